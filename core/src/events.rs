//! The event hub: follows the event log in id order and fans each event out to every subscriber.
//!
//! The log in the database is the source of truth. The hub reads it after every commit that appended events (the
//! store's watch channel, which on PostgreSQL also carries other instances' commits, by LISTEN/NOTIFY) and, as a
//! safety net for writers it is not told about, every second. On SQLite, a commit of a single event hands the event
//! over with the announcement ([`crate::store::HandedOver`]), and the hub passes on the run of handed-over events
//! that follows the last one it sent without reading them back. Commits of one batch tell in any order: an event
//! missing before one handed over is waited for a moment, then read from the log. (On PostgreSQL ids are drawn
//! inside the commit, so every event is read from the log.) Subscribers get
//! events through a bounded broadcast channel; one that falls behind is dropped and reconnects with its last id,
//! so a slow client never holds up the others.
//!
//! The hub also remembers the questions asked through this instance until an event shows them leaving `pending`
//! (`AskedHere`), which serves the long-poll's and the answer's reads of a HITL cycle without the database.
//!
//! Long-polls waiting on one question register with the hub by the question's id ([`EventHub::watch_question`]):
//! an event wakes the waiters of its own question only. With a broadcast receiver each, every event woke every
//! waiter (16 agents waiting: 16 wake-ups for each event, most for nothing), and a waiter that fell further behind
//! than the buffer gave up and answered with the question still pending, before its time was up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use holdpoint_types::EventType;
use tokio::sync::{broadcast, oneshot};
use uuid::Uuid;

use crate::store::{Committed, QuestionRow, Store};

/// How many events the hub reads from the log at a time.
const READ_BATCH: i64 = 1000;
/// How often the hub looks at the log even when nobody told it of a commit.
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long the hub waits for a commit to hand over an event that a later one's did before it: commits of one
/// batch are told in any order, moments apart. A commit that never tells (its task was dropped) is read from the
/// log after this.
const GAP_WAIT: Duration = Duration::from_millis(50);

/// What the hub does after a commit was told.
enum HandOut {
    /// Every event told of is sent.
    Done,
    /// Some were not handed over: read them from the log.
    ReadLog,
    /// An event before one handed over is missing: wait for its commit to tell, up to [`GAP_WAIT`].
    Gap,
}

pub use crate::store::HubEvent;

/// A handle on the hub; cheap to clone.
#[derive(Clone)]
pub struct EventHub {
    sender: broadcast::Sender<Arc<HubEvent>>,
    /// The id of the newest event handed to subscribers (or about to be: it is raised before sending).
    position: Arc<AtomicI64>,
    watches: Arc<Watches>,
    asked: Arc<AskedHere>,
    /// How many event streams each principal holds open here.
    streams: Arc<Mutex<HashMap<Uuid, usize>>>,
    /// Raised when this instance has written deliveries, for its outbox to send them at once.
    deliveries_queued: Arc<tokio::sync::Notify>,
}

/// One open event stream of a principal, counted until it is dropped.
pub struct StreamSlot {
    streams: Arc<Mutex<HashMap<Uuid, usize>>>,
    principal: Uuid,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = streams.get_mut(&self.principal) {
            *open -= 1;
            if *open == 0 {
                streams.remove(&self.principal);
            }
        }
    }
}

/// Questions asked through this instance that no event has shown leaving `pending`, as they were stored, so that
/// the two reads of a HITL cycle (the agent's long-poll, the person's answer) need no trip to the database.
///
/// A question changes only by leaving `pending`, and every such change appends an event, which the hub sees
/// (another instance's too, from the log) and which evicts the question *before* it fires the question's watches.
/// So a question found here is exactly as stored, or has just left `pending` and its event is on its way: a
/// long-poll registers its watch before it looks, so that event still wakes it, and an answer's `UPDATE` is
/// conditional on `pending`, so it finds out. Reads that must see a change the moment it commits (`GET`) go to the
/// database.
#[derive(Default)]
struct AskedHere(Mutex<std::collections::BTreeMap<Uuid, Arc<QuestionRow>>>);

impl AskedHere {
    /// How many are kept; the oldest go first (ids are v7 UUIDs), and are read from the database.
    const KEPT: usize = 10_000;

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<Uuid, Arc<QuestionRow>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The registered [`QuestionWatch`]es, by question id, each under a key of its own.
#[derive(Default)]
struct Watches {
    by_question: Mutex<WatchesByQuestion>,
    next_key: AtomicU64,
}

type WatchesByQuestion = HashMap<Uuid, Vec<(u64, oneshot::Sender<Arc<HubEvent>>)>>;

impl Watches {
    fn lock(&self) -> std::sync::MutexGuard<'_, WatchesByQuestion> {
        self.by_question.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Fires once, with the next event of one question after it was registered (other than its `question_asked`).
/// Dropping it unregisters it.
pub struct QuestionWatch {
    watches: Arc<Watches>,
    question_id: Uuid,
    key: u64,
    event: oneshot::Receiver<Arc<HubEvent>>,
}

impl QuestionWatch {
    /// The question's next event; `None` if the hub stopped first.
    pub async fn next_event(&mut self) -> Option<Arc<HubEvent>> {
        (&mut self.event).await.ok()
    }
}

impl Drop for QuestionWatch {
    fn drop(&mut self) {
        let mut by_question = self.watches.lock();
        if let Some(waiting) = by_question.get_mut(&self.question_id) {
            waiting.retain(|(key, _)| *key != self.key);
            if waiting.is_empty() {
                by_question.remove(&self.question_id);
            }
        }
    }
}

impl EventHub {
    /// Starts following the log from its current end.
    /// `buffer`: how many events a subscriber may fall behind before it is told to reconnect.
    pub async fn start(store: Arc<dyn Store>, buffer: usize) -> crate::store::StoreResult<Self> {
        let start = store.last_event_id().await?;
        let (sender, _) = broadcast::channel(buffer.max(1));
        let hub = EventHub {
            sender,
            position: Arc::new(AtomicI64::new(start)),
            watches: Arc::default(),
            asked: Arc::default(),
            streams: Arc::default(),
            deliveries_queued: Arc::default(),
        };
        tokio::spawn(hub.clone().follow(store));
        Ok(hub)
    }

    /// A receiver of every event sent from now on, and the id of the newest event sent before it.
    ///
    /// Subscribe *before* replaying from the log: every event above the returned id either comes through the
    /// receiver or is already in the log.
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<HubEvent>>, i64) {
        let receiver = self.sender.subscribe();
        (receiver, self.position.load(Ordering::SeqCst))
    }

    /// Counts a new event stream of `principal`, or `None` if it holds `most` open already.
    pub fn open_stream(&self, principal: Uuid, most: usize) -> Option<StreamSlot> {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        let open = streams.entry(principal).or_insert(0);
        if *open >= most {
            return None;
        }
        *open += 1;
        Some(StreamSlot { streams: Arc::clone(&self.streams), principal })
    }

    /// A watch on one question's next event (see [`QuestionWatch`]).
    ///
    /// Register *before* reading the question: an event after the read then fires the watch.
    pub fn watch_question(&self, question_id: Uuid) -> QuestionWatch {
        let key = self.watches.next_key.fetch_add(1, Ordering::Relaxed);
        let (sender, event) = oneshot::channel();
        self.watches.lock().entry(question_id).or_default().push((key, sender));
        QuestionWatch { watches: Arc::clone(&self.watches), question_id, key, event }
    }

    /// Remembers a question about to be stored as asked (see [`AskedHere`]); call [`EventHub::forget_asked`] if it
    /// was not stored after all. Before the write, so its answer cannot come before it is remembered.
    pub fn remember_asked(&self, row: &QuestionRow) {
        let mut asked = self.asked.lock();
        asked.insert(row.id, Arc::new(row.clone()));
        while asked.len() > AskedHere::KEPT {
            asked.pop_first();
        }
    }

    pub fn forget_asked(&self, id: Uuid) {
        self.asked.lock().remove(&id);
    }

    /// A question asked through this instance, as stored, while no event has shown it leaving `pending`; `None`
    /// means "read it from the database". Not for reads that must see a change the moment it commits.
    pub fn asked_and_pending(&self, workspace_id: Uuid, id: Uuid) -> Option<Arc<QuestionRow>> {
        self.asked.lock().get(&id).filter(|row| row.workspace_id == workspace_id).cloned()
    }

    /// Tells this instance's outbox that deliveries were written (kept until it next looks, if it is busy).
    pub fn deliveries_queued(&self) {
        self.deliveries_queued.notify_one();
    }

    /// Until [`EventHub::deliveries_queued`] is called (at once if it was since the last wait).
    pub async fn until_deliveries_queued(&self) {
        self.deliveries_queued.notified().await;
    }

    /// The id of the newest event handed to subscribers: a page rendered now opens its stream from here, so it
    /// misses nothing that happens between its render and its connection.
    pub fn position(&self) -> i64 {
        self.position.load(Ordering::SeqCst)
    }

    /// How many clients are subscribed.
    pub fn subscriber_count(&self) -> usize {
        self.sender.receiver_count()
    }

    async fn follow(self, store: Arc<dyn Store>) {
        let mut committed = store.committed_events();
        let mut read_log = true;
        // Set while the events handed over skip an id: the log is read if it is still missing then.
        let mut gap_deadline: Option<tokio::time::Instant> = None;
        loop {
            if read_log {
                gap_deadline = None;
                if let Err(err) = self.drain(store.as_ref()).await {
                    tracing::warn!(error = %err, "could not read the event log; retrying");
                    tokio::time::sleep(POLL_INTERVAL).await;
                }
            }
            let wake = gap_deadline.unwrap_or_else(|| tokio::time::Instant::now() + POLL_INTERVAL);
            tokio::select! {
                changed = committed.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let newest = committed.borrow_and_update().clone();
                    read_log = match self.hand_out_committed(&newest) {
                        HandOut::Done => {
                            gap_deadline = None;
                            false
                        }
                        HandOut::ReadLog => true,
                        HandOut::Gap => {
                            gap_deadline.get_or_insert_with(|| tokio::time::Instant::now() + GAP_WAIT);
                            false
                        }
                    };
                }
                () = tokio::time::sleep_until(wake) => read_log = true,
            }
        }
    }

    /// Passes on the events commits handed over that follow the last one sent, which spares reading them back.
    fn hand_out_committed(&self, newest: &Committed) -> HandOut {
        let position = self.position.load(Ordering::SeqCst);
        if newest.last <= position {
            return HandOut::Done;
        }
        if newest.read_through > position {
            return HandOut::ReadLog;
        }
        for event in newest.handed_over.following(position) {
            self.send(event);
        }
        if self.position.load(Ordering::SeqCst) >= newest.last { HandOut::Done } else { HandOut::Gap }
    }

    async fn drain(&self, store: &dyn Store) -> crate::store::StoreResult<()> {
        loop {
            let after = self.position.load(Ordering::SeqCst);
            let rows = store.events_after(after, READ_BATCH).await?;
            let full = rows.len() as i64 == READ_BATCH;
            for row in &rows {
                self.send(Arc::new(HubEvent::from(row)));
            }
            if !full {
                return Ok(());
            }
        }
    }

    fn send(&self, event: Arc<HubEvent>) {
        self.position.store(event.id, Ordering::SeqCst);
        if let Some(question_id) = event.question_id
            && event.event_type != EventType::QuestionAsked.as_str()
        {
            // Before the watches fire: a long-poll that finds the question here registered its watch first. A step of
            // its escalation, a claim or an approval changes who may answer it, so the remembered row goes too.
            self.asked.lock().remove(&question_id);
            // Watches wait for the question to leave `pending`, which an escalation step, a claim and an approval
            // short of the quorum do not do.
            let stays_pending = [
                EventType::QuestionReminded,
                EventType::QuestionEscalated,
                EventType::QuestionClaimed,
                EventType::QuestionApprovalAdded,
            ]
            .iter()
            .any(|kind| event.event_type == kind.as_str());
            if !stays_pending {
                let fired = self.watches.lock().remove(&question_id);
                for (_, watch) in fired.into_iter().flatten() {
                    let _ = watch.send(Arc::clone(&event));
                }
            }
        }
        // No subscribers is not an error: the event is in the log for whoever connects later.
        let _ = self.sender.send(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub() -> EventHub {
        EventHub {
            sender: broadcast::channel(4).0,
            position: Arc::default(),
            watches: Arc::default(),
            asked: Arc::default(),
            streams: Arc::default(),
            deliveries_queued: Arc::default(),
        }
    }

    fn event(id: i64, event_type: EventType, question_id: Uuid) -> Arc<HubEvent> {
        Arc::new(HubEvent {
            id,
            workspace_id: Uuid::nil(),
            event_type: event_type.as_str().to_owned(),
            project: None,
            run_id: None,
            question_id: Some(question_id),
            data: "{}".to_owned(),
            created_at: chrono::Utc::now(),
        })
    }

    #[tokio::test]
    async fn an_event_fires_the_watches_of_its_own_question_only() {
        let hub = hub();
        let (mine, other) = (Uuid::now_v7(), Uuid::now_v7());
        let mut first = hub.watch_question(mine);
        let mut second = hub.watch_question(mine);
        let mut elsewhere = hub.watch_question(other);
        hub.send(event(1, EventType::QuestionAsked, mine));
        hub.send(event(2, EventType::QuestionAnswered, mine));
        assert_eq!(first.next_event().await.map(|e| e.id), Some(2), "the question's asking does not fire it");
        assert_eq!(second.next_event().await.map(|e| e.id), Some(2));
        let pending = tokio::time::timeout(Duration::from_millis(20), elsewhere.next_event()).await;
        assert!(pending.is_err(), "another question's event fired the watch");
        assert_eq!(hub.watches.lock().len(), 1, "fired watches are unregistered");
    }

    #[tokio::test]
    async fn an_escalation_step_forgets_the_remembered_question_and_wakes_no_waiter() {
        let hub = hub();
        let workspace_id = Uuid::now_v7();
        let input = holdpoint_types::NewQuestion { title: "deploy?".into(), ..Default::default() };
        let bounds = crate::questions::TimeoutBounds { min_seconds: 1, max_seconds: 86_400 };
        let row = crate::questions::build_question(input, workspace_id, None, bounds, crate::store::now()).unwrap();
        hub.remember_asked(&row);
        let mut watch = hub.watch_question(row.id);
        hub.send(event(1, EventType::QuestionEscalated, row.id));
        assert!(hub.asked_and_pending(workspace_id, row.id).is_none(), "the row from before the step is still served");
        let woken = tokio::time::timeout(Duration::from_millis(20), watch.next_event()).await;
        assert!(woken.is_err(), "a waiter for the answer woke on an escalation step");
        hub.send(event(2, EventType::QuestionAnswered, row.id));
        assert_eq!(watch.next_event().await.map(|e| e.id), Some(2));
    }

    fn logged(id: i64) -> HubEvent {
        HubEvent {
            id,
            workspace_id: Uuid::nil(),
            event_type: EventType::QuestionAsked.as_str().to_owned(),
            project: None,
            run_id: None,
            question_id: Some(Uuid::now_v7()),
            data: format!("{{\"n\":{id}}}"),
            created_at: chrono::Utc::now(),
        }
    }

    fn sent(receiver: &mut broadcast::Receiver<Arc<HubEvent>>) -> Vec<i64> {
        std::iter::from_fn(|| receiver.try_recv().ok()).map(|event| event.id).collect()
    }

    /// Commits of one batch tell the hub in any order: an event handed over before the one it follows waits for it,
    /// and both go out in the log's order without the log being read.
    #[test]
    fn events_handed_over_out_of_order_go_out_in_order_once_the_gap_fills() {
        let hub = hub();
        let (mut receiver, _) = hub.subscribe();
        let committed = Committed::default();
        committed.handed_over.insert(logged(2));
        assert!(matches!(hub.hand_out_committed(&Committed { last: 2, ..committed.clone() }), HandOut::Gap));
        assert_eq!(sent(&mut receiver), Vec::<i64>::new(), "nothing goes out past a missing event");
        committed.handed_over.insert(logged(1));
        assert!(matches!(hub.hand_out_committed(&Committed { last: 2, ..committed.clone() }), HandOut::Done));
        assert_eq!(sent(&mut receiver), vec![1, 2]);
        assert!(matches!(hub.hand_out_committed(&Committed { last: 2, ..committed.clone() }), HandOut::Done));
        assert_eq!(sent(&mut receiver), Vec::<i64>::new(), "nothing is sent twice");
    }

    /// A commit told without its events (several events, or another instance's) has the hub read the log.
    #[test]
    fn a_commit_told_without_its_events_has_the_hub_read_the_log() {
        let hub = hub();
        let (mut receiver, _) = hub.subscribe();
        let committed = Committed { last: 3, read_through: 3, ..Committed::default() };
        committed.handed_over.insert(logged(1));
        assert!(matches!(hub.hand_out_committed(&committed), HandOut::ReadLog));
        assert_eq!(sent(&mut receiver), Vec::<i64>::new(), "the log is read in order, from the first missing");
    }

    fn asked(workspace_id: Uuid) -> QuestionRow {
        let input = holdpoint_types::NewQuestion { title: "Ship it?".into(), ..Default::default() };
        let bounds = crate::questions::TimeoutBounds { min_seconds: 300, max_seconds: 86_400 };
        crate::questions::build_question(input, workspace_id, None, bounds, crate::store::now()).unwrap()
    }

    /// A question remembered as asked is served until an event shows it leaving `pending`, and is gone before that
    /// event fires its watches: a long-poll that found it pending registered its watch first, and is woken.
    #[tokio::test]
    async fn an_asked_question_is_forgotten_before_the_event_that_resolves_it_fires_its_watches() {
        let hub = hub();
        let workspace = Uuid::now_v7();
        let row = asked(workspace);
        hub.remember_asked(&row);
        assert_eq!(hub.asked_and_pending(workspace, row.id).map(|r| r.id), Some(row.id));
        assert!(hub.asked_and_pending(Uuid::now_v7(), row.id).is_none(), "served to another workspace");

        let mut watch = hub.watch_question(row.id);
        hub.send(event(1, EventType::QuestionAsked, row.id));
        assert!(hub.asked_and_pending(workspace, row.id).is_some(), "its own asking does not evict it");
        let checker = hub.clone();
        let (id, workspace_id) = (row.id, workspace);
        let woken = tokio::spawn(async move {
            let event = watch.next_event().await;
            (event.map(|e| e.id), checker.asked_and_pending(workspace_id, id).is_none())
        });
        hub.send(event(2, EventType::QuestionAnswered, row.id));
        assert_eq!(woken.await.unwrap(), (Some(2), true), "woken, with the question forgotten by then");
    }

    #[test]
    fn a_dropped_watch_is_unregistered() {
        let hub = hub();
        let question = Uuid::now_v7();
        let kept = hub.watch_question(question);
        drop(hub.watch_question(question));
        assert_eq!(hub.watches.lock()[&question].len(), 1);
        drop(kept);
        assert!(hub.watches.lock().is_empty(), "nothing is left behind for a question nobody waits on");
    }
}
