//! Wire types of escalation: a workspace's policies, and the plan a question takes from them when it is
//! asked.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Assignee, QuestionKind, UnknownVariant, Urgency, time};

/// What happens to a pending question of one kind and urgency while nobody answers it
/// (`PUT /api/v1/escalation-policies`): the people it reached are reminded after `remind_after_seconds`, and after
/// `escalate_after_seconds` it is handed to `escalate_to` (someone away: their delegate), who become its assignee and
/// are notified, unless they are fewer people who may decide it than it needs (its eligible approvers, the approvals
/// it still needs): then it stays with whoever could answer it. A claim held by someone it is no longer for ends.
/// Both count from when the question was asked; the question's own deadline still applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EscalationPolicy {
    pub kind: QuestionKind,
    pub urgency: Urgency,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remind_after_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_after_seconds: Option<i64>,
    /// Who the question is handed to; required with `escalate_after_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_to: Option<Assignee>,
}

/// A workspace's escalation policies, at most one per kind and urgency; `PUT` replaces them all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EscalationPolicies {
    pub items: Vec<EscalationPolicy>,
}

wire_enum! {
    /// A step of a question's escalation.
    EscalationStep {
        /// The people the question reached are notified again.
        Remind = "remind",
        /// The question is handed to someone else, who is notified.
        Escalate = "escalate",
    }
}

/// A question's escalation plan, taken from its workspace's policy when it was asked: each step's time, and when
/// it was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct Escalation {
    #[serde(default, deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub remind_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub reminded_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub escalate_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub escalate_to: Option<Assignee>,
    #[serde(default, deserialize_with = "time::optional", serialize_with = "time::write_optional")]
    pub escalated_at: Option<DateTime<Utc>>,
}

impl Escalation {
    /// The next step not taken yet, and when it is due.
    pub fn next_step(&self) -> Option<(EscalationStep, DateTime<Utc>)> {
        let remind = self.remind_at.filter(|_| self.reminded_at.is_none()).map(|at| (EscalationStep::Remind, at));
        let escalate =
            self.escalate_at.filter(|_| self.escalated_at.is_none()).map(|at| (EscalationStep::Escalate, at));
        match (remind, escalate) {
            (Some(remind), Some(escalate)) => Some(if remind.1 <= escalate.1 { remind } else { escalate }),
            (remind, escalate) => remind.or(escalate),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::Role;

    #[test]
    fn the_next_step_is_the_soonest_one_not_taken() {
        let at = |s: u32| Utc.with_ymd_and_hms(2026, 11, 27, 12, 0, s).unwrap();
        let mut plan = Escalation {
            remind_at: Some(at(10)),
            reminded_at: None,
            escalate_at: Some(at(20)),
            escalate_to: Some(Assignee::Role(Role::Admin)),
            escalated_at: None,
        };
        assert_eq!(plan.next_step(), Some((EscalationStep::Remind, at(10))));
        plan.reminded_at = Some(at(11));
        assert_eq!(plan.next_step(), Some((EscalationStep::Escalate, at(20))));
        plan.escalated_at = Some(at(21));
        assert_eq!(plan.next_step(), None);
        let escalation_only = Escalation { remind_at: None, reminded_at: None, escalated_at: None, ..plan };
        assert_eq!(escalation_only.next_step(), Some((EscalationStep::Escalate, at(20))));
    }
}
