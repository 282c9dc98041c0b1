//! The people of the tests of how questions reach people: members with an email address, signed in.

use app::types::Role;
use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::common::{Session, TestApp};

pub const PASSWORD: &str = "correct horse battery staple";

/// A member with `role` and `email`, signed in.
pub async fn person(app: &TestApp, username: &str, role: Role, email: Option<&str>) -> Session {
    let member = app.add_person(username, PASSWORD, role).await;
    if let Some(email) = email {
        let path = format!("/api/v1/members/{}", member["user_id"].as_str().unwrap());
        let set = app.call(Method::PATCH, &path, Some(&app.token), Some(json!({ "email": email }))).await;
        assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    }
    let form = format!("username={username}&password={}&next=%2Finbox", PASSWORD.replace(' ', "+"));
    app.sign_in_with(&form).await.expect("the person signs in")
}
