use super::*;

fn headers(accept: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(axum::http::header::ACCEPT, accept.parse().unwrap());
    headers
}

#[test]
fn accept_headers_that_admit_an_event_stream_pass_and_others_are_refused() {
    assert!(require_event_stream(&HeaderMap::new()).is_ok());
    assert!(require_event_stream(&headers("text/event-stream")).is_ok());
    assert!(require_event_stream(&headers("application/vnd.ag-ui.event+proto, text/event-stream;q=0.5")).is_ok());
    assert!(require_event_stream(&headers("*/*")).is_ok());
    assert!(require_event_stream(&headers("application/json")).is_err());
    assert!(require_event_stream(&headers("text/event-stream;q=0")).is_err());
}

#[test]
fn a_model_turn_is_a_step_with_its_text_and_each_tool_call() {
    let message = MessageRow {
        id: Uuid::now_v7(),
        run_id: Uuid::now_v7(),
        seq: 3,
        step: 1,
        role: "assistant".into(),
        content: sqlx::types::Json(json!({ "role": "assistant", "content": "I will deploy.",
            "tool_calls": [{ "id": "call_1", "type": "function",
                "function": { "name": "http_request", "arguments": "{\"url\":\"x\"}" } }] })),
        created_at: crate::store::now(),
    };
    let types: Vec<String> = events_of(&message).iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(
        types,
        [
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "STEP_FINISHED"
        ]
    );
}
