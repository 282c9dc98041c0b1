//! How questions reach people: who a question is for, on which channels, decided when it is asked; and the
//! keys the channels sign with, shared by every instance through the store.

use chrono::{DateTime, Utc};
use holdpoint_types::{
    ActionStatus, Channel, ChannelHealth, ChannelHealthList, Delivery, DeliveryCause, DeliveryPage, DeliveryStatus,
    NewPushSubscription, Notification, NotificationPage, PushPublicKey, PushSubscriptionInfo, PushSubscriptionList,
    QuestionStatus,
};
use serde_json::Value;
use uuid::Uuid;

use crate::actions;
use crate::channels::ChannelKeys;
use crate::channels::web_push::VapidKey;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::store::{
    DeliveryRow, ListedDelivery, ListedNotification, MemberRow, NotificationQuery, NotificationRow, PrincipalKind,
    PushSubscriptionRow, QuestionRow, Reach, Store, StoreError, StoreResult,
};

/// The name the channel keys are stored under in `server_secrets`.
const CHANNEL_KEYS: &str = "channel_keys";

/// The keys action links and web pushes are signed with: those stored, or new ones stored now when none are, so
/// every instance and every restart signs with the same keys (a link sent by one instance is honoured by another; a
/// browser subscribed once stays subscribed). A VAPID key the operator configured (`vapid`) takes the stored one's
/// place.
pub async fn channel_keys(store: &dyn Store, vapid: Option<&VapidKey>) -> StoreResult<ChannelKeys> {
    let stored = store.server_secret(CHANNEL_KEYS, &ChannelKeys::generate().to_stored()).await?;
    let mut keys = ChannelKeys::from_stored(&stored).map_err(StoreError::Corrupt)?;
    if let Some(vapid) = vapid {
        keys.vapid = vapid.clone();
    }
    Ok(keys)
}

/// The channels outside Holdpoint's pages this server sends on: those configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SendsOn {
    pub email: bool,
    /// Slack, and where: each person's direct messages, or one post per question in a channel.
    pub slack: Option<SlackTarget>,
    /// Web push, to the browsers each person subscribed: on when push services can be told who sends (a VAPID
    /// subject).
    pub push: bool,
}

/// Where a Slack message asking a question goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlackTarget {
    /// A direct message from the app to each person the question is for.
    DirectMessages,
    /// One post in this channel (its id) per question, which anyone mapped may answer.
    Channel(String),
}

/// The address of a push delivery: it goes to every browser the person has subscribed when it is sent.
pub const PUSH_ADDRESS: &str = "every subscribed browser";

/// Whether `member` is among the people `question` is for: whoever may decide it
/// ([`holdpoint_types::refusal_to_decide`]) — its assignee (the user, or the members holding at least the role), or,
/// without one, every member whose role may answer it; of an approval with eligible approvers, only those.
pub fn is_for(question: &QuestionRow, member: &MemberRow) -> bool {
    let decider = holdpoint_types::Decider { role: member.role, name: &member.username, account: true };
    let (assignee, eligible) = (question.assignee.as_ref(), question.eligible.as_ref());
    holdpoint_types::refusal_to_decide(question.kind, assignee.map(|a| &a.0), eligible.map(|e| &e.0), decider).is_none()
}

/// Who a new question reaches and how, decided when it is asked: a notification for each person it is for whose
/// web threshold its urgency meets, and a delivery on each channel this server sends on whose threshold it meets and
/// where the person has an address (for push, a subscribed browser). Posted in a Slack channel, a question is one delivery, to the first person (by
/// name) whose Slack threshold it meets: whoever clicks answers as themselves.
///
/// `push_subscribers` are the members with a subscribed browser (read only when `sends_on.push`).
pub fn reach(
    question: &QuestionRow,
    members: &[MemberRow],
    sends_on: &SendsOn,
    push_subscribers: &[Uuid],
) -> StoreResult<Reach> {
    reach_because(question, DeliveryCause::Asked, question.created_at, members, sends_on, push_subscribers)
}

/// Who `question` (with the assignee it has now) reaches at `at` for `cause`, as [`reach`] decides it: an escalation
/// step reaches people again, each notification marked unread and each channel's message sent anew.
pub fn reach_because(
    question: &QuestionRow,
    cause: DeliveryCause,
    at: DateTime<Utc>,
    members: &[MemberRow],
    sends_on: &SendsOn,
    push_subscribers: &[Uuid],
) -> StoreResult<Reach> {
    let mut reach = Reach::default();
    let delivery = |member: &MemberRow, channel: Channel, address: &str| DeliveryRow {
        id: Uuid::now_v7(),
        workspace_id: question.workspace_id,
        question_id: question.id,
        user_id: member.user_id,
        channel,
        address: address.to_owned(),
        status: DeliveryStatus::Queued,
        attempts: 0,
        next_attempt_at: at,
        claimed_until: None,
        last_error: None,
        sent_at: None,
        created_at: at,
        updated_at: at,
        reference: None,
        followed_up_at: None,
        cause,
    };
    let mut posted_in_channel = false;
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
            reach.deliveries.push(delivery(member, Channel::Email, address));
        }
        let subscribed = sends_on.push && push_subscribers.contains(&member.user_id);
        if subscribed && preferences.push.min_urgency.admits(question.urgency) {
            reach.deliveries.push(delivery(member, Channel::Push, PUSH_ADDRESS));
        }
        if !preferences.slack.min_urgency.admits(question.urgency) {
            continue;
        }
        // An id the member set themselves could be a colleague's: messages go to proven ids only.
        let slack_user_id = member.slack_user_id.as_ref().filter(|_| member.slack_user_id_proven);
        match (&sends_on.slack, slack_user_id) {
            (Some(SlackTarget::DirectMessages), Some(slack_user)) => {
                reach.deliveries.push(delivery(member, Channel::Slack, slack_user));
            }
            (Some(SlackTarget::Channel(channel)), Some(_)) if !posted_in_channel => {
                posted_in_channel = true;
                reach.deliveries.push(delivery(member, Channel::Slack, channel));
            }
            _ => {}
        }
    }
    Ok(reach)
}

/// Who a question may reach, read once for its workspace: its members, the channels this server sends on, and the
/// members with a subscribed browser (read only when `sends_on.push`).
pub struct Reachable<'a> {
    pub members: &'a [MemberRow],
    pub sends_on: &'a SendsOn,
    pub push_subscribers: &'a [Uuid],
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
                cause: delivery.cause,
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
    let of = NotificationsOf { workspace_id: caller.workspace_id(), workspace: &caller.principal.workspace, user_id };
    notifications_of(store, of, unread_only, cursor, limit).await
}

/// Whose notifications: a person in a workspace.
#[derive(Debug, Clone, Copy)]
pub struct NotificationsOf<'a> {
    pub workspace_id: Uuid,
    /// The workspace's name, as questions carry it.
    pub workspace: &'a str,
    pub user_id: Uuid,
}

/// A page of a person's notifications, newest first, with how many are unread in all (the API's list and the web
/// UI's notification center).
pub async fn notifications_of(
    store: &dyn Store,
    of: NotificationsOf<'_>,
    unread_only: bool,
    cursor: Option<&str>,
    limit: u32,
) -> Result<NotificationPage, AppError> {
    let before = cursor.map(parse_cursor).transpose()?;
    let limit = limit.clamp(1, MAX_NOTIFICATION_PAGE);
    let query = NotificationQuery { unread_only, before, limit: limit + 1 };
    let mut listed = store.notifications(of.workspace_id, of.user_id, &query).await?;
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
            question: question.to_question(of.workspace)?,
            created_at: notification.created_at,
            read_at: notification.read_at,
            action_status,
        });
    }
    let unread = store.unread_notifications(of.workspace_id, of.user_id).await?;
    Ok(NotificationPage { items, unread, next_cursor })
}

/// A `{created_at micros}_{id}` cursor of a list newest first, as a page's `next_cursor` gives it.
pub fn parse_cursor(cursor: &str) -> Result<(DateTime<Utc>, Uuid), AppError> {
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

/// The most browsers one person may subscribe in a workspace: each push to them is sent to every one.
pub const MAX_PUSH_SUBSCRIPTIONS: usize = 20;

fn subscription_info(row: &PushSubscriptionRow) -> PushSubscriptionInfo {
    let push_service =
        url::Url::parse(&row.endpoint).ok().and_then(|url| url.host_str().map(str::to_owned)).unwrap_or_default();
    PushSubscriptionInfo { id: row.id, push_service, created_at: row.created_at }
}

/// The key browsers subscribe with, and whether this server pushes at all (`GET /push/public-key`).
pub fn push_public_key(keys: &ChannelKeys, sends_on: &SendsOn) -> PushPublicKey {
    PushPublicKey { public_key: keys.vapid.public_key_encoded(), enabled: sends_on.push }
}

/// The browsers the caller subscribed (`GET /me/push-subscriptions`).
pub async fn my_push_subscriptions(store: &dyn Store, caller: &Caller) -> Result<PushSubscriptionList, AppError> {
    let user_id = person(caller)?;
    let rows = store.push_subscriptions(caller.workspace_id(), user_id).await?;
    Ok(PushSubscriptionList { items: rows.iter().map(subscription_info).collect() })
}

/// Subscribes one of the caller's browsers to web pushes (`POST /me/push-subscriptions`); the same browser again
/// takes its new keys. The subscription is checked as the outbox will use it: an `https` endpoint (`http` only when
/// `allow_http`), a P-256 public key, a 16-byte secret.
pub async fn subscribe_browser(
    store: &dyn Store,
    caller: &Caller,
    sends_on: &SendsOn,
    new: NewPushSubscription,
    endpoints: crate::channels::web_push::PushEndpoints,
) -> Result<PushSubscriptionInfo, AppError> {
    use crate::channels::web_push::{InvalidSubscription, PushSubscription, SubscriptionKeys};
    let user_id = person(caller)?;
    if !sends_on.push {
        return Err(AppError::Conflict {
            message: "this server sends no web pushes: set HOLDPOINT_VAPID_SUBJECT (or HOLDPOINT_PUBLIC_URL with \
                      https, or an email sender)"
                .into(),
            details: None,
        });
    }
    let subscription = PushSubscription {
        endpoint: new.endpoint.trim().to_owned(),
        keys: SubscriptionKeys { p256dh: new.keys.p256dh.trim().to_owned(), auth: new.keys.auth.trim().to_owned() },
    };
    if let Err(invalid) = subscription.validate(endpoints) {
        let field = match invalid {
            InvalidSubscription::Endpoint(_) | InvalidSubscription::Destination(_) => "endpoint",
            InvalidSubscription::PublicKey => "keys.p256dh",
            InvalidSubscription::Auth => "keys.auth",
        };
        return Err(AppError::invalid_field(field, invalid.to_string()));
    }
    let existing = store.push_subscriptions(caller.workspace_id(), user_id).await?;
    let known = existing.iter().any(|row| row.endpoint == subscription.endpoint);
    if !known && existing.len() >= MAX_PUSH_SUBSCRIPTIONS {
        return Err(AppError::invalid_field(
            "endpoint",
            format!("at most {MAX_PUSH_SUBSCRIPTIONS} browsers may be subscribed; remove one first"),
        ));
    }
    let row = PushSubscriptionRow {
        // A browser subscribed again keeps its subscription (and its id), with the keys it sends now.
        id: existing.iter().find(|row| row.endpoint == subscription.endpoint).map_or_else(Uuid::now_v7, |row| row.id),
        workspace_id: caller.workspace_id(),
        user_id,
        endpoint: subscription.endpoint,
        p256dh: subscription.keys.p256dh,
        auth: subscription.keys.auth,
        created_at: crate::store::now(),
    };
    let info = subscription_info(&row);
    // Whoever subscribes a browser reads the questions pushed to it: recorded, with the push service, never the
    // endpoint (which lets whoever knows it push to the browser).
    let after = serde_json::json!({ "push_service": info.push_service, "again": known });
    let audit = push_subscription_entry(caller, actions::PUSH_SUBSCRIPTION_ADDED, &info, None, Some(after));
    Ok(subscription_info(&store.save_push_subscription(&row, &audit).await?))
}

fn push_subscription_entry(
    caller: &Caller,
    action: &str,
    subscription: &PushSubscriptionInfo,
    before: Option<Value>,
    after: Option<Value>,
) -> crate::store::NewAuditEntry {
    crate::store::NewAuditEntry {
        workspace_id: caller.workspace_id(),
        actor: crate::store::AuditActor::from(caller),
        action: action.to_owned(),
        subject_type: "push_subscription".into(),
        subject_id: Some(subscription.id.to_string()),
        before,
        after,
        diff: None,
        created_at: crate::store::now(),
    }
}

/// Unsubscribes one of the caller's browsers (`DELETE /me/push-subscriptions/{id}`); 404 if it is not theirs.
pub async fn unsubscribe_browser(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<(), AppError> {
    let user_id = person(caller)?;
    let subscriptions = store.push_subscriptions(caller.workspace_id(), user_id).await?;
    let Some(subscription) = subscriptions.iter().find(|row| row.id == id) else {
        return Err(AppError::NotFound("push subscription"));
    };
    let info = subscription_info(subscription);
    let before = serde_json::json!({ "push_service": info.push_service });
    let audit = push_subscription_entry(caller, actions::PUSH_SUBSCRIPTION_REMOVED, &info, Some(before), None);
    if store.delete_push_subscription(caller.workspace_id(), user_id, id, &audit).await? {
        Ok(())
    } else {
        Err(AppError::NotFound("push subscription"))
    }
}

/// How each channel is doing in the caller's workspace (`GET /channels`, admins): configured or not, the last
/// delivery that went out, the last failure and why, and how many deliveries wait.
pub async fn channel_health(
    store: &dyn Store,
    caller: &Caller,
    sends_on: &SendsOn,
) -> Result<ChannelHealthList, AppError> {
    caller.require_admin("manage people and tokens")?;
    Ok(ChannelHealthList { items: channel_health_of(store, caller.workspace_id(), sends_on).await? })
}

/// How each channel is doing in workspace `workspace_id` (for a caller already known to be its admin).
pub async fn channel_health_of(
    store: &dyn Store,
    workspace_id: Uuid,
    sends_on: &SendsOn,
) -> StoreResult<Vec<ChannelHealth>> {
    let mut items = Vec::with_capacity(Channel::ALL.len());
    for &channel in Channel::ALL {
        let summary = store.channel_summary(workspace_id, channel).await?;
        let configured = match channel {
            Channel::Email => sends_on.email,
            Channel::Slack => sends_on.slack.is_some(),
            Channel::Push => sends_on.push,
        };
        items.push(ChannelHealth {
            channel,
            configured,
            last_sent_at: summary.last_sent_at,
            last_failure_at: summary.last_failure_at,
            last_error: summary.last_error,
            waiting: u32::try_from(summary.waiting).unwrap_or(u32::MAX),
        });
    }
    Ok(items)
}

/// The caller's membership, with its addresses: what a test message is sent to. People only.
pub async fn my_membership(store: &dyn Store, caller: &Caller) -> Result<MemberRow, AppError> {
    let user_id = person(caller)?;
    store.member(caller.workspace_id(), user_id).await?.ok_or(AppError::NotFound("membership"))
}
