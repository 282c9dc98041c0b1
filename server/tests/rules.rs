//! Approval rules (docs/rules.md): one document per workspace, saved by admins with every fault named, deciding each
//! tool call (deny > ask > allow, failing closed) wherever calls are decided: `/rules/test`, `/decide`, the
//! executor and MCP's `request_approval`.

use crate::common;

use std::time::Duration;

use app::types::Role;
use axum::http::{Method, StatusCode};
use common::{Scripts, TestApp, assert_error};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

on_both_backends!(
    a_saved_document_round_trips_with_its_version_bumped_and_audited,
    a_faulty_document_is_refused_naming_its_fields_and_nothing_is_stored,
    the_strictest_decision_wins_and_a_condition_splits_one_tools_calls,
    a_dry_run_rule_is_audited_and_counted_but_decides_nothing,
    a_condition_that_fails_to_evaluate_fails_closed,
    decide_asks_and_with_wait_answers_once_a_person_decides,
    decide_asks_as_the_caller_wishes_where_the_rule_is_silent_and_returns_the_edited_arguments,
    a_grant_lets_an_ask_through_but_never_a_deny,
    the_executor_obeys_the_rules_over_the_agents_own_policy,
    mcp_request_approval_obeys_the_rules,
);

async fn put_rules(app: &TestApp, token: &str, document: Value) -> common::TestResponse {
    app.call(Method::PUT, "/api/v1/rules", Some(token), Some(document)).await
}

async fn save(app: &TestApp, document: Value) -> Value {
    let saved = put_rules(app, &app.token, document).await;
    assert_eq!(saved.status, StatusCode::OK, "{}", saved.text);
    saved.json
}

async fn test_call(app: &TestApp, call: Value) -> Value {
    let tested = app.post("/api/v1/rules/test", call).await;
    assert_eq!(tested.status, StatusCode::OK, "{}", tested.text);
    tested.json
}

async fn audit(app: &TestApp, action: &str) -> Vec<Value> {
    let page = app.get(&format!("/api/v1/audit?action={action}&limit=100")).await.json;
    page["items"].as_array().unwrap().clone()
}

async fn decide(app: &TestApp, token: &str, body: Value) -> Value {
    let decided = app.call(Method::POST, "/api/v1/decide", Some(token), Some(body)).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    decided.json
}

async fn a_saved_document_round_trips_with_its_version_bumped_and_audited(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let empty = app.get("/api/v1/rules").await.json;
    assert_eq!(empty, json!({ "version": 0, "rules": [], "default": "ask", "updated_at": null, "updated_by": null }));

    let first = json!({ "rules": [{ "name": "shell-asks", "tools": ["shell"], "decision": "ask",
        "reason": "shell commands change things", "ask": { "urgency": "critical", "required_approvals": 2 } }],
        "default": "allow" });
    let saved = save(&app, first.clone()).await;
    assert_eq!(saved["version"], 1);
    assert_eq!(saved["updated_by"], "admin of default");
    assert_eq!(saved["rules"][0]["mode"], "enforce", "the default mode is spelt out");
    let read = app.get("/api/v1/rules").await.json;
    assert_eq!(read, saved, "what was saved is what is read");
    assert_eq!(read["rules"][0]["ask"], json!({ "urgency": "critical", "required_approvals": 2 }));

    let second = json!({ "rules": [{ "name": "shell-denied", "tools": ["shell"], "decision": "deny" }] });
    let saved = save(&app, second).await;
    assert_eq!((saved["version"].clone(), saved["default"].clone()), (json!(2), json!("ask")));

    let entries = audit(&app, "rules.updated").await;
    assert_eq!(entries.len(), 2);
    let latest = &entries[0];
    assert_eq!(latest["actor"], "admin of default");
    assert_eq!(latest["before"]["version"], 1);
    assert_eq!(latest["before"]["document"]["rules"][0]["name"], "shell-asks");
    assert_eq!(latest["after"]["version"], 2);
    assert_eq!(latest["after"]["document"]["rules"][0]["name"], "shell-denied");
    assert!(latest["diff"].as_array().is_some_and(|ops| !ops.is_empty()), "{latest}");
    assert_eq!(entries[1]["before"]["document"], Value::Null, "the first save replaced nothing");

    for role in [Role::Approver, Role::Agent] {
        let token = app.create_token("default", role).await;
        let refused = put_rules(&app, &token, first.clone()).await;
        assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
        assert_eq!(app.call(Method::GET, "/api/v1/rules", Some(&token), None).await.json["version"], 2);
    }
}

async fn a_faulty_document_is_refused_naming_its_fields_and_nothing_is_stored(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    let good = save(&app, json!({ "rules": [{ "name": "ok", "tools": ["*"], "decision": "allow" }] })).await;

    let faulty = json!({ "rules": [
        { "name": "ok", "tools": ["*"], "decision": "allow" },
        { "name": "big", "tools": ["pay"], "when": "args.amount >", "decision": "ask" },
        { "name": "ok", "tools": ["shell"], "decision": "deny" },
        { "name": "odd", "tools": ["shell"], "when": "args.command ==", "decision": "maybe" },
        { "name": "glob", "tools": [""], "decision": "deny" },
        { "name": "slow", "tools": ["*"], "decision": "ask", "ask": { "timeout_seconds": 0 } },
        "not a rule",
    ], "default": "allow" });
    let refused = put_rules(&app, &app.token, faulty.clone()).await;
    let details = assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    let fields = details["details"]["fields"].as_object().unwrap();
    // One refusal names every fault: those of the shape (a decision that is no decision, a rule that is no object)
    // and, beside them, what the rules engine and the approval questions find.
    assert!(fields["rules[3].decision"].is_string(), "{details}");
    assert!(fields["rules[3].when"].as_str().unwrap_or_default().starts_with("syntax error at 1:"), "{details}");
    assert!(fields["rules[1].when"].as_str().unwrap_or_default().starts_with("syntax error at 1:"), "{details}");
    assert!(fields["rules[2].name"].as_str().unwrap_or_default().contains("earlier rule"), "{details}");
    assert!(fields["rules[4].tools[0]"].is_string(), "{details}");
    assert!(fields["rules[5].ask.timeout_seconds"].is_string(), "{details}");
    assert_eq!(fields["rules[6]"], "must be an object", "{details}");
    let named: Vec<&str> = fields.keys().map(String::as_str).collect();
    assert_eq!(
        named,
        [
            "rules[1].when",
            "rules[2].name",
            "rules[3].decision",
            "rules[3].when",
            "rules[4].tools[0]",
            "rules[5].ask.timeout_seconds",
            "rules[6]"
        ],
        "nothing else, and nothing of the stand-ins read in place of the faulty fields: {details}"
    );

    assert_eq!(app.get("/api/v1/rules").await.json, good, "nothing was stored");
    assert_eq!(audit(&app, "rules.updated").await.len(), 1);

    // The check answers the same without storing, and 200 for a valid document.
    let checked = app.post("/api/v1/rules/check", faulty).await;
    assert_eq!((checked.status, &checked.json), (StatusCode::UNPROCESSABLE_ENTITY, &refused.json));
    let checked = app.post("/api/v1/rules/check", json!({ "rules": [] })).await;
    assert_eq!(checked.status, StatusCode::OK, "{}", checked.text);
    assert_eq!(checked.json, json!({ "valid": true, "rules": 0 }));
    assert_eq!(app.get("/api/v1/rules").await.json, good);
}

async fn the_strictest_decision_wins_and_a_condition_splits_one_tools_calls(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    save(
        &app,
        json!({ "rules": [
            { "name": "payments-small", "tools": ["pay"], "when": "args.amount <= 1000", "decision": "allow" },
            { "name": "payments-large", "tools": ["pay"], "when": "args.amount > 1000", "decision": "ask",
              "reason": "large payments need a person" },
            { "name": "everything", "tools": ["*"], "decision": "allow" },
            { "name": "shell-asks", "tools": ["shell"], "decision": "ask" },
            { "name": "no-rm", "tools": ["sh*"], "when": "args.command.startsWith('rm ')", "decision": "deny" },
            { "name": "bots-only", "tools": ["*"], "agents": ["deploy-*"], "decision": "deny" },
        ], "default": "deny" }),
    )
    .await;
    let small = test_call(&app, json!({ "tool": "pay", "arguments": { "amount": 900 } })).await;
    assert_eq!(
        small,
        json!({ "decision": "allow", "rule": "payments-small", "matched": ["payments-small", "everything"] })
    );
    let large = test_call(&app, json!({ "tool": "pay", "arguments": { "amount": 1500 } })).await;
    assert_eq!(
        large,
        json!({ "decision": "ask", "rule": "payments-large", "matched": ["payments-large", "everything"] })
    );
    let ls = test_call(&app, json!({ "tool": "shell", "arguments": { "command": "ls" } })).await;
    assert_eq!((ls["decision"].clone(), ls["rule"].clone()), (json!("ask"), json!("shell-asks")));
    let rm = test_call(&app, json!({ "tool": "shell", "arguments": { "command": "rm -rf /" } })).await;
    assert_eq!(rm, json!({ "decision": "deny", "rule": "no-rm", "matched": ["everything", "shell-asks", "no-rm"] }));
    let bot = test_call(&app, json!({ "tool": "pay", "arguments": { "amount": 1 }, "agent": "deploy-bot" })).await;
    assert_eq!((bot["decision"].clone(), bot["rule"].clone()), (json!("deny"), json!("bots-only")));

    // With no rule matching, the default decides and no rule is named.
    save(&app, json!({ "rules": [{ "name": "pay", "tools": ["pay"], "decision": "allow" }], "default": "deny" })).await;
    let other = test_call(&app, json!({ "tool": "shell", "arguments": {} })).await;
    assert_eq!(other, json!({ "decision": "deny", "rule": null, "matched": [] }));
}

async fn a_dry_run_rule_is_audited_and_counted_but_decides_nothing(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    save(
        &app,
        json!({ "rules": [
            { "name": "would-deny-deletes", "tools": ["*delete*"], "decision": "deny", "mode": "dry_run" },
        ], "default": "allow" }),
    )
    .await;
    let agent = app.create_token("default", Role::Agent).await;
    let decided = decide(&app, &agent, json!({ "tool": "kubectl_delete", "arguments": { "pod": "web-1" } })).await;
    assert_eq!(decided["decision"], "allow", "a dry-run rule decides nothing: {decided}");
    assert_eq!(decided["rule"], Value::Null);
    let tested = test_call(&app, json!({ "tool": "kubectl_delete", "arguments": {} })).await;
    assert_eq!(tested["matched"], json!(["would-deny-deletes"]));

    let recorded = audit(&app, "rule.dry_run").await;
    assert_eq!(recorded.len(), 1, "the test endpoint records nothing: {recorded:?}");
    assert_eq!(recorded[0]["subject_id"], "would-deny-deletes");
    assert_eq!(recorded[0]["after"]["would_decide"], "deny");
    assert_eq!(recorded[0]["after"]["decided"], "allow");
    // A gateway call's arguments may hold secrets, and the log is kept for good: only their digest is recorded.
    assert_eq!(recorded[0]["after"]["arguments"], Value::Null, "{:?}", recorded[0]);
    assert_eq!(
        recorded[0]["after"]["arguments_sha256"],
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(br#"{"pod":"web-1"}"#))
    );
    let decisions = audit(&app, "rules.decided").await;
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0]["after"]["decision"], "allow");

    let metrics = app.get("/metrics").await.text;
    let line = metrics.lines().find(|l| l.starts_with("holdpoint_rule_matches_total{")).unwrap_or_default();
    assert!(line.contains("rule=\"would-deny-deletes\"") && line.contains("mode=\"dry_run\""), "{metrics}");
    assert!(line.ends_with(" 1"), "{line}");
}

async fn a_condition_that_fails_to_evaluate_fails_closed(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    save(
        &app,
        json!({ "rules": [
            { "name": "small-allowed", "tools": ["pay"], "when": "args.amount < 100", "decision": "allow" },
            { "name": "large-asks", "tools": ["pay"], "when": "args.amount > 1000", "decision": "ask" },
        ], "default": "allow" }),
    )
    .await;
    let text = test_call(&app, json!({ "tool": "pay", "arguments": { "amount": "a lot" } })).await;
    assert_eq!(text, json!({ "decision": "ask", "rule": "large-asks", "matched": ["large-asks"] }));
    let missing = test_call(&app, json!({ "tool": "pay", "arguments": {} })).await;
    assert_eq!(missing["decision"], "ask");
    let fine = test_call(&app, json!({ "tool": "pay", "arguments": { "amount": 50 } })).await;
    assert_eq!(fine["decision"], "allow");
}

async fn decide_asks_and_with_wait_answers_once_a_person_decides(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    save(
        &app,
        json!({ "rules": [{ "name": "deploys", "tools": ["deploy"], "decision": "ask", "reason": "production",
            "ask": { "urgency": "critical", "timeout_seconds": 600 } }], "default": "allow" }),
    )
    .await;
    let agent = app.create_token("default", Role::Agent).await;
    let asked = decide(&app, &agent, json!({ "tool": "deploy", "arguments": { "service": "web" } })).await;
    assert_eq!((asked["decision"].clone(), asked["rule"].clone()), (json!("ask"), json!("deploys")));
    assert_eq!(asked["reason"], "production");
    let question = &asked["question"];
    assert_eq!(question["kind"], "approval");
    assert_eq!(question["status"], "pending");
    assert_eq!(question["urgency"], "critical");
    assert_eq!(question["action"], json!({ "tool_name": "deploy", "arguments": { "service": "web" } }));
    assert!(question["body"].as_str().unwrap().contains("production"), "{question}");

    // With wait, the call holds until a person approves, then answers allow.
    let waiting = {
        let router = app.router.clone();
        let agent = agent.clone();
        tokio::spawn(async move {
            let request = axum::http::Request::post("/api/v1/decide")
                .header("authorization", format!("Bearer {agent}"))
                .header("content-type", "application/json")
                .body(axum::body::Body::from(
                    json!({ "tool": "deploy", "arguments": { "service": "api" }, "wait": true }).to_string(),
                ))
                .unwrap();
            let response = tower::ServiceExt::oneshot(router, request).await.unwrap();
            let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let pending = loop {
        let page = app.get("/api/v1/questions?status=pending").await.json;
        let found =
            page["items"].as_array().unwrap().iter().find(|q| q["action"]["arguments"]["service"] == "api").cloned();
        if let Some(found) = found {
            break found;
        }
        assert!(tokio::time::Instant::now() < deadline, "the waiting decide never asked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!waiting.is_finished(), "it waits for the person");
    let id = pending["id"].as_str().unwrap();
    let approved = app.post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": true })).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let decided = tokio::time::timeout(Duration::from_secs(20), waiting).await.unwrap().unwrap();
    assert_eq!(decided["decision"], "allow", "{decided}");
    assert_eq!(decided["question"]["status"], "answered");

    // A rejection answers deny, with the person's comment.
    let first = asked["question"]["id"].as_str().unwrap();
    let rejected =
        app.post(&format!("/api/v1/questions/{first}/answer"), json!({ "value": false, "comment": "not today" })).await;
    assert_eq!(rejected.status, StatusCode::OK);
    let entries = audit(&app, "rules.decided").await;
    assert_eq!(entries.len(), 2, "every decide is audited");
    assert!(entries.iter().any(|e| e["after"]["decision"] == "allow" && e["after"]["rule"] == "deploys"));
}

async fn decide_with_key(app: &TestApp, token: &str, key: &str, body: Value) -> common::TestResponse {
    let request = axum::http::Request::post("/api/v1/decide")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    app.send(request).await
}

async fn decide_asks_as_the_caller_wishes_where_the_rule_is_silent_and_returns_the_edited_arguments(
    backend: common::Backend,
) {
    let Some(app) = TestApp::start(backend).await else { return };
    save(
        &app,
        json!({ "rules": [
            { "name": "payments", "tools": ["pay"], "decision": "ask", "ask": { "urgency": "high" } },
            { "name": "allowed", "tools": ["read"], "decision": "allow" },
        ], "default": "ask" }),
    )
    .await;
    let agent = app.create_token("default", Role::Agent).await;
    let wishes = json!({ "title": "Pay the invoice?", "body": "Invoice 7", "urgency": "low", "allow_edit": true,
        "project": "books", "context": { "invoice": 7, "source": "mine" },
        "default_response": { "value": true }, "timeout_seconds": 600 });
    let call = json!({ "tool": "pay", "arguments": { "amount": 1500 }, "question": wishes });
    let asked = decide_with_key(&app, &agent, "pay-7", call.clone()).await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.text);
    let question = &asked.json["question"];
    assert_eq!(question["title"], "Pay the invoice?");
    assert!(question["body"].as_str().unwrap().starts_with("Invoice 7\n\n"), "{question}");
    assert_eq!(question["urgency"], "high", "the rule's own setting wins over the caller's");
    assert_eq!((question["allow_edit"].clone(), question["project"].clone()), (json!(true), json!("books")));
    assert_eq!(question["context"], json!({ "invoice": 7, "source": "mine", "rule": "payments" }));
    assert_eq!(question["default_response"], Value::Null, "a rule that asks wants a person, never the agent's default");
    assert!(asked.json.get("arguments").is_none(), "nothing to call with before it is allowed: {}", asked.json);

    // The same key asks once: a retry (here one that waits) gets the first question, and its outcome once decided.
    let id = question["id"].as_str().unwrap().to_owned();
    let edited = app
        .post(
            &format!("/api/v1/questions/{id}/answer"),
            json!({ "value": true, "comment": "half now", "edited_arguments": { "amount": 750 } }),
        )
        .await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.text);
    let mut waiting = call.clone();
    waiting["wait"] = json!(true);
    let again = decide_with_key(&app, &agent, "pay-7", waiting).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.json["question"]["id"], id.as_str());
    assert_eq!(again.json["decision"], "allow", "{}", again.json);
    assert_eq!(again.json["arguments"], json!({ "amount": 750 }), "the approver's edit is what to call with");
    assert_eq!(again.json["question"]["response"]["comment"], "half now");
    let other = decide_with_key(&app, &agent, "pay-7", json!({ "tool": "pay", "arguments": { "amount": 1 } })).await;
    assert_error(&other, StatusCode::CONFLICT, "conflict");

    // An allow carries the arguments as asked; the document's default may take the caller's default response.
    let read = decide(&app, &agent, json!({ "tool": "read", "arguments": { "path": "/etc" } })).await;
    assert_eq!((read["decision"].clone(), read["arguments"].clone()), (json!("allow"), json!({ "path": "/etc" })));
    let unruled = decide(
        &app,
        &agent,
        json!({ "tool": "restart", "arguments": {}, "question": { "default_response": { "value": true } } }),
    )
    .await;
    assert_eq!(unruled["question"]["default_response"]["value"], true, "{unruled}");
    let bad = app
        .call(
            Method::POST,
            "/api/v1/decide",
            Some(&agent),
            Some(json!({ "tool": "pay", "arguments": {}, "question": { "titel": "x" } })),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.text);
}

async fn a_grant_lets_an_ask_through_but_never_a_deny(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    save(&app, json!({ "rules": [{ "name": "shell-asks", "tools": ["shell"], "decision": "ask" }] })).await;
    let agent = app.create_token("default", Role::Agent).await;
    let call = json!({ "tool": "shell", "arguments": { "command": "make test" } });
    let asked = decide(&app, &agent, call.clone()).await;
    let id = asked["question"]["id"].as_str().unwrap();
    let approved = app
        .post(&format!("/api/v1/questions/{id}/answer"), json!({ "value": true, "grant": { "scope": "agent" } }))
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);

    let granted = decide(&app, &agent, call.clone()).await;
    assert_eq!(granted["decision"], "allow", "{granted}");
    assert!(granted["grant_id"].is_string() && granted.get("question").is_none(), "{granted}");
    assert_eq!(audit(&app, "grant.used").await.len(), 1);

    save(
        &app,
        json!({ "rules": [{ "name": "no-make", "tools": ["shell"], "when": "args.command.startsWith('make')",
            "decision": "deny", "reason": "use the CI" }] }),
    )
    .await;
    let denied = decide(&app, &agent, call).await;
    assert_eq!(denied["decision"], "deny");
    assert_eq!(denied["reason"], "use the CI");
    assert!(denied.get("grant_id").is_none(), "{denied}");
    assert_eq!(audit(&app, "grant.used").await.len(), 1, "the grant was not consulted");
}

async fn the_executor_obeys_the_rules_over_the_agents_own_policy(backend: common::Backend) {
    let scripts = Scripts::new();
    let dir = scripts.dir.clone();
    let Some(app) = TestApp::start_with(backend, move |config| {
        config.runtime.scripts_dir = Some(dir);
        config.runtime.shell = holdpoint::runtime::settings::ShellMode::DryRun;
    })
    .await
    else {
        return;
    };
    save(
        &app,
        json!({ "rules": [
            { "name": "no-rm", "tools": ["shell"], "when": "args.command.startsWith('rm')", "decision": "deny",
              "reason": "nothing is deleted here" },
            { "name": "pushes", "tools": ["shell"], "when": "args.command.startsWith('git push')",
              "decision": "ask", "reason": "pushes are public", "ask": { "urgency": "critical" } },
            { "name": "anything", "tools": ["*"], "decision": "allow" },
        ] }),
    )
    .await;
    let turns: Vec<Value> = ["ls", "rm -rf build", "git push"]
        .iter()
        .map(|command| json!({ "tool_calls": [{ "name": "shell", "arguments": { "command": command } }] }))
        .chain([json!({ "content": "done" })])
        .collect();
    let model = scripts.write("ruled.json", &Value::Array(turns));
    // The agent's own policy runs shell unasked: the rules make one call ask and refuse another.
    let spec = json!({ "name": "ruled", "model": model, "tools": ["shell"],
        "approval_policy": { "tools": { "shell": "auto" } } });
    let created = app.post("/api/v1/agents", spec).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    let run = app.post("/api/v1/runs", json!({ "agent_id": created.json["id"], "input": "tidy" })).await;
    let run_id = run.json["id"].as_str().unwrap().to_owned();

    let waiting = app.wait_for_run(&run_id, "waiting_for_approval").await;
    let question_id = waiting["pending_question_ids"][0].as_str().unwrap();
    let question = app.get(&format!("/api/v1/questions/{question_id}")).await.json;
    assert_eq!(question["action"]["arguments"]["command"], "git push");
    assert_eq!(question["urgency"], "critical", "asked as the rule says");
    assert!(question["body"].as_str().unwrap().contains("pushes are public"), "{question}");
    let calls = app.get(&format!("/api/v1/runs/{run_id}/tool-calls")).await.json["items"].as_array().unwrap().clone();
    assert_eq!(calls[0]["status"], "completed", "the allowed call ran");
    assert_eq!(calls[1]["status"], "rejected");
    assert_eq!(calls[1]["decided_by"], "approval rules");
    assert!(calls[1]["decision_comment"].as_str().unwrap().contains("nothing is deleted here"), "{}", calls[1]);

    let approved = app.post(&format!("/api/v1/questions/{question_id}/answer"), json!({ "value": true })).await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    app.wait_for_run(&run_id, "completed").await;

    // An agent whose own policy never allows shell is not loosened by an allowing rule.
    let never = json!({ "name": "careful", "model": scripts.write("careful.json", &json!([
        { "tool_calls": [{ "name": "shell", "arguments": { "command": "ls" } }] }, { "content": "done" }])),
        "tools": ["shell"], "approval_policy": { "tools": { "shell": "never" } } });
    let created = app.post("/api/v1/agents", never).await;
    let run = app.post("/api/v1/runs", json!({ "agent_id": created.json["id"], "input": "look" })).await;
    let run_id = run.json["id"].as_str().unwrap().to_owned();
    app.wait_for_run(&run_id, "completed").await;
    let calls = app.get(&format!("/api/v1/runs/{run_id}/tool-calls")).await.json;
    assert_eq!(calls["items"][0]["status"], "rejected", "{calls}");
}

async fn mcp_request_approval_obeys_the_rules(backend: common::Backend) {
    let Some(app) = TestApp::start(backend).await else { return };
    save(
        &app,
        json!({ "rules": [
            { "name": "no-prod-deletes", "tools": ["Bash"], "when": "args.command.contains('kubectl delete') && args.command.contains('prod')",
              "decision": "deny", "reason": "never kubectl delete in prod" },
            { "name": "reads", "tools": ["Read"], "decision": "allow" },
        ] }),
    )
    .await;
    let base = app.serve().await;
    let agent = app.create_token("default", Role::Agent).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{base}/mcp")).auth_header(agent);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();
    let ask = |tool: &str, input: Value| {
        CallToolRequestParams::new("request_approval")
            .with_arguments(json!({ "tool_name": tool, "input": input }).as_object().unwrap().clone())
    };
    let text_of = |result: rmcp::model::CallToolResult| -> Value {
        serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap()
    };
    let denied = client.call_tool(ask("Bash", json!({ "command": "kubectl delete pod web -n prod" }))).await.unwrap();
    let denied = text_of(denied);
    assert_eq!(denied["behavior"], "deny");
    assert!(denied["message"].as_str().unwrap().contains("never kubectl delete in prod"), "{denied}");
    let read = json!({ "file_path": "/etc/hosts" });
    let allowed = text_of(client.call_tool(ask("Read", read.clone())).await.unwrap());
    assert_eq!(allowed, json!({ "behavior": "allow", "updatedInput": read }));
    let questions = app.get("/api/v1/questions").await.json;
    assert_eq!(questions["items"].as_array().unwrap().len(), 0, "nobody was asked: {questions}");
}
