//! The audit log's vocabulary: the actions the server records. Others may be added (the column is free text); these
//! are the ones it writes. No use case owns them: each names the actions of its changes from here, so the audit log
//! and the use cases share the words without importing each other.

pub const QUESTION_ANSWERED: &str = "question.answered";
pub const QUESTION_DEFAULTED: &str = "question.defaulted";
pub const QUESTION_EXPIRED: &str = "question.expired";
pub const QUESTION_CANCELLED: &str = "question.cancelled";
/// A tool call approved or rejected by an agent's approval policy (people decide through the approval question).
pub const TOOL_CALL_DECIDED: &str = "tool_call.decided";
pub const RUN_CANCELLED: &str = "run.cancelled";
pub const SIGNIN: &str = "signin";
pub const SIGNOUT: &str = "signout";
pub const TOKEN_CREATED: &str = "token.created";
pub const TOKEN_REVOKED: &str = "token.revoked";
pub const USER_CREATED: &str = "user.created";
pub const MEMBER_ADDED: &str = "member.added";
pub const MEMBER_REMOVED: &str = "member.removed";
pub const ROLE_CHANGED: &str = "role.changed";
pub const PASSWORD_CHANGED: &str = "password.changed";
/// An existing account was invited to a workspace (it joins only when its owner accepts).
pub const MEMBER_INVITED: &str = "member.invited";
/// An invitation's account accepted it and became a member.
pub const INVITATION_ACCEPTED: &str = "invitation.accepted";
/// An invitation's account declined it.
pub const INVITATION_DECLINED: &str = "invitation.declined";
/// An account confirmed an email address as its own (the address single sign-on matches).
pub const EMAIL_VERIFIED: &str = "email.verified";
/// A member's email address or Slack user id changed.
pub const ADDRESSES_CHANGED: &str = "addresses.changed";
/// A person's channel thresholds changed.
pub const NOTIFICATIONS_CHANGED: &str = "notifications.changed";
/// A pending question's people were notified again by its escalation policy.
pub const QUESTION_REMINDED: &str = "question.reminded";
/// A pending question was handed to someone else by its escalation policy.
pub const QUESTION_ESCALATED: &str = "question.escalated";
/// A person subscribed a browser to web pushes (or subscribed it again, with new keys).
pub const PUSH_SUBSCRIPTION_ADDED: &str = "push_subscription.added";
/// A person removed one of their browsers' push subscriptions.
pub const PUSH_SUBSCRIPTION_REMOVED: &str = "push_subscription.removed";
/// A workspace's escalation policies were replaced.
pub const ESCALATION_POLICIES_CHANGED: &str = "escalation_policies.changed";
/// A webhook subscription was created, changed (disabled and enabled included) or deleted.
pub const WEBHOOK_CREATED: &str = "webhook.created";
pub const WEBHOOK_CHANGED: &str = "webhook.changed";
pub const WEBHOOK_DELETED: &str = "webhook.deleted";
/// A webhook delivery was queued again by hand.
pub const WEBHOOK_REDELIVERED: &str = "webhook.redelivered";
/// A workspace's callback secret was replaced.
pub const CALLBACK_SECRET_ROTATED: &str = "callback_secret.rotated";

/// One approval of a question that needs several, short of the quorum.
pub const QUESTION_APPROVAL_ADDED: &str = "question.approval_added";
/// Someone claimed a question (or took over another's claim, as an admin).
pub const QUESTION_CLAIMED: &str = "question.claimed";
/// A claim was let go before it ran out.
pub const QUESTION_UNCLAIMED: &str = "question.unclaimed";
/// A question assigned to someone away went to the member standing in for them.
pub const QUESTION_DELEGATED: &str = "question.delegated";
/// A member set, changed or ended an absence (and who stands in for them).
pub const ABSENCE_CHANGED: &str = "absence.changed";
/// An approver made a grant while approving a tool call.
pub const GRANT_CREATED: &str = "grant.created";
/// A grant was revoked before it ran out.
pub const GRANT_REVOKED: &str = "grant.revoked";
/// A call a grant let through without asking.
pub const GRANT_USED: &str = "grant.used";
/// An upstream MCP server of the gateway was registered, changed or removed.
pub const UPSTREAM_CREATED: &str = "upstream.created";
pub const UPSTREAM_CHANGED: &str = "upstream.changed";
pub const UPSTREAM_DELETED: &str = "upstream.deleted";
/// A tool call through the MCP gateway, whatever became of it.
pub const GATEWAY_CALL: &str = "gateway.call";
/// A workspace's approval rules were saved (with the change).
pub const RULES_UPDATED: &str = "rules.updated";
/// A call a dry-run rule would have decided (it decided nothing).
pub const RULE_DRY_RUN: &str = "rule.dry_run";
/// A call decided through `POST /decide`.
pub const RULES_DECIDED: &str = "rules.decided";

/// Every action above, for the audit page's filter.
pub const ALL: &[&str] = &[
    QUESTION_ANSWERED,
    QUESTION_DEFAULTED,
    QUESTION_EXPIRED,
    QUESTION_CANCELLED,
    TOOL_CALL_DECIDED,
    RUN_CANCELLED,
    SIGNIN,
    SIGNOUT,
    TOKEN_CREATED,
    TOKEN_REVOKED,
    USER_CREATED,
    MEMBER_ADDED,
    MEMBER_REMOVED,
    ROLE_CHANGED,
    PASSWORD_CHANGED,
    MEMBER_INVITED,
    INVITATION_ACCEPTED,
    INVITATION_DECLINED,
    EMAIL_VERIFIED,
    ADDRESSES_CHANGED,
    NOTIFICATIONS_CHANGED,
    PUSH_SUBSCRIPTION_ADDED,
    PUSH_SUBSCRIPTION_REMOVED,
    QUESTION_REMINDED,
    QUESTION_ESCALATED,
    ESCALATION_POLICIES_CHANGED,
    WEBHOOK_CREATED,
    WEBHOOK_CHANGED,
    WEBHOOK_DELETED,
    WEBHOOK_REDELIVERED,
    CALLBACK_SECRET_ROTATED,
    QUESTION_APPROVAL_ADDED,
    QUESTION_CLAIMED,
    QUESTION_UNCLAIMED,
    QUESTION_DELEGATED,
    ABSENCE_CHANGED,
    GRANT_CREATED,
    GRANT_USED,
    GRANT_REVOKED,
    UPSTREAM_CREATED,
    UPSTREAM_CHANGED,
    UPSTREAM_DELETED,
    GATEWAY_CALL,
    RULES_UPDATED,
    RULE_DRY_RUN,
    RULES_DECIDED,
];
