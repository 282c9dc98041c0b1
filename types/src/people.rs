//! Wire types of people and credentials: workspace members, API tokens, and who the caller is.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{UnknownVariant, Urgency};

/// A person's membership of the caller's workspace (`GET /members`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Member {
    pub user_id: Uuid,
    pub username: String,
    pub display_name: String,
    /// A human role: `viewer`, `responder`, `approver` or `admin`.
    pub role: Role,
    /// Whether the person has set a password (a first-start admin signs in by link until they do).
    pub has_password: bool,
    /// Where email reaches them, if anywhere.
    #[serde(default)]
    pub email: Option<String>,
    /// Whether the person confirmed that address themselves (a link sent there, opened while signed in as
    /// them): only such an address signs them in through single sign-on.
    #[serde(default)]
    pub email_verified: bool,
    /// Their Slack user id (`U...` or `W...`), for direct messages and for answering from Slack as them.
    #[serde(default)]
    pub slack_user_id: Option<String>,
    /// Whether the Slack id is proven (an admin set it, or an address the person verified found it). An id the
    /// person set themselves is unproven: it neither receives their messages nor answers from Slack as them.
    #[serde(default)]
    pub slack_user_id_proven: bool,
    /// Until when they are away: meanwhile the questions assigned to them go to `delegate`.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub away_until: Option<DateTime<Utc>>,
    /// Who takes their assigned questions while they are away (a username).
    #[serde(default)]
    pub delegate: Option<String>,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
}

/// An invitation of an existing account to a workspace (`POST /members` with the username of an account that
/// exists): no access until the account's owner accepts it (`POST /me/invitations/{id}/accept`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Invitation {
    pub id: Uuid,
    /// The workspace's name.
    pub workspace: String,
    /// The invited account.
    pub username: String,
    /// The role the membership will have.
    pub role: Role,
    /// Who invited them (a username or a token's name).
    pub invited_by: String,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
}

/// The answer of `POST /members` for an account that exists already: the invitation, pending its owner's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct InvitationCreated {
    pub invitation: Invitation,
}

impl Member {
    /// Whether they are away at `now`, handing their questions to a delegate.
    pub fn is_away(&self, now: DateTime<Utc>) -> bool {
        self.away_until.is_some_and(|until| until > now) && self.delegate.is_some()
    }
}

/// The body of `POST /members`: adds a person to the workspace, creating their account if the username is new.
/// `Debug` leaves the password out.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewMember {
    /// 1..=64 characters: lower-case letters, digits, `.`, `_` and `-`, starting with a letter or digit.
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 64, pattern = r"^[a-z0-9][a-z0-9._-]*$"))]
    pub username: String,
    /// Defaults to the username. 1..=100 characters, not only spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 100, pattern = r"\S"))]
    pub display_name: Option<String>,
    /// Required for a new account (10..=256 characters); must be absent when the account exists already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(min_length = 10, max_length = 256))]
    pub password: Option<String>,
    /// A human role: `viewer`, `responder`, `approver` or `admin`.
    #[cfg_attr(feature = "server", schema(schema_with = super::human_role_schema))]
    pub role: Role,
}

/// The body of `PATCH /members/{user_id}`: each field given is changed, each absent one kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MemberUpdate {
    /// A human role: `viewer`, `responder`, `approver` or `admin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(schema_with = super::human_role_schema))]
    pub role: Option<Role>,
    /// As in [`AddressUpdate`].
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, max_length = 254))]
    pub email: Option<Option<String>>,
    /// As in [`AddressUpdate`].
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, pattern = r"^[UW][A-Z0-9]{2,30}$"))]
    pub slack_user_id: Option<Option<String>>,
    /// Away until this time, handing assigned questions to `delegate` meanwhile; `null` ends the
    /// absence. Given together with `delegate`.
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<DateTime<Utc>>))]
    pub away_until: Option<Option<DateTime<Utc>>>,
    /// The member (a username) who takes the questions assigned to this person while they are away: someone who
    /// may answer questions (responder, approver or admin), not themselves.
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>))]
    pub delegate: Option<Option<String>>,
}

impl MemberUpdate {
    /// The addresses and absence this update changes.
    pub fn addresses(&self) -> AddressUpdate {
        AddressUpdate {
            email: self.email.clone(),
            slack_user_id: self.slack_user_id.clone(),
            away_until: self.away_until,
            delegate: self.delegate.clone(),
        }
    }
}

/// The body of `PATCH /me` (and part of `PATCH /members/{user_id}`): where a person is reached, and who stands in
/// for them while they are away. A field given as `null` removes the address (or ends the absence); an absent one
/// keeps it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddressUpdate {
    /// An email address (`alice@example.com`), at most 254 characters.
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, max_length = 254))]
    pub email: Option<Option<String>>,
    /// A Slack user id: `U` or `W` and 2..=30 upper-case letters or digits.
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>, pattern = r"^[UW][A-Z0-9]{2,30}$"))]
    pub slack_user_id: Option<Option<String>>,
    /// Away until this time, handing assigned questions to `delegate` meanwhile; `null` ends the
    /// absence. Given together with `delegate`.
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<DateTime<Utc>>))]
    pub away_until: Option<Option<DateTime<Utc>>>,
    /// The member (a username) who takes the questions assigned to this person while they are away: someone who
    /// may answer questions (responder, approver or admin), not themselves.
    #[serde(default, deserialize_with = "given", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(value_type = Option<String>))]
    pub delegate: Option<Option<String>>,
}

impl AddressUpdate {
    /// Whether the update changes the absence.
    pub fn changes_absence(&self) -> bool {
        self.away_until.is_some() || self.delegate.is_some()
    }
}

/// A field that is present, even as `null` (`Some(None)`), as opposed to absent (`None`, by `#[serde(default)]`).
fn given<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

wire_enum! {
    /// The lowest urgency that reaches a person on a channel, or `off` for none.
    MinUrgency {
        Low = "low",
        Normal = "normal",
        High = "high",
        Critical = "critical",
        Off = "off",
    }
}

impl MinUrgency {
    /// Whether a question of `urgency` reaches a person with this threshold.
    pub fn admits(self, urgency: Urgency) -> bool {
        let rank = |urgency: Urgency| match urgency {
            Urgency::Low => 0,
            Urgency::Normal => 1,
            Urgency::High => 2,
            Urgency::Critical => 3,
        };
        let threshold = match self {
            MinUrgency::Low => Urgency::Low,
            MinUrgency::Normal => Urgency::Normal,
            MinUrgency::High => Urgency::High,
            MinUrgency::Critical => Urgency::Critical,
            MinUrgency::Off => return false,
        };
        rank(urgency) >= rank(threshold)
    }
}

/// One channel's threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChannelPreference {
    pub min_urgency: MinUrgency,
}

/// `GET` and `PUT /me/notifications`: per channel, the lowest urgency that reaches the person. A channel left out
/// of a `PUT` takes its default: web UI and push for all, email and Slack for `high` and above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NotificationPreferences {
    #[serde(default = "low")]
    pub web: ChannelPreference,
    #[serde(default = "low")]
    pub push: ChannelPreference,
    #[serde(default = "high")]
    pub email: ChannelPreference,
    #[serde(default = "high")]
    pub slack: ChannelPreference,
}

fn low() -> ChannelPreference {
    ChannelPreference { min_urgency: MinUrgency::Low }
}

fn high() -> ChannelPreference {
    ChannelPreference { min_urgency: MinUrgency::High }
}

impl Default for NotificationPreferences {
    fn default() -> Self {
        NotificationPreferences { web: low(), push: low(), email: high(), slack: high() }
    }
}

/// An API token as listed (`GET /tokens`): never its secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    /// Who created it: a username, a token's name, `cli` or `bootstrap`.
    pub created_by: Option<String>,
    #[serde(deserialize_with = "super::time::required")]
    pub created_at: DateTime<Utc>,
    /// Set once the token is revoked; it stops working at that moment.
    #[serde(default, deserialize_with = "super::time::optional")]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// The body of `POST /tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// 1..=100 characters, not only spaces, for people to recognise it by.
    #[cfg_attr(feature = "server", schema(min_length = 1, max_length = 100, pattern = r"\S"))]
    pub name: String,
    pub role: Role,
}

/// The answer of `POST /tokens`: the only time the secret is ever shown. `Debug` leaves the secret out.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct CreatedToken {
    pub token: TokenInfo,
    /// `hp_` followed by 40 characters. Only its hash is kept: copy it now.
    pub secret: String,
}

/// The body of `POST /me/password`. `Debug` leaves the passwords out.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    /// Required once a password is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_password: Option<String>,
    /// 10..=256 characters.
    #[cfg_attr(feature = "server", schema(min_length = 10, max_length = 256))]
    pub new_password: String,
}

/// `GET /me`: who the caller is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Me {
    pub id: Uuid,
    /// `user` for a person's account, `token` for an API token.
    pub kind: String,
    pub name: String,
    pub workspace: String,
    pub role: Role,
}

impl std::fmt::Debug for NewMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewMember")
            .field("username", &self.username)
            .field("display_name", &self.display_name)
            .field("password", &self.password.as_ref().map(|_| "[redacted]"))
            .field("role", &self.role)
            .finish()
    }
}

impl std::fmt::Debug for PasswordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordChange { [redacted] }")
    }
}

impl std::fmt::Debug for CreatedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedToken").field("token", &self.token).field("secret", &"[redacted]").finish()
    }
}

/// Why a sign-in was refused: the code `POST /auth/signin` puts in `?error=`.
pub mod sign_in_error {
    /// The username or password is wrong.
    pub const WRONG_PASSWORD: &str = "wrong_password";
    /// The token is not valid.
    pub const WRONG_TOKEN: &str = "wrong_token";
    /// The one-time link was used or has expired.
    pub const LINK_SPENT: &str = "link_spent";
    /// The form named no credential.
    pub const MISSING: &str = "missing";
    /// Too many attempts; `?retry_after=` says in how many seconds to try again.
    pub const RATE_LIMITED: &str = "rate_limited";
    /// Single sign-on did not complete: the provider refused, the sign-in took too long, or what came back did not
    /// check out (state, nonce, signature).
    pub const SSO_FAILED: &str = "sso_failed";
    /// The identity provider could not be reached.
    pub const SSO_UNAVAILABLE: &str = "sso_unavailable";
    /// The provider has not verified the person's email address.
    pub const SSO_UNVERIFIED: &str = "sso_unverified";
    /// No member has the verified address (and provisioning is off), or their account is disabled.
    pub const SSO_NO_MEMBER: &str = "sso_no_member";
    /// More than one account has the verified address.
    pub const SSO_AMBIGUOUS: &str = "sso_ambiguous";
}

wire_enum! {
    /// A token's role. Ordered: each human role may do everything the ones before it may; `agent` is apart.
    Role {
        Viewer = "viewer",
        Responder = "responder",
        Approver = "approver",
        Admin = "admin",
        /// Creates questions and runs and reads its own, never answers.
        Agent = "agent",
    }
}

impl Role {
    /// The roles people hold; `agent` is a token's only.
    pub const HUMAN: [Role; 4] = [Role::Viewer, Role::Responder, Role::Approver, Role::Admin];

    /// Whether this role may answer ordinary (non-approval) questions.
    pub fn may_answer(self) -> bool {
        matches!(self, Role::Responder | Role::Approver | Role::Admin)
    }

    /// Whether this role may answer (or claim) questions of `kind`: approvals need an approver or an admin, other
    /// questions a responder and up. Who the question names (its assignee, who is eligible) is checked apart.
    pub fn may_answer_kind(self, kind: crate::QuestionKind) -> bool {
        match kind {
            crate::QuestionKind::Approval => matches!(self, Role::Approver | Role::Admin),
            _ => self.may_answer(),
        }
    }

    /// Where a human role stands in `viewer` < `responder` < `approver` < `admin`; `agent` is below them all.
    pub fn rank(self) -> u8 {
        match self {
            Role::Agent => 0,
            Role::Viewer => 1,
            Role::Responder => 2,
            Role::Approver => 3,
            Role::Admin => 4,
        }
    }

    /// Whether this role may create questions and runs.
    pub fn may_ask(self) -> bool {
        matches!(self, Role::Agent | Role::Responder | Role::Approver | Role::Admin)
    }

    /// The role as a sentence names it: "a viewer", "an approver".
    pub fn with_article(self) -> &'static str {
        match self {
            Role::Viewer => "a viewer",
            Role::Responder => "a responder",
            Role::Approver => "an approver",
            Role::Admin => "an admin",
            Role::Agent => "an agent",
        }
    }
}

/// Who a browser session acts as. Set by the server's session layer; read by pages and server functions.
/// `Debug` redacts the CSRF token.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct SessionInfo {
    pub workspace_id: Uuid,
    /// The workspace's name.
    pub workspace: String,
    /// The id of the account or token the session was opened with: an `agent` token's session shows only what
    /// that token created.
    #[serde(default)]
    pub principal_id: Uuid,
    /// The person's username, or the name of the token the session was opened with.
    pub name: String,
    /// Whether the session is a person's account (which has a password to manage) rather than a token's.
    #[serde(default)]
    pub account: bool,
    pub role: Role,
    /// Sent back with every state-changing request of this session (`X-CSRF-Token` header or `csrf` form field).
    pub csrf_token: String,
}

impl SessionInfo {
    /// The signed-in person or token as a question's rules see whoever would decide it.
    pub fn decider(&self) -> super::Decider<'_> {
        super::Decider { role: self.role, name: &self.name, account: self.account }
    }
}

impl std::fmt::Debug for SessionInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionInfo")
            .field("workspace_id", &self.workspace_id)
            .field("workspace", &self.workspace)
            .field("name", &self.name)
            .field("account", &self.account)
            .field("role", &self.role)
            .field("csrf_token", &"[redacted]")
            .finish()
    }
}

/// The OpenAPI schema of a role a person may hold: [`Role`] without `agent`.
#[cfg(feature = "server")]
pub fn human_role_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(Role::HUMAN.iter().map(|role| role.as_str())))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approvals_are_for_approvers_and_admins_and_other_questions_for_responders_and_up() {
        use crate::QuestionKind;
        let answering = |kind| Role::HUMAN.into_iter().filter(|role| role.may_answer_kind(kind)).collect::<Vec<_>>();
        assert_eq!(answering(QuestionKind::Approval), [Role::Approver, Role::Admin]);
        assert_eq!(answering(QuestionKind::Blocking), [Role::Responder, Role::Approver, Role::Admin]);
        assert!(!Role::Agent.may_answer_kind(QuestionKind::ErrorRecovery));
    }

    #[test]
    fn a_session_debug_output_shows_no_csrf_token() {
        let session = SessionInfo {
            workspace_id: Uuid::nil(),
            workspace: "default".into(),
            principal_id: Uuid::nil(),
            name: "ops".into(),
            account: false,
            role: Role::Admin,
            csrf_token: "csrf-secret-value".into(),
        };
        let debug = format!("{session:?}");
        assert!(!debug.contains("csrf-secret-value"), "{debug}");
        assert!(debug.contains("ops"), "{debug}");
    }

    #[test]
    fn only_human_roles_above_viewer_may_answer() {
        assert!(!Role::Viewer.may_answer());
        assert!(!Role::Agent.may_answer());
        assert!(Role::Responder.may_answer());
        assert!(Role::Admin.may_answer());
        assert!(!Role::Viewer.may_ask());
    }

    #[test]
    fn passwords_and_secrets_never_show_in_debug_output() {
        let member = NewMember {
            username: "alice".into(),
            display_name: None,
            password: Some("hunter2hunter2".into()),
            role: Role::Approver,
        };
        assert!(!format!("{member:?}").contains("hunter2"));
        let change =
            PasswordChange { current_password: Some("old secret 1".into()), new_password: "new secret 2".into() };
        assert!(!format!("{change:?}").contains("secret"));
        let created = CreatedToken {
            token: TokenInfo {
                id: Uuid::nil(),
                name: "ci".into(),
                role: Role::Agent,
                created_by: None,
                created_at: Utc::now(),
                revoked_at: None,
            },
            secret: "hp_topsecret".into(),
        };
        assert!(!format!("{created:?}").contains("topsecret"));
    }
}
