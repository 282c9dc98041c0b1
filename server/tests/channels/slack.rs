//! Slack against a stand-in of its Web API ([`super::slack_standin`]): the messages, modals and Web API calls
//! Holdpoint makes, and the checks and parsing of what Slack's interactivity sends back.

use std::time::Duration;

use app::types::{AnswerBody, Question, QuestionStatus};
use holdpoint::channels::DeliveryOutcome;
use holdpoint::channels::slack::{
    Interaction, MessageRef, SlackClient, SlackError, SlackMessage, answer_modal, parse_interaction, question_message,
    resolved_message, verify_request,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::slack_standin::{BOT_TOKEN, SIGNING_SECRET, StandIn, click_body, slack_signed};

fn approval() -> Question {
    serde_json::from_value(json!({
        "id": Uuid::now_v7(), "workspace": "default", "project": "infra", "run_id": null, "tool_call_id": null,
        "parent_run_ids": [], "kind": "approval", "response_type": "approval",
        "title": "Deploy <web> & restart?", "body": "Deploys **v2** to production.",
        "options": [], "fields": [],
        "action": {"tool_name": "deploy", "arguments": {"service": "web", "version": "v2"}},
        "allow_edit": false, "context": {}, "urgency": "critical", "timeout_at": "2099-01-01T00:00:00Z",
        "default_response": null, "status": "pending", "response": null, "answered_by": null, "resolution": null,
        "created_at": "2026-11-27T12:00:00Z", "updated_at": "2026-11-27T12:00:00Z", "resolved_at": null
    }))
    .unwrap()
}

fn choice(options: usize) -> Question {
    let options: Vec<Value> =
        (0..options).map(|i| json!({"value": format!("v{i}"), "label": format!("Option {i}")})).collect();
    let mut question = approval();
    question.kind = app::types::QuestionKind::Blocking;
    question.response_type = app::types::ResponseType::Choice;
    question.action = None;
    question.options = serde_json::from_value(Value::Array(options)).unwrap();
    question
}

/// Signs `body` as Slack signs a request to the interactions endpoint, from the documented recipe.

#[tokio::test]
async fn a_question_is_posted_with_its_buttons_and_a_signed_click_reads_back_as_its_answer() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    let question = approval();
    let message = question_message(&question, &format!("https://hp.example.com/questions/{}", question.id));

    let outcome = client.deliver("U0ALICE", &message).await;
    assert_eq!(outcome, DeliveryOutcome::Sent { reference: Some("D0APPDM01:1700000000.000100".into()) });
    let calls = stand_in.calls();
    assert_eq!(calls.len(), 1);
    let (method, args) = &calls[0];
    assert_eq!(method, "chat.postMessage");
    assert_eq!(args["channel"], "U0ALICE");
    assert_eq!(args["text"], "[CRITICAL] Approval: Deploy &lt;web&gt; &amp; restart?", "mrkdwn, escaped");

    // Slack shows the buttons it was sent; a click on Reject comes back signed.
    let actions = args["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap();
    let reject = actions["elements"].as_array().unwrap().iter().find(|b| b["text"]["text"] == "Reject").unwrap();
    let at = MessageRef::from_reference("D0APPDM01:1700000000.000100").unwrap();
    let body = click_body(reject, &at, "U0ALICE");
    let now = chrono::Utc::now().timestamp();
    let headers = slack_signed(SIGNING_SECRET, &body, now - 2);
    verify_request(SIGNING_SECRET, &headers, body.as_bytes(), now).unwrap();
    assert_eq!(
        parse_interaction(body.as_bytes()).unwrap(),
        Interaction::Answer {
            user_id: "U0ALICE".into(),
            question_id: question.id,
            value: json!(false),
            message: Some(at)
        }
    );

    // The same click with a stale timestamp, another secret, or a changed body is refused.
    let stale = slack_signed(SIGNING_SECRET, &body, now - 301);
    assert!(verify_request(SIGNING_SECRET, &stale, body.as_bytes(), now).is_err());
    assert!(verify_request("another-secret", &headers, body.as_bytes(), now).is_err());
    let changed = body.replace("U0ALICE", "U0MALLORY");
    assert!(verify_request(SIGNING_SECRET, &headers, changed.as_bytes(), now).is_err());
}

#[tokio::test]
async fn the_answer_button_opens_a_modal_slack_accepts() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    for question in [approval(), {
        let mut q = approval();
        q.response_type = app::types::ResponseType::Text;
        q.action = None;
        q
    }] {
        client.open_view("1337.42.abcdef", &answer_modal(&question, "https://hp.example.com/q")).await.unwrap();
    }
    let calls = stand_in.calls();
    assert_eq!(calls.iter().filter(|(method, _)| method == "views.open").count(), 2);
    assert_eq!(calls[0].1["view"]["blocks"][1]["element"]["type"], "static_select");
    assert_eq!(calls[1].1["view"]["blocks"][1]["element"]["type"], "plain_text_input");
}

/// A form of every field type Block Kit has an input for, with bounds, defaults, placeholders and descriptions, and
/// each rich type as a question of its own: modals the stand-in takes, as it checks them against Slack's reference.
#[tokio::test]
async fn modals_of_rich_fields_are_views_slack_accepts() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    let options = json!([{ "value": "eu", "label": "Europe" }, { "value": "us", "label": "United States" }]);
    let mut form = approval();
    form.kind = app::types::QuestionKind::Blocking;
    form.response_type = app::types::ResponseType::Form;
    form.action = None;
    form.fields = serde_json::from_value(json!([
        { "key": "name", "label": "Name", "response_type": "text", "required": true, "placeholder": "Your name",
          "default": "Ada" },
        { "key": "notes", "label": "Notes", "response_type": "markdown", "description": "Markdown is fine" },
        { "key": "nodes", "label": "Nodes", "response_type": "integer", "min": 1, "max": 9, "step": 2, "default": 3,
          "widget": "slider" },
        { "key": "ratio", "label": "Ratio", "response_type": "number", "min": 0.5, "max": 2.5, "default": 1.5 },
        { "key": "stars", "label": "Stars", "response_type": "rating", "max": 7, "default": 4 },
        { "key": "start", "label": "Start", "response_type": "date", "default": "2026-03-01" },
        { "key": "at", "label": "At", "response_type": "time", "default": "09:30" },
        { "key": "when", "label": "When", "response_type": "datetime", "default": "2026-03-01T09:30:00+01:00" },
        { "key": "mail", "label": "Mail", "response_type": "email", "default": "ops@example.com" },
        { "key": "link", "label": "Link", "response_type": "url", "placeholder": "https://" },
        { "key": "region", "label": "Region", "response_type": "choice", "options": options, "default": "us" },
        { "key": "regions", "label": "Regions", "response_type": "multi_choice", "options": options, "max_items": 1,
          "default": ["eu"] },
        { "key": "canary", "label": "Canary?", "response_type": "boolean", "default": false },
        { "key": "disks", "label": "Disks", "response_type": "table",
          "columns": [{ "key": "size", "label": "Size", "response_type": "integer" }] },
        { "key": "plan", "label": "Plan", "response_type": "file" }
    ]))
    .unwrap();
    client.open_view("1337.42.abcdef", &answer_modal(&form, "https://hp.example.com/q")).await.unwrap();
    let (_, args) = stand_in.calls().pop().unwrap();
    let elements: Vec<&str> =
        args["view"]["blocks"].as_array().unwrap().iter().filter_map(|b| b["element"]["type"].as_str()).collect();
    assert_eq!(
        elements,
        [
            "plain_text_input",
            "plain_text_input",
            "number_input",
            "number_input",
            "static_select",
            "datepicker",
            "timepicker",
            "datetimepicker",
            "email_text_input",
            "url_text_input",
            "static_select",
            "multi_static_select",
            "radio_buttons",
            "plain_text_input"
        ]
    );
    let when = &args["view"]["blocks"][8]["element"];
    assert_eq!(when["initial_date_time"], 1_772_353_800, "09:30 at +01:00 is 08:30 UTC");

    for (response_type, rules) in [
        ("number", json!({ "min": -1.5, "max": 2 })),
        ("integer", json!({ "min": 0, "step": 5 })),
        ("rating", json!({ "max": 10 })),
        ("date", json!({})),
        ("time", json!({})),
        ("datetime", json!({})),
        ("email", json!({})),
        ("url", json!({})),
        ("markdown", json!({})),
        ("multi_choice", json!({ "max_items": 2 })),
    ] {
        let mut question: Question = serde_json::from_value(serde_json::to_value(form.clone()).unwrap()).unwrap();
        question.response_type = response_type.parse().unwrap();
        question.fields = vec![];
        question.rules = serde_json::from_value(rules).unwrap();
        if response_type == "multi_choice" {
            question.options = serde_json::from_value(options.clone()).unwrap();
        }
        let modal = answer_modal(&question, "https://hp.example.com/q");
        client.open_view("1337.42.abcdef", &modal).await.unwrap_or_else(|e| panic!("{response_type}: {e:?}"));
    }
    assert_eq!(stand_in.calls().len(), 11);

    // What Slack refuses, the stand-in refuses: a number input without is_decimal_allowed, bounds the wrong way
    // round, a date picker's initial date in another format, a number input outside an input block.
    let bad_elements = [
        json!({ "type": "number_input", "action_id": "value" }),
        json!({ "type": "number_input", "action_id": "value", "is_decimal_allowed": false, "min_value": "5",
                "max_value": "1" }),
        json!({ "type": "datepicker", "action_id": "value", "initial_date": "01/03/2026" }),
        json!({ "type": "multi_static_select", "action_id": "value", "max_selected_items": 0,
                "options": [{ "text": { "type": "plain_text", "text": "a" }, "value": "0" }] }),
    ];
    for element in bad_elements {
        let view = json!({ "type": "modal", "title": { "type": "plain_text", "text": "t" },
            "submit": { "type": "plain_text", "text": "Send" },
            "blocks": [{ "type": "input", "label": { "type": "plain_text", "text": "l" }, "element": element }] });
        let refused = client.open_view("1337.42.abcdef", &view).await;
        assert!(matches!(&refused, Err(SlackError::Api { error, .. }) if error == "invalid_blocks"), "{element}");
    }
    assert_eq!(stand_in.calls().len(), 11, "nothing refused was recorded");
}

#[tokio::test]
async fn a_choice_of_twenty_options_stays_within_an_actions_blocks_limit() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    let question = choice(20);
    let message = question_message(&question, "https://hp.example.com/q");
    assert!(matches!(client.deliver("C0TEAM", &message).await, DeliveryOutcome::Sent { .. }));
    let (_, args) = &stand_in.calls()[0];
    let actions = args["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap();
    assert_eq!(actions["elements"].as_array().unwrap().len(), 22, "20 options, the modal, Open");
}

#[tokio::test]
async fn the_message_is_updated_without_buttons_once_the_question_is_resolved() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    let question = Question {
        status: QuestionStatus::Answered,
        answered_by: Some("alice".into()),
        response: Some(AnswerBody { value: json!(true), comment: None, edited_arguments: None }),
        ..approval()
    };
    let at = MessageRef { channel: "D0APPDM01".into(), ts: "1700000000.000100".into() };
    client.update_message(&at, &resolved_message(&question, "https://hp.example.com/q")).await.unwrap();
    let (method, args) = &stand_in.calls()[0];
    assert_eq!(method, "chat.update");
    assert_eq!((args["channel"].as_str(), args["ts"].as_str()), (Some("D0APPDM01"), Some("1700000000.000100")));
    let blocks = args["blocks"].as_array().unwrap();
    assert!(blocks.iter().all(|b| b["type"] != "actions"), "{blocks:?}");
    assert!(args["text"].as_str().unwrap().contains("Answered by alice: *Approved*"), "{args}");
}

#[tokio::test]
async fn the_stand_in_refuses_what_slack_refuses_and_the_client_says_so() {
    let (stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    // 26 buttons in one actions block: Slack's limit is 25.
    let buttons: Vec<Value> = (0..26)
        .map(|i| json!({"type": "button", "text": {"type": "plain_text", "text": "b"}, "action_id": format!("a{i}")}))
        .collect();
    let too_many = SlackMessage { text: "t".into(), blocks: vec![json!({"type": "actions", "elements": buttons})] };
    let outcome = client.deliver("C0TEAM", &too_many).await;
    assert!(
        matches!(&outcome, DeliveryOutcome::Failed { reason, .. } if reason.contains("invalid_blocks")),
        "{outcome:?}"
    );
    let long_header = SlackMessage {
        text: "t".into(),
        blocks: vec![json!({"type": "header", "text": {"type": "plain_text", "text": "h".repeat(151)}})],
    };
    assert!(matches!(client.deliver("C0TEAM", &long_header).await, DeliveryOutcome::Failed { .. }));
    assert!(stand_in.calls().is_empty());

    let message = question_message(&approval(), "https://hp.example.com/q");
    let outcome = client.deliver("C_UNKNOWN", &message).await;
    assert!(matches!(&outcome, DeliveryOutcome::Failed { reason, .. } if reason.contains("channel_not_found")));
    let wrong_token = SlackClient::new(&url, "xoxb-revoked", false).unwrap();
    let outcome = wrong_token.deliver("C0TEAM", &message).await;
    assert!(matches!(&outcome, DeliveryOutcome::Failed { reason, .. } if reason.contains("invalid_auth")));
}

#[tokio::test]
async fn rate_limits_outages_and_an_unreachable_api_are_retried() {
    let (_stand_in, url) = StandIn::start().await;
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    let message = question_message(&approval(), "https://hp.example.com/q");
    assert_eq!(
        client.post_message("C_RATELIMITED", &message).await,
        Err(SlackError::Api { error: "ratelimited".into(), retry_after: Some(Duration::from_secs(7)) })
    );
    assert!(matches!(
        client.deliver("C_RATELIMITED", &message).await,
        DeliveryOutcome::Retry { after: Some(after), .. } if after == Duration::from_secs(7)
    ));
    assert!(matches!(client.deliver("C_BROKEN", &message).await, DeliveryOutcome::Retry { after: None, .. }));
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let unreachable = SlackClient::new(&format!("http://127.0.0.1:{port}/api"), BOT_TOKEN, false).unwrap();
    assert!(matches!(unreachable.deliver("C0TEAM", &message).await, DeliveryOutcome::Retry { .. }));
}

#[tokio::test]
async fn users_lookup_by_email_finds_a_member_and_says_when_there_is_none() {
    let (stand_in, url) = StandIn::start().await;
    stand_in.add_person("alice@example.com", "U0ALICE");
    let client = SlackClient::new(&url, BOT_TOKEN, false).unwrap();
    assert_eq!(client.user_id_by_email("alice@example.com").await.unwrap().as_deref(), Some("U0ALICE"));
    assert_eq!(client.user_id_by_email("nobody@example.com").await.unwrap(), None);
    let wrong_token = SlackClient::new(&url, "xoxb-wrong", false).unwrap();
    let refused = wrong_token.user_id_by_email("alice@example.com").await;
    assert!(matches!(&refused, Err(SlackError::Api { error, .. }) if error == "invalid_auth"), "{refused:?}");
}
