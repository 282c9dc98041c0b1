//! Asking a question, the one way every door asks: the question prepared (its assignee checked or picked in turn,
//! the escalation plan of its workspace's policy) and recorded with its `question_asked` event, who it reaches and
//! the older blocking questions of its run it supersedes — or, when a live grant covers the tool call it asks
//! about, recorded approved by the grant.

use crate::store::Json;
use chrono::{Duration, SubsecRound};
use holdpoint_types::{
    AnswerBody, Assignee, Escalation, NewQuestion, QuestionKind, QuestionStatus, Resolution, ResponseType, Role,
};
use serde_json::Value;
use uuid::Uuid;

use super::{TimeoutBounds, build_question, delegation, transition};
use crate::error::AppError;
use crate::events::EventHub;
use crate::metrics::Metrics;
use crate::store::{
    AskedWith, EscalationPolicyRow, IdempotencyKey, NewEvent, QuestionResolution, QuestionRow, QuestionTransition,
    Store, StoreResult,
};

/// Asking a question, the one way every door asks (REST, MCP, the worker protocol, the executor): [`Asking::prepare`]
/// validates what was asked, the door adds what it knows (a run's lineage, a client's ids), and
/// [`Asking::record`] stores it with its `question_asked` event.
#[derive(Clone)]
pub struct Asking<'a> {
    pub store: &'a dyn Store,
    pub metrics: &'a Metrics,
    /// This instance's event hub, which keeps a question asked here in memory while it is pending (the cycle's
    /// reads then skip the database); `None` where no hub runs (a run the CLI executes against a server).
    pub hub: Option<&'a EventHub>,
    pub bounds: TimeoutBounds,
    /// The channels outside Holdpoint's pages the questions asked here are delivered on.
    pub sends_on: &'a crate::notifications::SendsOn,
    /// Which `callback_url`s a question may name.
    pub callbacks: crate::channels::webhooks::UrlPolicy,
    /// The largest upload the server takes (`HOLDPOINT_MAX_UPLOAD_BYTES`): a `file` field or question may not promise
    /// more.
    pub max_upload_bytes: u64,
}

/// Gives a new question the plan of its workspace's policy for its kind and urgency, if there is one.
async fn plan_escalation(store: &dyn Store, row: &mut QuestionRow) -> StoreResult<()> {
    if store.relays_to_server() {
        return Ok(());
    }
    let policy = store.escalation_policy(row.workspace_id, row.kind, row.urgency).await?;
    if let Some(policy) = policy {
        plan_by(row, &policy);
    }
    Ok(())
}

/// Sets the plan `policy` gives `row`: each step's time counted from its asking.
fn plan_by(row: &mut QuestionRow, policy: &EscalationPolicyRow) {
    // At the precision the databases keep, so the step's condition finds the time it was given.
    let after = |seconds: Option<i64>| seconds.map(|s| (row.created_at + Duration::seconds(s)).trunc_subsecs(6));
    let escalation = Escalation {
        remind_at: after(policy.remind_after_seconds),
        reminded_at: None,
        escalate_at: after(policy.escalate_after_seconds),
        escalate_to: policy.escalate_to.as_ref().map(|to| to.0.clone()),
        escalated_at: None,
    };
    row.next_escalation_at = escalation.next_step().map(|(_, at)| at);
    row.escalation = Some(Json(escalation));
}

/// The idempotency key of the question a run asks about one of its tool calls (`call`, the call's row id): a run asks
/// once per call, however often a worker that took it over asks again. Its scope is the REST API's, whose keys
/// begin with their caller's id and so never meet these.
pub fn tool_call_key(workspace_id: Uuid, call: Uuid) -> IdempotencyKey {
    use sha2::Digest;
    let key = format!("tool-call:{call}");
    let request_hash = sha2::Sha256::digest(key.as_bytes()).to_vec();
    IdempotencyKey { workspace_id, scope: "questions", key, request_hash }
}

/// A recorded question: the stored one (the first one, for a repeated idempotency key) and, when this call created
/// it, its JSON as its event carries it.
pub struct Asked {
    pub question: QuestionRow,
    pub json: Option<Box<serde_json::value::RawValue>>,
}

impl Asking<'_> {
    /// A new question from `input` in `workspace_id`, asked by `created_by`: its fields checked, its timeout
    /// within the bounds, its assignee someone who may answer it.
    pub async fn prepare(
        &self,
        input: NewQuestion,
        workspace_id: Uuid,
        created_by: Option<Uuid>,
    ) -> Result<QuestionRow, AppError> {
        let round_robin = input
            .assignee
            .as_ref()
            .filter(|requested| requested.strategy == Some(holdpoint_types::AssignStrategy::RoundRobin))
            .and_then(|requested| requested.role);
        // Only a file's `max_bytes` is bounded here; another type's is refused for being there (`build_question`).
        let own = (input.response_type == Some(ResponseType::File)).then(|| ("max_bytes".to_owned(), &input.rules));
        let fields = input.fields.iter().enumerate().filter(|(_, field)| field.response_type == ResponseType::File);
        let fields = fields.map(|(i, field)| (format!("fields[{i}].max_bytes"), &field.rules));
        for (name, rules) in own.into_iter().chain(fields) {
            if rules.max_bytes.is_some_and(|max| max > self.max_upload_bytes) {
                let limit = self.max_upload_bytes;
                let message = format!("may be at most {limit} (the server's largest upload)");
                return Err(AppError::invalid_field(&name, message));
            }
        }
        let mut row = build_question(input, workspace_id, created_by, self.bounds, crate::store::now())?;
        if let Some(url) = &row.callback_url
            && let Err(problem) = self.callbacks.check(url).await
        {
            return Err(AppError::invalid_field("callback_url", problem));
        }
        check_assignee(self.store, &row).await?;
        if let Some(role) = round_robin {
            row.assignee = Some(Json(Assignee::User(take_turn(self.store, &row, role).await?)));
        }
        plan_escalation(self.store, &mut row).await?;
        Ok(row)
    }

    /// Stores a prepared question with its `question_asked` event (in one transaction) and counts it. With an
    /// idempotency key seen before, nothing is stored and the first question is returned.
    pub async fn record(
        &self,
        row: &QuestionRow,
        workspace: &str,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Asked> {
        let members = crate::notifications::members(self.store, row.workspace_id).await?;
        // Assigned to someone away: it goes to who stands in for them, and the audit says so, in the same write.
        let (delegated, audit) = match delegation::delegated(row, &members, row.created_at) {
            Some((delegated, entry)) => (Some(delegated), vec![entry]),
            None => (None, Vec::new()),
        };
        let row = delegated.as_ref().unwrap_or(row);
        // Serialised once: the event's data and a door's answer carry the same text.
        let question = crate::store::event_data(&row.to_question(workspace)?)?;
        let event = NewEvent {
            workspace_id: row.workspace_id,
            event_type: holdpoint_types::EventType::QuestionAsked,
            project: row.project.clone(),
            run_id: row.run_id,
            question_id: Some(row.id),
            data: crate::store::question_event_data_around(&question)?,
            created_at: row.created_at,
        };
        // Read only where pushes are sent: a server without them asks without this read.
        let push_subscribers =
            if self.sends_on.push { self.store.push_subscribers(row.workspace_id).await? } else { Vec::new() };
        let with = AskedWith {
            supersedes: self.superseded_by(row, workspace).await?,
            reach: crate::notifications::reach(row, &members, self.sends_on, &push_subscribers)?,
            audit,
            answered_by_grant: None,
        };
        // Remembered before the write, so its answer cannot come before it is.
        if let Some(hub) = self.hub {
            hub.remember_asked(row);
        }
        let created = self.store.create_question(row, &event, idempotency, &with).await;
        let forget = || {
            if let Some(hub) = self.hub {
                hub.forget_asked(row.id);
            }
        };
        match created {
            Ok(created) if created.created => {
                if let (Some(hub), false) = (self.hub, with.reach.deliveries.is_empty()) {
                    hub.deliveries_queued();
                }
                self.metrics.question_created(row.kind.as_str());
                Ok(Asked { question: created.value, json: Some(question) })
            }
            Ok(repeated) => {
                forget();
                Ok(Asked { question: repeated.value, json: None })
            }
            Err(err) => {
                forget();
                Err(err)
            }
        }
    }
}

impl Asking<'_> {
    /// Stores a prepared question as [`Asking::record`] does, unless it asks to approve a tool call a live grant
    /// covers: then it is stored approved by the grant, asked and answered in the write that counts and
    /// audits the grant's use, and reaches no one. A question that needs several approvals, or names who may give
    /// it, is always asked: one person's grant does not stand for them.
    pub async fn record_unless_granted(
        &self,
        row: &QuestionRow,
        workspace: &str,
        idempotency: Option<&IdempotencyKey>,
    ) -> StoreResult<Asked> {
        let grantable = row.kind == QuestionKind::Approval && row.required_approvals <= 1 && row.eligible.is_none();
        let Some(action) = row.action.as_ref().filter(|_| grantable) else {
            return self.record(row, workspace, idempotency).await;
        };
        // One indexed read when no grant of the tool is live; the run is read only when one is.
        let live = self.store.live_grants(row.workspace_id, &action.tool_name, row.created_at).await?;
        if live.is_empty() {
            return self.record(row, workspace, idempotency).await;
        }
        let run = match (row.run_id, &row.tool_call_id) {
            (Some(run_id), Some(_)) => self.store.run(row.workspace_id, run_id).await?,
            _ => None,
        };
        let call = crate::grants::Call {
            workspace_id: row.workspace_id,
            tool_name: &action.tool_name,
            arguments: &action.arguments,
            run_id: row.run_id,
            agent: crate::grants::agent_of_question(row, run.as_ref()),
        };
        for grant in live.iter().filter(|grant| crate::grants::covers(grant, &call)) {
            match self.record_granted(row, workspace, idempotency, grant, &call).await {
                // Revoked or expired since it was read: the next one may still cover the call.
                Err(crate::store::StoreError::GrantNotLive) => continue,
                recorded => return recorded,
            }
        }
        self.record(row, workspace, idempotency).await
    }

    /// Stores `row` approved by `grant`, which covers its `call`.
    async fn record_granted(
        &self,
        row: &QuestionRow,
        workspace: &str,
        idempotency: Option<&IdempotencyKey>,
        grant: &crate::store::GrantRow,
        call: &crate::grants::Call<'_>,
    ) -> StoreResult<Asked> {
        let (asked, with) = approved_by_grant(row, workspace, grant, call)?;
        let created = self.store.create_question(row, &asked, idempotency, &with).await?;
        let Some(approved) =
            with.answered_by_grant.filter(|_| created.created).map(|granted| granted.transition.resolved)
        else {
            return Ok(Asked { question: created.value, json: None });
        };
        self.metrics.question_created(approved.kind.as_str());
        self.metrics.question_resolved(approved.kind.as_str(), approved.status.as_str(), std::time::Duration::ZERO);
        let json = crate::store::event_data(&approved.to_question(workspace)?)?;
        Ok(Asked { question: approved, json: Some(json) })
    }
}

/// What asking `row` (of workspace `workspace`) writes when `grant`, which covers its `call`, approves it as it is
/// asked: its `question_asked` event, and with it the approval (its `question_answered` event and audit entry) and
/// the grant's use.
pub fn approved_by_grant(
    row: &QuestionRow,
    workspace: &str,
    grant: &crate::store::GrantRow,
    call: &crate::grants::Call<'_>,
) -> StoreResult<(NewEvent, AskedWith)> {
    let approval = QuestionResolution {
        status: QuestionStatus::Answered,
        response: Some(AnswerBody {
            value: Value::Bool(true),
            comment: Some(format!("Covered by a grant from {}, so nobody was asked.", grant.created_by)),
            edited_arguments: None,
        }),
        answered_by: Some(crate::grants::GRANT_DECIDER.to_owned()),
        resolution: Some(Resolution::Policy),
        at: row.created_at,
        actor: crate::store::AuditActor::policy(crate::grants::GRANT_DECIDER, Some(grant.id.to_string())),
    };
    let transition = transition(row, &approval, workspace)?;
    // The asked event carries the question as the write leaves it, answered: no page offers it to anyone.
    let asked = NewEvent {
        workspace_id: row.workspace_id,
        event_type: holdpoint_types::EventType::QuestionAsked,
        project: row.project.clone(),
        run_id: row.run_id,
        question_id: Some(row.id),
        data: crate::store::question_event_data(&transition.resolved.to_question(workspace)?)?,
        created_at: row.created_at,
    };
    let used = crate::grants::use_entry(grant, call, serde_json::json!({ "question_id": row.id }), row.created_at);
    let with = AskedWith {
        answered_by_grant: Some(crate::store::AnsweredByGrant { grant_id: grant.id, transition, used }),
        ..AskedWith::default()
    };
    Ok((asked, with))
}

impl Asking<'_> {
    /// A new blocking question on a run cancels that run's older pending blocking ones, as the run's
    /// lifecycle (the audit's actor). A run asks one question at a time (its executor holds the run's lease), so
    /// what is pending when it asks is what the new question supersedes; the store cancels those still pending
    /// when it stores the new one.
    async fn superseded_by(&self, row: &QuestionRow, workspace: &str) -> StoreResult<Vec<QuestionTransition>> {
        let (Some(run_id), QuestionKind::Blocking) = (row.run_id, row.kind) else { return Ok(Vec::new()) };
        let change = QuestionResolution::cancelled(
            Some("superseded by a newer blocking question of the same run".into()),
            None,
            row.created_at,
            crate::store::AuditActor::policy(crate::audit::RUN_LIFECYCLE, Some(run_id.to_string())),
        );
        let mut superseded = Vec::new();
        for id in self.store.pending_question_ids(row.workspace_id, run_id).await? {
            let Some(old) = self.store.question(row.workspace_id, id).await? else { continue };
            if old.id != row.id && old.kind == QuestionKind::Blocking && old.status == QuestionStatus::Pending {
                superseded.push(transition(&old, &change, workspace)?);
            }
        }
        Ok(superseded)
    }
}

/// The member of `role` (exactly) whose round-robin turn it is for `row`: 422 if the role may not answer such a
/// question or has no member.
async fn take_turn(store: &dyn Store, row: &QuestionRow, role: Role) -> Result<String, AppError> {
    let needed = if row.kind == QuestionKind::Approval { Role::Approver } else { Role::Responder };
    if role.rank() < needed.rank() {
        return Err(AppError::invalid_field(
            "assignee.role",
            format!("{} may not answer {} questions", role.with_article(), row.kind.as_str().replace('_', " ")),
        ));
    }
    store.take_assignment_turn(row.workspace_id, role, row.created_at).await?.ok_or_else(|| {
        AppError::invalid_field("assignee.role", format!("no member of this workspace is {}", role.with_article()))
    })
}

/// Checks a new question's assignee against the workspace: a named person must be a member who may answer
/// questions of its kind, a role must be a human one. Refuses with 422.
pub async fn check_assignee(store: &dyn Store, row: &QuestionRow) -> Result<(), AppError> {
    let Some(assignee) = &row.assignee else {
        return Ok(());
    };
    if store.relays_to_server() {
        return Ok(());
    }
    match assignee_problem(store, row.workspace_id, row.kind, &assignee.0).await? {
        Some((field, message)) => Err(AppError::invalid_field(&format!("assignee.{field}"), message)),
        None => Ok(()),
    }
}

/// What is wrong with `assignee` for a question of `kind` in `workspace_id`, as `(field, message)` with `field` the
/// assignee's own (`role` or `user`); `None` when it may answer such a question.
pub async fn assignee_problem(
    store: &dyn Store,
    workspace_id: Uuid,
    kind: QuestionKind,
    assignee: &Assignee,
) -> StoreResult<Option<(&'static str, String)>> {
    let needed = if kind == QuestionKind::Approval { Role::Approver } else { Role::Responder };
    match assignee {
        Assignee::Role(role) if *role == Role::Agent || *role == Role::Viewer => {
            Ok(Some(("role", format!("must be a role that may answer: responder, approver or admin, not {role}"))))
        }
        Assignee::Role(_) => Ok(None),
        Assignee::User(username) => {
            let member = match store.user_by_username(username).await? {
                Some(user) => store.member(workspace_id, user.id).await?,
                None => None,
            };
            Ok(match member.map(|m| m.role) {
                None => Some(("user", format!("{username:?} is not a member of this workspace"))),
                Some(role) if role.rank() < needed.rank() => {
                    Some(("user", format!("{username} is {}, who may not answer this question", role.with_article())))
                }
                Some(_) => None,
            })
        }
    }
}
