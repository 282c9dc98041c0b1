use super::*;
use crate::test_questions::*;

/// The example of Slack's "Verifying requests from Slack": its signing secret, timestamp, body and signature.
const DOC_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const DOC_TIMESTAMP: &str = "1531420618";
const DOC_BODY: &str = concat!(
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V",
    "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=",
    "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN",
    "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
);
const DOC_SIGNATURE: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

#[test]
fn slacks_documented_example_request_verifies() {
    let now = 1_531_420_618 + 30;
    assert_eq!(
        verify_signature(DOC_SECRET, Some(DOC_TIMESTAMP), Some(DOC_SIGNATURE), DOC_BODY.as_bytes(), now),
        Ok(())
    );
}

#[test]
fn a_changed_body_secret_or_signature_does_not_verify() {
    let now = 1_531_420_618;
    let verify = |secret: &str, body: &str, signature: &str| {
        verify_signature(secret, Some(DOC_TIMESTAMP), Some(signature), body.as_bytes(), now)
    };
    let mismatch = Err(SignatureError::Mismatch);
    assert_eq!(verify(DOC_SECRET, &DOC_BODY.replace("roadrunner", "coyote"), DOC_SIGNATURE), mismatch);
    assert_eq!(verify("another-secret", DOC_BODY, DOC_SIGNATURE), mismatch);
    assert_eq!(verify(DOC_SECRET, DOC_BODY, &DOC_SIGNATURE.replace("v0=a2", "v0=b2")), mismatch);
    assert_eq!(verify(DOC_SECRET, DOC_BODY, DOC_SIGNATURE.trim_start_matches("v0=")), mismatch);
    assert_eq!(verify(DOC_SECRET, DOC_BODY, "v0=not-hex"), mismatch);
    // The timestamp is signed too: the same signature with another timestamp does not verify.
    assert_eq!(
        verify_signature(DOC_SECRET, Some("1531420619"), Some(DOC_SIGNATURE), DOC_BODY.as_bytes(), now),
        mismatch
    );
}

#[test]
fn a_timestamp_more_than_five_minutes_away_is_refused_even_when_signed() {
    let sent = 1_531_420_618;
    let verify =
        |now: i64| verify_signature(DOC_SECRET, Some(DOC_TIMESTAMP), Some(DOC_SIGNATURE), DOC_BODY.as_bytes(), now);
    assert_eq!(verify(sent + 300), Ok(()));
    assert_eq!(verify(sent + 301), Err(SignatureError::Stale { age_seconds: 301 }));
    assert_eq!(verify(sent - 301), Err(SignatureError::Stale { age_seconds: 301 }));
}

#[test]
fn missing_headers_and_bad_timestamps_are_refused() {
    let body = DOC_BODY.as_bytes();
    assert_eq!(
        verify_signature(DOC_SECRET, None, Some(DOC_SIGNATURE), body, 0),
        Err(SignatureError::Missing("X-Slack-Request-Timestamp"))
    );
    assert_eq!(
        verify_signature(DOC_SECRET, Some(DOC_TIMESTAMP), None, body, 0),
        Err(SignatureError::Missing("X-Slack-Signature"))
    );
    assert_eq!(
        verify_signature(DOC_SECRET, Some("yesterday"), Some(DOC_SIGNATURE), body, 0),
        Err(SignatureError::BadTimestamp)
    );
}

#[test]
fn headers_are_read_whatever_their_case() {
    let mut headers = http::HeaderMap::new();
    headers.insert("X-Slack-Request-Timestamp", DOC_TIMESTAMP.parse().unwrap());
    headers.insert("x-slack-signature", DOC_SIGNATURE.parse().unwrap());
    assert_eq!(verify_request(DOC_SECRET, &headers, DOC_BODY.as_bytes(), 1_531_420_618), Ok(()));
}

fn form(payload: &Value) -> Vec<u8> {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
        .into_bytes()
}

/// A `block_actions` payload as Slack sends it for a click on `button` of a message.
fn click(button: &Value) -> Value {
    json!({
        "type": "block_actions",
        "user": {"id": "U0123ABCD", "username": "alice", "name": "alice", "team_id": "T0001"},
        "api_app_id": "A0001",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": "1700000000.000100", "channel_id": "D0001",
                      "is_ephemeral": false},
        "trigger_id": "123.456.abc",
        "team": {"id": "T0001", "domain": "example"},
        "channel": {"id": "D0001", "name": "directmessage"},
        "response_url": "https://hooks.slack.com/actions/T0001/1/abc",
        "actions": [{
            "type": "button", "block_id": "q:x", "action_id": button["action_id"], "value": button["value"],
            "text": button["text"], "action_ts": "1700000001.000200"
        }]
    })
}

fn actions_of(message: &SlackMessage) -> Vec<Value> {
    let actions = message.blocks.iter().find(|b| b["type"] == "actions").expect("an actions block");
    actions["elements"].as_array().unwrap().clone()
}

#[test]
fn an_approval_message_has_approve_reject_comment_and_open_buttons() {
    let question = approval();
    let message = question_message(&question, "https://hp.example.com/questions/1");
    assert_eq!(message.blocks[0]["type"], "header");
    assert_eq!(message.blocks[0]["text"]["text"], "Run <rm -rf /tmp/build> & clean?");
    let all = serde_json::to_string(&message.blocks).unwrap();
    assert!(all.contains("Tool `shell` with the arguments:"), "{all}");
    assert!(all.contains("echo '&lt;done&gt;'"), "mrkdwn escapes the arguments: {all}");
    let buttons = actions_of(&message);
    let labels: Vec<&str> = buttons.iter().map(|b| b["text"]["text"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Approve", "Reject", "With a comment…", "Open in Holdpoint"]);
    assert_eq!(buttons[0]["style"], "primary");
    assert_eq!(buttons[1]["style"], "danger");
    assert_eq!(buttons[3]["url"], "https://hp.example.com/questions/1");
    assert_eq!(message.text, "[HIGH] Approval: Run &lt;rm -rf /tmp/build&gt; &amp; clean?", "mrkdwn, escaped");
}

#[test]
fn a_click_on_a_button_reads_back_as_the_answer_it_carries() {
    let question = choice(3);
    let message = question_message(&question, "https://hp.example.com/questions/1");
    let buttons = actions_of(&message);
    let interaction = parse_interaction(&form(&click(&buttons[1]))).unwrap();
    assert_eq!(
        interaction,
        Interaction::Answer {
            user_id: "U0123ABCD".into(),
            question_id: question.id,
            value: json!("region-1"),
            message: Some(MessageRef { channel: "D0001".into(), ts: "1700000000.000100".into() }),
        }
    );
}

#[test]
fn the_answer_button_opens_the_modal_and_its_submission_reads_back() {
    let question = text();
    let message = question_message(&question, "https://hp.example.com/questions/1");
    let buttons = actions_of(&message);
    assert_eq!(buttons[0]["text"]["text"], "Answer…");
    assert_eq!(
        parse_interaction(&form(&click(&buttons[0]))).unwrap(),
        Interaction::OpenModal {
            user_id: "U0123ABCD".into(),
            question_id: question.id,
            trigger_id: "123.456.abc".into()
        }
    );
    let modal = answer_modal(&question, "https://hp.example.com/questions/1");
    let submission = json!({
        "type": "view_submission",
        "team": {"id": "T0001", "domain": "example"},
        "user": {"id": "U0123ABCD", "username": "alice", "name": "alice", "team_id": "T0001"},
        "api_app_id": "A0001",
        "trigger_id": "789.012.def",
        "view": {
            "id": "V0001", "type": "modal", "callback_id": modal["callback_id"],
            "private_metadata": modal["private_metadata"], "hash": "1700000002.abc",
            "state": {"values": {
                "answer": {"value": {"type": "plain_text_input", "value": "Comet"}},
                "comment": {"value": {"type": "plain_text_input", "value": null}}
            }}
        }
    });
    let Interaction::Submit { user_id, question_id, answer } = parse_interaction(&form(&submission)).unwrap() else {
        panic!("not a submission");
    };
    assert_eq!((user_id.as_str(), question_id), ("U0123ABCD", question.id));
    assert_eq!(answer.inputs[ANSWER_BLOCK], ModalInput::Text("Comet".into()));
    assert_eq!(answer.comment, None);
    assert_eq!(answer.answer_for(&question).unwrap().value, json!("Comet"));
}

#[test]
fn a_modal_choice_with_a_comment_answers_with_that_quick_answer() {
    let question = approval();
    let modal = answer_modal(&question, "https://hp.example.com/questions/1");
    let options = modal["blocks"][1]["element"]["options"].as_array().unwrap();
    assert_eq!(options[1]["text"]["text"], "Reject");
    let chosen = |index: &str, comment: Option<&str>| ModalAnswer {
        inputs: [(ANSWER_BLOCK.to_owned(), ModalInput::Chosen(index.into()))].into(),
        comment: comment.map(str::to_owned),
    };
    let body = chosen("1", Some("not on a Friday")).answer_for(&question).unwrap();
    assert_eq!((body.value, body.comment.as_deref()), (json!(false), Some("not on a Friday")));
    assert!(chosen("2", None).answer_for(&question).is_err());
}

/// The input block of `modal` with `block_id`.
fn block<'a>(modal: &'a Value, block_id: &str) -> &'a Value {
    modal["blocks"].as_array().unwrap().iter().find(|b| b["block_id"] == block_id).unwrap()
}

/// A view submission of `modal` whose state holds `values` (block id to the element's state).
fn submitted(modal: &Value, values: Value) -> ModalAnswer {
    let submission = json!({
        "type": "view_submission", "user": {"id": "U0123ABCD"}, "trigger_id": "789.012.def",
        "view": {"id": "V0001", "type": "modal", "callback_id": modal["callback_id"],
                 "private_metadata": modal["private_metadata"], "state": {"values": values}}
    });
    match parse_interaction(&form(&submission)).unwrap() {
        Interaction::Submit { answer, .. } => answer,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_form_opens_a_modal_of_block_kit_inputs_and_leaves_files_and_tables_to_holdpoint() {
    let question = rich_form();
    let message = question_message(&question, "https://hp.example.com/questions/7");
    let asked = message.blocks.iter().filter_map(|b| b["text"]["text"].as_str()).find(|t| t.starts_with("*What"));
    assert!(
        asked.unwrap().starts_with("*What is asked*\n- Nodes (required): a whole number from 1 to 9, in steps of 2"),
        "{:?}",
        message.blocks
    );
    let buttons = actions_of(&message);
    let labels: Vec<&str> = buttons.iter().map(|b| b["text"]["text"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Answer…", "Open in Holdpoint"]);

    let modal = answer_modal(&question, "https://hp.example.com/questions/7");
    let nodes = block(&modal, "field:0");
    assert_eq!(nodes["label"]["text"], "Nodes");
    assert_eq!(nodes["optional"], false);
    assert_eq!(nodes["hint"]["text"], "Worker nodes · In steps of 2.");
    assert_eq!(
        nodes["element"],
        json!({"type": "number_input", "action_id": "value", "is_decimal_allowed": false,
               "min_value": "1", "max_value": "9", "initial_value": "3"})
    );
    assert_eq!(block(&modal, "field:1")["element"]["type"], "datepicker");
    let budget = &block(&modal, "field:2")["element"];
    assert_eq!((budget["type"].as_str(), budget["is_decimal_allowed"].as_bool()), (Some("number_input"), Some(true)));
    let stars = &block(&modal, "field:3")["element"];
    assert_eq!((stars["type"].as_str(), stars["options"].as_array().unwrap().len()), (Some("static_select"), 10));
    let regions = &block(&modal, "field:4")["element"];
    assert_eq!(
        (regions["type"].as_str(), regions["max_selected_items"].as_u64()),
        (Some("multi_static_select"), Some(1))
    );
    let ids: Vec<&str> = modal["blocks"].as_array().unwrap().iter().filter_map(|b| b["block_id"].as_str()).collect();
    assert_eq!(
        ids,
        ["field:0", "field:1", "field:2", "field:3", "field:4", "comment"],
        "no input for the table or the file"
    );
    let note = modal["blocks"].as_array().unwrap().iter().rev().nth(1).unwrap()["text"]["text"].as_str().unwrap();
    assert!(
        note.contains("*Disks*")
            && note.contains("*Plan*")
            && note.contains("<https://hp.example.com/questions/7|answer in Holdpoint>"),
        "{note}"
    );

    // Slack's state comes back as the form's answer: numbers, dates, stars, choices; empty inputs left out.
    let answer = submitted(
        &modal,
        json!({
            "field:0": {"value": {"type": "number_input", "value": "5"}},
            "field:1": {"value": {"type": "datepicker", "selected_date": "2026-03-01"}},
            "field:2": {"value": {"type": "number_input", "value": null}},
            "field:3": {"value": {"type": "static_select", "selected_option": {"text": {"type": "plain_text", "text": "★★★★ 4"}, "value": "4"}}},
            "field:4": {"value": {"type": "multi_static_select", "selected_options": [{"text": {"type": "plain_text", "text": "US"}, "value": "1"}]}},
            "comment": {"value": {"type": "plain_text_input", "value": "sized"}}
        }),
    );
    let body = answer.answer_for(&question).unwrap();
    assert_eq!(body.value, json!({"nodes": 5, "start": "2026-03-01", "stars": 4, "regions": ["us"]}));
    assert_eq!(body.comment.as_deref(), Some("sized"));

    // The server's field errors land under their inputs; the rest under the first one.
    let fields = [
        ("value.nodes".to_owned(), "must be at most 9".to_owned()),
        ("value.disks[0].size".to_owned(), "is required".to_owned()),
        ("comment".to_owned(), "too long".to_owned()),
    ];
    let errors = answer.errors(Some(&question), &fields, "Holdpoint refused this answer");
    assert_eq!(
        errors,
        json!({"response_action": "errors", "errors": {
            "field:0": "must be at most 9; value.disks[0].size: is required", "comment": "too long"}})
    );
    assert_eq!(
        answer.errors(None, &[], "not linked")["errors"],
        json!({"field:0": "not linked"}),
        "without the question, under the first input"
    );
}

#[test]
fn a_required_file_or_a_table_is_answered_in_holdpoint_with_a_link() {
    let mut question = rich_form();
    question.fields.last_mut().unwrap().required = true;
    let message = question_message(&question, "https://hp.example.com/questions/7");
    let buttons = actions_of(&message);
    let labels: Vec<&str> = buttons.iter().map(|b| b["text"]["text"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Answer in Holdpoint"]);
    let modal = answer_modal(&question, "https://hp.example.com/questions/7");
    assert!(modal["submit"].is_null(), "{modal}");
    assert!(modal.to_string().contains("<https://hp.example.com/questions/7|Answer in Holdpoint>"), "{modal}");
}

#[test]
fn single_values_have_the_input_of_their_type_and_read_back_as_it() {
    let open = "https://hp.example.com/q";
    let of = |response_type: ResponseType, rules: Value| Question {
        response_type,
        rules: serde_json::from_value(rules).unwrap(),
        ..text()
    };
    let cases = [
        (
            of(ResponseType::Datetime, json!({})),
            "datetimepicker",
            json!({"type": "datetimepicker", "selected_date_time": 1_772_353_800}),
            json!("2026-03-01T08:30:00Z"),
        ),
        (
            of(ResponseType::Time, json!({})),
            "timepicker",
            json!({"type": "timepicker", "selected_time": "09:30"}),
            json!("09:30"),
        ),
        (
            of(ResponseType::Email, json!({})),
            "email_text_input",
            json!({"type": "email_text_input", "value": "ops@example.com"}),
            json!("ops@example.com"),
        ),
        (
            of(ResponseType::Url, json!({})),
            "url_text_input",
            json!({"type": "url_text_input", "value": "https://example.com"}),
            json!("https://example.com"),
        ),
        (
            of(ResponseType::Markdown, json!({})),
            "plain_text_input",
            json!({"type": "plain_text_input", "value": "# Plan"}),
            json!("# Plan"),
        ),
        (
            of(ResponseType::Number, json!({"min": 0.5})),
            "number_input",
            json!({"type": "number_input", "value": "2.75"}),
            json!(2.75),
        ),
        (
            of(ResponseType::Rating, json!({"max": 3})),
            "static_select",
            json!({"type": "static_select", "selected_option": {"value": "3"}}),
            json!(3),
        ),
        (
            Question { response_type: ResponseType::ErrorRecovery, ..choice(2) },
            "static_select",
            json!({"type": "static_select", "selected_option": {"value": "4"}}),
            json!("region-1"),
        ),
    ];
    for (question, element, state, value) in cases {
        let modal = answer_modal(&question, open);
        assert_eq!(block(&modal, "answer")["element"]["type"], element, "{}", question.response_type);
        let answer = submitted(&modal, json!({"answer": {"value": state}}));
        assert_eq!(answer.answer_for(&question).unwrap().value, value, "{}", question.response_type);
    }
    let markdown = answer_modal(&of(ResponseType::Markdown, json!({})), open);
    assert_eq!(block(&markdown, "answer")["element"]["multiline"], true);
    let table = of(ResponseType::Table, json!({"columns": [{"key": "a", "label": "A", "response_type": "text"}]}));
    assert!(!has_modal(&table));
    let labels: Vec<String> = actions_of(&question_message(&table, open))
        .iter()
        .map(|b| b["text"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(labels, ["Answer in Holdpoint"]);
}

#[test]
fn clicks_holdpoint_does_not_handle_are_ignored_and_garbage_is_refused() {
    let message = question_message(&approval(), "https://hp.example.com/questions/1");
    let open = actions_of(&message).pop().unwrap();
    assert!(matches!(parse_interaction(&form(&click(&open))).unwrap(), Interaction::Ignored { .. }));
    assert!(matches!(
        parse_interaction(&form(&json!({"type": "view_closed", "user": {"id": "U1"}}))).unwrap(),
        Interaction::Ignored { .. }
    ));
    assert_eq!(parse_interaction(b"token=abc"), Err(InteractionError::NoPayload));
    assert!(matches!(parse_interaction(b"payload=%7Bnot-json"), Err(InteractionError::NotJson(_))));
    let forged = json!({"action_id": "answer:0", "value": "{\"q\":\"not-a-uuid\",\"v\":true}",
                        "text": {"type": "plain_text", "text": "x"}});
    assert!(matches!(parse_interaction(&form(&click(&forged))), Err(InteractionError::Invalid(_))));
}

#[test]
fn the_resolved_message_says_who_answered_what_and_has_no_buttons() {
    let question = Question {
        status: QuestionStatus::Answered,
        answered_by: Some("alice".into()),
        response: Some(AnswerBody { value: json!(false), comment: None, edited_arguments: None }),
        ..approval()
    };
    let message = resolved_message(&question, "https://hp.example.com/questions/1");
    assert!(message.blocks.iter().all(|b| b["type"] != "actions"));
    let last = message.blocks.last().unwrap()["text"]["text"].as_str().unwrap();
    assert_eq!(
        last,
        ":white_check_mark: Answered by alice: *Rejected*\n<https://hp.example.com/questions/1|Open in Holdpoint>"
    );
    let picked = Question {
        status: QuestionStatus::Answered,
        answered_by: Some("bob".into()),
        response: Some(AnswerBody { value: json!("region-2"), comment: None, edited_arguments: None }),
        ..choice(3)
    };
    let last = resolved_message(&picked, "u").blocks.last().unwrap()["text"]["text"].clone();
    assert!(last.as_str().unwrap().starts_with(":white_check_mark: Answered by bob: *Region &lt;2&gt;*"), "{last}");
    // A form's answer reads field by field, under the labels, as in the web UI.
    let fields = json!([
        { "key": "when", "label": "Go-live date", "response_type": "date" },
        { "key": "rating", "label": "Readiness", "response_type": "rating" },
    ]);
    let planned = Question {
        status: QuestionStatus::Answered,
        answered_by: Some("carol".into()),
        response_type: ResponseType::Form,
        fields: serde_json::from_value(fields).unwrap(),
        response: Some(AnswerBody {
            value: json!({"rating": 4, "when": "2026-03-01"}),
            comment: None,
            edited_arguments: None,
        }),
        ..choice(0)
    };
    let last = resolved_message(&planned, "u").blocks.last().unwrap()["text"]["text"].clone();
    let expected = ":white_check_mark: Answered by carol: *Go-live date: 2026-03-01; Readiness: 4 of 5*";
    assert!(last.as_str().unwrap().starts_with(expected), "{last}");

    // Withdrawn: by whom.
    let cancelled = Question { status: QuestionStatus::Cancelled, answered_by: Some("dave".into()), ..choice(0) };
    let last = resolved_message(&cancelled, "u").blocks.last().unwrap()["text"]["text"].clone();
    assert!(last.as_str().unwrap().starts_with(":no_entry_sign: Cancelled by dave"), "{last}");
}

#[test]
fn long_text_is_cut_to_block_kits_limits() {
    let question = Question {
        title: "t".repeat(400),
        body: "b".repeat(5000),
        action: Some(holdpoint_types::ApprovalAction {
            tool_name: "shell".into(),
            arguments: json!({"command": "x".repeat(5000)}),
        }),
        ..approval()
    };
    let message = question_message(&question, "https://hp.example.com/questions/1");
    assert_eq!(message.blocks[0]["text"]["text"].as_str().unwrap().chars().count(), 150);
    for block in message.blocks.iter().filter(|b| b["type"] == "section") {
        let text = block["text"]["text"].as_str().unwrap();
        assert!(text.chars().count() <= 3000, "{}", text.len());
    }
    let arguments = message.blocks.iter().find(|b| b["text"]["text"].as_str().is_some_and(|t| t.starts_with("Tool")));
    assert!(arguments.unwrap()["text"]["text"].as_str().unwrap().ends_with("…\n```"));
}

#[test]
fn a_message_reference_round_trips_through_its_stored_form() {
    let at = MessageRef { channel: "D0001".into(), ts: "1700000000.000100".into() };
    assert_eq!(MessageRef::from_reference(&at.to_reference()), Some(at));
    assert_eq!(MessageRef::from_reference("no-separator"), None);
}

#[test]
fn api_errors_are_sorted_into_retryable_and_permanent() {
    let api = |error: &str| SlackError::Api { error: error.into(), retry_after: None };
    assert!(matches!(api("ratelimited").outcome(), DeliveryOutcome::Retry { .. }));
    assert!(matches!(api("internal_error").outcome(), DeliveryOutcome::Retry { .. }));
    for permanent in ["channel_not_found", "invalid_auth", "token_revoked", "invalid_blocks", "missing_scope"] {
        assert!(matches!(api(permanent).outcome(), DeliveryOutcome::Failed { .. }), "{permanent}");
    }
    assert!(matches!(SlackError::Status { status: 503 }.outcome(), DeliveryOutcome::Retry { .. }));
    assert!(matches!(SlackError::Status { status: 404 }.outcome(), DeliveryOutcome::Failed { .. }));
    assert!(matches!(SlackError::Network("reset".into()).outcome(), DeliveryOutcome::Retry { .. }));
}
