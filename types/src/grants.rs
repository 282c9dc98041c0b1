//! Wire types of grants: "always allow" rules an approver makes while approving a tool call, which let
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

/// What a call's arguments must be for a grant to let it through: `{"equals": …}` or `{"command_prefix": …,
/// "other_arguments": {…}}`. Every argument is covered: no matcher leaves one free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(untagged, deny_unknown_fields)]
pub enum ArgumentMatcher {
    /// Exactly these arguments (JSON equality).
    Equals { equals: Value },
    /// For `shell`: a `command` that is this prefix, or this prefix followed by a space and more words, made only
    /// of characters that cannot chain or redirect commands (no `;`, `&`, `|`, `$`, backticks, `<`, `>`, newlines,
    /// parentheses or backslashes); and every other argument exactly as in `other_arguments`.
    CommandPrefix {
        command_prefix: String,
        /// The call's arguments besides `command`, exactly (a `cwd`, a `timeout_seconds`): one missing here must be
        /// missing from the call. Recorded from the approved call when the grant is made, so a request may leave
        /// it out; given, it must be the approved call's.
        #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
        #[cfg_attr(feature = "server", schema(value_type = Object))]
        other_arguments: serde_json::Map<String, Value>,
    },
}

impl ArgumentMatcher {
    /// `{"command_prefix": prefix}` with no other arguments.
    pub fn command_prefix(prefix: impl Into<String>) -> Self {
        ArgumentMatcher::CommandPrefix { command_prefix: prefix.into(), other_arguments: serde_json::Map::new() }
    }
}

/// The `grant` of an approval's answer: make this call's kind a grant as it is approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    pub scope: GrantScope,
    /// Defaults to `{"equals": <the approved arguments>}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<ArgumentMatcher>,
    /// How long it lasts: 60 s ..= 30 days, default 24 h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "server", schema(minimum = 60, maximum = 2_592_000))]
    pub expires_in_seconds: Option<i64>,
}

/// A grant as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
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
        ArgumentMatcher::Equals { equals } => equals == arguments,
        ArgumentMatcher::CommandPrefix { command_prefix, other_arguments } => {
            let Some(arguments) = arguments.as_object() else { return false };
            let Some(command) = arguments.get("command").and_then(Value::as_str) else { return false };
            // Every argument but the command is the approved call's: a `cwd` elsewhere runs the same command on
            // someone else's repository (its hooks, its configuration).
            let others_match = arguments.len() == other_arguments.len() + 1
                && other_arguments.iter().all(|(name, value)| name != "command" && arguments.get(name) == Some(value));
            others_match && command_has_prefix(command, command_prefix)
        }
    }
}

/// Whether a shell `command` is `prefix` or `prefix` and more words, made only of plain characters.
fn command_has_prefix(command: &str, prefix: &str) -> bool {
    let prefix = prefix.trim();
    if prefix.is_empty() || !command.chars().all(is_plain_command_char) {
        return false;
    }
    match command.trim().strip_prefix(prefix) {
        Some("") => true,
        Some(rest) => rest.starts_with([' ', '\t']),
        None => false,
    }
}

/// The arguments of a `shell` call besides its `command`: what a command prefix grant records of the approved call.
pub fn other_arguments(arguments: &Value) -> serde_json::Map<String, Value> {
    let mut others = arguments.as_object().cloned().unwrap_or_default();
    others.remove("command");
    others
}

/// A character a command a prefix grant lets through may contain: nothing a shell reads as chaining, substituting
/// or redirecting.
pub fn is_plain_command_char(c: char) -> bool {
    c.is_alphanumeric() || " \t-_./:=,@%+'\"~^*?[]{}#!".contains(c)
}

/// How a matcher reads for people: `git status …` or the arguments' JSON.
pub fn describe_matcher(matcher: &ArgumentMatcher) -> String {
    match matcher {
        ArgumentMatcher::Equals { equals } => format!("exactly {equals}"),
        ArgumentMatcher::CommandPrefix { command_prefix, other_arguments } if other_arguments.is_empty() => {
            format!("commands starting with “{command_prefix}”")
        }
        ArgumentMatcher::CommandPrefix { command_prefix, other_arguments } => {
            format!("commands starting with “{command_prefix}” with exactly {}", Value::Object(other_arguments.clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_command_prefix_never_widens_beyond_whole_words_of_plain_commands() {
        let prefix = ArgumentMatcher::command_prefix("git status");
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
        let equals = ArgumentMatcher::Equals { equals: json!({ "url": "https://example.com", "method": "GET" }) };
        assert!(matcher_allows(&equals, &json!({ "method": "GET", "url": "https://example.com" })));
        assert!(!matcher_allows(&equals, &json!({ "method": "POST", "url": "https://example.com" })));
        assert!(!matcher_allows(&equals, &json!({ "method": "GET", "url": "https://example.com", "body": "x" })));
    }
}
