//! Single sign-on: OpenID Connect's authorization code flow with PKCE, and who a signed-in identity is
//! here. People are matched by the email address their provider has verified, against the addresses accounts have
//! verified themselves (never an address typed onto a membership); with provisioning on, someone no account matches
//! becomes a member with the configured role, unless an admin removed them from that workspace.
//!
//! The flow's secrets (state, nonce, PKCE verifier) travel in an encrypted, authenticated cookie that only the
//! callback reads, so any instance can finish a sign-in another one started and nothing is stored per attempt.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use holdpoint_types::Role;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AccessTokenHash, AsyncHttpClient, AuthorizationCode, ClientId, ClientSecret, CsrfToken, HttpRequest, HttpResponse,
    IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, SubjectIdentifier,
    TokenResponse,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::actions;
use crate::credentials::Secret;
use crate::store::{AuditActor, NewAuditEntry, Principal, ProvisionedMember, Store, StoreError, UserRow};

/// Where the provider sends people back to, under the public URL.
pub const CALLBACK_PATH: &str = "/auth/oidc/callback";
/// The cookie that carries a sign-in in progress from its start to the callback.
pub const PENDING_COOKIE: &str = "holdpoint_oidc";
/// The path the pending sign-in's cookie is sent to: the callback, nothing else.
pub const PENDING_COOKIE_PATH: &str = "/auth/oidc";
/// How long a person may take at their provider before the sign-in must start over.
pub const PENDING_MINUTES: i64 = 10;
/// How long the provider's discovery document and keys are used before they are read again.
const DISCOVERY_FRESH_FOR: Duration = Duration::from_secs(300);
/// The largest response taken from the provider: its documents, keys and tokens are a few KiB.
const MAX_PROVIDER_RESPONSE_BYTES: usize = 1 << 20;
/// The name the cookie key is stored under in `server_secrets`, shared by every instance.
const COOKIE_KEY_SECRET: &str = "sso_cookie_key";
/// How many usernames are tried for a new person before provisioning gives up (`ana`, `ana-2`, …).
const USERNAME_ATTEMPTS: usize = 20;

/// Single sign-on with an OpenID Connect provider. Off until an issuer is given.
#[derive(Debug, Clone, clap::Args)]
pub struct SsoConfig {
    /// The OpenID provider's issuer URL (`https://id.example.com/realms/acme`); its discovery document is read
    /// from `<issuer>/.well-known/openid-configuration`. `http` only for a provider on this machine.
    #[arg(long, env = "HOLDPOINT_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,

    /// The client id Holdpoint is registered with at the provider; its redirect URI is
    /// `<HOLDPOINT_PUBLIC_URL>/auth/oidc/callback`.
    #[arg(long, env = "HOLDPOINT_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,

    /// The client's secret (sent with HTTP Basic authentication); without one, Holdpoint signs in as a public
    /// client, which PKCE protects.
    #[arg(long, env = "HOLDPOINT_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<Secret>,

    /// Give people who sign in with a verified email address no member has an account and this role
    /// (`viewer`, `responder`, `approver`); without it, they are refused until an admin adds them with that
    /// address.
    #[arg(long, env = "HOLDPOINT_OIDC_PROVISION_ROLE")]
    pub oidc_provision_role: Option<holdpoint_types::Role>,

    /// The workspace people created by single sign-on join.
    #[arg(long, env = "HOLDPOINT_OIDC_PROVISION_WORKSPACE", default_value = crate::people::DEFAULT_WORKSPACE)]
    pub oidc_provision_workspace: String,

    /// What the sign-in page's button calls the provider ("Sign in with …").
    #[arg(long, env = "HOLDPOINT_OIDC_DISPLAY_NAME", default_value = "single sign-on")]
    pub oidc_display_name: String,
}

impl SsoConfig {
    /// Single sign-on off, for tests and embedded use.
    pub fn defaults() -> Self {
        SsoConfig {
            oidc_issuer: None,
            oidc_client_id: None,
            oidc_client_secret: None,
            oidc_provision_role: None,
            oidc_provision_workspace: crate::people::DEFAULT_WORKSPACE.to_owned(),
            oidc_display_name: "single sign-on".to_owned(),
        }
    }
}

/// Why single sign-on could not be set up: settings that cannot work together, or the store.
#[derive(Debug, thiserror::Error)]
pub enum SsoSetupError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("its HTTP client: {0}")]
    HttpClient(String),
    #[error("HOLDPOINT_OIDC_ISSUER and HOLDPOINT_OIDC_CLIENT_ID go together: single sign-on needs both")]
    HalfConfigured,
    #[error("HOLDPOINT_OIDC_ISSUER {0:?} is not an https URL (http only for a provider on this machine)")]
    Issuer(String),
    #[error("single sign-on needs HOLDPOINT_PUBLIC_URL: the provider sends people back to <public URL>{CALLBACK_PATH}")]
    NoPublicUrl,
    #[error("HOLDPOINT_PUBLIC_URL {0:?} is not an http or https URL")]
    PublicUrl(String),
    #[error("HOLDPOINT_OIDC_PROVISION_ROLE may be viewer, responder or approver: admins are made by admins")]
    ProvisionRole,
}

/// Who the provider says signed in, once the ID token has been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedIdentity {
    pub subject: String,
    /// The email address, when the provider gave one.
    pub email: Option<String>,
    /// Whether the provider has verified that address (`email_verified`); absent counts as not.
    pub email_verified: bool,
    pub preferred_username: Option<String>,
    pub name: Option<String>,
}

/// Why a sign-in through the provider was refused: the code the sign-in page turns into a sentence
/// (`holdpoint_types::sign_in_error`).
pub type Refusal = &'static str;

/// A sign-in between its start and the callback: what the callback checks the provider's answer against.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingSignIn {
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
    /// Where to go once signed in.
    pub next: String,
}

/// What the provider sent the browser back with.
#[derive(Debug, Default, Deserialize)]
pub struct Callback {
    pub code: Option<String>,
    pub state: Option<String>,
    /// The provider's refusal (`access_denied`, …), instead of a code.
    pub error: Option<String>,
}

/// Who people created by single sign-on become.
#[derive(Debug, Clone)]
pub struct Provision {
    pub role: Role,
    pub workspace_id: Uuid,
}

/// The configured OpenID provider and what talking to it needs.
pub struct Sso {
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: Option<ClientSecret>,
    redirect: RedirectUrl,
    provision: Option<Provision>,
    /// What the sign-in page calls the provider.
    pub display_name: String,
    http: ProviderHttp,
    /// Encrypts and authenticates the pending sign-in's cookie.
    pub cookie_key: axum_extra::extract::cookie::Key,
    discovered: tokio::sync::Mutex<Option<(Instant, CoreProviderMetadata)>>,
}

impl std::fmt::Debug for Sso {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sso").field("issuer", &self.issuer).field("client_id", &self.client_id).finish_non_exhaustive()
    }
}

/// Whether `url` may be the issuer: `https`, or `http` to this machine (a provider run beside Holdpoint, tests).
fn acceptable_issuer(url: &url::Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(domain)) => domain == "localhost",
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

impl Sso {
    /// Single sign-on as `sso` sets it up, with Holdpoint reached at `public_url`: `None` when no issuer is
    /// configured. Reads (or makes) the cookie key every instance shares, and the workspace new people join. The
    /// provider itself is first asked at the first sign-in, so a provider that is down does not keep Holdpoint from
    /// starting.
    pub async fn configure(
        sso: &SsoConfig,
        public_url: Option<&str>,
        store: &dyn Store,
    ) -> Result<Option<Sso>, SsoSetupError> {
        let (issuer, client_id) = match (&sso.oidc_issuer, &sso.oidc_client_id) {
            (None, None) => return Ok(None),
            (Some(issuer), Some(client_id)) => (issuer, client_id),
            _ => return Err(SsoSetupError::HalfConfigured),
        };
        let issuer_url = url::Url::parse(issuer)
            .ok()
            .filter(acceptable_issuer)
            .ok_or_else(|| SsoSetupError::Issuer(issuer.clone()))?;
        let public_url = public_url.ok_or(SsoSetupError::NoPublicUrl)?;
        let redirect = url::Url::parse(public_url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .and_then(|_| RedirectUrl::new(format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/'))).ok())
            .ok_or_else(|| SsoSetupError::PublicUrl(public_url.to_owned()))?;
        let provision = match sso.oidc_provision_role {
            None => None,
            Some(Role::Admin | Role::Agent) => return Err(SsoSetupError::ProvisionRole),
            Some(role) => {
                let workspace = store.ensure_workspace(&sso.oidc_provision_workspace).await?;
                Some(Provision { role, workspace_id: workspace.id })
            }
        };
        let generated = hex::encode(rand::random::<[u8; 64]>());
        let stored = store.server_secret(COOKIE_KEY_SECRET, &generated).await?;
        let cookie_key = hex::decode(&stored)
            .ok()
            .and_then(|bytes| axum_extra::extract::cookie::Key::try_from(bytes.as_slice()).ok())
            .ok_or_else(|| StoreError::Corrupt(format!("the stored {COOKIE_KEY_SECRET} is not a 64-byte hex key")))?;
        // Following a redirect would let whoever answers at the provider's address send Holdpoint's requests
        // (with the client secret) elsewhere.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| SsoSetupError::HttpClient(e.to_string()))?;
        Ok(Some(Sso {
            // The issuer exactly as configured: the discovery document must name the same string.
            issuer: IssuerUrl::new(issuer.clone()).map_err(|_| SsoSetupError::Issuer(issuer_url.to_string()))?,
            client_id: ClientId::new(client_id.clone()),
            client_secret: sso.oidc_client_secret.as_ref().map(|secret| ClientSecret::new(secret.expose().to_owned())),
            redirect,
            provision,
            display_name: sso.oidc_display_name.clone(),
            http: ProviderHttp(http),
            cookie_key,
            discovered: tokio::sync::Mutex::new(None),
        }))
    }

    /// The provider's discovery document and keys: those read in the last few minutes, or read now.
    async fn metadata(&self) -> Result<CoreProviderMetadata, String> {
        let mut discovered = self.discovered.lock().await;
        if let Some((at, metadata)) = discovered.as_ref()
            && at.elapsed() < DISCOVERY_FRESH_FOR
        {
            return Ok(metadata.clone());
        }
        let metadata = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| format!("discovery at {}: {}", self.issuer.as_str(), crate::error::error_chain(&e)))?;
        *discovered = Some((Instant::now(), metadata.clone()));
        Ok(metadata)
    }

    /// Starts a sign-in: the provider's authorization URL to send the browser to, and what the callback will check
    /// the answer against.
    pub async fn start(&self, next: String) -> Result<(url::Url, PendingSignIn), String> {
        let metadata = self.metadata().await?;
        let client = CoreClient::from_provider_metadata(metadata, self.client_id.clone(), self.client_secret.clone())
            .set_redirect_uri(self.redirect.clone());
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(CoreAuthenticationFlow::AuthorizationCode, CsrfToken::new_random, Nonce::new_random)
            .add_scope(Scope::new("email".into()))
            .add_scope(Scope::new("profile".into()))
            .set_pkce_challenge(challenge)
            .url();
        let pending = PendingSignIn {
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
            next,
        };
        Ok((url, pending))
    }

    /// Finishes a sign-in: checks the `state`, trades the code (with the PKCE verifier) for tokens, and checks the
    /// ID token's signature, issuer, audience, expiry and nonce. `Err` with a reason for the log.
    pub async fn finish(&self, pending: &PendingSignIn, callback: &Callback) -> Result<VerifiedIdentity, String> {
        if let Some(error) = &callback.error {
            return Err(format!("the provider refused: {error}"));
        }
        let state_matches = callback
            .state
            .as_deref()
            .is_some_and(|state| bool::from(subtle::ConstantTimeEq::ct_eq(pending.state.as_bytes(), state.as_bytes())));
        if !state_matches {
            return Err("the state does not match the sign-in this browser started".into());
        }
        let code = callback.code.clone().ok_or("the provider sent no code")?;
        let metadata = self.metadata().await?;
        let client = CoreClient::from_provider_metadata(metadata, self.client_id.clone(), self.client_secret.clone())
            .set_redirect_uri(self.redirect.clone());
        let tokens = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| format!("the provider has no token endpoint: {e}"))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier.clone()))
            .request_async(&self.http)
            .await
            .map_err(|e| format!("the code exchange: {}", crate::error::error_chain(&e)))?;
        let id_token = tokens.id_token().ok_or("the provider sent no ID token")?;
        let verifier = client.id_token_verifier();
        let claims = id_token
            .claims(&verifier, &Nonce::new(pending.nonce.clone()))
            .map_err(|e| format!("the ID token: {}", crate::error::error_chain(&e)))?;
        if let Some(expected) = claims.access_token_hash() {
            let signing_alg = id_token.signing_alg().map_err(|e| format!("the ID token's algorithm: {e}"))?;
            let key = id_token.signing_key(&verifier).map_err(|e| format!("the ID token's key: {e}"))?;
            let actual = AccessTokenHash::from_token(tokens.access_token(), signing_alg, key)
                .map_err(|e| format!("the access token's hash: {e}"))?;
            if actual != *expected {
                return Err("the access token is not the one the ID token was issued with".into());
            }
        }
        let mut identity = VerifiedIdentity {
            subject: claims.subject().as_str().to_owned(),
            email: claims.email().map(|email| email.as_str().to_owned()),
            email_verified: claims.email_verified().unwrap_or(false),
            preferred_username: claims.preferred_username().map(|name| name.as_str().to_owned()),
            name: claims.name().and_then(|name| name.get(None)).map(|name| name.as_str().to_owned()),
        };
        // Providers that keep the ID token small give the address at the userinfo endpoint only; that answer is
        // taken only for the subject the ID token names.
        if identity.email.is_none() {
            let subject = SubjectIdentifier::new(identity.subject.clone());
            let request = client.user_info(tokens.access_token().clone(), Some(subject));
            if let Ok(request) = request {
                let info: openidconnect::core::CoreUserInfoClaims = request
                    .request_async(&self.http)
                    .await
                    .map_err(|e| format!("the userinfo request: {}", crate::error::error_chain(&e)))?;
                identity.email = info.email().map(|email| email.as_str().to_owned());
                identity.email_verified = info.email_verified().unwrap_or(false);
                if identity.name.is_none() {
                    identity.name = info.name().and_then(|name| name.get(None)).map(|name| name.as_str().to_owned());
                }
            }
        }
        Ok(identity)
    }

    /// Who `identity` is here: the account that verified the address the provider verified (in the workspace it
    /// joined first), or a new member when provisioning is on and nobody has the address. An address is an
    /// account's only once the account itself confirmed a link sent there, so neither a workspace admin who types
    /// an address onto a membership nor a member who types one signs in as anyone. Someone an admin removed from
    /// the provisioning workspace is not provisioned into it again. `Err` with the refusal the page shows.
    pub async fn principal_for(
        &self,
        store: &dyn Store,
        identity: &VerifiedIdentity,
    ) -> Result<Result<Principal, Refusal>, StoreError> {
        use holdpoint_types::sign_in_error;
        let Some(email) = identity.email.as_deref().filter(|_| identity.email_verified) else {
            return Ok(Err(sign_in_error::SSO_UNVERIFIED));
        };
        match store.account_by_verified_email(email).await? {
            Some(account) if account.disabled => Ok(Err(sign_in_error::SSO_NO_MEMBER)),
            // An account with no membership left (removed everywhere) signs in nowhere, and is not provisioned
            // back: an admin adds it again.
            Some(account) => Ok(store.user_principal(account.user_id, None).await?.ok_or(sign_in_error::SSO_NO_MEMBER)),
            None => match &self.provision {
                Some(provision) if !store.removed_from(provision.workspace_id, email).await? => {
                    provision_member(store, provision, identity, email).await.map(Ok)
                }
                _ => Ok(Err(sign_in_error::SSO_NO_MEMBER)),
            },
        }
    }
}

/// Makes `identity` a member: an account without a password (they sign in through the provider), named after
/// the provider's username or the address, in the provisioning workspace with its role and the verified address.
async fn provision_member(
    store: &dyn Store,
    provision: &Provision,
    identity: &VerifiedIdentity,
    email: &str,
) -> Result<Principal, StoreError> {
    let base = username_base(identity.preferred_username.as_deref(), email);
    let display_name = identity
        .name
        .as_deref()
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| name.chars().take(crate::people::DISPLAY_NAME_MAX_CHARS).collect())
        .unwrap_or_else(|| base.clone());
    let actor = AuditActor::policy("single sign-on", None);
    for attempt in 1..=USERNAME_ATTEMPTS {
        let username = if attempt == 1 { base.clone() } else { format!("{base}-{attempt}") };
        let now = crate::store::now();
        let user = UserRow {
            id: Uuid::now_v7(),
            username: username.clone(),
            display_name: display_name.clone(),
            password_hash: None,
            created_at: now,
            disabled_at: None,
        };
        let entry = |action: &str, after: serde_json::Value| NewAuditEntry {
            workspace_id: provision.workspace_id,
            actor: actor.clone(),
            action: action.to_owned(),
            subject_type: "user".into(),
            subject_id: Some(user.id.to_string()),
            before: None,
            after: Some(after),
            diff: None,
            created_at: now,
        };
        let audit = [
            entry(
                actions::USER_CREATED,
                serde_json::json!({ "username": username, "display_name": display_name, "via": "oidc" }),
            ),
            entry(
                actions::MEMBER_ADDED,
                serde_json::json!({ "username": username, "role": provision.role, "email": email }),
            ),
        ];
        let member = ProvisionedMember {
            user,
            workspace_id: provision.workspace_id,
            role: provision.role,
            email: email.to_lowercase(),
        };
        match store.provision_member(&member, &audit).await {
            Ok(()) => {
                tracing::info!(%username, role = %provision.role, "single sign-on created a member");
                return store
                    .user_principal(member.user.id, None)
                    .await?
                    .ok_or(StoreError::Corrupt(format!("the member {username} just created is not found")));
            }
            Err(StoreError::Duplicate(_)) => continue,
            Err(other) => return Err(other),
        }
    }
    Err(StoreError::Duplicate("account with that username"))
}

/// A username made of the provider's username or the address's local part: lower case, the characters usernames
/// may hold, starting with a letter or digit, short enough for a `-20` suffix.
fn username_base(preferred: Option<&str>, email: &str) -> String {
    let source =
        preferred.filter(|name| !name.trim().is_empty()).unwrap_or_else(|| email.split('@').next().unwrap_or(""));
    let cleaned: String = source
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c) { c } else { '-' })
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(crate::people::USERNAME_MAX_CHARS - 4)
        .collect();
    if cleaned.is_empty() { "user".into() } else { cleaned }
}

/// The provider's HTTP client for the OpenID library: the reqwest client Holdpoint already builds, with redirects
/// off and the response size bounded.
struct ProviderHttp(reqwest::Client);

#[derive(Debug, thiserror::Error)]
enum ProviderHttpError {
    #[error(transparent)]
    Request(#[from] reqwest::Error),
    #[error(transparent)]
    Http(#[from] http::Error),
    #[error("the provider's response is larger than {MAX_PROVIDER_RESPONSE_BYTES} bytes")]
    TooLarge,
}

impl<'c> AsyncHttpClient<'c> for ProviderHttp {
    type Error = ProviderHttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, ProviderHttpError>> + Send + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        Box::pin(async move {
            let request = reqwest::Request::try_from(request)?;
            let mut response = self.0.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            for (name, value) in response.headers() {
                answer = answer.header(name, value);
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_PROVIDER_RESPONSE_BYTES {
                    return Err(ProviderHttpError::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(answer.body(body)?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_made_of_what_usernames_may_hold() {
        assert_eq!(username_base(Some("Ana.Lopez"), "x@example.com"), "ana.lopez");
        assert_eq!(username_base(None, "Ben+ops@example.com"), "ben-ops");
        assert_eq!(username_base(Some("  "), "__cyd@example.com"), "cyd");
        assert_eq!(username_base(Some("Łukasz Nowak"), "l@example.com"), "ukasz-nowak");
        assert_eq!(username_base(None, "@example.com"), "user");
        let long = "a".repeat(200);
        assert_eq!(username_base(Some(&long), "a@example.com").len(), crate::people::USERNAME_MAX_CHARS - 4);
        for base in ["ana.lopez", "ben-ops", "cyd", "ukasz-nowak", "user"] {
            assert!(crate::people::check_username(&format!("{base}-20")).is_ok(), "{base}");
        }
    }

    #[test]
    fn only_https_issuers_or_http_on_this_machine() {
        let accepts = |url: &str| acceptable_issuer(&url::Url::parse(url).unwrap());
        assert!(accepts("https://id.example.com/realms/acme"));
        assert!(accepts("http://127.0.0.1:9000"));
        assert!(accepts("http://localhost:9000"));
        assert!(accepts("http://[::1]:9000"));
        assert!(!accepts("http://id.example.com"));
        assert!(!accepts("http://10.0.0.5"));
        assert!(!accepts("ftp://id.example.com"));
    }
}
