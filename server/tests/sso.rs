//! Single sign-on (spec §14): who a verified identity is here, on both backends, and the settings it needs. The
//! protocol itself (authorization code, PKCE, state, nonce) is exercised against a real OpenID provider by the
//! browser test `end2end/tests/sso.test.mjs`.

mod common;

use app::navigation::sign_in_error;
use app::types::Role;
use axum::http::StatusCode;
use common::{Backend, TestApp};
use holdpoint::config::ServeConfig;
use holdpoint::sso::VerifiedIdentity;
use serde_json::json;

on_both_backends!(
    a_verified_email_signs_in_its_member_and_nothing_else_does,
    provisioning_makes_a_member_with_the_configured_role_once,
);

/// Single sign-on with a provider that is never reached: matching people needs none.
fn with_sso(provision: Option<Role>) -> impl FnOnce(&mut ServeConfig) {
    move |config| {
        config.public_url = Some("http://127.0.0.1:3000".into());
        config.sso.oidc_issuer = Some("http://127.0.0.1:9/realms/test".into());
        config.sso.oidc_client_id = Some("holdpoint".into());
        config.sso.oidc_provision_role = provision;
    }
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

async fn member_with_email(app: &TestApp, username: &str, email: &str) -> String {
    let member = app.add_person(username, "correct horse battery staple", Role::Approver).await;
    let user_id = member["user_id"].as_str().unwrap().to_owned();
    let updated = app
        .call(
            axum::http::Method::PATCH,
            &format!("/api/v1/members/{user_id}"),
            Some(&app.token),
            Some(json!({"email": email})),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK, "{}", updated.text);
    user_id
}

async fn a_verified_email_signs_in_its_member_and_nothing_else_does(backend: Backend) {
    let app = TestApp::start_with(backend, with_sso(None)).await;
    let Some(app) = app else { return };
    let sso = app.state.sso.clone().expect("single sign-on is configured");
    let store = app.state.store.as_ref();
    let ana = member_with_email(&app, "ana", "ana@example.com").await;

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
    // Without provisioning, an address no member has signs nobody in.
    let stranger = sso.principal_for(store, &identity("mallory@example.com", true)).await.unwrap();
    assert_eq!(stranger.unwrap_err(), sign_in_error::SSO_NO_MEMBER);
    let members = app.get("/api/v1/members").await.json;
    assert!(!members.to_string().contains("mallory"), "{members}");

    // Two accounts with one address: neither is signed in.
    member_with_email(&app, "ana2", "ANA@example.com").await;
    let ambiguous = sso.principal_for(store, &identity("ana@example.com", true)).await.unwrap();
    assert_eq!(ambiguous.unwrap_err(), sign_in_error::SSO_AMBIGUOUS);
}

async fn provisioning_makes_a_member_with_the_configured_role_once(backend: Backend) {
    let app = TestApp::start_with(backend, with_sso(Some(Role::Responder))).await;
    let Some(app) = app else { return };
    let sso = app.state.sso.clone().expect("single sign-on is configured");
    let store = app.state.store.as_ref();
    // A member already has the username the provider suggests: the new one gets the next free name.
    app.add_person("cyd", "correct horse battery staple", Role::Viewer).await;

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
    assert_eq!(member["display_name"], "Cyd Charisse");
    assert_eq!(member["has_password"], false);

    // The next sign-in finds the member by the address: no second account.
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
