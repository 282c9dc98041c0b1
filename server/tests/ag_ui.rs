//! `POST /api/v1/agents/{name}/ag-ui`: a Holdpoint agent's run streamed as AG-UI events, ending with an interrupt
//! outcome while it waits for people, continued by a run on the same thread whose `resume` entries answer them.

use crate::common;

use app::types::Role;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use common::{Scripts, TestApp, TestResponse, assert_error};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn start(backend: common::Backend, scripts: &Scripts, mock: &MockServer) -> Option<TestApp> {
    let dir = scripts.dir.clone();
    let host = mock.address().to_string();
    TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.http_allowed_hosts = vec![host];
    })
    .await
}

async fn deploy_mock() -> MockServer {
    let mock = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/deploy"))
        .respond_with(ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&mock)
        .await;
    mock
}

/// An agent named `name` that runs `turns`, with `tools` and `policy`.
async fn agent(app: &TestApp, scripts: &Scripts, name: &str, turns: Value, tools: &[&str], policy: Value) {
    let model = scripts.write(&format!("{name}.json"), &turns);
    let spec = json!({ "name": name, "system_prompt": "You help.", "model": model, "tools": tools,
        "approval_policy": policy });
    let created = app.post("/api/v1/agents", spec).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
}

fn deploy_turns(mock: &MockServer) -> Value {
    json!([
        { "content": "I will deploy.", "tool_calls": [{ "id": "call_deploy", "name": "http_request",
            "arguments": { "method": "POST", "url": format!("{}/deploy", mock.uri()) } }] },
        { "content": "Deployed." }
    ])
}

fn input(thread: &str, run: &str, resume: Option<Value>) -> Value {
    let mut input = json!({
        "threadId": thread, "runId": run, "state": {}, "tools": [], "context": [], "forwardedProps": {},
        "messages": [{ "id": "user-1", "role": "user", "content": "Deploy the api." }],
    });
    if let Some(resume) = resume {
        input["resume"] = resume;
    }
    input
}

/// Posts a run input as `HttpAgent` does (JSON, `Accept: text/event-stream`).
async fn post_run(app: &TestApp, agent: &str, token: &str, body: Value) -> TestResponse {
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("/api/v1/agents/{agent}/ag-ui"))
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::from(body.to_string()))
        .unwrap();
    app.send(request).await
}

/// The events of a whole stream, in order.
fn events(response: &TestResponse) -> Vec<Value> {
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert!(
        response.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/event-stream"),
        "{:?}",
        response.headers
    );
    response
        .text
        .split("\n\n")
        .flat_map(|frame| frame.lines())
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).unwrap())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The stream of a run that waits: its approval as a `tool_call` interrupt; returns the interrupt.
async fn run_until_approval(app: &TestApp, thread: &str) -> Value {
    let first = events(&post_run(app, "deployer", &app.token, input(thread, "run-1", None)).await);
    assert_eq!(
        types(&first),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!((first[0]["threadId"].as_str(), first[0]["runId"].as_str()), (Some(thread), Some("run-1")));
    assert_eq!(first[3]["delta"], "I will deploy.");
    assert_eq!(first[5]["toolCallId"], "call_deploy");
    assert_eq!(first[5]["toolCallName"], "http_request");
    assert_eq!(first[5]["parentMessageId"], first[2]["messageId"]);
    let args: Value = serde_json::from_str(first[6]["delta"].as_str().unwrap()).unwrap();
    assert_eq!(args["method"], "POST");
    let finished = &first[9];
    assert_eq!((finished["threadId"].as_str(), finished["runId"].as_str()), (Some(thread), Some("run-1")));
    assert_eq!(finished["outcome"]["type"], "interrupt");
    let interrupts = finished["outcome"]["interrupts"].as_array().unwrap();
    assert_eq!(interrupts.len(), 1);
    interrupts[0].clone()
}

async fn an_approval_is_a_tool_call_interrupt_and_the_resumed_run_runs_the_call(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    agent(&app, &scripts, "deployer", deploy_turns(&mock), &["http_request"], json!({ "default": "prompt" })).await;
    let interrupt = run_until_approval(&app, "thread-approve").await;
    assert_eq!(interrupt["reason"], "tool_call");
    assert_eq!(interrupt["toolCallId"], "call_deploy");
    assert!(interrupt["message"].as_str().unwrap().contains("deployer"));
    assert_eq!(interrupt["responseSchema"]["properties"]["editedArgs"]["type"], "object", "edits are allowed");
    assert!(interrupt["expiresAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(interrupt["metadata"]["holdpoint"]["tool_name"], "http_request");
    let question_id = interrupt["id"].as_str().unwrap();
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["kind"], "approval", "the interrupt's id is the question's");
    let run_id = question["run_id"].as_str().unwrap().to_owned();
    assert_eq!(interrupt["metadata"]["holdpoint"]["question_id"], question_id);
    assert_eq!(mock.received_requests().await.unwrap().len(), 0, "nothing runs before it is approved");

    let resume = json!([{ "interruptId": question_id, "status": "resolved", "payload": { "approved": true } }]);
    let second = events(&post_run(&app, "deployer", &app.token, input("thread-approve", "run-2", Some(resume))).await);
    assert_eq!(
        types(&second),
        [
            "RUN_STARTED",
            "TOOL_CALL_RESULT",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    assert_eq!(second[0]["runId"], "run-2");
    assert_eq!(second[0]["metadata"]["holdpoint"]["run_id"], run_id.as_str(), "the thread is the same run");
    assert_eq!(second[1]["toolCallId"], "call_deploy");
    assert_eq!(second[1]["role"], "tool");
    assert_eq!(second[4]["delta"], "Deployed.");
    assert_eq!(second[7]["outcome"]["type"], "success");
    assert_eq!(second[7]["result"], "Deployed.");
    assert_eq!(mock.received_requests().await.unwrap().len(), 1, "the approved call ran once");
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!((question["status"].as_str(), question["response"]["value"].as_bool()), (Some("answered"), Some(true)));
    let run = app.get(&format!("/api/v1/runs/{run_id}")).await.json;
    assert_eq!(run["status"], "completed");

    // The thread's run has ended: a new run on it is refused, and nothing more runs.
    let again = post_run(&app, "deployer", &app.token, input("thread-approve", "run-3", None)).await;
    assert_error(&again, StatusCode::CONFLICT, "conflict");
}

async fn edited_arguments_run_instead_and_a_cancelled_resume_rejects_the_call(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    Mock::given(method("POST")).and(path("/canary")).respond_with(ResponseTemplate::new(201)).mount(&mock).await;
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    agent(&app, &scripts, "deployer", deploy_turns(&mock), &["http_request"], json!({ "default": "prompt" })).await;

    let interrupt = run_until_approval(&app, "thread-edit").await;
    let edited = json!({ "method": "POST", "url": format!("{}/canary", mock.uri()) });
    let resume = json!([{ "interruptId": interrupt["id"], "status": "resolved",
        "payload": { "approved": true, "editedArgs": edited } }]);
    let done = events(&post_run(&app, "deployer", &app.token, input("thread-edit", "run-2", Some(resume))).await);
    assert_eq!(done.last().unwrap()["outcome"]["type"], "success");
    let received = mock.received_requests().await.unwrap();
    assert_eq!(received.iter().map(|r| r.url.path()).collect::<Vec<_>>(), ["/canary"]);

    let interrupt = run_until_approval(&app, "thread-cancel").await;
    let question_id = interrupt["id"].as_str().unwrap();
    let resume = json!([{ "interruptId": question_id, "status": "cancelled",
        "metadata": { "holdpoint": { "comment": "not today" } } }]);
    let done = events(&post_run(&app, "deployer", &app.token, input("thread-cancel", "run-2", Some(resume))).await);
    assert_eq!(types(&done)[1], "TOOL_CALL_RESULT");
    let result: Value = serde_json::from_str(done[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["status"], "rejected");
    assert_eq!(result["reason"], "not today");
    assert_eq!(done.last().unwrap()["outcome"]["type"], "success");
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["status"], "cancelled");
    assert_eq!(mock.received_requests().await.unwrap().len(), 1, "the cancelled call never ran");
}

async fn questions_of_ask_user_are_input_required_and_confirmation_interrupts(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    let turns = json!([
        { "content": "", "tool_calls": [
            { "id": "call_notes", "name": "ask_user", "arguments": { "title": "Release notes?", "response_type": "form",
                "fields": [
                    { "key": "summary", "label": "Summary", "response_type": "text", "required": true },
                    { "key": "size", "label": "Size", "response_type": "choice", "required": false,
                      "options": [{ "value": "s", "label": "Small" }, { "value": "l", "label": "Large" }] }
                ] } }
        ] },
        { "content": "", "tool_calls": [
            { "id": "call_page", "name": "ask_user", "arguments": { "title": "Page the on-call?",
                "response_type": "boolean" } }
        ] },
        { "content": "Noted." }
    ]);
    agent(&app, &scripts, "writer", turns, &["ask_user"], json!({})).await;
    let first = events(&post_run(&app, "writer", &app.token, input("thread-ask", "run-1", None)).await);
    assert_eq!(
        types(&first),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STEP_FINISHED",
            "RUN_FINISHED"
        ]
    );
    let interrupt = &first[6]["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], "input_required");
    let schema = &interrupt["responseSchema"];
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["summary"]));
    assert_eq!(schema["properties"]["summary"]["type"], "string");
    assert_eq!(schema["properties"]["size"]["oneOf"][1], json!({ "const": "l", "title": "Large" }));

    // A value that does not fit the form is refused, naming it, and changes nothing.
    let wrong = json!([{ "interruptId": interrupt["id"], "status": "resolved", "payload": { "colour": "red" } }]);
    let refused = post_run(&app, "writer", &app.token, input("thread-ask", "run-2", Some(wrong))).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    // Named as the entry sent them: under its payload, not the answer's `value` the entry never had.
    let fields = error["details"]["fields"].as_object().unwrap();
    assert!(fields.contains_key("resume[0].payload.colour"), "{error}");
    assert!(fields.contains_key("resume[0].payload.summary"), "{error}");
    assert!(!fields.keys().any(|k| k.contains(".value")), "{error}");
    let pending = app.get(&format!("/api/v1/questions/{}", interrupt["id"].as_str().unwrap())).await.json;
    assert_eq!(pending["status"], "pending");

    let answer = json!([{ "interruptId": interrupt["id"], "status": "resolved",
        "payload": { "summary": "Faster logins", "size": "l" } }]);
    let second = events(&post_run(&app, "writer", &app.token, input("thread-ask", "run-2", Some(answer))).await);
    assert_eq!(types(&second)[1], "TOOL_CALL_RESULT");
    let result: Value = serde_json::from_str(second[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["value"], json!({ "summary": "Faster logins", "size": "l" }));
    let confirm = &second.last().unwrap()["outcome"]["interrupts"][0];
    assert_eq!(confirm["reason"], "confirmation");
    assert!(confirm["responseSchema"].is_null());

    let yes = json!([{ "interruptId": confirm["id"], "status": "resolved", "payload": true }]);
    let third = events(&post_run(&app, "writer", &app.token, input("thread-ask", "run-3", Some(yes))).await);
    let result: Value = serde_json::from_str(third[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["value"], true);
    assert_eq!(third.last().unwrap()["result"], "Noted.");
}

async fn bad_input_is_refused_in_the_error_shape_before_any_stream(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    agent(&app, &scripts, "deployer", deploy_turns(&mock), &["http_request"], json!({ "default": "prompt" })).await;
    let token = app.token.clone();

    let request = |body: &str, accept: &str| {
        Request::builder()
            .method(Method::POST)
            .uri("/api/v1/agents/deployer/ag-ui")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, accept)
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    let good = input("thread-bad", "run-1", None).to_string();
    assert_error(&app.send(request("{not json", "text/event-stream")).await, StatusCode::BAD_REQUEST, "bad_request");
    assert_error(&app.send(request(&good, "application/json")).await, StatusCode::BAD_REQUEST, "bad_request");
    let no_thread = json!({ "runId": "r", "messages": [] }).to_string();
    let refused = app.send(request(&no_thread, "text/event-stream")).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let bad_status = json!({ "threadId": "t", "runId": "r", "messages": [],
        "resume": [{ "interruptId": "x", "status": "maybe" }] });
    let refused = app.send(request(&bad_status.to_string(), "text/event-stream")).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let no_user = json!({ "threadId": "t", "runId": "r",
        "messages": [{ "id": "a", "role": "assistant", "content": "hi" }] });
    let refused = app.send(request(&no_user.to_string(), "text/event-stream")).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["messages"].is_string());
    let nobody = post_run(&app, "nobody", &app.token, input("t", "r", None)).await;
    assert_error(&nobody, StatusCode::NOT_FOUND, "not_found");
    let stray = json!([{ "interruptId": uuid::Uuid::now_v7(), "status": "resolved", "payload": true }]);
    let refused = post_run(&app, "deployer", &app.token, input("thread-none", "r", Some(stray))).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let runs = app.get("/api/v1/runs").await.json;
    assert_eq!(runs["items"].as_array().unwrap().len(), 0, "no refused request started a run");

    let interrupt = run_until_approval(&app, "thread-bad").await;
    // A thread that waits takes only a resume; one naming what is not its interrupt changes nothing.
    let again = post_run(&app, "deployer", &app.token, input("thread-bad", "run-2", None)).await;
    assert_error(&again, StatusCode::CONFLICT, "conflict");
    let mixed = json!([
        { "interruptId": interrupt["id"], "status": "resolved", "payload": { "approved": true } },
        { "interruptId": "not-an-interrupt", "status": "cancelled" }
    ]);
    let refused = post_run(&app, "deployer", &app.token, input("thread-bad", "run-2", Some(mixed))).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["resume[1].interruptId"].is_string(), "{error}");
    let no_payload = json!([{ "interruptId": interrupt["id"], "status": "resolved" }]);
    let refused = post_run(&app, "deployer", &app.token, input("thread-bad", "run-2", Some(no_payload))).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let question = app.get(&format!("/api/v1/questions/{}", interrupt["id"].as_str().unwrap())).await.json;
    assert_eq!(question["status"], "pending", "a refused resume answers nothing");
    assert_eq!(mock.received_requests().await.unwrap().len(), 0);
}

async fn who_may_run_and_answer_is_who_may_through_the_api(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    agent(&app, &scripts, "deployer", deploy_turns(&mock), &["http_request"], json!({ "default": "prompt" })).await;
    let viewer = app.create_token("default", Role::Viewer).await;
    let refused = post_run(&app, "deployer", &viewer, input("thread-authz", "run-1", None)).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");

    // An agent token runs the agent and sees its interrupt, but may not approve the call.
    let agent_token = app.create_token("default", Role::Agent).await;
    let first = events(&post_run(&app, "deployer", &agent_token, input("thread-authz", "run-1", None)).await);
    let interrupt = &first.last().unwrap()["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], "tool_call");
    let approve = json!([{ "interruptId": interrupt["id"], "status": "resolved", "payload": { "approved": true } }]);
    let refused = post_run(&app, "deployer", &agent_token, input("thread-authz", "run-2", Some(approve.clone()))).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    let responder = app.create_token("default", Role::Responder).await;
    let refused = post_run(&app, "deployer", &responder, input("thread-authz", "run-2", Some(approve.clone()))).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
    // Another agent's token does not see the thread at all.
    let stranger = app.create_token("default", Role::Agent).await;
    let refused = post_run(&app, "deployer", &stranger, input("thread-authz", "run-2", Some(approve.clone()))).await;
    assert_error(&refused, StatusCode::NOT_FOUND, "not_found");
    let question = app.get(&format!("/api/v1/questions/{}", interrupt["id"].as_str().unwrap())).await.json;
    assert_eq!(question["status"], "pending");

    // An approver decides it; the stream goes on to the end.
    let approver = app.create_token("default", Role::Approver).await;
    let done = events(&post_run(&app, "deployer", &approver, input("thread-authz", "run-2", Some(approve))).await);
    assert_eq!(done.last().unwrap()["outcome"]["type"], "success");
    assert_eq!(mock.received_requests().await.unwrap().len(), 1);

    // The agent that asked may withdraw its own question: a cancelled resume.
    let second = events(&post_run(&app, "deployer", &agent_token, input("thread-withdraw", "run-1", None)).await);
    let interrupt = &second.last().unwrap()["outcome"]["interrupts"][0];
    let cancel = json!([{ "interruptId": interrupt["id"], "status": "cancelled" }]);
    let done = events(&post_run(&app, "deployer", &agent_token, input("thread-withdraw", "run-2", Some(cancel))).await);
    assert_eq!(done.last().unwrap()["outcome"]["type"], "success");
    assert_eq!(mock.received_requests().await.unwrap().len(), 1);
}

async fn a_paused_run_is_one_interrupt_of_its_own_that_a_resume_continues(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    // One step per segment: the first turn's non-blocking question completes at once, and the budget is spent.
    let turns = json!([
        { "content": "Noting a preference.", "tool_calls": [{ "id": "call_pref", "name": "ask_user",
            "arguments": { "title": "Any preferred window?", "kind": "non_blocking" } }] },
        { "content": "Done." }
    ]);
    let model = scripts.write("pauser.json", &turns);
    let spec = json!({ "name": "pauser", "model": model, "tools": ["ask_user"], "max_steps": 1 });
    assert_eq!(app.post("/api/v1/agents", spec).await.status, StatusCode::CREATED);
    let first = events(&post_run(&app, "pauser", &app.token, input("thread-pause", "run-1", None)).await);
    let finished = first.last().unwrap();
    let run_id = finished["metadata"]["holdpoint"]["run_id"].as_str().unwrap();
    let interrupts = finished["outcome"]["interrupts"].as_array().unwrap();
    assert_eq!(interrupts.len(), 1, "the non-blocking question holds nothing: {interrupts:?}");
    assert_eq!(
        (interrupts[0]["id"].as_str(), interrupts[0]["reason"].as_str()),
        (Some(run_id), Some("input_required"))
    );
    assert_eq!(app.get(&format!("/api/v1/runs/{run_id}")).await.json["status"], "paused");

    let resume = json!([{ "interruptId": run_id, "status": "resolved", "payload": { "prompt": "Go on." } }]);
    let second = events(&post_run(&app, "pauser", &app.token, input("thread-pause", "run-2", Some(resume))).await);
    assert_eq!(second.last().unwrap()["result"], "Done.");
    let messages = app.get(&format!("/api/v1/runs/{run_id}/messages")).await.json;
    let prompt = messages["items"].as_array().unwrap().iter().find(|m| m["content"]["content"] == "Go on.");
    assert!(prompt.is_some_and(|m| m["role"] == "user"), "the payload's prompt is the next user message");
}

/// The first answer wins everywhere: a resume entry naming a question someone already answered elsewhere (here over
/// the API, as Slack or the inbox would) is skipped, its answer stands, the other entries apply, and the stream says
/// which entries were skipped and how their questions were resolved.
async fn a_resume_entry_resolved_elsewhere_first_is_skipped_and_reported(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    let turns = json!([
        { "content": "", "tool_calls": [
            { "id": "call_region", "name": "ask_user", "arguments": { "title": "Which region?" } }
        ] },
        { "content": "", "tool_calls": [
            { "id": "call_size", "name": "ask_user", "arguments": { "title": "Which size?" } }
        ] },
        { "content": "Noted." }
    ]);
    agent(&app, &scripts, "sizer", turns, &["ask_user"], json!({})).await;
    let first = events(&post_run(&app, "sizer", &app.token, input("thread-first", "run-1", None)).await);
    let region = first.last().unwrap()["outcome"]["interrupts"][0]["id"].as_str().unwrap().to_owned();
    // Answered in Slack (here: over the API) while the client still holds the interrupt; the run goes on and asks
    // its next question.
    let elsewhere = app
        .post(&format!("/api/v1/questions/{region}/answer"), json!({ "value": "us-east", "comment": "cheaper" }))
        .await;
    assert_eq!(elsewhere.status, StatusCode::OK, "{}", elsewhere.text);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let size = loop {
        let pending = app.get("/api/v1/questions?status=pending").await.json;
        if let Some(size) = pending["items"].as_array().and_then(|items| items.first()) {
            break size["id"].as_str().unwrap().to_owned();
        }
        assert!(tokio::time::Instant::now() < deadline, "the run never asked its second question");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };

    let resume = json!([
        { "interruptId": region, "status": "resolved", "payload": "eu-west" },
        { "interruptId": size, "status": "resolved", "payload": "large" }
    ]);
    let second = events(&post_run(&app, "sizer", &app.token, input("thread-first", "run-2", Some(resume))).await);
    assert_eq!(types(&second)[..2], ["RUN_STARTED", "CUSTOM"], "{second:?}");
    assert_eq!(second[1]["name"], "holdpoint.already_resolved");
    let skipped = second[1]["value"]["entries"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["interruptId"], region.as_str());
    assert_eq!(skipped[0]["status"], "answered");
    assert_eq!(skipped[0]["response"]["value"], "us-east");
    assert!(skipped[0]["answeredBy"].is_string(), "{skipped:?}");
    assert_eq!(second.last().unwrap()["outcome"]["type"], "success", "{second:?}");
    // The run went on while the client held the interrupt: the stream goes on from where the first one stopped,
    // so the client sees the region's result, the question it never saw asked, and the final message.
    let results = second.iter().filter(|e| e["type"] == "TOOL_CALL_RESULT").count();
    assert_eq!(results, 2, "both answers' results: {second:?}");
    let asked: Vec<&Value> =
        second.iter().filter(|e| e["type"] == "TOOL_CALL_START").map(|e| &e["toolCallName"]).collect();
    assert_eq!(asked, [&json!("ask_user")], "{second:?}");
    assert!(second.iter().any(|e| e["delta"] == "Noted."), "{second:?}");

    let region = app.get(&format!("/api/v1/questions/{region}")).await.json;
    assert_eq!(region["response"]["value"], "us-east", "the first answer stands: {region}");
    let size = app.get(&format!("/api/v1/questions/{size}")).await.json;
    assert_eq!((size["status"].as_str(), size["response"]["value"].as_str()), (Some("answered"), Some("large")));
}

/// A run that waits for its sub-agents is held by their questions: the stream ends with those as its interrupts
/// (naming the sub-agent's run), a resume answers them, and the stream follows the run until it finishes.
async fn a_run_waiting_for_its_sub_agents_is_interrupted_by_their_questions(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    let child = json!([
        { "tool_calls": [{ "id": "call_table", "name": "ask_user", "arguments": { "title": "Which table?" } }] },
        { "content": "migrated users" }
    ]);
    agent(&app, &scripts, "migrator", child, &["ask_user"], json!({})).await;
    let parent = json!([
        { "tool_calls": [{ "id": "call_spawn", "name": "spawn_agents",
            "arguments": { "agents": [{ "agent": "migrator", "input": "Migrate" }], "wait": true } }] },
        { "content": "all done" }
    ]);
    agent(&app, &scripts, "coordinator", parent, &["spawn_agents"], json!({})).await;

    let first = events(&post_run(&app, "coordinator", &app.token, input("thread-children", "run-1", None)).await);
    let finished = first.last().unwrap();
    assert_eq!(finished["outcome"]["type"], "interrupt", "{first:?}");
    assert_eq!(first.iter().find(|e| e["type"] == "TOOL_CALL_START").unwrap()["toolCallName"], "spawn_agents");
    let run_id = first[0]["metadata"]["holdpoint"]["run_id"].as_str().unwrap().to_owned();
    assert_eq!(app.get(&format!("/api/v1/runs/{run_id}")).await.json["status"], "waiting_for_children");
    let interrupts = finished["outcome"]["interrupts"].as_array().unwrap();
    assert_eq!(interrupts.len(), 1, "{interrupts:?}");
    let interrupt = &interrupts[0];
    assert_eq!(interrupt["reason"], "input_required");
    assert!(interrupt["message"].as_str().unwrap().contains("Which table?"));
    let children = app.get(&format!("/api/v1/runs?parent_run_id={run_id}")).await.json;
    let child_id = children["items"][0]["id"].as_str().unwrap();
    assert_eq!(interrupt["metadata"]["holdpoint"]["run_id"], child_id, "the interrupt names the sub-agent's run");

    // Without resume entries the thread is busy; another thread's sub-agent question is not this thread's
    // interrupt, and naming it answers nothing; the thread's own is answered.
    let busy = post_run(&app, "coordinator", &app.token, input("thread-children", "run-2", None)).await;
    assert_error(&busy, StatusCode::CONFLICT, "conflict");
    let other = events(&post_run(&app, "coordinator", &app.token, input("thread-other", "run-1", None)).await);
    let foreign = other.last().unwrap()["outcome"]["interrupts"][0]["id"].as_str().unwrap().to_owned();
    let wrong = json!([{ "interruptId": foreign, "status": "resolved", "payload": "users" }]);
    let refused = post_run(&app, "coordinator", &app.token, input("thread-children", "run-2", Some(wrong))).await;
    let error = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    assert!(error["details"]["fields"]["resume[0].interruptId"].is_string(), "{error}");
    assert_eq!(app.get(&format!("/api/v1/questions/{foreign}")).await.json["status"], "pending");
    let resume = json!([{ "interruptId": interrupt["id"], "status": "resolved", "payload": "users" }]);
    let second =
        events(&post_run(&app, "coordinator", &app.token, input("thread-children", "run-2", Some(resume))).await);
    let finished = second.last().unwrap();
    assert_eq!(finished["outcome"]["type"], "success", "{second:?}");
    assert_eq!(finished["result"], "all done");
    let report = second.iter().find(|e| e["type"] == "TOOL_CALL_RESULT").expect("the sub-agents' report");
    let report: Value = serde_json::from_str(report["content"].as_str().unwrap()).unwrap();
    assert_eq!(report["runs"][0]["result"], "migrated users");
    let question = app.get(&format!("/api/v1/questions/{}", interrupt["id"].as_str().unwrap())).await.json;
    assert_eq!(
        (question["status"].as_str(), question["response"]["value"].as_str()),
        (Some("answered"), Some("users"))
    );
}

/// `post_run` by a person signed in through the browser (session cookie and CSRF token).
async fn post_run_as(app: &TestApp, agent: &str, session: &common::Session, body: Value) -> TestResponse {
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("/api/v1/agents/{agent}/ag-ui"))
        .header(header::COOKIE, &session.cookie)
        .header("x-csrf-token", &session.csrf)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::from(body.to_string()))
        .unwrap();
    app.send(request).await
}

/// A call a rule asks two people to approve is approved through AG-UI as anywhere else: each person resumes the
/// thread with their approval; after the first the run still waits (its interrupt offered again, with the approval
/// counted), one person's second approval does not count twice, and the call runs once, after the second person's.
async fn a_call_that_needs_two_approvals_runs_after_two_people_resume_it(backend: common::Backend) {
    let (scripts, mock) = (Scripts::new(), deploy_mock().await);
    let Some(app) = start(backend, &scripts, &mock).await else { return };
    let rules = json!({ "default": "allow", "rules": [{ "name": "two-for-deploys", "tools": ["http_request"],
        "decision": "ask", "ask": { "required_approvals": 2 } }] });
    let saved = app.call(Method::PUT, "/api/v1/rules", Some(&app.token), Some(rules)).await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    agent(&app, &scripts, "deployer", deploy_turns(&mock), &["http_request"], json!({ "default": "prompt" })).await;
    let interrupt = run_until_approval(&app, "thread-quorum").await;
    let question_id = interrupt["id"].as_str().unwrap().to_owned();
    let signed_in = |username: &'static str| {
        let app = &app;
        async move {
            app.add_person(username, "correct horse battery staple", Role::Approver).await;
            let form = format!("username={username}&password=correct+horse+battery+staple&next=%2Finbox");
            app.sign_in_with(&form).await.expect("signed in")
        }
    };
    let (ana, ben) = (signed_in("ana").await, signed_in("ben").await);
    let approve = json!([{ "interruptId": question_id, "status": "resolved", "payload": { "approved": true } }]);

    let first =
        events(&post_run_as(&app, "deployer", &ana, input("thread-quorum", "run-2", Some(approve.clone()))).await);
    let finished = first.last().unwrap();
    assert_eq!(finished["outcome"]["type"], "interrupt", "one approval of two: the run still waits: {first:?}");
    assert_eq!(finished["outcome"]["interrupts"][0]["id"], question_id.as_str());
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["status"], "pending", "{question}");
    assert_eq!(question["approvals"].as_array().map(Vec::len), Some(1), "{question}");
    let again =
        events(&post_run_as(&app, "deployer", &ana, input("thread-quorum", "run-3", Some(approve.clone()))).await);
    assert_eq!(again.last().unwrap()["outcome"]["type"], "interrupt", "one person counts once: {again:?}");
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["approvals"].as_array().map(Vec::len), Some(1), "{question}");
    assert_eq!(mock.received_requests().await.unwrap().len(), 0, "nothing runs on one approval");

    let second = events(&post_run_as(&app, "deployer", &ben, input("thread-quorum", "run-4", Some(approve))).await);
    assert_eq!(second.last().unwrap()["outcome"]["type"], "success", "{second:?}");
    assert_eq!(mock.received_requests().await.unwrap().len(), 1, "the call ran once, after the second approval");
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["status"], "answered", "{question}");
}

on_both_backends!(
    a_call_that_needs_two_approvals_runs_after_two_people_resume_it,
    a_run_waiting_for_its_sub_agents_is_interrupted_by_their_questions,
    a_resume_entry_resolved_elsewhere_first_is_skipped_and_reported,
    an_approval_is_a_tool_call_interrupt_and_the_resumed_run_runs_the_call,
    edited_arguments_run_instead_and_a_cancelled_resume_rejects_the_call,
    questions_of_ask_user_are_input_required_and_confirmation_interrupts,
    bad_input_is_refused_in_the_error_shape_before_any_stream,
    who_may_run_and_answer_is_who_may_through_the_api,
    a_paused_run_is_one_interrupt_of_its_own_that_a_resume_continues,
);
