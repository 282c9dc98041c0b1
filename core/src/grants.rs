//! Grants: "always allow" rules an approver makes while approving a tool call. Which calls a grant
//! covers, checking a grant request against the question it comes with, consulting the live grants before a call
//! is asked about (the executor, MCP's `request_approval`, `POST /questions`), listing and revoking.

use crate::store::Json;
use chrono::{DateTime, Duration, Utc};
use holdpoint_types::{ArgumentMatcher, Grant, GrantRequest, GrantScope, Page, Question, QuestionKind, Role};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::actions;
use crate::credentials::Caller;
use crate::error::AppError;
use crate::store::{AuditActor, GrantRow, NewAuditEntry, Store, StoreResult};
use crate::validation::FieldErrors;

/// How long a grant lasts unless its maker says otherwise, and the bounds of what they may say.
pub const DEFAULT_LIFETIME_SECONDS: i64 = 24 * 3600;
pub const MIN_LIFETIME_SECONDS: i64 = 60;
pub const MAX_LIFETIME_SECONDS: i64 = 30 * 24 * 3600;
/// The tool whose calls a command prefix may match.
const SHELL: &str = "shell";
/// The longest command prefix.
const PREFIX_MAX_CHARS: usize = 500;

/// What a call is, for the grants that may cover it: its tool and arguments, and who is calling.
pub struct Call<'a> {
    pub workspace_id: Uuid,
    pub tool_name: &'a str,
    pub arguments: &'a Value,
    /// The run it belongs to, if any.
    pub run_id: Option<Uuid>,
    /// Who is calling, as an `agent` grant is bound to it: see [`agent_of_run`] and [`agent_of_question`].
    pub agent: Option<String>,
}

/// The `agent` a call of `run` comes from, as an `agent` grant is bound to it: for a run the server executes, the
/// agent definition it runs (`agent:<id>`), which only an admin can change; for a run a client executes, whoever
/// started it (`token:<id>`), since that client decides its calls whatever agent the run names. Never an agent's
/// name: any agent token may run any agent, and a name would let one token's grants cover another's calls. `None`
/// for an inline definition the server executes (no agent to bind to).
pub fn agent_of_run(run: &crate::store::RunRow) -> Option<String> {
    match run.executor {
        holdpoint_types::RunExecutor::Server => run.agent_id.map(|id| format!("agent:{id}")),
        holdpoint_types::RunExecutor::Client => run.created_by.map(token_agent),
    }
}

/// The `agent` of a question, as an `agent` grant is bound to it: a tool-call approval of a run is its run's
/// ([`agent_of_run`]); any other question comes from the token (or person) that asked it (`token:<id>`), naming a
/// run or not: asking with a run's id does not make a caller that run's agent.
pub fn agent_of_question(row: &crate::store::QuestionRow, run: Option<&crate::store::RunRow>) -> Option<String> {
    match run {
        Some(run) if row.tool_call_id.is_some() && row.run_id == Some(run.id) => agent_of_run(run),
        _ => row.created_by.map(token_agent),
    }
}

/// The `agent` of the calls a token (or person) asks about itself (MCP's `request_approval`, `POST /questions`, a
/// run it executes as a client): its own id, which no other token shares.
pub fn token_agent(principal_id: Uuid) -> String {
    format!("token:{principal_id}")
}

/// Checks a grant request that comes with an approval of `question` (the answer approves it, with `arguments`
/// the ones it runs with) and makes the grant; 422 naming the faulty `grant.*` field, 403 for a workspace grant by
/// someone not an admin.
pub fn grant_from_answer(
    caller: &Caller,
    question: &Question,
    agent: Option<String>,
    arguments: &Value,
    request: &GrantRequest,
    now: DateTime<Utc>,
) -> Result<GrantRow, AppError> {
    let mut errors = FieldErrors::default();
    let Some(action) = question.action.as_ref().filter(|_| question.kind == QuestionKind::Approval) else {
        return Err(AppError::invalid_field("grant", "only the approval of a tool call can make a grant"));
    };
    if request.scope == GrantScope::Workspace && caller.role() != Role::Admin {
        return Err(AppError::Forbidden("only an admin may make a grant for the whole workspace".into()));
    }
    match request.scope {
        GrantScope::Run if question.run_id.is_none() => {
            errors.add("grant.scope", "this approval belongs to no run: choose agent or workspace")
        }
        GrantScope::Agent if agent.is_none() => errors.add("grant.scope", "this approval has no agent to scope to"),
        _ => {}
    }
    let matcher = match request.matcher.clone() {
        None => ArgumentMatcher::Equals { equals: arguments.clone() },
        // A prefix covers the command only: every other argument is recorded as the approved call has it, and a
        // call with another (or an extra one) is asked about.
        Some(ArgumentMatcher::CommandPrefix { command_prefix, other_arguments }) => {
            let approved = holdpoint_types::other_arguments(arguments);
            if !other_arguments.is_empty() && other_arguments != approved {
                errors.add(
                    "grant.matcher.other_arguments",
                    "must be the arguments being approved besides command (or left out)",
                );
            }
            ArgumentMatcher::CommandPrefix {
                command_prefix: command_prefix.trim().to_owned(),
                other_arguments: approved,
            }
        }
        Some(matcher) => matcher,
    };
    match &matcher {
        ArgumentMatcher::CommandPrefix { .. } if action.tool_name != SHELL => {
            errors.add("grant.matcher", format!("a command prefix matches shell calls, not {}", action.tool_name))
        }
        ArgumentMatcher::CommandPrefix { command_prefix: prefix, .. } => {
            if prefix.is_empty() || prefix.chars().count() > PREFIX_MAX_CHARS {
                errors.add("grant.matcher.command_prefix", format!("must have 1..={PREFIX_MAX_CHARS} characters"));
            } else if !prefix.chars().all(holdpoint_types::is_plain_command_char) {
                errors.add(
                    "grant.matcher.command_prefix",
                    "must not contain characters that chain, substitute or redirect commands",
                );
            } else if !holdpoint_types::matcher_allows(&matcher, arguments) {
                errors.add("grant.matcher.command_prefix", "must match the command being approved");
            }
        }
        ArgumentMatcher::Equals { equals } if equals != arguments => {
            errors.add("grant.matcher.equals", "must be the arguments being approved")
        }
        ArgumentMatcher::Equals { .. } => {}
    }
    let lifetime = request.expires_in_seconds.unwrap_or(DEFAULT_LIFETIME_SECONDS);
    if !(MIN_LIFETIME_SECONDS..=MAX_LIFETIME_SECONDS).contains(&lifetime) {
        errors.add(
            "grant.expires_in_seconds",
            format!("must be within {MIN_LIFETIME_SECONDS}..={MAX_LIFETIME_SECONDS} (30 days)"),
        );
    }
    errors.into_result("the grant")?;
    Ok(GrantRow {
        id: Uuid::now_v7(),
        workspace_id: caller.workspace_id(),
        scope: request.scope,
        run_id: (request.scope == GrantScope::Run).then_some(question.run_id).flatten(),
        agent: (request.scope == GrantScope::Agent).then_some(agent).flatten(),
        tool_name: action.tool_name.clone(),
        matcher: Json(matcher),
        created_by: caller.principal.name.clone(),
        created_by_id: Some(caller.principal.id),
        question_id: Some(question.id),
        created_at: now,
        expires_at: now + Duration::seconds(lifetime),
        revoked_at: None,
        revoked_by: None,
        uses: 0,
        last_used_at: None,
    })
}

/// Stores a grant made with an answer, with its audit entry.
pub async fn record(store: &dyn Store, caller: &Caller, grant: &GrantRow) -> StoreResult<()> {
    let audit = NewAuditEntry {
        workspace_id: grant.workspace_id,
        actor: caller.into(),
        action: actions::GRANT_CREATED.into(),
        subject_type: "grant".into(),
        subject_id: Some(grant.id.to_string()),
        before: None,
        after: Some(grant_json(grant)),
        diff: None,
        created_at: grant.created_at,
    };
    store.insert_grant(grant, &audit).await
}

fn grant_json(grant: &GrantRow) -> Value {
    json!({
        "scope": grant.scope,
        "run_id": grant.run_id,
        "agent": grant.agent,
        "tool_name": grant.tool_name,
        "matcher": grant.matcher.0,
        "expires_at": grant.expires_at,
        "question_id": grant.question_id,
    })
}

/// A tool call of a run, as the grants that may cover it see it: its agent is the run's ([`agent_of_run`]).
pub fn call_of_run<'a>(run: &'a crate::store::RunRow, call: &'a crate::store::ToolCallRow) -> Call<'a> {
    Call {
        workspace_id: run.workspace_id,
        tool_name: &call.tool_name,
        arguments: &call.input.0,
        run_id: Some(run.id),
        agent: agent_of_run(run),
    }
}

/// Whether `grant` covers `call`: its scope takes the call in and its matcher allows the arguments.
pub fn covers(grant: &GrantRow, call: &Call<'_>) -> bool {
    let in_scope = match grant.scope {
        GrantScope::Run => grant.run_id.is_some() && grant.run_id == call.run_id,
        GrantScope::Agent => grant.agent.is_some() && grant.agent == call.agent,
        GrantScope::Workspace => true,
    };
    in_scope
        && grant.workspace_id == call.workspace_id
        && grant.tool_name == call.tool_name
        && holdpoint_types::matcher_allows(&grant.matcher.0, call.arguments)
}

/// The live grant that lets `call` through without asking, its use counted and audited (with the grant and its
/// maker) in one write; `None` when none covers it, and a person must be asked.
pub async fn let_through(store: &dyn Store, call: &Call<'_>, extra: Value) -> StoreResult<Option<GrantRow>> {
    let now = crate::store::now();
    let covering =
        store.live_grants(call.workspace_id, call.tool_name, now).await?.into_iter().filter(|g| covers(g, call));
    for grant in covering {
        // Revoked or expired since it was read: the next one may still cover the call.
        if store.use_grant(call.workspace_id, grant.id, now, &use_entry(&grant, call, extra.clone(), now)).await? {
            return Ok(Some(grant));
        }
    }
    Ok(None)
}

/// The audit entry of a call `grant` let through at `at`: the call, the grant's maker and matcher, and `extra`.
pub fn use_entry(grant: &GrantRow, call: &Call<'_>, extra: Value, at: DateTime<Utc>) -> NewAuditEntry {
    let mut after = json!({
        "tool_name": call.tool_name,
        "arguments": call.arguments,
        "run_id": call.run_id,
        "agent": call.agent,
        "grant_created_by": grant.created_by,
        "matcher": grant.matcher.0,
    });
    if let (Some(after), Value::Object(extra)) = (after.as_object_mut(), extra) {
        after.extend(extra);
    }
    NewAuditEntry {
        workspace_id: call.workspace_id,
        actor: AuditActor::policy(GRANT_DECIDER, Some(grant.id.to_string())),
        action: actions::GRANT_USED.into(),
        subject_type: "grant".into(),
        subject_id: Some(grant.id.to_string()),
        before: None,
        after: Some(after),
        diff: None,
        created_at: at,
    }
}

/// Who decided a call a grant let through, as its tool call and the audit record it.
pub const GRANT_DECIDER: &str = "grant";

/// `GET /grants`: any member may read what is allowed without asking (newest first; `all` includes revoked and
/// expired ones).
pub async fn list(
    store: &dyn Store,
    caller: &Caller,
    all: bool,
    before: Option<Uuid>,
    limit: u32,
) -> Result<Page<Grant>, AppError> {
    if caller.role() == Role::Agent {
        return Err(AppError::Forbidden("an agent token may not read grants".into()));
    }
    let live_at = (!all).then(crate::store::now);
    let mut rows = store.grants(caller.workspace_id(), live_at, before, limit + 1).await?;
    let next_cursor = if rows.len() > limit as usize {
        rows.truncate(limit as usize);
        rows.last().map(|row| row.id.to_string())
    } else {
        None
    };
    Ok(Page { items: rows.iter().map(GrantRow::to_grant).collect(), next_cursor })
}

/// `POST /grants/{id}/revoke`: its maker or an admin ends it at once; 409 if it was revoked already.
pub async fn revoke(store: &dyn Store, caller: &Caller, id: Uuid) -> Result<Grant, AppError> {
    let grant = store.grant(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("grant"))?;
    if grant.created_by_id != Some(caller.principal.id) && caller.role() != Role::Admin {
        return Err(AppError::Forbidden("only whoever made a grant, or an admin, may revoke it".into()));
    }
    if grant.revoked_at.is_some() {
        return Err(AppError::Conflict { message: "the grant is already revoked".into(), details: None });
    }
    let now = crate::store::now();
    let audit = NewAuditEntry {
        workspace_id: grant.workspace_id,
        actor: caller.into(),
        action: actions::GRANT_REVOKED.into(),
        subject_type: "grant".into(),
        subject_id: Some(grant.id.to_string()),
        before: Some(grant_json(&grant)),
        after: Some(json!({ "revoked_at": now, "uses": grant.uses })),
        diff: None,
        created_at: now,
    };
    if !store.revoke_grant(grant.workspace_id, id, now, &caller.principal.name, &audit).await? {
        return Err(AppError::Conflict { message: "the grant is already revoked".into(), details: None });
    }
    let revoked = store.grant(grant.workspace_id, id).await?.ok_or(AppError::NotFound("grant"))?;
    Ok(revoked.to_grant())
}

/// `GET /questions/{id}/approved-before`: how often a person approved exactly this call in the last 30 days (at
/// most [`APPROVED_BEFORE_CAP`]), for the offer to make it a grant.
pub async fn approved_before(
    store: &dyn Store,
    caller: &Caller,
    id: Uuid,
) -> Result<holdpoint_types::ApprovedBefore, AppError> {
    let question = store.question(caller.workspace_id(), id).await?.ok_or(AppError::NotFound("question"))?;
    if !caller.visibility().sees(question.created_by) {
        return Err(AppError::NotFound("question"));
    }
    let Some(action) = &question.action else { return Ok(holdpoint_types::ApprovedBefore { approved_by_hand: 0 }) };
    let since = crate::store::now() - Duration::days(30);
    let count = store
        .approved_by_hand(caller.workspace_id(), &action.0.tool_name, &action.0.arguments, since, APPROVED_BEFORE_CAP)
        .await?;
    Ok(holdpoint_types::ApprovedBefore { approved_by_hand: count })
}

/// The most earlier approvals `approved_before` counts: enough to say "many".
const APPROVED_BEFORE_CAP: u32 = 100;

#[cfg(test)]
mod tests {
    use holdpoint_types::{ArgumentMatcher, matcher_allows};
    use serde_json::json;

    /// A command prefix grant lets a call through only when the command has the prefix and every other argument is
    /// the one the approved call had: a `cwd` elsewhere, or an argument the approved call did not have, is asked.
    #[test]
    fn a_command_prefix_covers_the_command_and_the_other_arguments_only_as_recorded() {
        let bare = ArgumentMatcher::command_prefix("git status");
        let in_repo: ArgumentMatcher =
            serde_json::from_value(json!({ "command_prefix": "git status", "other_arguments": { "cwd": "/repo" } }))
                .unwrap();
        let table = [
            (&bare, json!({ "command": "git status" }), true),
            (&bare, json!({ "command": "git status -s" }), true),
            (&bare, json!({ "command": "git status", "cwd": "/tmp/x" }), false),
            (&bare, json!({ "command": "git status", "timeout_seconds": 1 }), false),
            (&bare, json!({ "command": "git status", "cwd": null }), false),
            (&bare, json!({ "command": "git push" }), false),
            (&bare, json!(["git status"]), false),
            (&in_repo, json!({ "command": "git status -s", "cwd": "/repo" }), true),
            (&in_repo, json!({ "cwd": "/repo", "command": "git status" }), true),
            (&in_repo, json!({ "command": "git status", "cwd": "/tmp/attacker-repo" }), false),
            (&in_repo, json!({ "command": "git status", "cwd": "/repo/" }), false),
            (&in_repo, json!({ "command": "git status" }), false),
            (&in_repo, json!({ "command": "git status", "cwd": "/repo", "timeout_seconds": 1 }), false),
            (&in_repo, json!({ "command": "git status; rm -rf /", "cwd": "/repo" }), false),
        ];
        for (matcher, arguments, allowed) in table {
            assert_eq!(matcher_allows(matcher, &arguments), allowed, "{matcher:?} on {arguments}");
        }
    }

    /// Grants stored as `{"command_prefix": …}` read as covering calls with no other argument; a matcher is one
    /// kind or the other, never both, and nothing unknown.
    #[test]
    fn a_matcher_reads_and_writes_its_wire_form() {
        let stored: ArgumentMatcher = serde_json::from_value(json!({ "command_prefix": "make" })).unwrap();
        assert_eq!(stored, ArgumentMatcher::command_prefix("make"));
        assert_eq!(serde_json::to_value(&stored).unwrap(), json!({ "command_prefix": "make" }));
        let with_cwd = json!({ "command_prefix": "make", "other_arguments": { "cwd": "/src" } });
        let read: ArgumentMatcher = serde_json::from_value(with_cwd.clone()).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap(), with_cwd);
        let equals: ArgumentMatcher = serde_json::from_value(json!({ "equals": { "n": 1 } })).unwrap();
        assert_eq!(equals, ArgumentMatcher::Equals { equals: json!({ "n": 1 }) });
        for refused in [
            json!({}),
            json!({ "equals": {}, "command_prefix": "make" }),
            json!({ "command_prefix": "make", "cwd": "/src" }),
            json!({ "equals": {}, "other_arguments": {} }),
            json!({ "command_prefix": ["make"] }),
        ] {
            assert!(serde_json::from_value::<ArgumentMatcher>(refused.clone()).is_err(), "{refused}");
        }
    }
}
