//! The ways a question reaches a person outside Holdpoint's own pages: email over SMTP, Slack, web push,
//! and the signed action links the first and last of them carry.
//!
//! Each channel turns a question into that channel's message and sends it, and says how the attempt went in the
//! one shape the outbox worker needs ([`DeliveryOutcome`]): sent, worth retrying later, or never going to work.
//! Nothing here reads or writes the database or knows who may answer what: the outbox decides who is told on which
//! channel and records each attempt; the doors that receive an answer from a channel (action links, Slack's
//! interactions) apply every rule of answering through the answer use case. So this module imports nothing else of the
//! server, and any use case or door may use it.

pub mod action_links;
pub mod asked;
pub mod causes;
pub mod egress;
pub mod email;
pub mod slack;
pub mod web_push;
pub mod webhooks;

use std::time::Duration;

use holdpoint_types::{Question, ResponseType};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

pub use holdpoint_types::Channel;

/// How one attempt to deliver went: what the outbox worker records, and whether it tries again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The channel's service took the message.
    Sent {
        /// What the service calls the message, when it can be changed later: Slack's `channel` and `ts` (see
        /// [`slack::MessageRef`]), so the message can say how the question was resolved.
        reference: Option<String>,
    },
    /// It may work later (a network error, a timeout, a 5xx, a rate limit): the worker tries again with backoff.
    Retry {
        reason: String,
        /// How long the service asked us to wait (`Retry-After`), when it said.
        after: Option<Duration>,
    },
    /// It will not work by trying again: an address or subscription that no longer exists (a push endpoint's 404
    /// or 410), a message the service refuses, credentials it rejects.
    Failed {
        reason: String,
        /// The recipient's address on this channel is gone for good (a push subscription that expired): the
        /// outbox removes it rather than sending to it again.
        address_gone: bool,
    },
}

impl DeliveryOutcome {
    /// A failure worth retrying, with the service's requested wait if any.
    pub fn retry(reason: impl Into<String>, after: Option<Duration>) -> Self {
        DeliveryOutcome::Retry { reason: reason.into(), after }
    }

    /// A failure that trying again would not mend.
    pub fn failed(reason: impl Into<String>) -> Self {
        DeliveryOutcome::Failed { reason: reason.into(), address_gone: false }
    }
}

/// The channels' secrets, which every instance of a deployment must share: the key action links are signed with
/// and the VAPID key browsers subscribed to. Generated once, by whichever instance starts first, and stored where
/// every instance reads them (the database), in the form [`ChannelKeys::to_stored`] writes; a VAPID key given as
/// `HOLDPOINT_VAPID_PRIVATE_KEY` takes the stored one's place. `Debug` shows neither private key.
#[derive(Debug, Clone)]
pub struct ChannelKeys {
    pub action_links: action_links::ActionLinkKey,
    pub vapid: web_push::VapidKey,
}

#[derive(Serialize, Deserialize)]
struct StoredKeys {
    action_link_key: String,
    vapid_private_key: String,
}

impl ChannelKeys {
    /// New random keys.
    pub fn generate() -> Self {
        ChannelKeys { action_links: action_links::ActionLinkKey::generate(), vapid: web_push::VapidKey::generate() }
    }

    /// The stored form: JSON with each key in base64url.
    pub fn to_stored(&self) -> String {
        serde_json::to_string(&StoredKeys {
            action_link_key: self.action_links.encoded(),
            vapid_private_key: self.vapid.encoded(),
        })
        .expect("keys serialize to JSON")
    }

    /// Reads the stored form.
    pub fn from_stored(stored: &str) -> Result<Self, String> {
        let keys: StoredKeys = serde_json::from_str(stored).map_err(|e| format!("the stored channel keys: {e}"))?;
        Ok(ChannelKeys {
            action_links: action_links::ActionLinkKey::from_encoded(&keys.action_link_key)
                .map_err(|e| e.to_string())?,
            vapid: web_push::VapidKey::from_encoded(&keys.vapid_private_key).map_err(|e| e.to_string())?,
        })
    }
}

/// How a quick answer's button or link looks: the channels that can show emphasis use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerStyle {
    /// The affirmative answer (Approve).
    Primary,
    /// The answer that stops something (Reject).
    Danger,
    Plain,
}

/// One answer a person can give with a single click (a link in an email, a Slack button, a push action).
#[derive(Debug, Clone, PartialEq)]
pub struct QuickAnswer {
    /// The answer's `value`, as `POST /questions/{id}/answer` takes it.
    pub value: Value,
    /// What the button says.
    pub label: String,
    pub style: AnswerStyle,
}

/// The most choices an email offers as links; a longer list is answered in Holdpoint.
pub const EMAIL_MAX_CHOICES: usize = 6;
/// The most choices a push notification offers as actions: browsers show two actions beside "Open".
pub const PUSH_MAX_CHOICES: usize = 2;

/// The answers a question offers with one click, when it has any: Approve and Reject for an approval, Yes and No for
/// a boolean, and each option of a `choice` question that has at most `max_choices` options. Other questions (text,
/// multi-choice, forms, error recovery) need more than one click and are answered in Holdpoint or in a Slack modal.
/// A question that is not pending offers none.
pub fn quick_answers(question: &Question, max_choices: usize) -> Vec<QuickAnswer> {
    if question.status != holdpoint_types::QuestionStatus::Pending {
        return Vec::new();
    }
    let answer = |value: Value, label: &str, style| QuickAnswer { value, label: label.to_owned(), style };
    match question.response_type {
        ResponseType::Approval => vec![
            answer(Value::Bool(true), "Approve", AnswerStyle::Primary),
            answer(Value::Bool(false), "Reject", AnswerStyle::Danger),
        ],
        ResponseType::Boolean => vec![
            answer(Value::Bool(true), "Yes", AnswerStyle::Primary),
            answer(Value::Bool(false), "No", AnswerStyle::Plain),
        ],
        ResponseType::Choice if question.options.len() <= max_choices => question
            .options
            .iter()
            .map(|option| answer(Value::String(option.value.clone()), &option.label, AnswerStyle::Plain))
            .collect(),
        _ => Vec::new(),
    }
}

/// Where a question opens in Holdpoint's web UI, under `public_url` (the address people reach Holdpoint at).
pub fn question_url(public_url: &str, question_id: Uuid) -> String {
    format!("{}/questions/{question_id}", public_url.trim_end_matches('/'))
}

/// `text` cut to at most `max` characters, with an ellipsis when something was cut: for the fields a service limits.
pub fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The arguments of an approval's tool call, indented for reading.
pub fn pretty_arguments(arguments: &Value) -> String {
    serde_json::to_string_pretty(arguments).unwrap_or_else(|_| arguments.to_string())
}

/// When a question's deadline falls and what happens then, in words: "2026-11-27 14:05 UTC (then it is rejected)".
pub fn deadline_text(question: &Question) -> Option<String> {
    let at = question.timeout_at?;
    let then = match &question.default_response {
        Some(default) => format!("then the default applies: {}", default.value),
        None => "then it expires".to_owned(),
    };
    Some(format!("{} ({then})", at.format("%Y-%m-%d %H:%M UTC")))
}

#[cfg(test)]
pub(crate) mod test_questions {
    //! Questions for the channels' tests, shaped as the API returns them.

    use chrono::{TimeZone, Utc};
    use holdpoint_types::{ApprovalAction, QuestionKind, QuestionOption, QuestionStatus, ResponseType, Urgency};
    use serde_json::json;

    use super::*;

    pub fn approval() -> Question {
        Question {
            id: Uuid::parse_str("0193a000-0000-7000-8000-000000000001").unwrap(),
            workspace: "default".into(),
            project: Some("infra".into()),
            run_id: Some(Uuid::parse_str("0193a000-0000-7000-8000-0000000000aa").unwrap()),
            tool_call_id: Some("call_1".into()),
            parent_run_ids: vec![],
            kind: QuestionKind::Approval,
            response_type: ResponseType::Approval,
            title: "Run <rm -rf /tmp/build> & clean?".into(),
            body: "The agent wants to **clean** the build directory.\n\nIt says: \"safe\".".into(),
            options: vec![],
            fields: vec![],
            response_schema: None,
            rules: Default::default(),
            action: Some(ApprovalAction {
                tool_name: "shell".into(),
                arguments: json!({"command": "rm -rf /tmp/build && echo '<done>'"}),
            }),
            allow_edit: false,
            context: json!({"host": "build-1"}),
            urgency: Urgency::High,
            timeout_at: Some(Utc.with_ymd_and_hms(2026, 11, 27, 14, 5, 0).unwrap()),
            default_response: None,
            status: QuestionStatus::Pending,
            response: None,
            answered_by: None,
            resolution: None,
            created_at: Utc.with_ymd_and_hms(2026, 11, 27, 13, 50, 0).unwrap(),
            updated_at: Utc.with_ymd_and_hms(2026, 11, 27, 13, 50, 0).unwrap(),
            resolved_at: None,
            assignee: None,
            escalation: None,
            callback_url: None,
            required_approvals: 1,
            eligible: None,
            approvals: vec![],
            claimed_by: None,
            claim_expires_at: None,
        }
    }

    pub fn choice(options: usize) -> Question {
        Question {
            kind: QuestionKind::Blocking,
            response_type: ResponseType::Choice,
            title: "Which region?".into(),
            body: "Pick where to deploy.".into(),
            action: None,
            options: (0..options)
                .map(|i| QuestionOption {
                    value: format!("region-{i}"),
                    label: format!("Region <{i}>"),
                    description: None,
                })
                .collect(),
            ..approval()
        }
    }

    /// A form of every kind of field a channel has to say something about: bounds, a description, a table, a file.
    pub fn rich_form() -> Question {
        let fields = serde_json::from_value(json!([
            {"key": "nodes", "label": "Nodes", "response_type": "integer", "required": true,
             "min": 1, "max": 9, "step": 2, "description": "Worker nodes", "default": 3},
            {"key": "start", "label": "Start", "response_type": "date", "required": true},
            {"key": "budget", "label": "Budget", "response_type": "number", "min": 0.5},
            {"key": "stars", "label": "Stars", "response_type": "rating", "max": 10},
            {"key": "regions", "label": "Regions", "response_type": "multi_choice", "max_items": 1,
             "options": [{"value": "eu", "label": "Europe"}, {"value": "us", "label": "US"}]},
            {"key": "disks", "label": "Disks", "response_type": "table", "min_rows": 1, "max_rows": 4,
             "columns": [{"key": "size", "label": "Size (GiB)", "response_type": "integer", "required": true},
                         {"key": "kind", "label": "Kind", "response_type": "choice",
                          "options": [{"value": "ssd", "label": "SSD"}, {"value": "hdd", "label": "HDD"}]}]},
            {"key": "plan", "label": "Plan", "response_type": "file", "accept": ["application/pdf", "image/*"],
             "max_bytes": 5242880}
        ]))
        .unwrap();
        Question {
            kind: QuestionKind::Blocking,
            response_type: ResponseType::Form,
            title: "Size the cluster".into(),
            body: "For the **spring** release.".into(),
            action: None,
            fields,
            ..approval()
        }
    }

    pub fn text() -> Question {
        Question {
            kind: QuestionKind::Blocking,
            response_type: ResponseType::Text,
            title: "What should the release be called?".into(),
            action: None,
            urgency: Urgency::Normal,
            ..approval()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_questions::*;
    use super::*;
    use holdpoint_types::QuestionStatus;
    use serde_json::json;

    #[test]
    fn channels_have_the_wire_names_of_the_notification_settings() {
        for &channel in Channel::ALL {
            assert_eq!(channel.as_str().parse::<Channel>().unwrap(), channel);
            assert_eq!(serde_json::to_value(channel).unwrap(), json!(channel.as_str()));
        }
        assert_eq!(Channel::Push.as_str(), "push");
        assert!("web_push".parse::<Channel>().is_err());
    }

    #[test]
    fn an_approval_offers_approve_and_reject_and_a_boolean_yes_and_no() {
        let answers = quick_answers(&approval(), EMAIL_MAX_CHOICES);
        let values: Vec<_> = answers.iter().map(|a| (a.value.clone(), a.label.as_str(), a.style)).collect();
        assert_eq!(
            values,
            [(json!(true), "Approve", AnswerStyle::Primary), (json!(false), "Reject", AnswerStyle::Danger)]
        );
        let boolean = Question { response_type: ResponseType::Boolean, ..approval() };
        let labels: Vec<_> = quick_answers(&boolean, 2).into_iter().map(|a| a.label).collect();
        assert_eq!(labels, ["Yes", "No"]);
    }

    #[test]
    fn a_choice_offers_its_options_only_up_to_the_channels_limit() {
        let answers = quick_answers(&choice(6), EMAIL_MAX_CHOICES);
        assert_eq!(answers.len(), 6);
        assert_eq!(answers[2].value, json!("region-2"));
        assert_eq!(answers[2].label, "Region <2>");
        assert!(quick_answers(&choice(7), EMAIL_MAX_CHOICES).is_empty());
        assert!(quick_answers(&choice(3), PUSH_MAX_CHOICES).is_empty());
    }

    #[test]
    fn text_questions_and_resolved_questions_offer_no_quick_answer() {
        assert!(quick_answers(&text(), EMAIL_MAX_CHOICES).is_empty());
        let answered = Question { status: QuestionStatus::Answered, ..approval() };
        assert!(quick_answers(&answered, EMAIL_MAX_CHOICES).is_empty());
    }

    #[test]
    fn truncation_counts_characters_and_marks_the_cut() {
        assert_eq!(truncate_chars("héllo", 5), "héllo");
        assert_eq!(truncate_chars("héllo wörld", 5), "héll…");
        assert_eq!(truncate_chars("héllo wörld", 5).chars().count(), 5);
    }

    #[test]
    fn the_deadline_says_what_happens_when_it_passes() {
        assert_eq!(deadline_text(&approval()).unwrap(), "2026-11-27 14:05 UTC (then it expires)");
        let with_default = Question {
            default_response: Some(holdpoint_types::AnswerBody {
                value: json!(false),
                comment: None,
                edited_arguments: None,
            }),
            ..approval()
        };
        assert_eq!(deadline_text(&with_default).unwrap(), "2026-11-27 14:05 UTC (then the default applies: false)");
        assert_eq!(deadline_text(&Question { timeout_at: None, ..approval() }), None);
    }

    #[test]
    fn the_keys_round_trip_through_their_stored_form_and_stay_out_of_debug() {
        let keys = ChannelKeys::generate();
        let stored = keys.to_stored();
        let again = ChannelKeys::from_stored(&stored).unwrap();
        assert_eq!(again.action_links.encoded(), keys.action_links.encoded());
        assert_eq!(again.vapid.encoded(), keys.vapid.encoded());
        let debug = format!("{keys:?}");
        assert!(!debug.contains(&keys.action_links.encoded()) && !debug.contains(&keys.vapid.encoded()), "{debug}");
        assert!(ChannelKeys::from_stored("{}").is_err());
        assert!(
            ChannelKeys::from_stored(&stored.replace("vapid_private_key\":\"", "vapid_private_key\":\"x")).is_err()
        );
    }

    /// The examples `docs/notifications.md` shows (`docs/examples/`) are what the channels send for an approval. After
    /// a change to a message, run this test with `HOLDPOINT_BLESS=1` to write them again, and look at them.
    #[test]
    fn the_documented_examples_are_what_the_channels_send() {
        let question = Question {
            title: "Deploy web 2.4.0 to production?".into(),
            body: "Staging has run **2.4.0** for 24 hours with an error rate of 0.02 %.\n\nThe plan resizes the API \
                   group from 6 to 8 instances."
                .into(),
            action: Some(holdpoint_types::ApprovalAction {
                tool_name: "shell".into(),
                arguments: json!({"command": "terraform apply -auto-approve", "workdir": "infra/prod"}),
            }),
            context: json!({"change": "CHG-2291", "requested_by": "release-agent"}),
            ..approval()
        };
        let open = question_url("https://holdpoint.example.com", question.id);
        let links: Vec<action_links::ActionLink> = quick_answers(&question, EMAIL_MAX_CHOICES)
            .into_iter()
            .map(|answer| action_links::ActionLink {
                url: format!("https://holdpoint.example.com/act/<signed token: {}>", answer.label.to_lowercase()),
                id: Uuid::nil(),
                answer,
            })
            .collect();
        let email = email::render_question(&question, &links, &open);
        let slack = slack::question_message(&question, &open);
        let slack = serde_json::to_string_pretty(&json!({"text": slack.text, "blocks": slack.blocks})).unwrap();
        let examples = [
            ("email-approval.txt", format!("Subject: {}\n\n{}", email.subject, email.text)),
            ("email-approval.html", email.html),
            ("slack-approval.json", format!("{slack}\n")),
        ];
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples");
        for (name, content) in examples {
            let path = dir.join(name);
            if std::env::var_os("HOLDPOINT_BLESS").is_some() {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &content).unwrap();
            }
            let documented = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                documented == content,
                "docs/examples/{name} is not what Holdpoint sends: run with HOLDPOINT_BLESS=1"
            );
        }
    }

    #[test]
    fn a_question_opens_under_the_public_url() {
        let id = approval().id;
        assert_eq!(question_url("https://hp.example.com/", id), format!("https://hp.example.com/questions/{id}"));
    }
}
