//! Single sign-on (docs/security.md): who a verified identity is here, on both backends, and the settings it needs. The
//! protocol itself (authorization code, PKCE, state, nonce) is exercised against a real OpenID provider by the
//! browser test `end2end/tests/sso.test.mjs`. Addresses are verified through a real SMTP server (`smtp_sink.py`):
//! the verification link is read from the message that reached it.

use crate::channels::smtp;
use crate::common;

use app::navigation::sign_in_error;
use app::types::Role;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{Backend, Session, TestApp, assert_error};
use holdpoint::config::ServeConfig;
use holdpoint::sso::VerifiedIdentity;
use serde_json::{Value, json};

on_both_backends!(
    a_verified_email_signs_in_its_member_and_nothing_else_does,
    provisioning_makes_a_member_with_the_configured_role_once,
    an_admin_of_another_workspace_cannot_take_over_an_account_through_single_sign_on,
    an_address_is_verified_by_its_accounts_own_session_and_by_one_account_only,
    a_removed_member_is_not_provisioned_again_by_signing_in,
);

const PASSWORD: &str = "correct horse battery staple";
const PUBLIC_URL: &str = "http://127.0.0.1:3000";

/// Single sign-on with a provider that is never reached (matching people needs none), and email to `smtp` when
/// given (verification links).
fn with_sso_and_mail(provision: Option<Role>, smtp: Option<String>) -> impl FnOnce(&mut ServeConfig) {
    move |config| {
        config.public_url = Some(PUBLIC_URL.into());
        config.sso.oidc_issuer = Some("http://127.0.0.1:9/realms/test".into());
        config.sso.oidc_client_id = Some("holdpoint".into());
        config.sso.oidc_provision_role = provision;
        if let Some(smtp) = smtp {
            config.channels.smtp_url = Some(smtp.parse().unwrap());
            config.channels.email_from = Some("Holdpoint <holdpoint@example.com>".parse().unwrap());
        }
    }
}

fn with_sso(provision: Option<Role>) -> impl FnOnce(&mut ServeConfig) {
    with_sso_and_mail(provision, None)
}

fn identity(email: &str, verified: bool) -> VerifiedIdentity {
    VerifiedIdentity {
        subject: format!("sub-{email}"),
        email: Some(email.into()),
        email_verified: verified,
        preferred_username: None,
        name: None,
    }
}

async fn sign_in(app: &TestApp, username: &str) -> Session {
    let form = format!("username={username}&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    app.sign_in_with(&form).await.expect("the person signs in")
}

/// The code of the verification link in the next message the sink accepts, sent to `to`.
async fn verification_code(sink: &mut smtp::Sink, to: &str) -> String {
    let message = sink.next_message().await;
    assert_eq!(message["rcpt_tos"], json!([to]), "{message}");
    let html = message["parts"].as_array().unwrap().iter().find(|p| p["content_type"] == "text/html").unwrap();
    let href = html["links"][0]["href"].as_str().unwrap();
    let prefix = format!("{PUBLIC_URL}/verify-email/");
    href.strip_prefix(&prefix).unwrap_or_else(|| panic!("{href}")).to_owned()
}

/// Opens a verification link as a browser with `session` (or none).
async fn open_link(app: &TestApp, code: &str, session: Option<&Session>) -> common::TestResponse {
    let mut request = Request::get(format!("/verify-email/{code}"));
    if let Some(session) = session {
        request = request.header(header::COOKIE, &session.cookie);
    }
    app.send(request.body(Body::empty()).unwrap()).await
}

/// Confirms a verification link as the browser with `session`, as the page's form posts it.
async fn confirm_link(app: &TestApp, code: &str, session: &Session) -> common::TestResponse {
    let request = Request::post(format!("/verify-email/{code}"))
        .header(header::COOKIE, &session.cookie)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("csrf={}", session.csrf)))
        .unwrap();
    app.send(request).await
}

/// Sets `email` as `session`'s own address and confirms the link that reaches it: the address is the account's.
async fn verify_own_email(app: &TestApp, sink: &mut smtp::Sink, session: &Session, email: &str) {
    let set = app.session_call(session, Method::PATCH, "/api/v1/me", Some(json!({"email": email}))).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    assert_eq!(set.json["email_verified"], false, "{}", set.text);
    let code = verification_code(sink, email).await;
    let page = open_link(app, &code, Some(session)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    assert!(page.text.contains(&format!("value=\"{}\"", session.csrf)), "{}", page.text);
    let confirmed = confirm_link(app, &code, session).await;
    assert_eq!(confirmed.status, StatusCode::OK, "{}", confirmed.text);
    let me = app.session_call(session, Method::PATCH, "/api/v1/me", Some(json!({}))).await;
    assert_eq!(me.json["email_verified"], true, "{}", me.text);
}

async fn user_id_of(app: &TestApp, username: &str) -> String {
    let members = app.get("/api/v1/members").await.json;
    let member = members["items"].as_array().unwrap().iter().find(|m| m["username"] == username).cloned();
    member.unwrap_or_else(|| panic!("{username} in {members}"))["user_id"].as_str().unwrap().to_owned()
}

async fn set_member_email(app: &TestApp, token: &str, user_id: &str, email: &str) -> Value {
    let path = format!("/api/v1/members/{user_id}");
    let updated = app.call(Method::PATCH, &path, Some(token), Some(json!({"email": email}))).await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    updated.json
}

async fn a_verified_email_signs_in_its_member_and_nothing_else_does(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let Some(app) = TestApp::start_with(backend, with_sso_and_mail(None, Some(sink.url()))).await else { return };
    let sso = app.state.sso.clone().expect("single sign-on is configured");
    let store = app.state.store.as_ref();
    app.add_person("ana", PASSWORD, Role::Approver).await;
    let ana = user_id_of(&app, "ana").await;
    // An address an admin typed proves nothing about the account.
    set_member_email(&app, &app.token, &ana, "ana@example.com").await;
    let typed = sso.principal_for(store, &identity("ana@example.com", true)).await.unwrap();
    assert_eq!(typed.unwrap_err(), sign_in_error::SSO_NO_MEMBER);

    let session = sign_in(&app, "ana").await;
    verify_own_email(&app, &mut sink, &session, "ana@example.com").await;
    let signed_in = sso.principal_for(store, &identity("ana@example.com", true)).await.unwrap().unwrap();
    assert_eq!((signed_in.id.to_string(), signed_in.name.as_str()), (ana.clone(), "ana"));
    assert_eq!((signed_in.role, signed_in.workspace.as_str()), (Role::Approver, "default"));
    // Addresses are compared without regard to case.
    let shouted = sso.principal_for(store, &identity("Ana@Example.COM", true)).await.unwrap().unwrap();
    assert_eq!(shouted.id, signed_in.id);

    // What the provider has not verified proves nothing, whoever it names.
    let unverified = sso.principal_for(store, &identity("ana@example.com", false)).await.unwrap();
    assert_eq!(unverified.unwrap_err(), sign_in_error::SSO_UNVERIFIED);
    let no_address = VerifiedIdentity { email: None, ..identity("ana@example.com", true) };
    assert_eq!(sso.principal_for(store, &no_address).await.unwrap().unwrap_err(), sign_in_error::SSO_UNVERIFIED);
    // Without provisioning, an address no account verified signs nobody in.
    let stranger = sso.principal_for(store, &identity("mallory@example.com", true)).await.unwrap();
    assert_eq!(stranger.unwrap_err(), sign_in_error::SSO_NO_MEMBER);
    let members = app.get("/api/v1/members").await.json;
    assert!(!members.to_string().contains("mallory"), "{members}");

    // Another member typing the same address onto their own membership changes nothing: ana still signs in.
    app.add_person("ana2", PASSWORD, Role::Viewer).await;
    let ana2 = sign_in(&app, "ana2").await;
    let claimed = app.session_call(&ana2, Method::PATCH, "/api/v1/me", Some(json!({"email": "ANA@example.com"}))).await;
    assert_eq!((claimed.status, &claimed.json["email_verified"]), (StatusCode::OK, &json!(false)), "{}", claimed.text);
    let still = sso.principal_for(store, &identity("ana@example.com", true)).await.unwrap().unwrap();
    assert_eq!(still.id.to_string(), ana);
}

async fn provisioning_makes_a_member_with_the_configured_role_once(backend: Backend) {
    let app = TestApp::start_with(backend, with_sso(Some(Role::Responder))).await;
    let Some(app) = app else { return };
    let sso = app.state.sso.clone().expect("single sign-on is configured");
    let store = app.state.store.as_ref();
    // A member already has the username the provider suggests: the new one gets the next free name.
    app.add_person("cyd", PASSWORD, Role::Viewer).await;

    let new = VerifiedIdentity {
        preferred_username: Some("Cyd".into()),
        name: Some("Cyd Charisse".into()),
        ..identity("cyd@example.com", true)
    };
    let first = sso.principal_for(store, &new).await.unwrap().unwrap();
    assert_eq!((first.name.as_str(), first.role, first.workspace.as_str()), ("cyd-2", Role::Responder, "default"));
    let members = app.get("/api/v1/members").await.json;
    let member = members["items"].as_array().unwrap().iter().find(|m| m["username"] == "cyd-2").expect("a member");
    assert_eq!(member["user_id"], first.id.to_string());
    assert_eq!(member["email"], "cyd@example.com");
    // The provider verified the address, and the account is new: it is the account's.
    assert_eq!(member["email_verified"], true);
    assert_eq!(member["display_name"], "Cyd Charisse");
    assert_eq!(member["has_password"], false);

    // The next sign-in finds the account by the address: no second account.
    let again = sso.principal_for(store, &new).await.unwrap().unwrap();
    assert_eq!(again.id, first.id);
    let created = app.get("/api/v1/audit?action=user.created&limit=100").await.json;
    let by_sso: Vec<_> =
        created["items"].as_array().unwrap().iter().filter(|entry| entry["actor"] == "single sign-on").collect();
    assert_eq!(by_sso.len(), 1, "{created}");
    assert_eq!(by_sso[0]["after"]["username"], "cyd-2");
    let added = app.get("/api/v1/audit?action=member.added&limit=100").await.json;
    let entry = added["items"].as_array().unwrap().iter().find(|e| e["actor"] == "single sign-on").unwrap();
    assert_eq!(entry["after"]["role"], "responder");
    assert_eq!(entry["after"]["email"], "cyd@example.com");

    // Provisioning never makes up for what the provider has not verified.
    let unverified = sso.principal_for(store, &identity("dee@example.com", false)).await.unwrap();
    assert_eq!(unverified.unwrap_err(), sign_in_error::SSO_UNVERIFIED);
}

/// The takeover of issue 51: an admin of workspace B names vic's account, puts an address they control on it, and
/// signs in through the provider with that address. None of it reaches vic's account.
async fn an_admin_of_another_workspace_cannot_take_over_an_account_through_single_sign_on(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let Some(app) = TestApp::start_with(backend, with_sso_and_mail(None, Some(sink.url()))).await else { return };
    let sso = app.state.sso.clone().expect("single sign-on is configured");
    let store = app.state.store.as_ref();
    app.add_person("vic", PASSWORD, Role::Admin).await;
    let vic = user_id_of(&app, "vic").await;
    let mallory = app.create_token("b", Role::Admin).await;

    // Naming vic's account only invites it: no membership in B, so nothing of vic's to change there.
    let added = app
        .call(Method::POST, "/api/v1/members", Some(&mallory), Some(json!({"username": "vic", "role": "viewer"})))
        .await;
    assert_eq!(added.status, StatusCode::ACCEPTED, "{}", added.text);
    let patch = app
        .call(
            Method::PATCH,
            &format!("/api/v1/members/{vic}"),
            Some(&mallory),
            Some(json!({"email": "mallory@evil.test"})),
        )
        .await;
    assert_error(&patch, StatusCode::NOT_FOUND, "not_found");

    // Vic accepts (an invitation may look harmless), and mallory types her address onto vic's membership in B.
    let session = sign_in(&app, "vic").await;
    let id = added.json["invitation"]["id"].as_str().unwrap();
    let accepted = app.session_call(&session, Method::POST, &format!("/api/v1/me/invitations/{id}/accept"), None).await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
    let typed = set_member_email(&app, &mallory, &vic, "mallory@evil.test").await;
    assert_eq!(typed["email_verified"], false, "{typed}");
    // Signing in through the provider with it signs in as nobody.
    let takeover = sso.principal_for(store, &identity("mallory@evil.test", true)).await.unwrap();
    assert_eq!(takeover.unwrap_err(), sign_in_error::SSO_NO_MEMBER);
    // And no link reached mallory's mailbox that could make it vic's: an admin's typing sends none.
    assert!(sink.message_within(std::time::Duration::from_millis(500)).await.is_none());

    // The legitimate path: vic verifies their own address, then signs in through the provider with it.
    verify_own_email(&app, &mut sink, &session, "vic@example.com").await;
    let signed_in = sso.principal_for(store, &identity("vic@example.com", true)).await.unwrap().unwrap();
    assert_eq!((signed_in.id.to_string(), signed_in.workspace.as_str()), (vic.clone(), "default"));
    let takeover = sso.principal_for(store, &identity("mallory@evil.test", true)).await.unwrap();
    assert_eq!(takeover.unwrap_err(), sign_in_error::SSO_NO_MEMBER);
    let audit = app.get("/api/v1/audit?action=email.verified").await.json;
    assert_eq!(audit["items"][0]["after"]["email"], "vic@example.com", "{audit}");
}

async fn an_address_is_verified_by_its_accounts_own_session_and_by_one_account_only(backend: Backend) {
    let mut sink = smtp::Sink::start().await;
    let Some(app) = TestApp::start_with(backend, with_sso_and_mail(None, Some(sink.url()))).await else { return };
    let sso = app.state.sso.clone().expect("single sign-on is configured");
    let store = app.state.store.as_ref();
    app.add_person("vic", PASSWORD, Role::Responder).await;
    app.add_person("eve", PASSWORD, Role::Responder).await;
    let (vic, eve) = (sign_in(&app, "vic").await, sign_in(&app, "eve").await);

    // Eve sets vic's address on herself; the link goes to vic's mailbox. Whoever holds it, only eve's own session
    // could confirm it, and opening it confirms nothing.
    let set = app.session_call(&eve, Method::PATCH, "/api/v1/me", Some(json!({"email": "vic@example.com"}))).await;
    assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    let code = verification_code(&mut sink, "vic@example.com").await;
    let anonymous = open_link(&app, &code, None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{}", anonymous.text);
    let as_vic = open_link(&app, &code, Some(&vic)).await;
    assert_eq!(as_vic.status, StatusCode::FORBIDDEN, "{}", as_vic.text);
    assert_eq!(confirm_link(&app, &code, &vic).await.status, StatusCode::NOT_FOUND);
    let forged = Session { cookie: eve.cookie.clone(), csrf: "not-the-token".into() };
    assert_eq!(confirm_link(&app, &code, &forged).await.status, StatusCode::FORBIDDEN);
    let nobody = sso.principal_for(store, &identity("vic@example.com", true)).await.unwrap();
    assert_eq!(nobody.unwrap_err(), sign_in_error::SSO_NO_MEMBER);

    // Vic verifies it first: it is vic's, and eve's link (even confirmed by eve) cannot take it.
    verify_own_email(&app, &mut sink, &vic, "vic@example.com").await;
    let taken = confirm_link(&app, &code, &eve).await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.text);
    let signed_in = sso.principal_for(store, &identity("vic@example.com", true)).await.unwrap().unwrap();
    assert_eq!(signed_in.name, "vic");
    // A used link works once.
    let again = app.session_call(&vic, Method::PATCH, "/api/v1/me", Some(json!({"email": "vic2@example.com"}))).await;
    assert_eq!(again.status, StatusCode::OK);
    let second = verification_code(&mut sink, "vic2@example.com").await;
    assert_eq!(confirm_link(&app, &second, &vic).await.status, StatusCode::OK);
    assert_eq!(confirm_link(&app, &second, &vic).await.status, StatusCode::NOT_FOUND);
}

async fn a_removed_member_is_not_provisioned_again_by_signing_in(backend: Backend) {
    let Some(app) = TestApp::start_with(backend, with_sso(Some(Role::Responder))).await else { return };
    let sso = app.state.sso.clone().expect("single sign-on is configured");
    let store = app.state.store.as_ref();
    let remove = |user_id: String| {
        let app = &app;
        async move {
            let removed = app.call(Method::DELETE, &format!("/api/v1/members/{user_id}"), Some(&app.token), None).await;
            assert_eq!(removed.status, StatusCode::NO_CONTENT, "{}", removed.text);
        }
    };

    // Provisioned by signing in, then removed by an admin: signing in again brings nobody back.
    let first = sso.principal_for(store, &identity("rex@example.com", true)).await.unwrap().unwrap();
    remove(first.id.to_string()).await;
    let again = sso.principal_for(store, &identity("rex@example.com", true)).await.unwrap();
    assert_eq!(again.unwrap_err(), sign_in_error::SSO_NO_MEMBER);

    // A member with a password whose address an admin typed, removed: not provisioned anew under that address.
    app.add_person("sam", PASSWORD, Role::Approver).await;
    let sam = user_id_of(&app, "sam").await;
    set_member_email(&app, &app.token, &sam, "sam@example.com").await;
    remove(sam).await;
    let back = sso.principal_for(store, &identity("Sam@example.com", true)).await.unwrap();
    assert_eq!(back.unwrap_err(), sign_in_error::SSO_NO_MEMBER);
    let members = app.get("/api/v1/members").await.json;
    assert_eq!(members["items"].as_array().unwrap().len(), 0, "{members}");
    // Someone never removed is provisioned as before.
    let new = sso.principal_for(store, &identity("tia@example.com", true)).await.unwrap().unwrap();
    assert_eq!((new.name.as_str(), new.role), ("tia", Role::Responder));
}

/// What a case changes in otherwise working settings.
type Spoil = Box<dyn FnOnce(&mut ServeConfig)>;

/// The settings single sign-on cannot work without, refused at start with what is wrong.
#[tokio::test]
async fn single_sign_on_settings_that_cannot_work_are_refused_at_start() {
    let cases: [(&str, Spoil); 5] = [
        ("go together", Box::new(|c| c.sso.oidc_client_id = None)),
        ("HOLDPOINT_PUBLIC_URL", Box::new(|c| c.public_url = None)),
        ("not an https URL", Box::new(|c| c.sso.oidc_issuer = Some("http://id.example.com".into()))),
        ("admins are made by admins", Box::new(|c| c.sso.oidc_provision_role = Some(Role::Admin))),
        ("admins are made by admins", Box::new(|c| c.sso.oidc_provision_role = Some(Role::Agent))),
    ];
    for (expected, spoil) in cases {
        let dir = tempdir();
        let mut config = ServeConfig::for_tests(format!("sqlite://{}/holdpoint.db?mode=rwc", dir.display()));
        with_sso(None)(&mut config);
        spoil(&mut config);
        let error = holdpoint::server::build_state(config).await.err().expect("refused");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
}

/// The sign-in routes without single sign-on configured, and with a provider that cannot be reached.
#[tokio::test]
async fn the_sign_in_routes_answer_when_the_provider_is_absent_or_down() {
    let plain = TestApp::start(Backend::Sqlite).await.unwrap();
    assert_eq!(plain.get("/auth/oidc/start").await.status, StatusCode::NOT_FOUND);
    assert_eq!(plain.get("/auth/oidc/callback?code=x&state=y").await.status, StatusCode::NOT_FOUND);

    let app = TestApp::start_with(Backend::Sqlite, with_sso(None)).await.unwrap();
    let start = app.get("/auth/oidc/start?next=%2Fapprovals").await;
    assert_eq!(start.status, StatusCode::SEE_OTHER, "{}", start.text);
    assert_eq!(start.headers["location"], "/signin?error=sso_unavailable&next=/approvals");
    // A callback this browser never started (no cookie), whatever it carries, signs nobody in.
    let callback = app.get("/auth/oidc/callback?code=stolen&state=guessed").await;
    assert_eq!(callback.status, StatusCode::SEE_OTHER);
    assert_eq!(callback.headers["location"], "/signin?error=sso_failed&next=/inbox");
    assert!(callback.headers.get("set-cookie").is_none_or(|c| !c.to_str().unwrap().starts_with("hp_session")));
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join("holdpoint-tests").join(format!("sso-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
