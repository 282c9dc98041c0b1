//! The store's tests against both databases: the plans SQLite makes of the hot statements, the checks the
//! migrations keep, PostgreSQL's revocation notices and listener, the audit chain under wrong guesses of its head,
//! the batched writes' placeholders, and what two stores in one process share.

use holdpoint_types::{AnswerBody, QuestionKind, Resolution, ResponseType};

use super::*;
use crate::postgres::*;
use crate::sqlite::*;
use crate::test_postgres::PostgresSchema;
use crate::token_cache::TokenCache;
use sqlx::PgPool;

/// A SQLite database file of one test's own, removed with its WAL when the test ends.
struct TestDatabase(std::path::PathBuf);

impl TestDatabase {
    fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(format!("holdpoint-{name}-{}.db", Uuid::now_v7())))
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.0.display())
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

/// The ops of SQLite's plan for each statement of `sql`, on the store's schema.
async fn sqlite_plans(database: &TestDatabase, sql: &Statements) -> Vec<Vec<String>> {
    super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
    let connection = rusqlite::Connection::open(&database.0).unwrap();
    sql.iter()
        .map(|statement| {
            let mut plan = connection.prepare(&format!("EXPLAIN {statement}")).unwrap();
            plan.raw_query().mapped(|op| op.get::<_, String>(1)).map(Result::unwrap).collect()
        })
        .collect()
}

/// SQLite builds a temporary b-tree for every run of a statement that returns rows (`RETURNING`) or checks a
/// `CHECK (x IN (3 or more values))`; the hot writes ran seven of them per HITL cycle (migration 0010).
#[tokio::test]
async fn sqlite_asks_and_answers_without_building_temporary_tables() {
    let database = TestDatabase::new("no-temporary-tables");
    for sql in [&*INSERT_QUESTION_THEN_EVENT_DIRECTLY, &*RESOLVE_PENDING_WITH_EVENT_AND_AUDIT] {
        for (plan, statement) in sqlite_plans(&database, sql).await.iter().zip(sql.iter()) {
            assert!(!plan.iter().any(|op| op == "OpenEphemeral"), "{statement}: {plan:?}");
        }
    }
}

/// Migration 0010's comparisons refuse what the IN lists refused, let a NULL through as they did, and leave no
/// IN list of three or more values in any table's CHECK.
#[tokio::test]
async fn sqlite_checks_refuse_the_values_they_refused_before_migration_0010() {
    let database = TestDatabase::new("checks");
    let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
    let workspace = store.ensure_workspace("checks").await.unwrap();
    let (row, asked) = question_and_event(workspace.id, "checked", ResponseType::Boolean);
    store.create_question(&row, &asked, None, &AskedWith::default()).await.unwrap();
    let connection = rusqlite::Connection::open(&database.0).unwrap();
    for change in [
        "UPDATE questions SET status = 'answred'",
        "UPDATE questions SET kind = 'Blocking'",
        "UPDATE questions SET urgency = ''",
        "UPDATE questions SET resolution = 'person'",
    ] {
        let err = connection.execute(change, []).unwrap_err();
        assert!(err.to_string().contains("CHECK constraint failed"), "{change}: {err}");
    }
    assert_eq!(connection.execute("UPDATE questions SET resolution = NULL, status = 'expired'", []).unwrap(), 1);
    let tables: Vec<String> = connection
        .prepare("SELECT sql FROM sqlite_schema WHERE type = 'table'")
        .unwrap()
        .query_map([], |table| table.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(tables.iter().any(|sql| sql.contains("CHECK (kind = 'blocking' OR kind = 'non_blocking'")), "{tables:?}");
    for sql in &tables {
        for (at, _) in sql.match_indices(" IN (") {
            let list = &sql[at + 5..at + 5 + sql[at + 5..].find(')').unwrap()];
            assert!(list.matches(',').count() < 2, "an IN list of three or more values is left: {sql}");
        }
    }
    assert_eq!(connection.query_row("PRAGMA integrity_check", [], |ok| ok.get::<_, String>(0)).unwrap(), "ok");
}

/// A person's answer `value`, as the answering use case makes it.
fn answered_with(value: serde_json::Value) -> QuestionResolution {
    QuestionResolution {
        status: holdpoint_types::QuestionStatus::Answered,
        response: Some(AnswerBody { value, comment: None, edited_arguments: None }),
        answered_by: Some("tester".into()),
        resolution: Some(Resolution::Human),
        at: crate::now(),
        actor: AuditActor::policy("test", None),
    }
}

#[test]
fn a_postgres_revocation_notifies_on_the_channel_the_instances_listen_to() {
    let notify = PostgresStore::TELL_OTHERS_OF_A_REVOCATION;
    assert_eq!(notify, format!("SELECT pg_notify('{CREDENTIALS_CHANNEL}', '')"));
}

/// A notification that comes before any event hub follows the store (at start, while the hub's task has not
/// run yet) must not stop the listener: stopped, it would leave the token cache serving without hearing the
/// other instances' revocations, and their events reaching this one only by the hub's poll.
#[tokio::test]
async fn the_listener_keeps_listening_through_a_notification_that_comes_before_the_hub() {
    let url = std::env::var("HOLDPOINT_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let pool = match PgPool::connect(&url).await {
        Ok(pool) => pool,
        Err(err) if std::env::var("CI").as_deref() == Ok("true") => panic!("PostgreSQL is required in CI: {err}"),
        Err(err) => return eprintln!("SKIPPED: PostgreSQL at {url} is unreachable ({err})"),
    };
    let committed = watch::channel(Committed::default()).0;
    let tokens = Arc::new(TokenCache::new(false, std::time::Duration::from_secs(600)));
    let stop = tokio_util::sync::CancellationToken::new();
    let listening = Listening {
        pool: pool.clone(),
        schema: "public".into(),
        committed: committed.clone(),
        tokens: Arc::clone(&tokens),
    };
    tokio::spawn(listen_to_other_instances(listening, stop.clone()));
    let _stop_when_done = stop.drop_guard();
    let principal = Principal {
        id: Uuid::now_v7(),
        kind: PrincipalKind::Token,
        workspace_id: Uuid::now_v7(),
        workspace: "default".into(),
        name: "agent".into(),
        role: holdpoint_types::Role::Agent,
        person: None,
    };
    let remembered = || {
        tokens.remember(b"secret", &principal, tokens.generation());
        tokens.get(b"secret").is_some()
    };
    eventually(remembered, "the cache serves once the listener listens").await;
    let notify = |channel: &'static str| {
        let pool = pool.clone();
        async move { sqlx::query("SELECT pg_notify($1, '0')").bind(channel).execute(&pool).await.unwrap() }
    };
    // Nobody follows the events yet: no hub has subscribed to the store's commits.
    notify(EVENTS_CHANNEL).await;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    notify(CREDENTIALS_CHANNEL).await;
    eventually(|| tokens.get(b"secret").is_none(), "the revocation is heard").await;
}

#[test]
fn a_store_follows_the_ids_of_its_own_schemas_log_only() {
    assert_eq!(event_of_this_log("holdpoint_a:42", "holdpoint_a"), Some(42));
    assert_eq!(event_of_this_log("holdpoint_b:42", "holdpoint_a"), None, "another schema's log");
    assert_eq!(event_of_this_log("odd:name:7", "odd:name"), Some(7));
    assert_eq!(event_of_this_log("42", "holdpoint_a"), None);
    assert_eq!(event_of_this_log("holdpoint_a:x", "holdpoint_a"), None);
}

async fn eventually(condition: impl Fn() -> bool, what: &str) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn entry(workspace_id: Uuid, n: usize) -> NewAuditEntry {
    NewAuditEntry {
        workspace_id,
        actor: AuditActor::policy("test", None),
        action: "test.appended".into(),
        subject_type: "test".into(),
        subject_id: Some(n.to_string()),
        before: None,
        after: Some(serde_json::json!({ "n": n })),
        diff: None,
        created_at: crate::now(),
    }
}

/// A pending blocking question titled `title`, answered with `response_type`, with its `question_asked` event:
/// the row the asking use case stores for a request that names only these two.
fn question_and_event(workspace_id: Uuid, title: &str, response_type: ResponseType) -> (QuestionRow, NewEvent) {
    let (kind, now) = (QuestionKind::Blocking, crate::now());
    let row = QuestionRow {
        id: Uuid::now_v7(),
        workspace_id,
        project: None,
        run_id: None,
        tool_call_id: None,
        parent_run_ids: Json(Vec::new()),
        kind,
        response_type,
        title: title.to_owned(),
        body: String::new(),
        options: Json(Vec::new()),
        fields: Json(Vec::new()),
        action: None,
        allow_edit: false,
        context: Json(serde_json::json!({})),
        urgency: kind.default_urgency(),
        timeout_at: kind.default_timeout_seconds().map(|seconds| now + chrono::Duration::seconds(seconds)),
        default_response: None,
        status: holdpoint_types::QuestionStatus::Pending,
        response: None,
        answered_by: None,
        resolution: None,
        created_by: None,
        created_at: now,
        updated_at: now,
        resolved_at: None,
        assignee: None,
        escalation: None,
        next_escalation_at: None,
        callback_url: None,
        required_approvals: 1,
        eligible: None,
        approvals: Json(Vec::new()),
        claimed_by: None,
        claim_expires_at: None,
        claimed_by_id: None,
        field_rules: None,
        response_schema: None,
        revision: 0,
    };
    let asked = NewEvent {
        workspace_id,
        event_type: holdpoint_types::EventType::QuestionAsked,
        project: None,
        run_id: None,
        question_id: Some(row.id),
        data: event_data(&serde_json::json!({})).unwrap(),
        created_at: row.created_at,
    };
    (row, asked)
}

/// `row` leaving `pending` with `change`: the question after it, its event and an audit entry recording it, as
/// the use case hands them to the store.
fn transition(row: &QuestionRow, change: &QuestionResolution, workspace: &str) -> QuestionTransition {
    let resolved = row.resolved_with(change);
    let event = change.event(&resolved, workspace).unwrap();
    let audit = NewAuditEntry {
        workspace_id: resolved.workspace_id,
        actor: change.actor.clone(),
        action: format!("question.{}", resolved.status.as_str()),
        subject_type: "question".into(),
        subject_id: Some(resolved.id.to_string()),
        before: Some(serde_json::json!({ "status": "pending" })),
        after: Some(
            serde_json::json!({ "status": resolved.status, "value": change.response.as_ref().map(|r| &r.value) }),
        ),
        diff: None,
        created_at: change.at,
    };
    QuestionTransition { resolved, event, audit, files: Vec::new() }
}

/// How many audit entries the store holds, after checking every workspace's chain whole: `seq` 1, 2, 3...
/// without gaps, each hash recomputed from its entry, each `prev_hash` the previous entry's hash, and the chain
/// ending where its head row says.
async fn unbroken_chain_entries(store: &dyn Store) -> u64 {
    let mut entries = 0;
    for head in store.audit_heads().await.unwrap() {
        let (mut last_seq, mut last_hash) = (0_i64, GENESIS_HASH.to_owned());
        for row in store.audit_chain(head.workspace_id, 0, u32::MAX).await.unwrap() {
            assert_eq!(row.seq, last_seq + 1, "{}: the chain's entries follow each other", head.workspace);
            assert_eq!(entry_hash(&row), row.hash, "{}: entry {} is as it was hashed", head.workspace, row.seq);
            assert_eq!(row.prev_hash, last_hash, "{}: entry {} links to the one before", head.workspace, row.seq);
            (last_seq, last_hash) = (row.seq, row.hash);
            entries += 1;
        }
        assert_eq!((head.seq, head.hash), (Some(last_seq), Some(last_hash)), "{}: the head", head.workspace);
    }
    entries
}

/// A delivery to `endpoint` of the workspace, queued at `sequence`, due at `due`.
fn delivery(
    workspace_id: Uuid,
    endpoint: &str,
    webhook_id: Option<Uuid>,
    sequence: i64,
    due: DateTime<Utc>,
) -> WebhookDeliveryRow {
    WebhookDeliveryRow {
        id: Uuid::now_v7(),
        workspace_id,
        webhook_id,
        endpoint: endpoint.into(),
        url: "http://127.0.0.1:9/hook".into(),
        sequence,
        message_id: format!("{endpoint}-{sequence}"),
        event_type: "question_answered".into(),
        body: "{}".into(),
        status: holdpoint_types::DeliveryStatus::Queued,
        attempts: 0,
        next_attempt_at: due,
        claimed_until: None,
        last_error: None,
        response_status: None,
        sent_at: None,
        created_at: due,
        updated_at: due,
        give_up_at: due + chrono::Duration::hours(1),
    }
}

/// The webhook sender's claim loop sleeps until `next_webhook_delivery_due`: while a queue's head is being sent,
/// that is when its claim ends, not the due time of the deliveries waiting behind it (the loop would wake every
/// few milliseconds for as long as a slow receiver takes); a disabled subscription's deliveries never count.
async fn next_due_is_when_a_claim_could_take_a_delivery<S: Store>(store: &S) {
    let workspace = store.ensure_workspace("hooks").await.unwrap();
    let now = crate::now();
    let due = now - chrono::Duration::seconds(5);
    assert_eq!(store.next_webhook_delivery_due().await.unwrap(), None);

    let disabled = WebhookRow {
        id: Uuid::now_v7(),
        workspace_id: workspace.id,
        url: "http://127.0.0.1:9/disabled".into(),
        events: Json(vec![]),
        description: String::new(),
        secret: "whsec_test".into(),
        created_at: now,
        updated_at: now,
        disabled_at: Some(now),
        disabled_reason: Some("gone".into()),
    };
    store.create_webhook(&disabled, &entry(workspace.id, 1)).await.unwrap();
    let endpoint = disabled.id.to_string();
    store
        .queue_webhook_deliveries(&[delivery(workspace.id, &endpoint, Some(disabled.id), 1, due)], None)
        .await
        .unwrap();
    assert_eq!(store.next_webhook_delivery_due().await.unwrap(), None, "a disabled subscription's wait");

    let callback = "http://127.0.0.1:9/callback";
    let queued = [delivery(workspace.id, callback, None, 2, due), delivery(workspace.id, callback, None, 3, due)];
    store.queue_webhook_deliveries(&queued, None).await.unwrap();
    assert_eq!(store.next_webhook_delivery_due().await.unwrap(), Some(due), "the head is due");
    let until = now + chrono::Duration::seconds(30);
    let claimed = store.claim_webhook_heads(now, until, 10, None).await.unwrap();
    assert_eq!(claimed.iter().map(|d| d.sequence).collect::<Vec<_>>(), [2], "one head, of the enabled queue");
    assert_eq!(
        store.next_webhook_delivery_due().await.unwrap(),
        Some(until),
        "while the head is sent, nothing is claimable before its claim ends"
    );
    let mut sent = claimed[0].clone();
    sent.status = holdpoint_types::DeliveryStatus::Sent;
    sent.updated_at = now;
    assert!(store.finish_webhook_delivery(&sent).await.unwrap());
    assert_eq!(store.next_webhook_delivery_due().await.unwrap(), Some(due), "the next head is due at once");
}

#[tokio::test]
async fn on_sqlite_next_due_is_when_a_claim_could_take_a_delivery() {
    let database = TestDatabase::new("next-due");
    let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
    next_due_is_when_a_claim_could_take_a_delivery(&store).await;
}

#[tokio::test]
async fn on_postgres_next_due_is_when_a_claim_could_take_a_delivery() {
    let Some(schema) = PostgresSchema::new().await else { return };
    let store = super::super::connect_postgres(&schema.url, StoreSettings::defaults()).await.unwrap();
    next_due_is_when_a_claim_could_take_a_delivery(&store).await;
}

/// What a store remembers is its own: two stores in one process (two servers in one test process) share no
/// workspace names and no audit chain heads.
#[tokio::test]
async fn two_stores_in_one_process_share_no_workspace_names_and_no_audit_heads() {
    let (first, second) = (TestDatabase::new("own-caches-a"), TestDatabase::new("own-caches-b"));
    let first = super::super::connect_sqlite(&first.url(), StoreSettings::defaults()).await.unwrap();
    let second_store = super::super::connect_sqlite(&second.url(), StoreSettings::defaults()).await.unwrap();
    let workspace = first.ensure_workspace("mine").await.unwrap();
    first.append_audit(&entry(workspace.id, 1)).await.unwrap();
    assert_eq!(first.workspace_name(workspace.id).await.unwrap(), "mine");
    assert_eq!(first.caches.workspace_names.get(workspace.id).as_deref(), Some("mine"));
    assert!(first.audit_heads.guess(workspace.id).is_some(), "the first store guesses its chain's head");
    assert_eq!(second_store.caches.workspace_names.get(workspace.id), None);
    assert_eq!(second_store.audit_heads.guess(workspace.id), None);
}

/// An answer's event and audit entry go in with one query while SQLite's guess of the chain's head holds; when
/// it does not (ahead of the head, as after a rolled-back append, or behind it, as after another process's), the
/// event still goes in and the entry follows the stored head.
#[tokio::test]
async fn an_answer_stores_its_event_and_its_audit_entry_whatever_the_guess_of_the_head() {
    let database = TestDatabase::new("answer-guess");
    let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
    let workspace = store.ensure_workspace("answers").await.unwrap();
    for n in 0..4 {
        let (row, asked) = question_and_event(workspace.id, &format!("q{n}"), ResponseType::Boolean);
        store.create_question(&row, &asked, None, &AskedWith::default()).await.unwrap();
        // The first answer finds no guess, the second one ahead, the third one behind, the fourth the right one.
        match n {
            1 => store.audit_heads.remember(workspace.id, 50, "not-the-head"),
            2 => store.audit_heads.remember(workspace.id, 0, "not-the-head"),
            _ => {}
        }
        let change = answered_with(serde_json::json!(true));
        let outcome = store.resolve_question(transition(&row, &change, "answers")).await.unwrap();
        assert!(matches!(outcome, ResolveOutcome::Resolved(_)), "answer {n}");
    }
    let events = store.events_after(0, 100).await.unwrap();
    assert_eq!(events.iter().filter(|event| event.event_type == "question_answered").count(), 4);
    assert_eq!(unbroken_chain_entries(&store).await, 4, "one entry per answer");
}

/// SQLite resolves a pending question in one query only on a right guess of the audit chain's head: with none,
/// or one ahead of the head (as after a rolled-back append) or behind it (as after another process's append),
/// the database refuses the entry, the query stops before it releases its savepoint, and nothing of it is
/// stored. The general path then answers with the entry on the stored head; a question no longer pending
/// writes nothing either way.
#[tokio::test]
async fn on_sqlite_the_one_query_answer_stores_nothing_unless_its_guess_of_the_head_holds() {
    let database = TestDatabase::new("one-query-answer");
    let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
    let workspace = store.ensure_workspace("one-query").await.unwrap();
    let answer = |value: bool| answered_with(serde_json::json!(value));
    let stored = |id: Uuid| {
        let store = store.clone();
        async move {
            let question = store.question(workspace.id, id).await.unwrap().unwrap();
            let events = store.events_after(0, 100).await.unwrap();
            let answered = events.iter().filter(|e| e.event_type == "question_answered").count();
            let entries = unbroken_chain_entries(&store).await;
            let entries = usize::try_from(entries).unwrap();
            (question.status.as_str().to_owned(), answered, entries)
        }
    };
    let ask = |n: usize| {
        let store = store.clone();
        async move {
            let (row, asked) = question_and_event(workspace.id, &format!("q{n}"), ResponseType::Boolean);
            store.create_question(&row, &asked, None, &AskedWith::default()).await.unwrap();
            row
        }
    };

    let first = ask(0).await;
    assert!(!store.resolve_in_one_query(&transition(&first, &answer(true), "one-query")).await.unwrap(), "no guess");
    assert_eq!(stored(first.id).await, ("pending".to_owned(), 0, 0), "nothing stored without a guess");
    let ResolveOutcome::Resolved(_) =
        store.resolve_question(transition(&first, &answer(true), "one-query")).await.unwrap()
    else {
        panic!("the general path answers");
    };
    assert_eq!(stored(first.id).await, ("answered".to_owned(), 1, 1));

    for (n, (seq, hash)) in [(50, "ahead"), (0, "behind")].into_iter().enumerate() {
        let question = ask(n + 1).await;
        store.audit_heads.remember(workspace.id, seq, hash);
        let answering = transition(&question, &answer(false), "one-query");
        assert!(!store.resolve_in_one_query(&answering).await.unwrap(), "a guess {hash} of the head");
        assert_eq!(stored(question.id).await, ("pending".to_owned(), n + 1, n + 1), "nothing stored, {hash}");
        let ResolveOutcome::Resolved(_) = store.resolve_question(answering).await.unwrap() else {
            panic!("the general path answers after a guess {hash} of the head");
        };
        assert_eq!(stored(question.id).await, ("answered".to_owned(), n + 2, n + 2));
    }

    // The general path left the right guess: the one query stores the answer, its event and its entry.
    let question = ask(3).await;
    let answering = transition(&question, &answer(true), "one-query");
    assert!(store.resolve_in_one_query(&answering).await.unwrap(), "a right guess resolves in one query");
    let resolved = answering.resolved;
    let read_back = store.question(workspace.id, question.id).await.unwrap().unwrap();
    assert_eq!(read_back.to_question("one-query").unwrap(), resolved.to_question("one-query").unwrap());
    assert_eq!(stored(question.id).await, ("answered".to_owned(), 4, 4));
    // Once answered, the same read resolves nothing more.
    let again = transition(&question, &answer(false), "one-query");
    assert!(!store.resolve_in_one_query(&again).await.unwrap());
    let ResolveOutcome::NotPending(current) = store.resolve_question(again).await.unwrap() else {
        panic!("a second answer finds the question answered");
    };
    assert_eq!(current.to_question("one-query").unwrap(), resolved.to_question("one-query").unwrap());
    assert_eq!(stored(question.id).await, ("answered".to_owned(), 4, 4));
}

/// The trigger that refuses an audit entry off its chain's head (migration 0009) says what
/// `AUDIT_ENTRY_OFF_ITS_HEAD` looks for.
#[tokio::test]
async fn on_sqlite_an_audit_entry_off_its_head_is_refused_with_the_message_the_store_looks_for() {
    let database = TestDatabase::new("off-head");
    let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
    let workspace = store.ensure_workspace("off-head").await.unwrap();
    let first = store.append_audit(&entry(workspace.id, 1)).await.unwrap();
    for (seq, prev_hash) in [(first.seq + 2, first.hash.clone()), (first.seq + 1, "0".repeat(64))] {
        let row = AuditRow::seal(&entry(workspace.id, 2), seq, prev_hash);
        let err = Bind::bind_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT), &row)
            .fetch_one(&store.write)
            .await
            .expect_err("an entry off its head");
        let sqlx::Error::Database(err) = err else { panic!("not the database's refusal: {err}") };
        assert!(err.message().contains(AUDIT_ENTRY_OFF_ITS_HEAD), "{}", err.message());
    }
    let row = AuditRow::seal(&entry(workspace.id, 2), first.seq + 1, first.hash.clone());
    Bind::bind_row(sqlx::query_as::<_, (i64,)>(&APPEND_AUDIT), &row).fetch_one(&store.write).await.unwrap();
}

/// On SQLite, asking runs on the writer's own thread: a caller that goes away once the write was handed over
/// (a client that disconnected) does not cut it short, and the question is stored whole, with its event.
#[tokio::test]
async fn on_sqlite_a_question_whose_caller_goes_away_is_still_stored_whole() {
    let database = TestDatabase::new("writer-thread");
    let store = connect(&database.url()).await.unwrap();
    let workspace = store.ensure_workspace("abandoned").await.unwrap();
    let (row, asked) = question_and_event(workspace.id, "Still there?", ResponseType::Text);
    // Polled once (which hands the write over), then dropped: a write takes trips to SQLite's thread, so it
    // cannot have ended within that one poll.
    let abandoned = futures::FutureExt::now_or_never(store.create_question(&row, &asked, None, &AskedWith::default()));
    assert!(abandoned.is_none(), "the caller gave up before the write ended");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.question(workspace.id, row.id).await.unwrap().is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the question was not stored within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let events = store.events_after(0, 100).await.unwrap();
    assert!(events.iter().any(|event| event.question_id == Some(row.id) && event.event_type == "question_asked"));
}

#[test]
fn the_batched_writes_bind_as_many_values_as_their_statements_name() {
    assert_eq!(QUESTION_ARGUMENTS, QUESTION_COLUMNS.split(',').count());
    assert_eq!(EVENT_ARGUMENTS, placeholder_count(PostgresStore::INSERT_EVENT));
    assert_eq!(RESOLVE_ARGUMENTS, placeholder_count(&RESOLVE_AS_EXPRESSIONS));
}

#[test]
fn placeholder_count_is_the_highest_placeholder() {
    assert_eq!(placeholder_count(SqliteStore::INSERT_EVENT), 7);
    assert_eq!(placeholder_count(&APPEND_AUDIT_IF_HEAD), 15);
    assert_eq!(placeholder_count("SELECT 1"), 0);
}

/// The SQLite store appends on its guess of the chain's head; a wrong guess (another process appended, or an
/// append was rolled back after the guess moved) must fall back to the stored head, never fork the chain.
#[tokio::test]
async fn a_wrong_guess_of_the_audit_head_still_links_each_entry_to_the_stored_head() {
    let database = TestDatabase::new("audit-guess");
    let store = super::super::connect_sqlite(&database.url(), StoreSettings::defaults()).await.unwrap();
    let workspace = store.ensure_workspace("guess").await.unwrap();
    for n in 1..=3 {
        assert_eq!(store.append_audit(&entry(workspace.id, n)).await.unwrap().seq, n as i64);
    }
    // Ahead of the stored head, as after a rolled-back append; then behind it, as after another process's.
    store.audit_heads.remember(workspace.id, 7, "not-the-head");
    assert_eq!(store.append_audit(&entry(workspace.id, 4)).await.unwrap().seq, 4);
    store.audit_heads.remember(workspace.id, 2, "not-the-head");
    let fifth = store.append_audit(&entry(workspace.id, 5)).await.unwrap();
    assert_eq!(fifth.seq, 5);
    assert_eq!(store.append_audit(&entry(workspace.id, 6)).await.unwrap().prev_hash, fifth.hash);
    assert_eq!(unbroken_chain_entries(&store).await, 6);
}

#[test]
fn placeholders_shift_past_the_question_arguments_and_nothing_else_changes() {
    assert_eq!(shift_placeholders("VALUES ($1, $2, $10) RETURNING id", 27), "VALUES ($28, $29, $37) RETURNING id");
    assert_eq!(shift_placeholders("a '$' b $x", 5), "a '$' b $x");
    let sql =
        insert_question_then_event("WITH asked AS (", ") ", "INSERT INTO events (a, b) VALUES ($1, $2) RETURNING id");
    assert!(sql.starts_with("WITH asked AS (INSERT INTO questions (id, "), "{sql}");
    assert!(sql.ends_with("$38, $39)) INSERT INTO events (a, b) VALUES ($40, $41) RETURNING id"), "{sql}");
}

/// How PostgreSQL's generic plan for `sql` (of `arguments` placeholders) reads `questions`: each scan's index.
async fn question_indexes_planned(connection: &mut sqlx::PgConnection, sql: &str, arguments: usize) -> Vec<String> {
    sqlx::query(&format!("PREPARE planned AS {sql}")).execute(&mut *connection).await.unwrap();
    sqlx::query("SET plan_cache_mode = force_generic_plan").execute(&mut *connection).await.unwrap();
    let nulls = vec!["NULL"; arguments].join(", ");
    let (plan,): (serde_json::Value,) = sqlx::query_as(&format!("EXPLAIN (FORMAT JSON) EXECUTE planned({nulls})"))
        .fetch_one(&mut *connection)
        .await
        .unwrap();
    sqlx::query("DEALLOCATE planned").execute(&mut *connection).await.unwrap();
    fn walk(node: &serde_json::Value, found: &mut Vec<String>) {
        let scan = node["Node Type"].as_str().is_some_and(|kind| kind.ends_with("Scan"));
        if scan && node["Relation Name"] == "questions" {
            found.push(node["Index Name"].as_str().unwrap_or("(a sequential scan)").to_owned());
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            walk(child, found);
        }
    }
    let mut found = Vec::new();
    walk(&plan[0]["Plan"], &mut found);
    found
}

/// Before autovacuum had analyzed `questions` (a new database, as in the HITL benchmark), PostgreSQL planned the
/// resolving statement through `questions_status_deadline` and walked every pending entry, dead ones included,
/// to find the question (see `STILL_PENDING`); it must find it by its id.
#[tokio::test]
async fn postgres_resolves_a_question_found_by_its_id() {
    let Some(schema) = PostgresSchema::new().await else { return };
    let url = schema.url.clone();
    let store = connect(&url).await.unwrap();
    let workspace = store.ensure_workspace("busy").await.unwrap();
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO questions (id, workspace_id, kind, response_type, title, urgency, status, created_at, \
         updated_at) SELECT gen_random_uuid(), $1, 'blocking', 'text', 'q', 'normal', \
         CASE WHEN n % 500 = 0 THEN 'pending' ELSE 'answered' END, now(), now() \
         FROM generate_series(1, 3000) AS n",
    )
    .bind(workspace.id)
    .execute(&mut connection)
    .await
    .unwrap();

    // The statement of a batch that holds one resolve (`write_batch`).
    let resolve_alone = format!("WITH {} SELECT 0, id FROM w0", RESOLVE_AS_EXPRESSIONS.replace("NAME", "w0"));
    let resolving = question_indexes_planned(&mut connection, &resolve_alone, RESOLVE_ARGUMENTS).await;
    let by_id = ["questions_pkey", "questions_workspace_created"];
    assert!(resolving.iter().all(|index| by_id.contains(&index.as_str())), "{resolving:?}");
    assert_eq!(resolving.len(), 1, "{resolving:?}");
}

/// Asks and answers that reach PostgreSQL together go in as one statement (`write_batch`), each stored once
/// with its event and, for an answer, its audit entry. Of two answers to one question in one batch, one
/// resolves it and the other finds it resolved.
#[tokio::test]
async fn on_postgres_asks_and_answers_queued_together_are_each_stored_once() {
    let Some(schema) = PostgresSchema::new().await else { return };
    let store = super::super::connect_postgres(&schema.url, StoreSettings::defaults()).await.unwrap();
    let workspace = store.ensure_workspace("batched").await.unwrap();
    store.caches.workspace_names.remember(workspace.id, "batched");
    let question = |n: usize| question_and_event(workspace.id, &format!("q{n}"), ResponseType::Boolean);
    let transactions = |ids: Vec<Uuid>| {
        let url = schema.url.clone();
        async move {
            let pool = PgPool::connect(&url).await.unwrap();
            let (count,): (i64,) =
                sqlx::query_as("SELECT count(DISTINCT xmin::text) FROM questions WHERE id = ANY($1)")
                    .bind(ids)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            count
        }
    };
    // The test's runtime has one thread: every write below is queued before the batch's worker runs.
    let first: Vec<(QuestionRow, NewEvent)> = (0..5).map(question).collect();
    let alone = AskedWith::default();
    let created =
        futures::future::join_all(first.iter().map(|(row, event)| store.create_question(row, event, None, &alone)));
    assert!(created.await.iter().all(Result::is_ok));
    assert_eq!(transactions(first.iter().map(|(row, _)| row.id).collect()).await, 1, "one statement");

    let second: Vec<(QuestionRow, NewEvent)> = (5..7).map(question).collect();
    let asks =
        futures::future::join_all(second.iter().map(|(row, event)| store.create_question(row, event, None, &alone)));
    let answer = answered_with(serde_json::json!(true));
    let answered = [0, 1, 2, 0].map(|n| &first[n].0);
    let answers = futures::future::join_all(
        answered.iter().map(|row| store.resolve_question(transition(row, &answer, "batched"))),
    );
    let (asks, answers) = tokio::join!(asks, answers);
    assert!(asks.iter().all(Result::is_ok));
    let outcomes: Vec<&str> = answers
        .iter()
        .map(|outcome| match outcome.as_ref().unwrap() {
            ResolveOutcome::Resolved(_) => "resolved",
            ResolveOutcome::NotPending(_) => "not pending",
            ResolveOutcome::NotFound => "not found",
        })
        .collect();
    assert_eq!(outcomes.iter().filter(|o| **o == "resolved").count(), 3, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| **o == "not pending").count(), 1, "{outcomes:?}");
    let together = [&second[0].0, &second[1].0, &first[1].0, &first[2].0].map(|row| row.id);
    assert_eq!(transactions(together.to_vec()).await, 1, "the second batch is one statement too");

    let events = store.events_after(0, 100).await.unwrap();
    assert!(events.windows(2).all(|pair| pair[0].id < pair[1].id));
    let count = |kind: &str| events.iter().filter(|event| event.event_type == kind).count();
    assert_eq!((count("question_asked"), count("question_answered")), (7, 3));
    assert_eq!(unbroken_chain_entries(&store).await, 3, "one entry per answer");
    for (n, (row, _)) in first.iter().chain(&second).enumerate() {
        let status = store.question(workspace.id, row.id).await.unwrap().unwrap().status;
        assert_eq!(status.as_str(), if n < 3 { "answered" } else { "pending" }, "q{n}");
    }
}
