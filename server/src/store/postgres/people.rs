//! People and credentials: accounts, memberships, API tokens and sign-in links, on PostgreSQL.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use app::types::Role;

use super::*;
use crate::store::backend::SqlBackend;
use crate::store::people::*;
use sqlx::Postgres;

impl PostgresStore {
    /// A member's role, read inside `tx`; `None` if they are not a member.
    pub(in crate::store) async fn member_role(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        workspace_id: Uuid,
        user_id: Uuid,
    ) -> StoreResult<Option<Role>> {
        let current: Option<(String,)> =
            sqlx::query_as("SELECT role FROM memberships WHERE workspace_id = $1 AND user_id = $2")
                .bind(workspace_id)
                .bind(user_id)
                .fetch_optional(&mut **tx)
                .await?;
        current
            .map(|(role,)| role.parse().map_err(|e: app::types::UnknownVariant| StoreError::Corrupt(e.to_string())))
            .transpose()
    }

    /// The workspace's admins other than `user_id`, counted inside `tx` after locking their rows, so the "last
    /// admin" check and the change it guards happen together.
    pub(in crate::store) async fn other_admins(
        tx: &mut sqlx::Transaction<'static, Postgres>,
        workspace_id: Uuid,
        user_id: Uuid,
    ) -> StoreResult<i64> {
        let admins: Vec<(Uuid,)> = sqlx::query_as(
            "SELECT user_id FROM memberships WHERE workspace_id = $1 AND role = 'admin' AND user_id <> $2 FOR UPDATE",
        )
        .bind(workspace_id)
        .bind(user_id)
        .fetch_all(&mut **tx)
        .await?;
        Ok(admins.len() as i64)
    }

    /// Stores a new account inside `tx`; [`StoreError::Duplicate`] if the username is taken.
    async fn insert_user_in(tx: &mut sqlx::Transaction<'static, Postgres>, user: &UserRow) -> StoreResult<()> {
        let result = sqlx::query(&format!("INSERT INTO users ({USER_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"))
            .bind(user.id)
            .bind(&user.username)
            .bind(&user.display_name)
            .bind(&user.password_hash)
            .bind(user.created_at)
            .bind(user.disabled_at)
            .execute(&mut **tx)
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(err) if is_unique_violation(&err) => Err(StoreError::Duplicate("account with that username")),
            Err(err) => Err(err.into()),
        }
    }
}

#[async_trait]
impl PeopleStore for PostgresStore {
    fn credential_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.token_cache().changes()
    }

    async fn insert_user(&self, user: &UserRow, audit: &[NewAuditEntry]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        Self::insert_user_in(&mut tx, user).await?;
        for entry in audit {
            self.append_audit_in(&mut tx, entry).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn user_by_username(&self, username: &str) -> StoreResult<Option<UserRow>> {
        Ok(sqlx::query_as(&format!("SELECT {USER_COLUMNS} FROM users WHERE username = $1"))
            .bind(username)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn set_password(&self, user_id: Uuid, password_hash: &str, audit: &[NewAuditEntry]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE users SET password_hash = $1 WHERE id = $2")
            .bind(password_hash)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        for entry in audit {
            self.append_audit_in(&mut tx, entry).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn user_principal(&self, user_id: Uuid, workspace: Option<&str>) -> StoreResult<Option<Principal>> {
        let record: Option<PrincipalRecord> = sqlx::query_as(&format!(
            "{USER_PRINCIPAL} WHERE u.id = $1 AND u.disabled_at IS NULL AND ($2 IS NULL OR w.name = $2) \
             ORDER BY m.created_at, w.name LIMIT 1"
        ))
        .bind(user_id)
        .bind(workspace)
        .fetch_optional(&self.pool)
        .await?;
        record.map(PrincipalRecord::into_principal).transpose()
    }

    async fn workspaces_of(&self, user_id: Uuid) -> StoreResult<Vec<Uuid>> {
        let rows: Vec<(Uuid,)> = sqlx::query_as("SELECT workspace_id FROM memberships WHERE user_id = $1")
            .bind(user_id)
            .fetch_all(&self.pool)
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
        let mut tx = self.pool.begin().await?;
        let result =
            sqlx::query("INSERT INTO memberships (workspace_id, user_id, role, created_at) VALUES ($1, $2, $3, $4)")
                .bind(workspace_id)
                .bind(user_id)
                .bind(role.as_str())
                .bind(crate::store::now())
                .execute(&mut *tx)
                .await;
        match result {
            Ok(_) => {}
            Err(err) if is_unique_violation(&err) => return Err(StoreError::Duplicate("membership")),
            Err(err) => return Err(err.into()),
        }
        sqlx::query(FORGET_REMOVAL).bind(workspace_id).bind(user_id).execute(&mut *tx).await?;
        for entry in audit {
            self.append_audit_in(&mut tx, entry).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn member(&self, workspace_id: Uuid, user_id: Uuid) -> StoreResult<Option<MemberRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.workspace_id = $1 AND m.user_id = $2"
        ))
        .bind(workspace_id)
        .bind(user_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn members(&self, workspace_id: Uuid, after: Option<&str>, limit: u32) -> StoreResult<Vec<MemberRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {MEMBER_COLUMNS} FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.workspace_id = $1 AND ($2 IS NULL OR u.username > $2) ORDER BY u.username LIMIT $3"
        ))
        .bind(workspace_id)
        .bind(after)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn change_role(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        role: Role,
        audit: &AuditOfMembership<'_>,
    ) -> StoreResult<MembershipChange> {
        let mut tx = self.pool.begin().await?;
        let Some(before) = Self::member_role(&mut tx, workspace_id, user_id).await? else {
            self.rollback_write(tx).await?;
            return Ok(MembershipChange::NotMember);
        };
        if before == Role::Admin
            && role != Role::Admin
            && Self::other_admins(&mut tx, workspace_id, user_id).await? == 0
        {
            // Explicitly: a dropped transaction keeps the admins' row locks until its connection is reused.
            self.rollback_write(tx).await?;
            return Ok(MembershipChange::LastAdmin);
        }
        sqlx::query("UPDATE memberships SET role = $1 WHERE workspace_id = $2 AND user_id = $3")
            .bind(role.as_str())
            .bind(workspace_id)
            .bind(user_id)
            .execute(&mut *tx)
            .await?;
        self.append_audit_in(&mut tx, &audit(before)).await?;
        self.tell_others_of_a_revocation(&mut tx).await?;
        tx.commit().await?;
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
        let mut tx = self.pool.begin().await?;
        if let (Some(slack_user_id), true) = (&settings.slack_user_id, settings.slack_user_id_proven) {
            sqlx::query(RELEASE_SLACK_ID)
                .bind(workspace_id)
                .bind(slack_user_id)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
        }
        let updated = sqlx::query(SET_MEMBER_SETTINGS)
            .bind(settings.email.as_deref())
            .bind(settings.slack_user_id.as_deref())
            .bind(settings.notifications.as_deref())
            .bind(workspace_id)
            .bind(user_id)
            .bind(settings.away_until)
            .bind(settings.delegate_id)
            .bind(settings.slack_user_id_proven)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if updated == 0 {
            self.rollback_write(tx).await?;
            return Ok(false);
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn remove_member(
        &self,
        workspace_id: Uuid,
        user_id: Uuid,
        audit: &AuditOfMembership<'_>,
    ) -> StoreResult<MembershipChange> {
        let mut tx = self.pool.begin().await?;
        let Some(before) = Self::member_role(&mut tx, workspace_id, user_id).await? else {
            self.rollback_write(tx).await?;
            return Ok(MembershipChange::NotMember);
        };
        if before == Role::Admin && Self::other_admins(&mut tx, workspace_id, user_id).await? == 0 {
            self.rollback_write(tx).await?;
            return Ok(MembershipChange::LastAdmin);
        }
        sqlx::query(RECORD_REMOVAL)
            .bind(workspace_id)
            .bind(user_id)
            .bind(crate::store::now())
            .execute(&mut *tx)
            .await?;
        for statement in [
            "DELETE FROM sessions WHERE workspace_id = $1 AND user_id = $2",
            "DELETE FROM signin_links WHERE workspace_id = $1 AND user_id = $2",
            // The browsers subscribed to pushes go with the membership, like its other addresses.
            "DELETE FROM push_subscriptions WHERE workspace_id = $1 AND user_id = $2",
            "DELETE FROM memberships WHERE workspace_id = $1 AND user_id = $2",
        ] {
            sqlx::query(statement).bind(workspace_id).bind(user_id).execute(&mut *tx).await?;
        }
        self.append_audit_in(&mut tx, &audit(before)).await?;
        self.tell_others_of_a_revocation(&mut tx).await?;
        tx.commit().await?;
        self.caches.push_subscribers.forget(workspace_id);
        // Long requests of the member (event streams, MCP sessions) check their caller again.
        self.token_cache().forget_all();
        Ok(MembershipChange::Changed { before })
    }

    async fn tokens(&self, workspace_id: Uuid, before: Option<Uuid>, limit: u32) -> StoreResult<Vec<TokenInfoRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {TOKEN_INFO_COLUMNS} FROM tokens WHERE workspace_id = $1 AND ($2 IS NULL OR id < $2) \
             ORDER BY id DESC LIMIT $3"
        ))
        .bind(workspace_id)
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?)
    }

    async fn token_info(&self, workspace_id: Uuid, id: Uuid) -> StoreResult<Option<TokenInfoRow>> {
        Ok(sqlx::query_as(&format!("SELECT {TOKEN_INFO_COLUMNS} FROM tokens WHERE workspace_id = $1 AND id = $2"))
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn revoke_token(
        &self,
        workspace_id: Uuid,
        id: Uuid,
        at: DateTime<Utc>,
        audit: &NewAuditEntry,
    ) -> StoreResult<Option<TokenInfoRow>> {
        let mut tx = self.pool.begin().await?;
        let revoked =
            sqlx::query("UPDATE tokens SET revoked_at = $1 WHERE workspace_id = $2 AND id = $3 AND revoked_at IS NULL")
                .bind(at)
                .bind(workspace_id)
                .bind(id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if revoked == 1 {
            self.append_audit_in(&mut tx, audit).await?;
        }
        sqlx::query("DELETE FROM sessions WHERE token_id = $1").bind(id).execute(&mut *tx).await?;
        let row: Option<TokenInfoRow> =
            sqlx::query_as(&format!("SELECT {TOKEN_INFO_COLUMNS} FROM tokens WHERE workspace_id = $1 AND id = $2"))
                .bind(workspace_id)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        self.tell_others_of_a_revocation(&mut tx).await?;
        tx.commit().await?;
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
        // The role's members stay locked until the turn is marked: concurrent turns of the role take theirs one
        // after the other, each seeing the marks before it.
        let mut tx = self.pool.begin().await?;
        let members: Vec<InTurn> = sqlx::query_as(&format!("{IN_TURN}{}", Self::for_update_of("m")))
            .bind(workspace_id)
            .bind(role)
            .fetch_all(&mut *tx)
            .await?;
        let Some((user_id, username, mark)) = next_turn(&members, at) else { return Ok(None) };
        sqlx::query(MARK_ASSIGNED).bind(workspace_id).bind(user_id).bind(mark).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(Some(username))
    }

    async fn has_credentials(&self, workspace_id: Uuid) -> StoreResult<bool> {
        let found: Option<(i32,)> = sqlx::query_as(
            "SELECT 1 FROM tokens WHERE workspace_id = $1 AND revoked_at IS NULL \
             UNION ALL SELECT 1 FROM memberships m JOIN users u ON u.id = m.user_id \
             WHERE m.workspace_id = $1 AND u.password_hash IS NOT NULL LIMIT 1",
        )
        .bind(workspace_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    async fn account_by_verified_email(&self, email: &str) -> StoreResult<Option<AccountByEmail>> {
        Ok(sqlx::query_as(ACCOUNT_BY_VERIFIED_EMAIL).bind(email).fetch_optional(&self.pool).await?)
    }

    async fn removed_from(&self, workspace_id: Uuid, email: &str) -> StoreResult<bool> {
        let found: Option<(i32,)> =
            sqlx::query_as(REMOVED_FROM).bind(workspace_id).bind(email).fetch_optional(&self.pool).await?;
        Ok(found.is_some())
    }

    async fn insert_invitation(&self, invitation: &InvitationRow, audit: &NewAuditEntry) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let result = sqlx::query(INSERT_INVITATION)
            .bind(invitation.id)
            .bind(invitation.workspace_id)
            .bind(invitation.user_id)
            .bind(invitation.role.as_str())
            .bind(&invitation.invited_by)
            .bind(invitation.created_at)
            .execute(&mut *tx)
            .await;
        match result {
            Ok(_) => {}
            Err(err) if is_unique_violation(&err) => return Err(StoreError::Duplicate("invitation")),
            Err(err) => return Err(err.into()),
        }
        self.append_audit_in(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn invitations_of(&self, user_id: Uuid) -> StoreResult<Vec<InvitationRow>> {
        Ok(sqlx::query_as(&format!(
            "SELECT {INVITATION_COLUMNS} FROM invitations i JOIN workspaces w ON w.id = i.workspace_id \
             WHERE i.user_id = $1 ORDER BY i.created_at, i.id"
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn answer_invitation(
        &self,
        user_id: Uuid,
        id: Uuid,
        accept: bool,
        audit: &(dyn for<'r> Fn(&'r InvitationRow) -> NewAuditEntry + Send + Sync),
    ) -> StoreResult<Option<InvitationRow>> {
        let mut tx = self.pool.begin().await?;
        let taken: Option<TakenInvitation> =
            sqlx::query_as(TAKE_INVITATION).bind(user_id).bind(id).fetch_optional(&mut *tx).await?;
        let Some(taken) = taken else {
            self.rollback_write(tx).await?;
            return Ok(None);
        };
        let (workspace,): (String,) = sqlx::query_as(WORKSPACE_NAME).bind(taken.1).fetch_one(&mut *tx).await?;
        let invitation = InvitationRow::taken(taken, workspace);
        if accept {
            sqlx::query(INSERT_INVITED_MEMBER)
                .bind(invitation.workspace_id)
                .bind(user_id)
                .bind(invitation.role.as_str())
                .bind(crate::store::now())
                .execute(&mut *tx)
                .await?;
            sqlx::query(FORGET_REMOVAL).bind(invitation.workspace_id).bind(user_id).execute(&mut *tx).await?;
        }
        self.append_audit_in(&mut tx, &audit(&invitation)).await?;
        tx.commit().await?;
        Ok(Some(invitation))
    }

    async fn insert_email_verification(&self, verification: &EmailVerificationRow) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(DROP_EXPIRED_VERIFICATIONS)
            .bind(verification.user_id)
            .bind(verification.created_at)
            .execute(&mut *tx)
            .await?;
        sqlx::query(INSERT_EMAIL_VERIFICATION)
            .bind(&verification.code_hash)
            .bind(verification.user_id)
            .bind(&verification.email)
            .bind(verification.created_at)
            .bind(verification.expires_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn email_verification(&self, code_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<(Uuid, String)>> {
        Ok(sqlx::query_as(EMAIL_VERIFICATION).bind(code_hash).bind(now).fetch_optional(&self.pool).await?)
    }

    async fn confirm_email_verification(
        &self,
        code_hash: &[u8],
        user_id: Uuid,
        now: DateTime<Utc>,
        audit: &(dyn for<'r> Fn(&'r str) -> NewAuditEntry + Send + Sync),
    ) -> StoreResult<EmailConfirmation> {
        let mut tx = self.pool.begin().await?;
        let used: Option<(String,)> = sqlx::query_as(USE_EMAIL_VERIFICATION)
            .bind(code_hash)
            .bind(user_id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((email,)) = used else {
            self.rollback_write(tx).await?;
            return Ok(EmailConfirmation::Unknown);
        };
        sqlx::query(INSERT_VERIFIED_EMAIL).bind(&email).bind(user_id).bind(now).execute(&mut *tx).await?;
        let (holder,): (Uuid,) = sqlx::query_as(VERIFIED_EMAIL_HOLDER).bind(&email).fetch_one(&mut *tx).await?;
        if holder != user_id {
            // The link stays unused: the address is another account's.
            self.rollback_write(tx).await?;
            return Ok(EmailConfirmation::TakenByAnother);
        }
        self.append_audit_in(&mut tx, &audit(&email)).await?;
        tx.commit().await?;
        Ok(EmailConfirmation::Verified { email })
    }

    async fn session_opened_at(&self, id_hash: &[u8]) -> StoreResult<Option<DateTime<Utc>>> {
        let found: Option<(DateTime<Utc>,)> =
            sqlx::query_as(SESSION_OPENED_AT).bind(id_hash).fetch_optional(&self.pool).await?;
        Ok(found.map(|(at,)| at))
    }

    async fn provision_member(&self, member: &ProvisionedMember, audit: &[NewAuditEntry]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        let user = &member.user;
        Self::insert_user_in(&mut tx, user).await?;
        sqlx::query(INSERT_MEMBER_WITH_EMAIL)
            .bind(member.workspace_id)
            .bind(user.id)
            .bind(member.role.as_str())
            .bind(user.created_at)
            .bind(&member.email)
            .execute(&mut *tx)
            .await?;
        sqlx::query(INSERT_VERIFIED_EMAIL)
            .bind(&member.email)
            .bind(user.id)
            .bind(user.created_at)
            .execute(&mut *tx)
            .await?;
        for entry in audit {
            self.append_audit_in(&mut tx, entry).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn replace_signin_link(&self, link: &SigninLinkRow) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM signin_links WHERE workspace_id = $1 AND used_at IS NULL")
            .bind(link.workspace_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO signin_links (code_hash, workspace_id, user_id, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&link.code_hash)
        .bind(link.workspace_id)
        .bind(link.user_id)
        .bind(link.created_at)
        .bind(link.expires_at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn use_signin_link(&self, code_hash: &[u8], now: DateTime<Utc>) -> StoreResult<Option<Principal>> {
        let mut tx = self.pool.begin().await?;
        // Conditional on `used_at IS NULL`: of two concurrent uses, one wins.
        let used: Option<(Uuid, Uuid)> = sqlx::query_as(
            "UPDATE signin_links SET used_at = $1 WHERE code_hash = $2 AND used_at IS NULL AND expires_at > $1 \
             RETURNING user_id, workspace_id",
        )
        .bind(now)
        .bind(code_hash)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((user_id, workspace_id)) = used else {
            return Ok(None);
        };
        let record: Option<PrincipalRecord> = sqlx::query_as(&format!(
            "{USER_PRINCIPAL} WHERE u.id = $1 AND m.workspace_id = $2 AND u.disabled_at IS NULL"
        ))
        .bind(user_id)
        .bind(workspace_id)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        record.map(PrincipalRecord::into_principal).transpose()
    }
}
