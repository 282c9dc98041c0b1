//! The rows of people and credentials and their wire forms: accounts, memberships with their addresses and
//! settings, tokens, sign-in links, invitations, email verifications, and what a membership's change reports.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use holdpoint_types::Role;

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
    /// Whether the Slack id is proven (an admin set it, or a verified address found it): only a proven id maps
    /// Slack clicks to the member and receives their messages.
    pub slack_user_id_proven: bool,
    /// Whether the account has verified the membership's email address (confirmed a link sent there).
    pub email_verified: bool,
    /// The channel thresholds as JSON (`holdpoint_types::NotificationPreferences`); `None` = the defaults.
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
    pub fn preferences(&self) -> Result<holdpoint_types::NotificationPreferences, StoreError> {
        match &self.notifications {
            None => Ok(holdpoint_types::NotificationPreferences::default()),
            Some(json) => serde_json::from_str(json)
                .map_err(|e| StoreError::Corrupt(format!("the notification preferences of {}: {e}", self.user_id))),
        }
    }

    /// What [`PeopleStore::set_member_settings`] would write to leave the member as they are.
    pub fn settings(&self) -> MemberSettings {
        MemberSettings {
            email: self.email.clone(),
            slack_user_id: self.slack_user_id.clone(),
            slack_user_id_proven: self.slack_user_id_proven,
            notifications: self.notifications.clone(),
            away_until: self.away_until,
            delegate_id: self.delegate_id,
        }
    }

    pub fn to_member(&self) -> Result<holdpoint_types::Member, StoreError> {
        Ok(holdpoint_types::Member {
            user_id: self.user_id,
            username: self.username.clone(),
            display_name: self.display_name.clone(),
            role: self.role,
            has_password: self.has_password,
            created_at: self.created_at,
            email: self.email.clone(),
            slack_user_id: self.slack_user_id.clone(),
            slack_user_id_proven: self.slack_user_id_proven,
            email_verified: self.email_verified,
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
    /// Whether the Slack id is proven; setting a proven id takes it from any other member of the workspace.
    pub slack_user_id_proven: bool,
    /// JSON of `holdpoint_types::NotificationPreferences`; `None` = the defaults.
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
    pub fn to_token_info(&self) -> Result<holdpoint_types::TokenInfo, StoreError> {
        Ok(holdpoint_types::TokenInfo {
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

/// The account that verified an email address a sign-in names.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AccountByEmail {
    pub user_id: Uuid,
    /// Whether the account is disabled (it then signs in nowhere).
    pub disabled: bool,
}

/// An invitation of an existing account to a workspace, pending until its owner accepts or declines it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct InvitationRow {
    pub id: Uuid,
    pub workspace_id: Uuid,
    /// The workspace's name (read with the row; ignored when inserting).
    pub workspace: String,
    pub user_id: Uuid,
    pub role: Role,
    pub invited_by: String,
    pub created_at: DateTime<Utc>,
}

impl InvitationRow {
    pub fn to_invitation(&self, username: &str) -> holdpoint_types::Invitation {
        holdpoint_types::Invitation {
            id: self.id,
            workspace: self.workspace.clone(),
            username: username.to_owned(),
            role: self.role,
            invited_by: self.invited_by.clone(),
            created_at: self.created_at,
        }
    }
}

/// A verification link sent to an address: the code only as its hash.
#[derive(Debug, Clone)]
pub struct EmailVerificationRow {
    pub code_hash: Vec<u8>,
    pub user_id: Uuid,
    /// Lower-cased.
    pub email: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// What confirming a verification link did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmailConfirmation {
    /// The account verified the address.
    Verified { email: String },
    /// No such link for this account: unknown, used, expired, or sent to another account.
    Unknown,
    /// Another account verified the address first; it keeps it.
    TakenByAnother,
}

/// A person single sign-on creates: their account, and their membership of one workspace with a role and the
/// verified email address they signed in with.
#[derive(Debug, Clone)]
pub struct ProvisionedMember {
    pub user: UserRow,
    pub workspace_id: Uuid,
    pub role: Role,
    /// Lower-cased; the account is recorded as having verified it (the provider did, and the account is new).
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
