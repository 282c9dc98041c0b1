//! The store of people and credentials, and the SQL both backends use for it: user accounts, their
//! memberships, API token management and one-time sign-in links.
//!
//! Role changes and removals that could leave a workspace without an admin are refused inside the transaction
//! that would make them, so two admins demoting each other at once cannot both succeed.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use app::types::Role;

use super::*;

/// A person's account. The password only as its argon2id hash.
#[derive(Clone, sqlx::FromRow)]
pub struct UserRow {
    pub id: Uuid,
    pub username: String,
    pub display_name: String,
    pub password_hash: Option<String>,
    pub created_at: DateTime<Utc>,
    pub disabled_at: Option<DateTime<Utc>>,
}

impl std::fmt::Debug for UserRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserRow")
            .field("id", &self.id)
            .field("username", &self.username)
            .field("password_hash", &self.password_hash.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// A member of a workspace: the account and its role there.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MemberRow {
    pub user_id: Uuid,
    pub username: String,
    pub display_name: String,
    pub role: Role,
    pub has_password: bool,
    pub created_at: DateTime<Utc>,
    pub email: Option<String>,
    pub slack_user_id: Option<String>,
    /// The channel thresholds as JSON (`app::types::NotificationPreferences`); `None` = the defaults.
    pub notifications: Option<String>,
    /// Until when they are away, handing their assigned questions to `delegate_id`.
    pub away_until: Option<DateTime<Utc>>,
    pub delegate_id: Option<Uuid>,
    /// The delegate's username.
    pub delegate: Option<String>,
}

impl MemberRow {
    /// Whether they are away at `now`, with someone to stand in for them.
    pub fn is_away(&self, now: DateTime<Utc>) -> bool {
        self.away_until.is_some_and(|until| until > now) && self.delegate_id.is_some()
    }

    /// The member's channel thresholds: those stored, or the defaults.
    pub fn preferences(&self) -> Result<app::types::NotificationPreferences, StoreError> {
        match &self.notifications {
            None => Ok(app::types::NotificationPreferences::default()),
            Some(json) => serde_json::from_str(json)
                .map_err(|e| StoreError::Corrupt(format!("the notification preferences of {}: {e}", self.user_id))),
        }
    }

    /// What [`PeopleStore::set_member_settings`] would write to leave the member as they are.
    pub fn settings(&self) -> MemberSettings {
        MemberSettings {
            email: self.email.clone(),
            slack_user_id: self.slack_user_id.clone(),
            notifications: self.notifications.clone(),
            away_until: self.away_until,
            delegate_id: self.delegate_id,
        }
    }

    pub fn to_member(&self) -> Result<app::types::Member, StoreError> {
        Ok(app::types::Member {
            user_id: self.user_id,
            username: self.username.clone(),
            display_name: self.display_name.clone(),
            role: self.role,
            has_password: self.has_password,
            created_at: self.created_at,
            email: self.email.clone(),
            slack_user_id: self.slack_user_id.clone(),
            away_until: self.away_until,
            delegate: self.delegate.clone(),
        })
    }
}

/// A member's addresses and channel thresholds, as stored with their membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSettings {
    pub email: Option<String>,
    pub slack_user_id: Option<String>,
    /// JSON of `app::types::NotificationPreferences`; `None` = the defaults.
    pub notifications: Option<String>,
    pub away_until: Option<DateTime<Utc>>,
    pub delegate_id: Option<Uuid>,
}

/// A token as listed: never its secret.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct TokenInfoRow {
    pub id: Uuid,
    pub name: String,
    pub role: Role,
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl TokenInfoRow {
    pub fn to_token_info(&self) -> Result<app::types::TokenInfo, StoreError> {
        Ok(app::types::TokenInfo {
            id: self.id,
            name: self.name.clone(),
            role: self.role,
            created_by: self.created_by.clone(),
            created_at: self.created_at,
            revoked_at: self.revoked_at,
        })
    }
}

/// A one-time sign-in link: the code only as its hash.
#[derive(Debug, Clone)]
pub struct SigninLinkRow {
    pub code_hash: Vec<u8>,
    pub workspace_id: Uuid,
    pub user_id: Uuid,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A membership whose email address matched a sign-in's: whose account, in which workspace.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct MemberByEmail {
    pub user_id: Uuid,
    pub workspace: String,
    /// Whether the account is disabled (it then signs in nowhere).
    pub disabled: bool,
}

/// A person single sign-on creates: their account, and their membership of one workspace with a role and the
/// verified email address they signed in with.
#[derive(Debug, Clone)]
pub struct ProvisionedMember {
    pub user: UserRow,
    pub workspace_id: Uuid,
    pub role: Role,
    pub email: String,
}

/// What a role change or a removal did.
#[derive(Debug, Clone, PartialEq)]
pub enum MembershipChange {
    /// Done; the role the person had before.
    Changed {
        before: Role,
    },
    NotMember,
    /// Refused: the workspace would have no admin left.
    LastAdmin,
}

/// Accounts, memberships, token management and sign-in links.
#[async_trait]
pub trait PeopleStore: Send + Sync {
    /// Whether this store only relays to a server (a client-executed run): it knows nobody, and the server checks
    /// what concerns people when the request reaches it.
    fn relays_to_server(&self) -> bool {
        false
    }

    /// Changes whenever a credential may have been revoked or a member removed or given another role, here or
    /// (on PostgreSQL) through another instance: what holds a caller for long checks it again then.
    fn credential_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        // A store that knows nobody hears of no change: a channel whose sender is gone never changes.
        tokio::sync::watch::channel(0).1
    }

    /// Stores a new account with the audit entries that record it, in one transaction; [`StoreError::Duplicate`]
    /// if the username is taken.
    async fn insert_user(&self, user: &UserRow, audit: &[NewAuditEntry]) -> StoreResult<()>;
    async fn user_by_username(&self, username: &str) -> StoreResult<Option<UserRow>>;
    /// Sets a password with the audit entries that record it, in one transaction.
    async fn set_password(&self, user_id: Uuid, password_hash: &str, audit: &[NewAuditEntry]) -> StoreResult<()>;
    /// The person acting in a workspace (by name; `None` = the one they joined first), if they are a member and
    /// their account is enabled.
    async fn user_principal(&self, user_id: Uuid, workspace: Option<&str>) -> StoreResult<Option<Principal>>;

    /// The workspaces a person belongs to.
    async fn workspaces_of(&self, user_id: Uuid) -> StoreResult<Vec<Uuid>>;
    /// Adds a person to a workspace with the audit entries that record it, in one transaction;
    /// [`StoreError::Duplicate`] if they are a member already.
    async fn insert_membership(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        role: Role,
        audit: &[NewAuditEntry],
    ) -> StoreResult<()>;
    async fn member(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<Option<MemberRow>>;
    /// Members by username, after `after` (a username).
    async fn members(&self, workspace_id: Uuid, after: Option<&str>, limit: u32) -> StoreResult<Vec<MemberRow>>;
    /// Gives a member another role, with the audit entry `audit` makes of the role they had, in one transaction;
    /// refused if that would leave the workspace without an admin.
    async fn change_role(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        role: Role,
        audit: &AuditOfMembership<'_>,
    ) -> StoreResult<MembershipChange>;
    /// Replaces a member's addresses and channel thresholds, with `audit`, in one transaction; `false`, and
    /// nothing written, if they are not a member.
    async fn set_member_settings(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        settings: &MemberSettings,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool>;
    /// Removes a member and ends their sessions in the workspace, with the audit entry `audit` makes of the role
    /// they had, in one transaction; refused for the last admin.
    async fn remove_member(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        audit: &AuditOfMembership<'_>,
    ) -> StoreResult<MembershipChange>;

    /// Tokens, newest first, after `before` (a token id).
    async fn tokens(&self, workspace_id: Uuid, before: Option<Uuid>, limit: u32) -> StoreResult<Vec<TokenInfoRow>>;
    async fn token_info(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<TokenInfoRow>>;
    /// Revokes a live token and ends its sessions, at once, with `audit` in the same transaction. `None` if there is
    /// no such token; the row as it is, and nothing recorded, if it was revoked already (its `revoked_at` is then
    /// older than `at`).
    async fn revoke_token(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<Option<TokenInfoRow>>;

    /// Whether anyone can sign in to the workspace other than by a sign-in link: a live token, or a member with
    /// a password.
    async fn has_credentials(&self, workspace_id: Uuid) -> StoreResult<bool>;
    /// The memberships whose email address is `email` (compared without regard to ASCII case), the oldest first.
    async fn members_by_email(&self, email: &str) -> StoreResult<Vec<MemberByEmail>>;
    /// Stores a new account and its one membership with the audit entries that record them, in one transaction;
    /// [`StoreError::Duplicate`] if the username is taken.
    async fn provision_member(&self, member: &ProvisionedMember, audit: &[NewAuditEntry]) -> StoreResult<()>;
    /// Stores a new sign-in link and drops the workspace's unused ones (only the newest printed link works).
    async fn replace_signin_link(&self, link: &SigninLinkRow) -> StoreResult<()>;
    /// Uses a sign-in link once: the person it signs in, or `None` if the code is unknown, used or expired.
    async fn use_signin_link(&self, code_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<Principal>>;
    /// Gives the next turn of a role's round-robin: of the workspace's members with exactly `role` (whose account is
    /// not disabled), the one given a question least recently (never first, then the longest-standing member)
    /// is marked as given one at `at`; their username, or `None` if the role has no member.
    async fn take_assignment_turn(
        &self,
        workspace_id: Uuid,
        role: Role,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<String>>;
}

/// The members a role's round-robin turn goes between (`$1` workspace, `$2` role), in the order their rows are locked
/// where the dialect locks them.
pub(super) const IN_TURN: &str = "SELECT m.user_id, u.username, m.last_assigned_at, m.created_at \
     FROM memberships m JOIN users u ON u.id = m.user_id \
     WHERE m.workspace_id = $1 AND m.role = $2 AND u.disabled_at IS NULL ORDER BY m.user_id";

/// Marks a member (`$1` workspace, `$2` user) as given a question at `$3`.
pub(super) const MARK_ASSIGNED: &str =
    "UPDATE memberships SET last_assigned_at = $3 WHERE workspace_id = $1 AND user_id = $2";

/// One member a round-robin turn may go to, as [`IN_TURN`] reads them.
pub(super) type InTurn = (Uuid, String, Option<DateTime<Utc>>, DateTime<Utc>);

/// Of `members`, whose turn it is (given a question least recently: never first, then the longest-standing member),
/// and the time to mark them with: `at`, or just after the latest mark if that is later (the marks then keep the
/// order the turns were taken in, whatever the clocks of the instances that asked).
pub(super) fn next_turn(members: &[InTurn], at: DateTime<Utc>) -> Option<(Uuid, String, DateTime<Utc>)> {
    let (user_id, username, _, _) =
        members.iter().min_by_key(|(user_id, _, last, created_at)| (last.is_some(), *last, *created_at, *user_id))?;
    let latest = members.iter().filter_map(|(_, _, last, _)| *last).max();
    let mark = latest.map_or(at, |latest| at.max(latest + chrono::Duration::microseconds(1)));
    Some((*user_id, username.clone(), mark))
}

/// The audit entry of a membership change, made from the role the member had (read in the change's transaction).
pub type AuditOfMembership<'a> = dyn Fn(Role) -> NewAuditEntry + Send + Sync + 'a;

/// Principals of people: a user in one of their workspaces, with the role of that membership.
pub(super) const USER_PRINCIPAL: &str = "SELECT u.id, CAST('user' AS TEXT) AS kind, m.workspace_id, \
     w.name AS workspace, u.username AS name, m.role, u.id AS person FROM users u JOIN memberships m ON m.user_id = u.id \
     JOIN workspaces w ON w.id = m.workspace_id";
pub(super) const MEMBER_COLUMNS: &str = "u.id AS user_id, u.username, u.display_name, m.role, \
     (u.password_hash IS NOT NULL) AS has_password, m.created_at, m.email, m.slack_user_id, m.notifications, \
     m.away_until, m.delegate_id, (SELECT d.username FROM users d WHERE d.id = m.delegate_id) AS delegate";
pub(super) const TOKEN_INFO_COLUMNS: &str = "id, name, role, created_by, created_at, revoked_at";
pub(super) const USER_COLUMNS: &str = "id, username, display_name, password_hash, created_at, disabled_at";

/// The memberships with an email address (`$1`), as [`PeopleStore::members_by_email`] returns them. SQLite's
/// `lower` folds ASCII only: addresses differing in the case of other letters do not match there.
pub(super) const MEMBERS_BY_EMAIL: &str = "SELECT m.user_id, w.name AS workspace, \
     (u.disabled_at IS NOT NULL) AS disabled FROM memberships m JOIN users u ON u.id = m.user_id \
     JOIN workspaces w ON w.id = m.workspace_id WHERE lower(m.email) = lower($1) ORDER BY m.created_at, w.name";
/// A new member with their email address (`workspace_id`, `user_id`, `role`, `created_at`, `email`).
pub(super) const INSERT_MEMBER_WITH_EMAIL: &str =
    "INSERT INTO memberships (workspace_id, user_id, role, created_at, email) VALUES ($1, $2, $3, $4, $5)";

/// Replaces a member's settings (`email`, `slack_user_id`, `notifications`, `workspace_id`, `user_id`,
/// `away_until`, `delegate_id`).
pub(super) const SET_MEMBER_SETTINGS: &str = "UPDATE memberships SET email = $1, slack_user_id = $2, \
     notifications = $3, away_until = $6, delegate_id = $7 WHERE workspace_id = $4 AND user_id = $5";
