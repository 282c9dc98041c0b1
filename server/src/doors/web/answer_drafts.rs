//! What a person sent from the question page's plain form (the one that works without JavaScript) when the answer
//! was refused: kept in memory for a while, so the page they are sent back to shows their inputs again with each
//! problem beside its input instead of an empty form. Per person and question; gone once the question is answered
//! through the form, after [`DRAFT_TTL`], or when [`DRAFTS_MAX`] newer ones push it out. (On a server of several
//! instances, the page may be served by another instance and show the form empty, with the refusal's sentence.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use app::AnswerDraft;
use uuid::Uuid;

/// How long a refused answer's inputs are kept.
pub const DRAFT_TTL: Duration = Duration::from_secs(60 * 60);
/// The most drafts kept at once; the oldest go first.
pub const DRAFTS_MAX: usize = 1_000;

/// The drafts, by person and question.
#[derive(Default)]
pub struct AnswerDrafts(Mutex<Book>);

/// The drafts with when each was kept, and the order they were kept in (instants can be equal).
#[derive(Default)]
struct Book {
    drafts: HashMap<(Uuid, Uuid), (Instant, u64, AnswerDraft)>,
    kept: u64,
}

impl AnswerDrafts {
    /// Keeps `draft` for `person`'s answer to `question`, replacing an older one.
    pub fn keep(&self, person: Uuid, question: Uuid, draft: AnswerDraft) {
        let now = Instant::now();
        let mut book = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        book.kept += 1;
        let order = book.kept;
        book.drafts.retain(|_, (at, _, _)| now.duration_since(*at) < DRAFT_TTL);
        if book.drafts.len() >= DRAFTS_MAX
            && let Some(oldest) = book.drafts.iter().min_by_key(|(_, (_, order, _))| *order).map(|(key, _)| *key)
        {
            book.drafts.remove(&oldest);
        }
        book.drafts.insert((person, question), (now, order, draft));
    }

    /// The draft of `person`'s answer to `question`, if one is kept.
    pub fn get(&self, person: Uuid, question: Uuid) -> Option<AnswerDraft> {
        let book = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        book.drafts
            .get(&(person, question))
            .filter(|(at, _, _)| at.elapsed() < DRAFT_TTL)
            .map(|(_, _, draft)| draft.clone())
    }

    /// Forgets the draft of `person`'s answer to `question`.
    pub fn forget(&self, person: Uuid, question: Uuid) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).drafts.remove(&(person, question));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draft_is_kept_per_person_and_question_until_forgotten() {
        let drafts = AnswerDrafts::default();
        let (alice, bob, question) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let draft = AnswerDraft { values: vec![("value".into(), "x".into())], ..Default::default() };
        drafts.keep(alice, question, draft.clone());
        assert_eq!(drafts.get(alice, question), Some(draft));
        assert_eq!(drafts.get(bob, question), None, "someone else's draft is not shown");
        drafts.forget(alice, question);
        assert_eq!(drafts.get(alice, question), None);
    }

    #[test]
    fn the_oldest_draft_goes_when_the_book_is_full() {
        let drafts = AnswerDrafts::default();
        let person = Uuid::now_v7();
        let first = Uuid::now_v7();
        drafts.keep(person, first, AnswerDraft::default());
        for _ in 0..DRAFTS_MAX {
            drafts.keep(person, Uuid::now_v7(), AnswerDraft::default());
        }
        assert_eq!(drafts.get(person, first), None);
    }
}
