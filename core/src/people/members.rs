//! A workspace's members: adding one (a new account or an existing one), inviting, answering an invitation, roles
//! (never leaving a workspace without an admin), an admin's changes to a member, removal, and the API tokens
//! members make and revoke.

use holdpoint_types::{CreatedToken, Invitation, Member, MemberUpdate, NewMember, NewToken, TokenInfo};
use uuid::Uuid;

use super::absences::{absence_of, set_absence};
use super::addresses::{Proof, check_addresses, set_addresses};
use super::*;
use crate::actions;
use crate::channels::slack::SlackClient;
use crate::credentials::{hash_secret, new_token_secret};
use crate::events::EventHub;
use crate::notifications::SendsOn;
use crate::questions::claims::Fallen;
use crate::store::{InvitationRow, MembershipChange, UserRow, WorkspaceRow};

/// What `POST /members` did: a new account made a member, or an existing account invited.
#[derive(Debug, Clone)]
pub enum Joining {
    /// A new account, a member at once.
    Added(Member),
    /// An account that exists already: it joins only when its owner accepts.
    Invited(Invitation),
}

/// `POST /members`: adds a person whose username is new, creating their account with its password; invites an
/// account that exists already, which becomes a member only when its owner accepts (an admin of one workspace
/// holds no power over an account another workspace shares).
pub async fn add_member(store: &dyn Store, caller: &Caller, input: NewMember) -> Result<Joining, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let mut errors = crate::validation::FieldErrors::default();
    let username = input.username.trim().to_owned();
    if let Err(problem) = check_username(&username) {
        errors.add("username", problem);
    }
    if input.role == Role::Agent {
        errors.add("role", "people hold human roles: viewer, responder, approver or admin");
    }
    if let Some(name) = &input.display_name
        && (name.trim().is_empty() || name.chars().count() > DISPLAY_NAME_MAX_CHARS)
    {
        errors.add("display_name", format!("must have 1..={DISPLAY_NAME_MAX_CHARS} characters"));
    }
    if let Some(Err(problem)) = input.password.as_deref().map(check_password) {
        errors.add("password", problem);
    }
    errors.into_result("the member")?;
    let user = match store.user_by_username(&username).await? {
        Some(existing) => {
            if input.password.is_some() {
                return Err(AppError::invalid_field(
                    "password",
                    "the account exists already; only its owner sets its password",
                ));
            }
            return invite(store, caller, &existing, input.role).await.map(Joining::Invited);
        }
        None => {
            let Some(password) = input.password else {
                return Err(AppError::invalid_field("password", "a new account needs a password"));
            };
            let user = UserRow {
                id: Uuid::now_v7(),
                display_name: input.display_name.map(|n| n.trim().to_owned()).unwrap_or_else(|| username.clone()),
                username: username.clone(),
                password_hash: Some(hash_password(password).await?),
                created_at: now(),
                disabled_at: None,
            };
            let after = serde_json::json!({ "username": user.username, "display_name": user.display_name });
            let created = entry_by(caller, actions::USER_CREATED, ("user", user.id), None, Some(after));
            store.insert_user(&user, &[created]).await.map_err(conflict_on_duplicate)?;
            tracing::info!(username = %user.username, "account created");
            user
        }
    };
    let after = serde_json::json!({ "username": user.username, "role": input.role });
    let added = entry_by(caller, actions::MEMBER_ADDED, ("user", user.id), None, Some(after));
    store
        .insert_membership(caller.workspace_id(), user.id, input.role, &[added])
        .await
        .map_err(conflict_on_duplicate)?;
    tracing::info!(username = %user.username, role = %input.role, workspace = %caller.principal.workspace, "member added");
    let row = store.member(caller.workspace_id(), user.id).await?.ok_or(AppError::NotFound("member"))?;
    Ok(Joining::Added(row.to_member()?))
}

/// Invites the existing account `user` to the caller's workspace with `role`: 409 if they are a member already or
/// invited already.
async fn invite(store: &dyn Store, caller: &Caller, user: &UserRow, role: Role) -> Result<Invitation, AppError> {
    if store.member(caller.workspace_id(), user.id).await?.is_some() {
        return Err(AppError::Conflict { message: "this membership exists already".into(), details: None });
    }
    let invitation = InvitationRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        workspace: caller.principal.workspace.clone(),
        user_id: user.id,
        role,
        invited_by: caller.principal.name.clone(),
        created_at: now(),
    };
    let after = serde_json::json!({ "username": user.username, "role": role, "invitation": invitation.id });
    let invited = entry_by(caller, actions::MEMBER_INVITED, ("user", user.id), None, Some(after));
    store.insert_invitation(&invitation, &invited).await.map_err(conflict_on_duplicate)?;
    tracing::info!(username = %user.username, %role, workspace = %caller.principal.workspace, "account invited");
    Ok(invitation.to_invitation(&user.username))
}

/// `GET /me/invitations`: the invitations of the caller's account, oldest first.
pub async fn my_invitations(store: &dyn Store, caller: &Caller) -> Result<Vec<Invitation>, AppError> {
    let user_id = my_account(caller)?;
    let rows = store.invitations_of(user_id).await?;
    Ok(rows.iter().map(|row| row.to_invitation(&caller.principal.name)).collect())
}

/// `POST /me/invitations/{id}/accept` (`accept`) or `/decline`: the caller answers an invitation of their own
/// account, once. Accepting makes them a member of its workspace with its role. The audit entry goes to the
/// inviting workspace's log. 404 if the account has no such invitation (answered already, or another's).
pub async fn answer_invitation(
    store: &dyn Store,
    caller: &Caller,
    id: Uuid,
    accept: bool,
) -> Result<Invitation, AppError> {
    let user_id = my_account(caller)?;
    let actor = AuditActor::from(caller);
    let username = caller.principal.name.clone();
    let audit = move |invitation: &InvitationRow| NewAuditEntry {
        workspace_id: invitation.workspace_id,
        actor: actor.clone(),
        action: (if accept { actions::INVITATION_ACCEPTED } else { actions::INVITATION_DECLINED }).to_owned(),
        subject_type: "user".into(),
        subject_id: Some(user_id.to_string()),
        before: None,
        after: Some(serde_json::json!({
            "username": username, "role": invitation.role, "invitation": invitation.id,
        })),
        diff: None,
        created_at: now(),
    };
    let answered =
        store.answer_invitation(user_id, id, accept, &audit).await?.ok_or(AppError::NotFound("invitation"))?;
    tracing::info!(username = %caller.principal.name, workspace = %answered.workspace, accept, "invitation answered");
    Ok(answered.to_invitation(&caller.principal.name))
}

/// `PATCH /members/{user_id}`: another role; never leaves the workspace without an admin.
/// Their claims of questions the new role may not decide are let go.
pub async fn change_role(
    store: &dyn Store,
    hub: &EventHub,
    caller: &Caller,
    user_id: Uuid,
    role: Role,
) -> Result<Member, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    if role == Role::Agent {
        return Err(AppError::invalid_field("role", "people hold human roles: viewer, responder, approver or admin"));
    }
    let changed = move |before: Role| {
        let (before, after) = (serde_json::json!({ "role": before }), serde_json::json!({ "role": role }));
        entry_by(caller, actions::ROLE_CHANGED, ("user", user_id), Some(before), Some(after))
    };
    match store.change_role(caller.workspace_id(), user_id, role, &changed).await? {
        MembershipChange::Changed { before } => tracing::info!(%user_id, %before, after = %role, "role changed"),
        MembershipChange::NotMember => return Err(AppError::NotFound("member")),
        MembershipChange::LastAdmin => return Err(last_admin()),
    }
    let row = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
    let because = format!("their role is now {role}");
    let fallen = Fallen { holder: user_id, now_as: Some((row.role, row.username.as_str())), because: &because };
    release_claims(store, hub, caller, fallen).await?;
    Ok(row.to_member()?)
}

/// Lets go of the claims `fallen` holds on questions they may no longer decide.
async fn release_claims(
    store: &dyn Store,
    hub: &EventHub,
    caller: &Caller,
    fallen: Fallen<'_>,
) -> Result<(), AppError> {
    let (workspace, actor) = (&caller.principal.workspace, AuditActor::from(caller));
    let released =
        crate::questions::claims::release_fallen_claims(store, hub, workspace, caller.workspace_id(), fallen, &actor)
            .await?;
    if released > 0 {
        tracing::info!(holder = %fallen.holder, released, because = fallen.because, "claims let go");
    }
    Ok(())
}

/// `PATCH /members/{user_id}`: another role, other addresses, or both. Every field is checked before anything is
/// written, so a bad one changes nothing.
pub async fn update_member(
    store: &dyn Store,
    slack: Option<&SlackClient>,
    hub: &EventHub,
    sends_on: &SendsOn,
    caller: &Caller,
    user_id: Uuid,
    update: MemberUpdate,
) -> Result<Member, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let addresses = update.addresses();
    check_addresses(&addresses)?;
    let absence = match addresses.changes_absence() {
        true => {
            let member = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
            Some(absence_of(store, caller.workspace_id(), &member, &addresses, crate::store::now()).await?)
        }
        false => None,
    };
    if let Some(role) = update.role {
        change_role(store, hub, caller, user_id, role).await?;
    }
    if addresses.email.is_some() || addresses.slack_user_id.is_some() {
        let member = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
        set_addresses(store, slack, caller, &member, addresses, Proof::Admin).await?;
    }
    if let Some(absence) = absence {
        let member = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
        set_absence(store, hub, sends_on, caller, &member, absence).await?;
    }
    let row = store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("member"))?;
    Ok(row.to_member()?)
}

/// `DELETE /members/{user_id}`: the person loses access to the workspace at once (their sessions there end), and
/// lets go of the questions they claimed there.
pub async fn remove_member(store: &dyn Store, hub: &EventHub, caller: &Caller, user_id: Uuid) -> Result<(), AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let removed = move |before: Role| {
        entry_by(caller, actions::MEMBER_REMOVED, ("user", user_id), Some(serde_json::json!({ "role": before })), None)
    };
    match store.remove_member(caller.workspace_id(), user_id, &removed).await? {
        MembershipChange::Changed { before } => {
            tracing::info!(%user_id, %before, "member removed");
            let fallen = Fallen { holder: user_id, now_as: None, because: "they left the workspace" };
            release_claims(store, hub, caller, fallen).await
        }
        MembershipChange::NotMember => Err(AppError::NotFound("member")),
        MembershipChange::LastAdmin => Err(last_admin()),
    }
}

fn last_admin() -> AppError {
    AppError::Conflict { message: "the workspace must keep at least one admin".into(), details: None }
}

fn conflict_on_duplicate(err: StoreError) -> AppError {
    match err {
        StoreError::Duplicate(what) => {
            AppError::Conflict { message: format!("this {what} exists already"), details: None }
        }
        other => other.into(),
    }
}

/// A token's name as it is kept (trimmed), or why it is refused: what the API and `holdpoint token create` take.
pub fn check_token_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > TOKEN_NAME_MAX_CHARS {
        return Err(format!("must have 1..={TOKEN_NAME_MAX_CHARS} characters"));
    }
    if name.chars().any(char::is_control) {
        return Err("may not hold control characters (line breaks, tabs)".into());
    }
    Ok(name.to_owned())
}

/// `POST /tokens`: a new token of the caller's workspace; its secret is in the answer and nowhere else.
pub async fn create_token(store: &dyn Store, caller: &Caller, input: NewToken) -> Result<CreatedToken, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let name = check_token_name(&input.name).map_err(|message| AppError::invalid_field("name", message))?;
    let secret = new_token_secret();
    let row = TokenRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        name,
        role: input.role,
        secret_hash: hash_secret(&secret),
        created_at: now(),
        created_by: Some(caller.principal.name.clone()),
        // The token belongs to the person who made it (a token made by a token belongs to that token's person).
        maker_id: caller.principal.person,
    };
    store_token(store, &row, &AuditActor::from(caller)).await?;
    tracing::info!(token = %row.id, name = %row.name, role = %row.role, by = %caller.principal.name, "token created");
    let info = store.token_info(caller.workspace_id(), row.id).await?.ok_or(AppError::NotFound("token"))?;
    Ok(CreatedToken { token: info.to_token_info()?, secret })
}

/// `POST /tokens/{id}/revoke`: the token stops working at once, and so do the sessions opened with it; a service
/// token lets go of its claims (a person's token claims for the person, who keeps them). 409 if it was revoked
/// already.
pub async fn revoke_token(store: &dyn Store, hub: &EventHub, caller: &Caller, id: Uuid) -> Result<TokenInfo, AppError> {
    caller.require_admin(MANAGE_PEOPLE)?;
    let at = now();
    let (before, after) = (serde_json::json!({ "revoked_at": null }), serde_json::json!({ "revoked_at": at }));
    let revoked = entry_by(caller, actions::TOKEN_REVOKED, ("token", id), Some(before), Some(after));
    let row = store.revoke_token(caller.workspace_id(), id, at, &revoked).await?.ok_or(AppError::NotFound("token"))?;
    if row.revoked_at != Some(at) {
        return Err(AppError::Conflict {
            message: "the token is revoked already".into(),
            details: Some(serde_json::json!({ "revoked_at": row.revoked_at })),
        });
    }
    tracing::info!(token = %id, by = %caller.principal.name, "token revoked");
    if store.token_maker(caller.workspace_id(), id).await?.is_none() {
        release_claims(store, hub, caller, Fallen { holder: id, now_as: None, because: "the token was revoked" })
            .await?;
    }
    Ok(row.to_token_info()?)
}

/// The name, and the `created_by`, of the admin token the `HOLDPOINT_BOOTSTRAP_TOKEN` setting makes.
pub const BOOTSTRAP_TOKEN: &str = "bootstrap";

/// The policy the bootstrap token's making and revoking are audited as.
const BOOTSTRAP_ACTOR: &str = "bootstrap token configuration";

/// Whether token `id` was made by the `HOLDPOINT_BOOTSTRAP_TOKEN` setting: its `token.created` entry is the policy's.
async fn made_by_the_setting(store: &dyn Store, workspace_id: Uuid, id: Uuid) -> Result<bool, AppError> {
    let query = crate::store::AuditQuery {
        filter: holdpoint_types::AuditFilter {
            action: Some(actions::TOKEN_CREATED.to_owned()),
            actor_kind: Some(holdpoint_types::ActorKind::Policy),
            subject_id: Some(id.to_string()),
            ..Default::default()
        },
        ascending: true,
        cursor_seq: None,
        limit: 10,
    };
    let created = store.list_audit(workspace_id, &query).await?;
    Ok(created.iter().any(|entry| entry.actor == BOOTSTRAP_ACTOR))
}

/// What [`install_bootstrap_token`] did.
#[derive(Debug, Default, PartialEq)]
pub struct BootstrapInstalled {
    /// Whether the token was new (`false` on every start after the first with the same value).
    pub created: bool,
    /// The tokens earlier values of the setting made, revoked now.
    pub revoked: Vec<Uuid>,
}

/// Makes the configured bootstrap token (`secret_hash`) an admin token of `workspace`, and revokes the tokens earlier
/// values of the setting made, with their sessions and claims: an operator changes the value to retire a leaked one,
/// and expects the old value to stop working. Starting again with the same value changes nothing.
pub async fn install_bootstrap_token(
    store: &dyn Store,
    hub: &EventHub,
    workspace: &WorkspaceRow,
    secret_hash: Vec<u8>,
) -> Result<BootstrapInstalled, AppError> {
    let actor = AuditActor::policy(BOOTSTRAP_ACTOR, None);
    let row = TokenRow {
        id: Uuid::now_v7(),
        workspace_id: workspace.id,
        name: BOOTSTRAP_TOKEN.into(),
        role: Role::Admin,
        secret_hash,
        created_at: now(),
        created_by: Some(BOOTSTRAP_TOKEN.into()),
        maker_id: None,
    };
    let created = store_token(store, &row, &actor).await?;
    // `None` when an admin revoked this very value: it stays revoked, as they meant.
    let current = store.principal_by_token_hash(&row.secret_hash).await?.map(|principal| principal.id);
    let mut earlier = Vec::new();
    let mut before = None;
    loop {
        let page = store.tokens(workspace.id, before, 100).await?;
        before = page.last().map(|token| token.id);
        for token in &page {
            let made_by_the_setting = token.name == BOOTSTRAP_TOKEN
                && token.created_by.as_deref() == Some(BOOTSTRAP_TOKEN)
                && token.role == Role::Admin;
            if made_by_the_setting && token.revoked_at.is_none() && Some(token.id) != current {
                earlier.push(token.id);
            }
        }
        if page.len() < 100 {
            break;
        }
    }
    let mut revoked = Vec::new();
    for id in earlier {
        // Only the setting's own tokens are retired, as the audit chain records their making: one an admin made with
        // the bootstrap token and named "bootstrap" too looks the same in the tokens' table.
        if !made_by_the_setting(store, workspace.id, id).await? {
            continue;
        }
        let at = now();
        let entry = NewAuditEntry {
            workspace_id: workspace.id,
            actor: actor.clone(),
            action: actions::TOKEN_REVOKED.to_owned(),
            subject_type: "token".into(),
            subject_id: Some(id.to_string()),
            before: Some(serde_json::json!({ "revoked_at": null })),
            after: Some(serde_json::json!({ "revoked_at": at, "because": "HOLDPOINT_BOOTSTRAP_TOKEN changed" })),
            diff: None,
            created_at: at,
        };
        let Some(token) = store.revoke_token(workspace.id, id, at, &entry).await? else { continue };
        if token.revoked_at != Some(at) {
            continue;
        }
        let fallen = Fallen { holder: id, now_as: None, because: "the bootstrap token changed" };
        crate::questions::claims::release_fallen_claims(store, hub, &workspace.name, workspace.id, fallen, &actor)
            .await?;
        revoked.push(id);
    }
    Ok(BootstrapInstalled { created, revoked })
}
