//! Wire types of grants (spec §14): "always allow" rules an approver makes while approving a tool call, which let
//! later calls of the same tool with matching arguments through without asking, until they expire or are revoked.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::UnknownVariant;

wire_enum! {
    /// Which calls a grant covers.
    GrantScope {
        /// The calls of the run the approved call belongs to.
        Run = "run",
        /// The calls of every run of the same agent (for a question asked directly, of the same token).
        Agent = "agent",
        /// Every call in the workspace (admins only).
        Workspace = "workspace",
    }
}

/// What a call's arguments must be for a grant to let it through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ArgumentMatcher {
    /// Exactly these arguments (JSON equality).
    Equals(Value),
    /// For `shell`: a `command` that is this prefix, or this prefix followed by a space and more words, made only
    /// of characters that cannot chain or redirect commands (no `;`, `&`, `|`, `$`, backticks, `<`, `>`, newlines,
    /// parentheses or backslashes).
    CommandPrefix(String),
}

/// The `grant` of an approval's answer: make this call's kind a grant as it is approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    pub scope: GrantScope,
    /// Defaults to `{"equals": <the approved arguments>}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<ArgumentMatcher>,
    /// How long it lasts: 60 s ..= 30 days, default 24 h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(minimum = 60, maximum = 2_592_000))]
    pub expires_in_seconds: Option<i64>,
}

/// A grant as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct Grant {
    pub id: Uuid,
    pub scope: GrantScope,
    /// The run a `run` grant covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    /// Who an `agent` grant covers: `agent:<id>`, an agent definition the server executes, or `token:<id>`, a token
    /// (or person) asking about its own calls — directly, or in a run it executes as a client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    pub tool_name: String,
    pub matcher: ArgumentMatcher,
    /// Who made it (username or token name), from which question.
    pub created_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_id: Option<Uuid>,
    #[serde(deserialize_with = "super::time::required", serialize_with = "super::time::write")]
    pub created_at: DateTime<Utc>,
    #[serde(deserialize_with = "super::time::required", serialize_with = "super::time::write")]
    pub expires_at: DateTime<Utc>,
    #[serde(default, deserialize_with = "super::time::optional", serialize_with = "super::time::write_optional")]
    pub revoked_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
    /// How many calls it let through.
    pub uses: i64,
    #[serde(default, deserialize_with = "super::time::optional", serialize_with = "super::time::write_optional")]
    pub last_used_at: Option<DateTime<Utc>>,
}

/// `GET /questions/{id}/approved-before`: how often the same call (tool and arguments) was approved by a person
/// in the last 30 days, for the offer to make it a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(utoipa::ToSchema))]
pub struct ApprovedBefore {
    pub approved_by_hand: u32,
}

impl Grant {
    /// Whether it lets calls through at `now`: neither revoked nor expired.
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at > now
    }
}

/// What a grant's matcher makes of `arguments` (a call of its tool): whether it lets the call through.
pub fn matcher_allows(matcher: &ArgumentMatcher, arguments: &Value) -> bool {
    match matcher {
        ArgumentMatcher::Equals(expected) => expected == arguments,
        ArgumentMatcher::CommandPrefix(prefix) => {
            let Some(command) = arguments.get("command").and_then(Value::as_str) else { return false };
            let prefix = prefix.trim();
            if prefix.is_empty() || !command.chars().all(is_plain_command_char) {
                return false;
            }
            let command = command.trim();
            match command.strip_prefix(prefix) {
                Some("") => true,
                Some(rest) => rest.starts_with([' ', '\t']),
                None => false,
            }
        }
    }
}

/// A character a command a prefix grant lets through may contain: nothing a shell reads as chaining, substituting
/// or redirecting.
pub fn is_plain_command_char(c: char) -> bool {
    c.is_alphanumeric() || " \t-_./:=,@%+'\"~^*?[]{}#!".contains(c)
}

/// How a matcher reads for people: `git status …` or the arguments' JSON.
pub fn describe_matcher(matcher: &ArgumentMatcher) -> String {
    match matcher {
        ArgumentMatcher::Equals(value) => format!("exactly {value}"),
        ArgumentMatcher::CommandPrefix(prefix) => format!("commands starting with “{prefix}”"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_command_prefix_never_widens_beyond_whole_words_of_plain_commands() {
        let prefix = ArgumentMatcher::CommandPrefix("git status".into());
        let allows = |command: &str| matcher_allows(&prefix, &json!({ "command": command }));
        assert!(allows("git status"));
        assert!(allows("git status --short"));
        assert!(allows("  git status -s  "));
        for chained in [
            "git status; rm -rf /",
            "git status && rm -rf /",
            "git status || rm -rf /",
            "git status | sh",
            "git status $(rm -rf /)",
            "git status `rm -rf /`",
            "git status > /etc/passwd",
            "git status < /dev/zero",
            "git status\nrm -rf /",
            "git status & rm -rf /",
            "git status (true)",
            "git status \\; rm",
        ] {
            assert!(!allows(chained), "{chained:?}");
        }
        assert!(!allows("git statusx"), "a longer word is another command");
        assert!(!allows("git stat"));
        assert!(!allows("sudo git status"));
        assert!(!matcher_allows(&prefix, &json!({ "cmd": "git status" })), "no command, no match");
    }

    #[test]
    fn an_equals_matcher_needs_the_same_json() {
        let equals = ArgumentMatcher::Equals(json!({ "url": "https://example.com", "method": "GET" }));
        assert!(matcher_allows(&equals, &json!({ "method": "GET", "url": "https://example.com" })));
        assert!(!matcher_allows(&equals, &json!({ "method": "POST", "url": "https://example.com" })));
        assert!(!matcher_allows(&equals, &json!({ "method": "GET", "url": "https://example.com", "body": "x" })));
    }
}
