//! How questions reach people (spec §11): who a question is for, on which channels, decided when it is asked; and the
//! keys the channels sign with, shared by every instance through the store.

use app::types::{
    ActionStatus, AnswerBody, Assignee, Channel, Delivery, DeliveryPage, DeliveryStatus, Notification,
    NotificationPage, Question, QuestionKind, QuestionStatus, Role,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::channels::ChannelKeys;
use crate::channels::action_links::ActionLinkError;
use crate::config::ChannelsConfig;
use crate::credentials::{Caller, Credential};
use crate::error::AppError;
use crate::questions::{Answering, answer_through};
use crate::store::{
    DeliveryRow, ListedDelivery, ListedNotification, MemberRow, NotificationQuery, NotificationRow, PrincipalKind,
    QuestionRow, Reach, Store, StoreError, StoreResult,
};

/// The name the channel keys are stored under in `server_secrets`.
const CHANNEL_KEYS: &str = "channel_keys";

/// The keys action links and web pushes are signed with: those stored, or new ones stored now when none are, so
/// every instance and every restart signs with the same keys (a link sent by one instance is honoured by another; a
/// browser subscribed once stays subscribed). A VAPID key given in the configuration takes the stored one's place.
pub async fn channel_keys(store: &dyn Store, config: &ChannelsConfig) -> StoreResult<ChannelKeys> {
    let stored = store.server_secret(CHANNEL_KEYS, &ChannelKeys::generate().to_stored()).await?;
    let mut keys = ChannelKeys::from_stored(&stored).map_err(StoreError::Corrupt)?;
    if let Some(vapid) = &config.vapid_private_key {
        keys.vapid = vapid.clone();
    }
    Ok(keys)
}

/// The channels outside Holdpoint's pages this server sends on: those configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendsOn {
    pub email: bool,
}

impl SendsOn {
    /// The channels `config` sets up.
    pub fn configured(config: &ChannelsConfig) -> Self {
        SendsOn { email: config.smtp_url.is_some() && config.email_from.is_some() }
    }
}

/// Whether `member` is among the people `question` is for (spec §11): its assignee (the user, or the members holding
/// at least the role), or, without one, every member whose role may answer it.
pub fn is_for(question: &QuestionRow, member: &MemberRow) -> bool {
    let may_answer_kind = match question.kind {
        QuestionKind::Approval => member.role.rank() >= Role::Approver.rank(),
        _ => member.role.may_answer(),
    };
    match question.assignee.as_ref().map(|assignee| &assignee.0) {
        Some(Assignee::User(username)) => *username == member.username && may_answer_kind,
        Some(Assignee::Role(role)) => member.role.rank() >= role.rank() && may_answer_kind,
        None => may_answer_kind,
    }
}

/// Who a new question reaches and how, decided when it is asked: a notification for each person it is for whose
/// web threshold its urgency meets, and a delivery on each channel this server sends on whose threshold it meets and
/// where the person has an address.
pub fn reach(question: &QuestionRow, members: &[MemberRow], sends_on: SendsOn) -> StoreResult<Reach> {
    let mut reach = Reach::default();
    let at = question.created_at;
    for member in members.iter().filter(|member| is_for(question, member)) {
        let preferences = member.preferences()?;
        if preferences.web.min_urgency.admits(question.urgency) {
            reach.notifications.push(NotificationRow {
                id: Uuid::now_v7(),
                workspace_id: question.workspace_id,
                question_id: question.id,
                user_id: member.user_id,
                created_at: at,
                read_at: None,
            });
        }
        let email = member.email.as_ref().filter(|_| sends_on.email);
        if let Some(address) = email.filter(|_| preferences.email.min_urgency.admits(question.urgency)) {
            reach.deliveries.push(DeliveryRow {
                id: Uuid::now_v7(),
                workspace_id: question.workspace_id,
                question_id: question.id,
                user_id: member.user_id,
                channel: Channel::Email,
                address: address.clone(),
                status: DeliveryStatus::Queued,
                attempts: 0,
                next_attempt_at: at,
                claimed_until: None,
                last_error: None,
                sent_at: None,
                created_at: at,
                updated_at: at,
            });
        }
    }
    Ok(reach)
}

/// Every member of `workspace_id`.
pub async fn members(store: &dyn Store, workspace_id: Uuid) -> StoreResult<Vec<MemberRow>> {
    const PAGE: u32 = 500;
    let mut members: Vec<MemberRow> = Vec::new();
    loop {
        let after = members.last().map(|member| member.username.clone());
        let page = store.members(workspace_id, after.as_deref(), PAGE).await?;
        let done = page.len() < PAGE as usize;
        members.extend(page);
        if done {
            return Ok(members);
        }
    }
}

/// The longest page of notifications.
pub const MAX_NOTIFICATION_PAGE: u32 = 200;

/// A question's deliveries (`GET /questions/{id}/deliveries`), for a caller who may read the question.
pub async fn deliveries_of(store: &dyn Store, caller: &Caller, question_id: Uuid) -> Result<DeliveryPage, AppError> {
    let question = store.question(caller.workspace_id(), question_id).await?.ok_or(AppError::NotFound("question"))?;
    if !caller.visibility().sees(question.created_by) {
        return Err(AppError::NotFound("question"));
    }
    let items = store
        .deliveries_of_question(caller.workspace_id(), question_id)
        .await?
        .into_iter()
        .map(|ListedDelivery { delivery, username }| {
            let waiting = matches!(delivery.status, DeliveryStatus::Queued | DeliveryStatus::Retrying);
            Delivery {
                id: delivery.id,
                channel: delivery.channel,
                recipient: username,
                status: delivery.status,
                attempts: u32::try_from(delivery.attempts).unwrap_or(0),
                next_attempt_at: waiting.then_some(delivery.next_attempt_at),
                last_error: delivery.last_error,
                sent_at: delivery.sent_at,
            }
        })
        .collect();
    Ok(DeliveryPage { items })
}

/// The person a notification call is about: the signed-in caller. Tokens have no notifications.
fn person(caller: &Caller) -> Result<Uuid, AppError> {
    if caller.principal.kind != PrincipalKind::User {
        return Err(AppError::Forbidden("tokens have no notifications; sign in with your account".into()));
    }
    Ok(caller.principal.id)
}

/// A page of the caller's notifications, newest first (`GET /notifications`). `cursor` is a page's `next_cursor`.
pub async fn my_notifications(
    store: &dyn Store,
    caller: &Caller,
    unread_only: bool,
    cursor: Option<&str>,
    limit: u32,
) -> Result<NotificationPage, AppError> {
    let user_id = person(caller)?;
    let before = cursor.map(parse_cursor).transpose()?;
    let limit = limit.clamp(1, MAX_NOTIFICATION_PAGE);
    let query = NotificationQuery { unread_only, before, limit: limit + 1 };
    let mut listed = store.notifications(caller.workspace_id(), user_id, &query).await?;
    let more = listed.len() > limit as usize;
    listed.truncate(limit as usize);
    let next_cursor = more
        .then(|| {
            listed
                .last()
                .map(|last| format!("{}_{}", last.notification.created_at.timestamp_micros(), last.notification.id))
        })
        .flatten();
    let mut items = Vec::with_capacity(listed.len());
    for ListedNotification { notification, question } in listed {
        let action_status =
            if question.status == QuestionStatus::Pending { ActionStatus::Pending } else { ActionStatus::Done };
        items.push(Notification {
            id: notification.id,
            question: question.to_question(&caller.principal.workspace)?,
            created_at: notification.created_at,
            read_at: notification.read_at,
            action_status,
        });
    }
    let unread = store.unread_notifications(caller.workspace_id(), user_id).await?;
    Ok(NotificationPage { items, unread, next_cursor })
}

fn parse_cursor(cursor: &str) -> Result<(DateTime<Utc>, Uuid), AppError> {
    let invalid = || AppError::invalid_field("cursor", "is not a cursor this endpoint returned");
    let (micros, id) = cursor.split_once('_').ok_or_else(invalid)?;
    let at = micros.parse::<i64>().ok().and_then(DateTime::from_timestamp_micros).ok_or_else(invalid)?;
    Ok((at, Uuid::parse_str(id).map_err(|_| invalid())?))
}

/// Marks one of the caller's notifications read (`POST /notifications/{id}/read`); 404 if it is not theirs.
pub async fn mark_read(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<(), AppError> {
    let user_id = person(caller)?;
    if store.mark_notification_read(caller.workspace_id(), user_id, id, crate::store::now()).await? {
        Ok(())
    } else {
        Err(AppError::NotFound("notification"))
    }
}

/// Marks every unread notification of the caller read (`POST /notifications/read-all`); returns how many.
pub async fn mark_all_read(store: &dyn Store, caller: &Caller) -> Result<u64, AppError> {
    let user_id = person(caller)?;
    Ok(store.mark_all_notifications_read(caller.workspace_id(), user_id, crate::store::now()).await?)
}

/// Why an action link cannot answer.
#[derive(Debug)]
pub enum LinkRefused {
    /// Not a link this Holdpoint issued, or one past its expiry.
    Invalid(ActionLinkError),
    /// Its question is gone, or its person is no longer a member of the question's workspace.
    Gone,
    /// Its question was resolved already (by this link or anyone).
    Resolved(Box<Question>),
    /// Answering is refused by a rule of §3 (the person's role, the assignee, separation of duties) or the answer
    /// does not fit.
    Refused(AppError),
}

/// What a link offers: its question (pending), the person it answers as, and the answer it gives.
pub struct LinkOffer {
    pub question: Question,
    pub recipient: Caller,
    pub value: Value,
}

/// Reads an action link without changing anything (`GET /act/{token}`: mail scanners open links).
pub async fn open_link(
    store: &dyn Store,
    keys: &ChannelKeys,
    token: &str,
    now: DateTime<Utc>,
) -> Result<LinkOffer, LinkRefused> {
    let claims = keys.action_links.verify(token, now).map_err(LinkRefused::Invalid)?;
    let gone = |_| LinkRefused::Gone;
    let mut found = None;
    for workspace_id in store.workspaces_of(claims.recipient_id).await.map_err(gone)? {
        if let Some(row) = store.question(workspace_id, claims.question_id).await.map_err(gone)? {
            found = Some(row);
            break;
        }
    }
    let row = found.ok_or(LinkRefused::Gone)?;
    let workspace = store.workspace_name(row.workspace_id).await.map_err(gone)?;
    let principal = store.user_principal(claims.recipient_id, Some(&workspace)).await.map_err(gone)?;
    let principal = principal.ok_or(LinkRefused::Gone)?;
    let question = row.to_question(&workspace).map_err(gone)?;
    if question.status != QuestionStatus::Pending {
        return Err(LinkRefused::Resolved(Box::new(question)));
    }
    let recipient = Caller { principal, credential: Credential::Channel(claims.channel) };
    Ok(LinkOffer { question, recipient, value: claims.value })
}

/// Answers with an action link (`POST /act/{token}`), as its person, with every rule an answer in Holdpoint has; the
/// audit entry names the channel. A link answers only a pending question, and a question leaves `pending` once, so
/// each link answers at most once.
pub async fn follow_link(
    answering: &Answering<'_>,
    keys: &ChannelKeys,
    token: &str,
    now: DateTime<Utc>,
) -> Result<Question, LinkRefused> {
    let offer = open_link(answering.store, keys, token, now).await?;
    let Credential::Channel(channel) = offer.recipient.credential else { return Err(LinkRefused::Gone) };
    let answer = AnswerBody { value: offer.value, comment: None, edited_arguments: None };
    match answer_through(answering, &offer.recipient, offer.question.id, answer, now, Some(channel)).await {
        Ok(question) => Ok(question),
        Err(AppError::Conflict { .. }) => {
            let row = answering.store.question(offer.recipient.workspace_id(), offer.question.id).await;
            match row {
                Ok(Some(row)) => Err(LinkRefused::Resolved(Box::new(
                    row.to_question(&offer.recipient.principal.workspace).map_err(|_| LinkRefused::Gone)?,
                ))),
                _ => Err(LinkRefused::Gone),
            }
        }
        Err(refused) => Err(LinkRefused::Refused(refused)),
    }
}
