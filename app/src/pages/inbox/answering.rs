//! Answering from the list: what the rows, the keyboard and the split view share ([`Inbox`]), the one-click answers a
//! row offers, and the answers they send.

use std::collections::HashMap;

use leptos::prelude::*;
use serde_json::Value;
use uuid::Uuid;

use crate::api::post_json;
use crate::types::{
    AnswerBody, Decider, Question, QuestionStatus, QuestionSummary, ResponseType, SessionInfo, Urgency, answer_in_words,
};

/// What a row answered from the list is doing: waiting for the server, or refused with the server's reason.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RowState {
    Sending,
    Failed(String),
}

/// The answer a row's one-click action gives: `true`/`false` for a yes/no question or an approval, an option's
/// value for a choice. `None` when the row has no such action (its question needs its page or the split view), or
/// when the question is not `viewer`'s to decide (see [`QuestionSummary::refusal_to_decide`]).
fn quick_answer(question: &QuestionSummary, action: RowAction, viewer: Option<Decider<'_>>) -> Option<Value> {
    if viewer.is_some_and(|viewer| question.refusal_to_decide(viewer).is_some()) {
        return None;
    }
    let yes_no = matches!(question.response_type, ResponseType::Boolean | ResponseType::Approval);
    match action {
        RowAction::Affirm if yes_no => Some(Value::Bool(true)),
        RowAction::Refuse if yes_no => Some(Value::Bool(false)),
        RowAction::Choice(index) => question.choices.get(index).map(|o| Value::String(o.value.clone())),
        _ => None,
    }
}

/// A row's one-click actions: Yes or Approve, No or Reject, and the nth choice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum RowAction {
    Affirm,
    Refuse,
    Choice(usize),
}

/// Everything the rows, the keyboard and the split view share on the inbox page.
#[derive(Clone, Copy)]
pub(crate) struct Inbox {
    pub(super) shown: Memo<Vec<QuestionSummary>>,
    /// The row the keyboard is on (by id, so live insertions above it do not move it); the split view shows it.
    pub(super) cursor: RwSignal<Option<Uuid>>,
    /// Rows marked with `x` or their checkbox, for one answer to all of them.
    pub(super) marked: RwSignal<Vec<Uuid>>,
    pub(super) states: RwSignal<HashMap<Uuid, RowState>>,
    /// Questions answered from this page, as the server returned them: they leave a pending list at once, without
    /// waiting for the event stream to say so.
    pub(super) answered: RwSignal<Vec<Question>>,
    /// The last answer sent from the list, said in a notice.
    pub(super) notice: RwSignal<Option<String>>,
    /// A batch that holds a critical question, waiting for a confirmation: whether it affirms.
    pub(super) confirming: RwSignal<Option<bool>>,
    pub(super) shortcuts_open: RwSignal<bool>,
    /// Who is signed in; `None` if the page could not tell, and then the server decides each answer alone.
    pub(super) viewer: StoredValue<Option<SessionInfo>>,
}

/// Sends answers from the list (see [`Inbox::answer`]; part of the deferred module, see [`crate::deferred`]).
pub(crate) fn send_row_answers(inbox: Inbox, answers: Vec<(Uuid, Value)>) {
    inbox.send(answers);
}

impl Inbox {
    /// Sends `answers` (question id, value), one after the other; each row shows its outcome, and the cursor moves on from
    /// a row that leaves the list. Each is an answer of its own (`POST /questions/{id}/answer`, as the live modal
    /// sends), so one refused answer leaves the others standing.
    fn answer(self, answers: Vec<(Uuid, Value)>) {
        if !answers.is_empty() {
            crate::deferred::answer_rows(self, answers);
        }
    }

    fn send(self, answers: Vec<(Uuid, Value)>) {
        self.states.update(|states| {
            for (id, _) in &answers {
                states.insert(*id, RowState::Sending);
            }
        });
        // Where the cursor goes if its row is answered, chosen now: the event stream may take the row out of the
        // list before the answer's own response arrives.
        let leaving: Vec<Uuid> = answers.iter().map(|(id, _)| *id).collect();
        let cursor = self.cursor.get_untracked();
        let next = cursor.filter(|c| leaving.contains(c)).map(|c| self.next_after(c, &leaving));
        leptos::task::spawn_local(async move {
            let mut outcomes = Vec::with_capacity(answers.len());
            for (id, value) in answers {
                let body = AnswerBody { value, comment: None, edited_arguments: None };
                outcomes.push((id, post_json::<_, Question>(&format!("/questions/{id}/answer"), &body).await));
            }
            let mut done = Vec::new();
            self.states.update(|states| {
                for (id, outcome) in outcomes {
                    match outcome {
                        Ok(question) => {
                            states.remove(&id);
                            done.push(question);
                        }
                        Err(err) => {
                            states.insert(id, RowState::Failed(err.describe()));
                        }
                    }
                }
            });
            if done.is_empty() {
                return;
            }
            let ids: Vec<Uuid> = done.iter().map(|q| q.id).collect();
            if let Some(next) =
                next.filter(|_| self.cursor.get_untracked() == cursor && cursor.is_some_and(|c| ids.contains(&c)))
            {
                self.cursor.set(next);
            }
            self.marked.update(|marked| marked.retain(|id| !ids.contains(id)));
            self.notice.set(Some(answered_from_rows(&done)));
            self.answered.update(|answered| answered.extend(done));
        });
    }

    /// The row after `id` that is not leaving with `leaving`, else the one before: where the cursor goes when its
    /// row is answered.
    pub(super) fn next_after(self, id: Uuid, leaving: &[Uuid]) -> Option<Uuid> {
        self.shown.with_untracked(|shown| {
            let at = shown.iter().position(|q| q.id == id)?;
            let staying = |q: &&QuestionSummary| !leaving.contains(&q.id);
            shown[at + 1..].iter().find(staying).or_else(|| shown[..at].iter().rev().find(staying)).map(|q| q.id)
        })
    }

    /// The answer `action` gives `question`, if its row offers it to the viewer (see [`quick_answer`]).
    fn quick_answer(self, question: &QuestionSummary, action: RowAction) -> Option<Value> {
        self.viewer.with_value(|viewer| quick_answer(question, action, viewer.as_ref().map(SessionInfo::decider)))
    }

    /// Why the viewer may not decide `question`, said on its row in place of its one-click answers.
    pub(super) fn refusal(self, question: &QuestionSummary) -> Option<String> {
        self.viewer.with_value(|viewer| viewer.as_ref().and_then(|viewer| question.refusal_to_decide(viewer.decider())))
    }

    /// One action on one row, if the row has it.
    pub(super) fn act(self, id: Uuid, action: RowAction) {
        let value = self
            .shown
            .with_untracked(|shown| shown.iter().find(|q| q.id == id).and_then(|q| self.quick_answer(q, action)));
        if let Some(value) = value {
            self.answer(vec![(id, value)]);
        }
    }

    /// Yes/approve (`affirm`) or no/reject for every marked row that takes it; a batch with a critical question
    /// waits for a confirmation first.
    pub(super) fn act_on_marked(self, affirm: bool, confirmed: bool) {
        let action = if affirm { RowAction::Affirm } else { RowAction::Refuse };
        let (answers, critical) = self.marked.with_untracked(|marked| {
            self.shown.with_untracked(|shown| {
                let chosen: Vec<&QuestionSummary> = shown.iter().filter(|q| marked.contains(&q.id)).collect();
                let answers: Vec<(Uuid, Value)> =
                    chosen.iter().filter_map(|q| self.quick_answer(q, action).map(|v| (q.id, v))).collect();
                let critical =
                    chosen.iter().any(|q| q.urgency == Urgency::Critical && self.quick_answer(q, action).is_some());
                (answers, critical)
            })
        });
        if critical && answers.len() > 1 && !confirmed {
            self.confirming.set(Some(affirm));
            return;
        }
        self.confirming.set(None);
        self.answer(answers);
    }

    pub(super) fn toggle_mark(self, id: Uuid) {
        self.marked.update(|marked| {
            if let Some(at) = marked.iter().position(|m| *m == id) {
                marked.remove(at);
            } else {
                marked.push(id);
            }
        });
    }
}

/// What the list says once rows were answered from it (`done`, as the server returned them): an approval of several
/// is recorded, not answered, and says where its quorum stands.
fn answered_from_rows(done: &[Question]) -> String {
    let waiting = done.iter().filter(|q| q.status == QuestionStatus::Pending).count();
    match done {
        [one] if waiting == 1 => crate::components::answered_notice(one),
        [one] => format!(
            "Answered “{}”: {}",
            one.title,
            one.response.as_ref().map(|r| answer_in_words(one, &r.value)).unwrap_or_default()
        ),
        many if waiting == 0 => format!("Answered {} questions.", many.len()),
        many => format!("Answered {} questions; {waiting} of them wait for more approvals.", many.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::*;

    fn question(title: &str, status: QuestionStatus) -> Question {
        crate::types::sample_question(title, status)
    }

    #[test]
    fn a_row_answers_yes_no_and_approvals_with_a_boolean_and_a_short_choice_with_its_value() {
        let summary = |response_type, options: &[&str]| {
            let mut q = question("q", QuestionStatus::Pending);
            q.response_type = response_type;
            q.options = options
                .iter()
                .map(|v| QuestionOption { value: (*v).into(), label: v.to_uppercase(), description: None })
                .collect();
            QuestionSummary::from(&q)
        };
        for response_type in [ResponseType::Boolean, ResponseType::Approval] {
            let row = summary(response_type, &[]);
            assert_eq!(quick_answer(&row, RowAction::Affirm, None), Some(Value::Bool(true)));
            assert_eq!(quick_answer(&row, RowAction::Refuse, None), Some(Value::Bool(false)));
            assert_eq!(quick_answer(&row, RowAction::Choice(0), None), None);
        }
        let choice = summary(ResponseType::Choice, &["eu", "us"]);
        assert_eq!(quick_answer(&choice, RowAction::Choice(1), None), Some(Value::String("us".into())));
        assert_eq!(quick_answer(&choice, RowAction::Choice(2), None), None, "there is no third option");
        assert_eq!(quick_answer(&choice, RowAction::Affirm, None), None);
        let long = summary(ResponseType::Choice, &["a", "b", "c", "d"]);
        assert_eq!(quick_answer(&long, RowAction::Choice(0), None), None, "four options are answered on the page");
        assert_eq!(quick_answer(&summary(ResponseType::Text, &[]), RowAction::Affirm, None), None);
    }

    #[test]
    fn a_row_offers_its_answers_only_to_whom_the_question_allows() {
        let mut approval = question("Deploy?", QuestionStatus::Pending);
        approval.kind = QuestionKind::Approval;
        approval.response_type = ResponseType::Approval;
        approval.eligible = Some(Eligible::Users(vec!["nadia".into()]));
        let row = QuestionSummary::from(&approval);
        let as_person = |name, role| Some(Decider { role, name, account: true });
        assert_eq!(quick_answer(&row, RowAction::Affirm, as_person("nadia", Role::Approver)), Some(Value::Bool(true)));
        assert_eq!(quick_answer(&row, RowAction::Affirm, as_person("erin", Role::Approver)), None, "not named");
        assert_eq!(quick_answer(&row, RowAction::Refuse, as_person("erin", Role::Admin)), None, "not named either");
        let token = Some(Decider { role: Role::Approver, name: "nadia", account: false });
        assert_eq!(quick_answer(&row, RowAction::Affirm, token), None, "a token that merely has her name");

        let mut assigned = question("Which region?", QuestionStatus::Pending);
        assigned.response_type = ResponseType::Choice;
        assigned.options = vec![QuestionOption { value: "eu".into(), label: "EU".into(), description: None }];
        assigned.assignee = Some(Assignee::User("nadia".into()));
        let row = QuestionSummary::from(&assigned);
        assert_eq!(quick_answer(&row, RowAction::Choice(0), as_person("erin", Role::Responder)), None);
        assert_eq!(
            quick_answer(&row, RowAction::Choice(0), as_person("nadia", Role::Responder)),
            Some(Value::String("eu".into()))
        );
        assert_eq!(quick_answer(&row, RowAction::Choice(0), as_person("nadia", Role::Viewer)), None, "a viewer");
    }

    #[test]
    fn an_approval_of_several_answered_from_a_row_says_where_its_quorum_stands() {
        let mut partial = crate::types::sample_question("Deploy?", QuestionStatus::Pending);
        partial.required_approvals = 2;
        partial.approvals =
            vec![crate::types::Approval { by: "alice".into(), at: chrono::Utc::now(), comment: None, person_id: None }];
        assert_eq!(answered_from_rows(std::slice::from_ref(&partial)), "Approval recorded for “Deploy?”: 1 of 2");
        let mut done = crate::types::sample_question("Ship?", QuestionStatus::Answered);
        done.response = Some(crate::types::AnswerBody { value: true.into(), comment: None, edited_arguments: None });
        assert_eq!(
            answered_from_rows(&[done.clone(), partial]),
            "Answered 2 questions; 1 of them wait for more approvals."
        );
        assert!(answered_from_rows(&[done]).starts_with("Answered “Ship?”: "));
    }
}
