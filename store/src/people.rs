//! The store of people and credentials, written once for both backends: user accounts, their memberships, API
//! token management and one-time sign-in links: the trait, its one implementation and its SQL (the rows are in
//! [`super::people_rows`]).
//!
//! Role changes and removals that could leave a workspace without an admin are refused inside the transaction
//! that would make them, so two admins demoting each other at once cannot both succeed.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use holdpoint_types::Role;

use super::backend::{Sql, SqlBackend, Statement};
use super::sql::{is_unique_violation, table_row};
use super::*;

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
    /// Sets a password with the audit entries that record it, and ends the account's sessions but `keep` (the
    /// session of the person changing their own), in one transaction: a new password locks out whoever had the old
    /// one.
    async fn set_password(
        &self,
        user_id: Uuid,
        password_hash: &str,
        keep: Option<&[u8]>,
        audit: &[NewAuditEntry],
    ) -> StoreResult<()>;
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
    /// The person who made token `id`, if it is a token a person made.
    async fn token_maker(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<Uuid>>;
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
    /// The account that verified `email` (compared lower-cased), if one did.
    async fn account_by_verified_email(&self, email: &str) -> StoreResult<Option<AccountByEmail>>;
    /// Whether an admin removed someone with the address `email` (lower-cased) from the workspace, and nobody added
    /// them again since.
    async fn removed_from(&self, workspace_id: Uuid, email: &str) -> StoreResult<bool>;
    /// Stores a new account and its one membership, with its address recorded as verified, and the audit entries
    /// that record them, in one transaction; [`StoreError::Duplicate`] if the username is taken.
    async fn provision_member(&self, member: &ProvisionedMember, audit: &[NewAuditEntry]) -> StoreResult<()>;
    /// Stores an invitation with its audit entry, in one transaction; [`StoreError::Duplicate`] if the account has
    /// a pending invitation to the workspace already.
    async fn insert_invitation(&self, invitation: &InvitationRow, audit: &NewAuditEntry) -> StoreResult<()>;
    /// The account's pending invitations, oldest first.
    async fn invitations_of(&self, user_id: Uuid) -> StoreResult<Vec<InvitationRow>>;
    /// Answers the account's pending invitation `id` once (of two answers, one wins): accepting makes the
    /// membership (nothing if they are a member already), declining only drops it; with the audit entry `audit`
    /// makes of it, in one transaction. `None` if the account has no such pending invitation.
    async fn answer_invitation(
        &self,
        user_id: Uuid,
        id: Uuid,
        accept: bool,
        audit: &(dyn for<'r> Fn(&'r InvitationRow) -> NewAuditEntry + Send + Sync),
    ) -> StoreResult<Option<InvitationRow>>;
    /// Stores a verification link sent to an address, dropping the account's expired ones.
    async fn insert_email_verification(&self, verification: &EmailVerificationRow) -> StoreResult<()>;
    /// The account and address of a live verification link, without using it.
    async fn email_verification(&self, code_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<(Uuid, String)>>;
    /// Uses a verification link of `user_id` once and records its address as the account's, with the audit entry
    /// `audit` makes of the address, in one transaction.
    async fn confirm_email_verification(
        &self,
        code_hash: &[u8],
        user_id: Uuid,
        now: DateTime<Utc>,
        audit: &(dyn for<'r> Fn(&'r str) -> NewAuditEntry + Send + Sync),
    ) -> StoreResult<EmailConfirmation>;
    /// When the session with this id hash was opened (by a sign-in of any kind), if it exists.
    async fn session_opened_at(&self, id_hash: &[u8]) -> StoreResult<Option<DateTime<Utc>>>;
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

#[async_trait]
impl<B: SqlBackend> PeopleStore for B {
    fn credential_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.token_cache().changes()
    }

    async fn insert_user(&self, user: &UserRow, audit: &[NewAuditEntry]) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        insert_user_in(&mut write, user).await?;
        for entry in audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        self.commit_write(write, None).await
    }

    async fn user_by_username(&self, username: &str) -> StoreResult<Option<UserRow>> {
        self.write_alone()
            .fetch_optional(
                Statement::new(format!("SELECT {USER_COLUMNS} FROM users WHERE username = $1")).bind(username),
            )
            .await
    }

    async fn set_password(
        &self,
        user_id: Uuid,
        password_hash: &str,
        keep: Option<&[u8]>,
        audit: &[NewAuditEntry],
    ) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        write
            .execute(
                Statement::new("UPDATE users SET password_hash = $1 WHERE id = $2").bind(password_hash).bind(user_id),
            )
            .await?;
        write
            .execute(
                Statement::new("DELETE FROM sessions WHERE user_id = $1 AND ($2 IS NULL OR id_hash <> $2)")
                    .bind(user_id)
                    .bind(keep),
            )
            .await?;
        for entry in audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        self.tell_others_of_a_revocation(&mut write).await?;
        self.commit_write(write, None).await?;
        // Long requests of the account (event streams, MCP sessions) check their caller again.
        self.token_cache().forget_all();
        Ok(())
    }

    async fn user_principal(&self, user_id: Uuid, workspace: Option<&str>) -> StoreResult<Option<Principal>> {
        let record: Option<PrincipalRecord> = self
            .write_alone()
            .fetch_optional(
                Statement::new(format!(
                    "{USER_PRINCIPAL} WHERE u.id = $1 AND u.disabled_at IS NULL AND ($2 IS NULL OR w.name = $2) \
                     ORDER BY m.created_at, w.name LIMIT 1"
                ))
                .bind(user_id)
                .bind(workspace),
            )
            .await?;
        record.map(PrincipalRecord::into_principal).transpose()
    }

    async fn workspaces_of(&self, user_id: Uuid) -> StoreResult<Vec<Uuid>> {
        let rows: Vec<(Uuid,)> = self
            .write_alone()
            .fetch_all(Statement::new("SELECT workspace_id FROM memberships WHERE user_id = $1").bind(user_id))
            .await?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    async fn insert_membership(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        role: Role,
        audit: &[NewAuditEntry],
    ) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        let inserted = write
            .execute(
                Statement::new(
                    "INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)",
                )
                .bind(workspace_id)
                .bind(user_id)
                .bind(role.as_str())
                .bind(crate::now()),
            )
            .await;
        duplicate_as(inserted, "membership")?;
        write.execute(Statement::new(FORGET_REMOVAL).bind(workspace_id).bind(user_id)).await?;
        for entry in audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        self.commit_write(write, None).await
    }

    async fn member(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<Option<MemberRow>> {
        self.write_alone()
            .fetch_optional(
                Statement::new(format!(
                    "SELECT {MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id \
                     WHERE m.workspace_id = $1 AND m.user_id = $2"
                ))
                .bind(workspace_id)
                .bind(user_id),
            )
            .await
    }

    async fn members(&self, workspace_id: Uuid, after: Option<&str>, limit: u32) -> StoreResult<Vec<MemberRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id \
                     WHERE m.workspace_id = $1 AND ($2 IS NULL OR u.username > $2) ORDER BY u.username LIMIT $3"
                ))
                .bind(workspace_id)
                .bind(after)
                .bind(i64::from(limit)),
            )
            .await
    }

    async fn change_role(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        role: Role,
        audit: &AuditOfMembership<'_>,
    ) -> StoreResult<MembershipChange> {
        let mut write = self.begin_write().await?;
        let before = match role_before::<B>(&mut write, workspace_id, user_id, role != Role::Admin).await? {
            Ok(before) => before,
            Err(refused) => {
                // Explicitly: a dropped transaction keeps the admins' row locks until its connection is reused.
                self.rollback_write(write).await?;
                return Ok(refused);
            }
        };
        write
            .execute(
                Statement::new("UPDATE memberships SET role = $1 WHERE workspace_id = $2 AND user_id = $3")
                    .bind(role.as_str())
                    .bind(workspace_id)
                    .bind(user_id),
            )
            .await?;
        self.append_audit_in(&mut write, &audit(before)).await?;
        self.tell_others_of_a_revocation(&mut write).await?;
        self.commit_write(write, None).await?;
        // Long requests of the member (event streams, MCP sessions) check their caller again.
        self.token_cache().forget_all();
        Ok(MembershipChange::Changed { before })
    }

    async fn set_member_settings(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        settings: &MemberSettings,
        audit: &NewAuditEntry,
    ) -> StoreResult<bool> {
        let mut write = self.begin_write().await?;
        if let (Some(slack_user_id), true) = (&settings.slack_user_id, settings.slack_user_id_proven) {
            write
                .execute(Statement::new(RELEASE_SLACK_ID).bind(workspace_id).bind(slack_user_id).bind(user_id))
                .await?;
        }
        let updated = write
            .execute(
                Statement::new(SET_MEMBER_SETTINGS)
                    .bind(settings.email.as_deref())
                    .bind(settings.slack_user_id.as_deref())
                    .bind(settings.notifications.as_deref())
                    .bind(workspace_id)
                    .bind(user_id)
                    .bind(settings.away_until)
                    .bind(settings.delegate_id)
                    .bind(settings.slack_user_id_proven),
            )
            .await?;
        if updated == 0 {
            self.rollback_write(write).await?;
            return Ok(false);
        }
        self.append_audit_in(&mut write, audit).await?;
        self.commit_write(write, None).await?;
        Ok(true)
    }

    async fn remove_member(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        audit: &AuditOfMembership<'_>,
    ) -> StoreResult<MembershipChange> {
        let mut write = self.begin_write().await?;
        let before = match role_before::<B>(&mut write, workspace_id, user_id, true).await? {
            Ok(before) => before,
            Err(refused) => {
                self.rollback_write(write).await?;
                return Ok(refused);
            }
        };
        write.execute(Statement::new(RECORD_REMOVAL).bind(workspace_id).bind(user_id).bind(crate::now())).await?;
        write
            .execute(Statement::new(GIVE_UP_DELIVERIES_TO).bind(workspace_id).bind(user_id).bind(crate::now()))
            .await?;
        for statement in [
            "DELETE FROM sessions WHERE workspace_id = $1 AND user_id = $2",
            "DELETE FROM signin_links WHERE workspace_id = $1 AND user_id = $2",
            // The browsers subscribed to pushes go with the membership, like its other addresses.
            "DELETE FROM push_subscriptions WHERE workspace_id = $1 AND user_id = $2",
            "DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2",
        ] {
            write.execute(Statement::new(statement).bind(workspace_id).bind(user_id)).await?;
        }
        self.append_audit_in(&mut write, &audit(before)).await?;
        self.tell_others_of_a_revocation(&mut write).await?;
        self.commit_write(write, None).await?;
        self.caches().push_subscribers.forget(workspace_id);
        // Long requests of the member (event streams, MCP sessions) check their caller again.
        self.token_cache().forget_all();
        Ok(MembershipChange::Changed { before })
    }

    async fn tokens(&self, workspace_id: Uuid, before: Option<Uuid>, limit: u32) -> StoreResult<Vec<TokenInfoRow>> {
        self.read()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {TOKEN_INFO_COLUMNS} FROM tokens WHERE workspace_id = $1 AND ($2 IS NULL OR id < $2) \
                     ORDER BY id DESC LIMIT $3"
                ))
                .bind(workspace_id)
                .bind(before)
                .bind(i64::from(limit)),
            )
            .await
    }

    async fn token_info(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<TokenInfoRow>> {
        self.write_alone().fetch_optional(Statement::by_id(TOKEN_INFO_COLUMNS, "tokens", workspace_id, id)).await
    }

    async fn token_maker(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<Uuid>> {
        let maker: Option<(Option<Uuid>,)> =
            self.read().fetch_optional(Statement::by_id("maker_id", "tokens", workspace_id, id)).await?;
        Ok(maker.and_then(|(maker,)| maker))
    }

    async fn revoke_token(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<Option<TokenInfoRow>> {
        let mut write = self.begin_write().await?;
        let revoked = write
            .execute(
                Statement::new(
                    "UPDATE tokens SET revoked_at = $1 WHERE workspace_id = $2 AND id = $3 AND revoked_at IS NULL",
                )
                .bind(at)
                .bind(workspace_id)
                .bind(id),
            )
            .await?;
        if revoked == 1 {
            self.append_audit_in(&mut write, audit).await?;
        }
        write.execute(Statement::new("DELETE FROM sessions WHERE token_id = $1").bind(id)).await?;
        let row: Option<TokenInfoRow> =
            write.fetch_optional(Statement::by_id(TOKEN_INFO_COLUMNS, "tokens", workspace_id, id)).await?;
        self.tell_others_of_a_revocation(&mut write).await?;
        self.commit_write(write, None).await?;
        // Before the caller hears that the token is revoked, this instance has stopped trusting it.
        self.token_cache().forget_all();
        Ok(row)
    }

    async fn take_assignment_turn(
        &self,
        workspace_id: Uuid,
        role: Role,
        at: DateTime<Utc>,
    ) -> StoreResult<Option<String>> {
        // The role's members stay locked until the turn is marked (on SQLite the one writer holds the whole
        // database): concurrent turns of the role take theirs one after the other, each seeing the marks before it.
        let mut write = self.begin_write().await?;
        let members: Vec<InTurn> = write
            .fetch_all(Statement::new(format!("{IN_TURN}{}", B::for_update_of("m"))).bind(workspace_id).bind(role))
            .await?;
        let Some((user_id, username, mark)) = next_turn(&members, at) else { return Ok(None) };
        write.execute(Statement::new(MARK_ASSIGNED).bind(workspace_id).bind(user_id).bind(mark)).await?;
        self.commit_write(write, None).await?;
        Ok(Some(username))
    }

    async fn has_credentials(&self, workspace_id: Uuid) -> StoreResult<bool> {
        let found: Option<(i32,)> = self
            .write_alone()
            .fetch_optional(
                Statement::new(
                    "SELECT 1 FROM tokens WHERE workspace_id = $1 AND revoked_at IS NULL \
                     UNION ALL SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id \
                     WHERE m.workspace_id = $1 AND u.password_hash IS NOT NULL LIMIT 1",
                )
                .bind(workspace_id),
            )
            .await?;
        Ok(found.is_some())
    }

    async fn account_by_verified_email(&self, email: &str) -> StoreResult<Option<AccountByEmail>> {
        self.write_alone().fetch_optional(Statement::new(ACCOUNT_BY_VERIFIED_EMAIL).bind(email)).await
    }

    async fn removed_from(&self, workspace_id: Uuid, email: &str) -> StoreResult<bool> {
        let found: Option<(i32,)> =
            self.write_alone().fetch_optional(Statement::new(REMOVED_FROM).bind(workspace_id).bind(email)).await?;
        Ok(found.is_some())
    }

    async fn insert_invitation(&self, invitation: &InvitationRow, audit: &NewAuditEntry) -> StoreResult<()> {
        let insert = Statement::new(INSERT_INVITATION)
            .bind(invitation.id)
            .bind(invitation.workspace_id)
            .bind(invitation.user_id)
            .bind(invitation.role.as_str())
            .bind(&invitation.invited_by)
            .bind(invitation.created_at);
        duplicate_as(self.write_audited(insert, Some(audit)).await, "invitation")
    }

    async fn invitations_of(&self, user_id: Uuid) -> StoreResult<Vec<InvitationRow>> {
        self.write_alone()
            .fetch_all(
                Statement::new(format!(
                    "SELECT {INVITATION_COLUMNS} FROM invitations i JOIN workspaces w ON w.id = i.workspace_id \
                     WHERE i.user_id = $1 ORDER BY i.created_at, i.id"
                ))
                .bind(user_id),
            )
            .await
    }

    async fn answer_invitation(
        &self,
        user_id: Uuid,
        id: Uuid,
        accept: bool,
        audit: &(dyn for<'r> Fn(&'r InvitationRow) -> NewAuditEntry + Send + Sync),
    ) -> StoreResult<Option<InvitationRow>> {
        let mut write = self.begin_write().await?;
        let taken: Option<TakenInvitation> =
            write.fetch_optional(Statement::new(TAKE_INVITATION).bind(user_id).bind(id)).await?;
        let Some(taken) = taken else {
            self.rollback_write(write).await?;
            return Ok(None);
        };
        let (workspace,): (String,) = write.fetch_one(Statement::new(WORKSPACE_NAME).bind(taken.1)).await?;
        let invitation = InvitationRow::taken(taken, workspace);
        if accept {
            write
                .execute(
                    Statement::new(INSERT_INVITED_MEMBER)
                        .bind(invitation.workspace_id)
                        .bind(user_id)
                        .bind(invitation.role.as_str())
                        .bind(crate::now()),
                )
                .await?;
            write.execute(Statement::new(FORGET_REMOVAL).bind(invitation.workspace_id).bind(user_id)).await?;
        }
        self.append_audit_in(&mut write, &audit(&invitation)).await?;
        self.commit_write(write, None).await?;
        Ok(Some(invitation))
    }

    async fn insert_email_verification(&self, verification: &EmailVerificationRow) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        write
            .execute(
                Statement::new(DROP_EXPIRED_VERIFICATIONS).bind(verification.user_id).bind(verification.created_at),
            )
            .await?;
        write.execute(Statement::insert(verification)).await?;
        self.commit_write(write, None).await
    }

    async fn email_verification(&self, code_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<(Uuid, String)>> {
        self.write_alone().fetch_optional(Statement::new(EMAIL_VERIFICATION).bind(code_hash).bind(now)).await
    }

    async fn confirm_email_verification(
        &self,
        code_hash: &[u8],
        user_id: Uuid,
        now: DateTime<Utc>,
        audit: &(dyn for<'r> Fn(&'r str) -> NewAuditEntry + Send + Sync),
    ) -> StoreResult<EmailConfirmation> {
        let mut write = self.begin_write().await?;
        let used: Option<(String,)> = write
            .fetch_optional(Statement::new(USE_EMAIL_VERIFICATION).bind(code_hash).bind(user_id).bind(now))
            .await?;
        let Some((email,)) = used else {
            self.rollback_write(write).await?;
            return Ok(EmailConfirmation::Unknown);
        };
        write.execute(Statement::new(INSERT_VERIFIED_EMAIL).bind(&email).bind(user_id).bind(now)).await?;
        let (holder,): (Uuid,) = write.fetch_one(Statement::new(VERIFIED_EMAIL_HOLDER).bind(&email)).await?;
        if holder != user_id {
            // The link stays unused: the address is another account's.
            self.rollback_write(write).await?;
            return Ok(EmailConfirmation::TakenByAnother);
        }
        self.append_audit_in(&mut write, &audit(&email)).await?;
        self.commit_write(write, None).await?;
        Ok(EmailConfirmation::Verified { email })
    }

    async fn session_opened_at(&self, id_hash: &[u8]) -> StoreResult<Option<DateTime<Utc>>> {
        let found: Option<(DateTime<Utc>,)> =
            self.write_alone().fetch_optional(Statement::new(SESSION_OPENED_AT).bind(id_hash)).await?;
        Ok(found.map(|(at,)| at))
    }

    async fn provision_member(&self, member: &ProvisionedMember, audit: &[NewAuditEntry]) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        let user = &member.user;
        insert_user_in(&mut write, user).await?;
        write
            .execute(
                Statement::new(INSERT_MEMBER_WITH_EMAIL)
                    .bind(member.workspace_id)
                    .bind(user.id)
                    .bind(member.role.as_str())
                    .bind(user.created_at)
                    .bind(&member.email),
            )
            .await?;
        write
            .execute(Statement::new(INSERT_VERIFIED_EMAIL).bind(&member.email).bind(user.id).bind(user.created_at))
            .await?;
        for entry in audit {
            self.append_audit_in(&mut write, entry).await?;
        }
        self.commit_write(write, None).await
    }

    async fn replace_signin_link(&self, link: &SigninLinkRow) -> StoreResult<()> {
        let mut write = self.begin_write().await?;
        write
            .execute(
                Statement::new("DELETE FROM signin_links WHERE workspace_id = $1 AND used_at IS NULL")
                    .bind(link.workspace_id),
            )
            .await?;
        write.execute(Statement::insert(link)).await?;
        self.commit_write(write, None).await
    }

    async fn use_signin_link(&self, code_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<Principal>> {
        let mut write = self.begin_write().await?;
        // Conditional on `used_at IS NULL`: of two concurrent uses, one wins.
        let used: Option<(Uuid, Uuid)> = write
            .fetch_optional(
                Statement::new(
                    "UPDATE signin_links SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1 \
                     RETURNING user_id, workspace_id",
                )
                .bind(now)
                .bind(code_hash),
            )
            .await?;
        let Some((user_id, workspace_id)) = used else {
            return Ok(None);
        };
        let record: Option<PrincipalRecord> = write
            .fetch_optional(
                Statement::new(format!(
                    "{USER_PRINCIPAL} WHERE u.id = $1 AND m.workspace_id = $2 AND u.disabled_at IS NULL"
                ))
                .bind(user_id)
                .bind(workspace_id),
            )
            .await?;
        self.commit_write(write, None).await?;
        record.map(PrincipalRecord::into_principal).transpose()
    }
}

/// The role a member has before a change of their membership, read inside the write, or why the change is refused:
/// they are not a member, or they are an admin, the change takes that role from them (`unmakes_admin`), and the
/// workspace has no other admin.
async fn role_before<B: SqlBackend>(
    write: &mut B::Write,
    workspace_id: Uuid,
    user_id: Uuid,
    unmakes_admin: bool,
) -> StoreResult<Result<Role, MembershipChange>> {
    let Some(before) = member_role(write, workspace_id, user_id).await? else {
        return Ok(Err(MembershipChange::NotMember));
    };
    if before == Role::Admin && unmakes_admin && other_admins::<B>(write, workspace_id, user_id).await? == 0 {
        return Ok(Err(MembershipChange::LastAdmin));
    }
    Ok(Ok(before))
}

/// A member's role, read inside the write; `None` if they are not a member.
async fn member_role(write: &mut impl Sql, workspace_id: Uuid, user_id: Uuid) -> StoreResult<Option<Role>> {
    let current: Option<(String,)> = write
        .fetch_optional(
            Statement::new("SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2")
                .bind(workspace_id)
                .bind(user_id),
        )
        .await?;
    current
        .map(|(role,)| role.parse().map_err(|e: holdpoint_types::UnknownVariant| StoreError::Corrupt(e.to_string())))
        .transpose()
}

/// The workspace's admins other than `user_id`, counted inside the write with their rows locked (SQLite's one
/// writer holds the whole database), so the "last admin" check and the change it guards happen together.
async fn other_admins<B: SqlBackend>(write: &mut B::Write, workspace_id: Uuid, user_id: Uuid) -> StoreResult<i64> {
    let admins: Vec<(Uuid,)> = write
        .fetch_all(
            Statement::new(format!(
                "SELECT user_id FROM memberships WHERE workspace_id = $1 AND role = 'admin' AND user_id <> $2{}",
                B::FOR_UPDATE
            ))
            .bind(workspace_id)
            .bind(user_id),
        )
        .await?;
    Ok(admins.len() as i64)
}

/// Stores a new account inside the write; [`StoreError::Duplicate`] if the username is taken.
async fn insert_user_in(write: &mut impl Sql, user: &UserRow) -> StoreResult<()> {
    let inserted = write.execute(Statement::insert(user)).await;
    duplicate_as(inserted, "account with that username")
}

/// An insert's outcome, with a unique key's violation as [`StoreError::Duplicate`] of `what`.
fn duplicate_as<T>(inserted: StoreResult<T>, what: &'static str) -> StoreResult<()> {
    match inserted {
        Ok(_) => Ok(()),
        Err(StoreError::Database(err)) if is_unique_violation(&err) => Err(StoreError::Duplicate(what)),
        Err(err) => Err(err),
    }
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
/// Gives up the deliveries still waiting for member `$2` of workspace `$1`, who leaves at `$3`: they would carry
/// questions to someone who may no longer see them.
const GIVE_UP_DELIVERIES_TO: &str = "UPDATE deliveries SET status = 'failed', \
     last_error = 'not sent: the recipient left the workspace', updated_at = $3 \
     WHERE workspace_id = $1 AND user_id = $2 AND (status = 'queued' OR status = 'retrying')";
pub(super) const USER_PRINCIPAL: &str = "SELECT u.id, CAST('user' AS TEXT) AS kind, m.workspace_id, \
     w.name AS workspace, u.username AS name, m.role, u.id AS person FROM users u JOIN memberships m ON m.user_id = u.id \
     JOIN workspaces w ON w.id = m.workspace_id";
pub(super) const MEMBER_COLUMNS: &str = "u.id AS user_id, u.username, u.display_name, m.role, \
     (u.password_hash IS NOT NULL) AS has_password, m.created_at, m.email, m.slack_user_id, m.slack_user_id_proven, \
     EXISTS (SELECT 1 FROM verified_emails v WHERE v.user_id = m.user_id AND v.email = lower(m.email)) \
     AS email_verified, m.notifications, \
     m.away_until, m.delegate_id, (SELECT d.username FROM users d WHERE d.id = m.delegate_id) AS delegate";
pub(super) const TOKEN_INFO_COLUMNS: &str = "id, name, role, created_by, created_at, revoked_at";
table_row!(USER_COLUMNS = UserRow in "users": id, username, display_name, password_hash, created_at, disabled_at);

/// The account that verified an address (`$1`), as [`PeopleStore::account_by_verified_email`] returns it. SQLite's
/// `lower` folds ASCII only: addresses differing in the case of other letters do not match there.
pub(super) const ACCOUNT_BY_VERIFIED_EMAIL: &str = "SELECT v.user_id, (u.disabled_at IS NOT NULL) AS disabled \
     FROM verified_emails v JOIN users u ON u.id = v.user_id WHERE v.email = lower($1)";
/// Whether a removal from workspace `$1` names the address `$2`.
pub(super) const REMOVED_FROM: &str =
    "SELECT 1 FROM member_removals WHERE workspace_id = $1 AND email = lower($2) LIMIT 1";
/// Records a removal (`$1` workspace, `$2` user, `$3` when) with the membership's address, before the membership
/// goes.
pub(super) const RECORD_REMOVAL: &str = "INSERT INTO member_removals (workspace_id, user_id, email, removed_at) \
     SELECT workspace_id, user_id, lower(email), $3 FROM memberships WHERE workspace_id = $1 AND user_id = $2 \
     ON CONFLICT (workspace_id, user_id) DO UPDATE SET email = excluded.email, removed_at = excluded.removed_at";
/// Forgets a removal (`$1` workspace, `$2` user): the person was added again.
pub(super) const FORGET_REMOVAL: &str = "DELETE FROM member_removals WHERE workspace_id = $1 AND user_id = $2";
/// Records an address (`$1`, lower-cased) as verified by account `$2` at `$3`, unless an account verified it
/// already.
pub(super) const INSERT_VERIFIED_EMAIL: &str = "INSERT INTO verified_emails (email, user_id, verified_at) \
     VALUES (lower($1), $2, $3) ON CONFLICT (email) DO NOTHING";
/// The account holding a verified address (`$1`).
pub(super) const VERIFIED_EMAIL_HOLDER: &str = "SELECT user_id FROM verified_emails WHERE email = lower($1)";
/// Stores an invitation (`id`, `workspace_id`, `user_id`, `role`, `invited_by`, `created_at`).
pub(super) const INSERT_INVITATION: &str = "INSERT INTO invitations (id, workspace_id, user_id, role, invited_by, \
     created_at) VALUES ($1, $2, $3, $4, $5, $6)";
/// The columns of an invitation with its workspace's name (`i` joined with `w`).
pub(super) const INVITATION_COLUMNS: &str =
    "i.id, i.workspace_id, w.name AS workspace, i.user_id, i.role, i.invited_by, i.created_at";
/// Takes an account's (`$1`) pending invitation (`$2`) away, so only one answer gets it.
pub(super) const TAKE_INVITATION: &str = "DELETE FROM invitations WHERE user_id = $1 AND id = $2 \
     RETURNING id, workspace_id, user_id, role, invited_by, created_at";
/// An invitation as [`TAKE_INVITATION`] returns it, before its workspace's name is read.
pub(super) type TakenInvitation = (Uuid, Uuid, Uuid, Role, String, DateTime<Utc>);
/// A workspace's name (`$1` its id).
pub(super) const WORKSPACE_NAME: &str = "SELECT name FROM workspaces WHERE id = $1";

impl InvitationRow {
    /// The row of a taken invitation, with its workspace's name.
    pub(super) fn taken(
        (id, workspace_id, user_id, role, invited_by, created_at): TakenInvitation,
        workspace: String,
    ) -> Self {
        InvitationRow { id, workspace_id, workspace, user_id, role, invited_by, created_at }
    }
}
/// The membership an accepted invitation makes (`workspace_id`, `user_id`, `role`, `created_at`); nothing if it
/// exists.
pub(super) const INSERT_INVITED_MEMBER: &str = "INSERT INTO memberships (workspace_id, user_id, role, created_at) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (workspace_id, user_id) DO NOTHING";
table_row!(SigninLinkRow in "signin_links": code_hash, workspace_id, user_id, created_at, expires_at);
table_row!(EmailVerificationRow in "email_verifications": code_hash, user_id, email, created_at, expires_at);
/// Drops an account's (`$1`) expired links (`$2` is now).
pub(super) const DROP_EXPIRED_VERIFICATIONS: &str =
    "DELETE FROM email_verifications WHERE user_id = $1 AND expires_at <= $2";
/// A live verification link (`$1` code hash, `$2` now).
pub(super) const EMAIL_VERIFICATION: &str =
    "SELECT user_id, email FROM email_verifications WHERE code_hash = $1 AND expires_at > $2";
/// Uses an account's (`$2`) live verification link (`$1`, `$3` now) once.
pub(super) const USE_EMAIL_VERIFICATION: &str = "DELETE FROM email_verifications WHERE code_hash = $1 \
     AND user_id = $2 AND expires_at > $3 RETURNING email";
/// When a session (`$1`) was opened.
pub(super) const SESSION_OPENED_AT: &str = "SELECT created_at FROM sessions WHERE id_hash = $1";
/// Takes a proven Slack id (`$2`) from every member of workspace `$1` but `$3`: a workspace holds each proven id
/// once, and the latest proof wins.
pub(super) const RELEASE_SLACK_ID: &str = "UPDATE memberships SET slack_user_id = NULL, slack_user_id_proven = \
     FALSE WHERE workspace_id = $1 AND slack_user_id = $2 AND user_id <> $3";
/// A new member with their email address (`workspace_id`, `user_id`, `role`, `created_at`, `email`).
pub(super) const INSERT_MEMBER_WITH_EMAIL: &str =
    "INSERT INTO memberships (workspace_id, user_id, role, created_at, email) VALUES ($1, $2, $3, $4, $5)";

/// Replaces a member's settings (`email`, `slack_user_id`, `notifications`, `workspace_id`, `user_id`,
/// `away_until`, `delegate_id`, `slack_user_id_proven`).
pub(super) const SET_MEMBER_SETTINGS: &str = "UPDATE memberships SET email = $1, slack_user_id = $2, \
     notifications = $3, away_until = $6, delegate_id = $7, slack_user_id_proven = $8 \
     WHERE workspace_id = $4 AND user_id = $5";
