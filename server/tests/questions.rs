//! Rich fields and one interaction schema (docs/api.md) through the API: each field type and its bounds stored as
//! given and answered in its own shape; a definition or an answer that does not fit refused with 422 naming the
//! path (`fields[2].max`, `value.items[1].qty`), nothing stored; a `response_schema` (MCP elicitation's own examples)
//! becoming fields and checking answers.

use crate::common;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use common::{TestApp, assert_error};
use serde_json::{Value, json};

backend_tests!(
    every_rich_field_type_is_stored_as_given_and_answered_in_its_own_shape,
    a_definition_that_does_not_hold_is_refused_naming_its_path_and_nothing_is_stored,
    an_answer_that_does_not_fit_names_the_value_and_the_question_stays_pending,
    single_value_questions_take_the_rich_types_and_their_bounds_at_the_top,
    the_html_form_parser_reads_the_rich_scalar_types_from_text,
    a_response_schema_from_the_mcp_specification_becomes_fields_and_checks_answers,
    a_response_schema_keyword_outside_elicitation_is_refused_by_name,
);

/// A form with one field of each rich type, with the attributes each may carry.
fn rich_form() -> Value {
    json!({
        "title": "Plan the migration",
        "response_type": "form",
        "fields": [
            {"key": "day", "label": "Day", "response_type": "date", "required": true,
             "description": "The first day of the window", "default": "2026-03-02"},
            {"key": "start", "label": "Start", "response_type": "datetime"},
            {"key": "at", "label": "At", "response_type": "time", "placeholder": "HH:MM"},
            {"key": "nodes", "label": "Nodes", "response_type": "integer", "min": 1, "max": 9, "step": 2,
             "widget": "slider", "default": 3},
            {"key": "budget", "label": "Budget", "response_type": "number", "min": 0, "step": 0.5},
            {"key": "confidence", "label": "Confidence", "response_type": "rating", "max": 10},
            {"key": "owner", "label": "Owner", "response_type": "email"},
            {"key": "runbook", "label": "Runbook", "response_type": "url"},
            {"key": "notes", "label": "Notes", "response_type": "markdown"},
            {"key": "regions", "label": "Regions", "response_type": "multi_choice", "min_items": 1, "max_items": 2,
             "options": [{"value": "eu", "label": "EU"}, {"value": "us", "label": "US"}, {"value": "ap", "label": "AP"}]},
            {"key": "items", "label": "Items", "response_type": "table", "min_rows": 1, "max_rows": 5,
             "columns": [
                {"key": "name", "label": "Name", "response_type": "text", "required": true},
                {"key": "qty", "label": "Qty", "response_type": "integer"},
                {"key": "price", "label": "Price", "response_type": "number"},
                {"key": "fragile", "label": "Fragile", "response_type": "boolean"},
                {"key": "due", "label": "Due", "response_type": "date"},
                {"key": "size", "label": "Size", "response_type": "choice",
                 "options": [{"value": "s", "label": "Small"}, {"value": "l", "label": "Large"}]}
             ]}
        ]
    })
}

fn good_answer() -> Value {
    json!({
        "day": "2026-03-02",
        "start": "2026-03-02T22:00:00+01:00",
        "at": "22:30",
        "nodes": 5,
        "budget": 120.5,
        "confidence": 8,
        "owner": "ops@example.com",
        "runbook": "https://example.com/runbooks/migrate",
        "notes": "## Steps\n\n1. drain\n2. move",
        "regions": ["eu", "ap"],
        "items": [
            {"name": "disk", "qty": 2, "price": 80.0, "fragile": true, "due": "2026-03-01", "size": "l"},
            {"name": "cable"}
        ]
    })
}

async fn ask(app: &TestApp, body: Value) -> Value {
    let created = app.post("/api/v1/questions", body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    created.json
}

fn answer_path(question: &Value) -> String {
    format!("/api/v1/questions/{}/answer", question["id"].as_str().unwrap())
}

/// The fields a 422 names, in order.
fn named(response: &common::TestResponse) -> Vec<String> {
    let error = assert_error(response, StatusCode::UNPROCESSABLE_ENTITY, "invalid");
    error["details"]["fields"].as_object().unwrap().keys().cloned().collect()
}

async fn every_rich_field_type_is_stored_as_given_and_answered_in_its_own_shape(app: TestApp) {
    let question = ask(&app, rich_form()).await;
    let mut given = rich_form()["fields"].clone();
    for field in given.as_array_mut().unwrap() {
        field.as_object_mut().unwrap().entry("required").or_insert(json!(false));
    }
    assert_eq!(question["fields"], given, "every attribute is kept as given (and `required` said)");
    let fetched = app.get(&format!("/api/v1/questions/{}", question["id"].as_str().unwrap())).await.json;
    assert_eq!(fetched, question);

    let answered = app.post(&answer_path(&question), json!({"value": good_answer()})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
    assert_eq!(answered.json["status"], "answered");
    assert_eq!(answered.json["response"]["value"], good_answer());

    // Only what is required must be there.
    let question = ask(&app, rich_form()).await;
    let minimal = app.post(&answer_path(&question), json!({"value": {"day": "2026-12-31"}})).await;
    assert_eq!(minimal.status, StatusCode::OK, "{}", minimal.text);
}

async fn a_definition_that_does_not_hold_is_refused_naming_its_path_and_nothing_is_stored(app: TestApp) {
    let with_field = |index: usize, change: Value| {
        let mut body = rich_form();
        let field = &mut body["fields"][index];
        for (key, value) in change.as_object().unwrap() {
            field[key] = value.clone();
        }
        body
    };
    let cases = [
        (with_field(5, json!({"max": 11})), "fields[5].max"),
        (with_field(5, json!({"max": 2})), "fields[5].max"),
        (with_field(3, json!({"min": 9, "max": 1})), "fields[3].max"),
        (with_field(4, json!({"widget": "slider"})), "fields[4].widget"),
        (with_field(3, json!({"step": 0.5})), "fields[3].step"),
        (with_field(0, json!({"min": 1})), "fields[0].min"),
        (with_field(0, json!({"default": "02/03/2026"})), "fields[0].default"),
        (with_field(3, json!({"default": 4})), "fields[3].default"),
        (with_field(9, json!({"max_items": 4})), "fields[9].max_items"),
        (with_field(10, json!({"max_rows": 201})), "fields[10].max_rows"),
        (with_field(10, json!({"columns": []})), "fields[10].columns"),
        (
            with_field(10, json!({"columns": [{"key": "r", "label": "R", "response_type": "rating"}]})),
            "fields[10].columns[0].response_type",
        ),
        (
            with_field(10, json!({"columns": [{"key": "c", "label": "C", "response_type": "choice"}]})),
            "fields[10].columns[0].options",
        ),
        (with_field(1, json!({"response_type": "approval"})), "fields[1].response_type"),
        (with_field(2, json!({"placeholder": "x".repeat(201)})), "fields[2].placeholder"),
    ];
    for (body, path) in cases {
        let response = app.post("/api/v1/questions", body).await;
        assert_eq!(named(&response), [path], "{}", response.text);
    }
    let many: Vec<Value> =
        (0..31).map(|i| json!({"key": format!("f{i}"), "label": "F", "response_type": "text"})).collect();
    let response = app.post("/api/v1/questions", json!({"title": "t", "response_type": "form", "fields": many})).await;
    assert_eq!(named(&response), ["fields"]);
    let thirty: Vec<Value> =
        (0..30).map(|i| json!({"key": format!("f{i}"), "label": "F", "response_type": "text"})).collect();
    ask(&app, json!({"title": "t", "response_type": "form", "fields": thirty})).await;

    let listed = app.get("/api/v1/questions").await.json;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "only the valid form was stored");
}

async fn an_answer_that_does_not_fit_names_the_value_and_the_question_stays_pending(app: TestApp) {
    let question = ask(&app, rich_form()).await;
    let with = |change: Value| {
        let mut value = good_answer();
        for (key, entry) in change.as_object().unwrap() {
            value[key] = entry.clone();
        }
        json!({ "value": value })
    };
    let cases = [
        (with(json!({"day": "2026-02-30"})), "value.day"),
        (with(json!({"start": "2026-03-02T22:00:00"})), "value.start"),
        (with(json!({"at": "7pm"})), "value.at"),
        (with(json!({"nodes": 4})), "value.nodes"),
        (with(json!({"nodes": 11})), "value.nodes"),
        (with(json!({"budget": -1})), "value.budget"),
        (with(json!({"confidence": 0})), "value.confidence"),
        (with(json!({"owner": "ops at example"})), "value.owner"),
        (with(json!({"runbook": "javascript:alert(1)"})), "value.runbook"),
        (with(json!({"notes": "x".repeat(10_001)})), "value.notes"),
        (with(json!({"regions": []})), "value.regions"),
        (with(json!({"items": [{"name": "disk"}, {"name": "cable", "qty": 1.5}]})), "value.items[1].qty"),
        (with(json!({"items": [{"name": "disk", "size": "xl"}]})), "value.items[0].size"),
        (with(json!({"items": [{"qty": 1}]})), "value.items[0].name"),
        (with(json!({"items": [{"name": "disk", "colour": "red"}]})), "value.items[0].colour"),
        (with(json!({"items": []})), "value.items"),
    ];
    for (body, path) in cases {
        let response = app.post(&answer_path(&question), body).await;
        assert_eq!(named(&response), [path], "{}", response.text);
    }
    let id = question["id"].as_str().unwrap();
    let fetched = app.get(&format!("/api/v1/questions/{id}")).await.json;
    assert_eq!(fetched["status"], "pending");
    assert_eq!(fetched["response"], Value::Null, "nothing was stored");
}

async fn single_value_questions_take_the_rich_types_and_their_bounds_at_the_top(app: TestApp) {
    let rating = ask(&app, json!({"title": "How did it go?", "response_type": "rating", "max": 3})).await;
    assert_eq!(rating["max"], 3);
    assert_eq!(named(&app.post(&answer_path(&rating), json!({"value": 4})).await), ["value"]);
    let answered = app.post(&answer_path(&rating), json!({"value": 3})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    let table = json!({"title": "Which disks?", "response_type": "table", "max_rows": 2,
        "columns": [{"key": "size", "label": "Size", "response_type": "integer", "required": true}]});
    let disks = ask(&app, table).await;
    assert_eq!(named(&app.post(&answer_path(&disks), json!({"value": [{"size": "big"}]})).await), ["value[0].size"]);
    let answered = app.post(&answer_path(&disks), json!({"value": [{"size": 100}, {"size": 200}]})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    let number = ask(&app, json!({"title": "Replicas?", "response_type": "integer", "min": 1, "max": 5})).await;
    assert_eq!((number["min"].clone(), number["max"].clone()), (json!(1), json!(5)));
    assert_eq!(named(&app.post(&answer_path(&number), json!({"value": 6})).await), ["value"]);

    let refusals = [
        (
            json!({"title": "t", "response_type": "date", "default_response": {"value": "tomorrow"}}),
            "default_response.value",
        ),
        (json!({"title": "t", "response_type": "rating", "max": 12}), "max"),
        (json!({"title": "t", "response_type": "text", "min_rows": 1}), "min_rows"),
        (json!({"title": "t", "response_type": "table"}), "columns"),
        (json!({"title": "t", "response_type": "number", "min": 0, "widget": "slider"}), "widget"),
        (
            json!({"title": "t", "kind": "non_blocking", "response_type": "email",
                   "default_response": {"value": "nobody"}}),
            "default_response.value",
        ),
    ];
    for (body, path) in refusals {
        let response = app.post("/api/v1/questions", body).await;
        assert_eq!(named(&response), [path], "{}", response.text);
    }
    // The default a timeout would apply fits, so it is taken.
    let dated = json!({"title": "When?", "response_type": "date", "default_response": {"value": "2026-04-01"}});
    assert_eq!(ask(&app, dated).await["default_response"]["value"], "2026-04-01");
}

/// The plain HTML answer form (no JavaScript) sends text; the server reads each rich scalar type from it.
async fn the_html_form_parser_reads_the_rich_scalar_types_from_text(app: TestApp) {
    let session = app.sign_in_with(&format!("token={}", app.token)).await.expect("a session");
    let form = json!({"title": "Plan", "response_type": "form", "fields": [
        {"key": "day", "label": "Day", "response_type": "date"},
        {"key": "nodes", "label": "Nodes", "response_type": "integer", "max": 9},
        {"key": "stars", "label": "Stars", "response_type": "rating"},
        {"key": "owner", "label": "Owner", "response_type": "email"},
        {"key": "notes", "label": "Notes", "response_type": "markdown"}
    ]});
    let question = ask(&app, form).await;
    let id = question["id"].as_str().unwrap();
    let body = format!(
        "csrf={}&field.day=2026-03-02&field.nodes=4&field.stars=5&field.owner=ops%40example.com&field.notes=%23+Hi%0A",
        session.csrf
    );
    let request = Request::post(format!("/ui/answer/{id}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, &session.cookie)
        .body(Body::from(body))
        .unwrap();
    let response = app.send(request).await;
    assert!(response.status.is_redirection() || response.status.is_success(), "{}: {}", response.status, response.text);
    let answered = app.get(&format!("/api/v1/questions/{id}")).await.json;
    assert_eq!(
        answered["response"]["value"],
        json!({"day": "2026-03-02", "nodes": 4, "stars": 5, "owner": "ops@example.com", "notes": "# Hi\n"})
    );
}

async fn a_response_schema_from_the_mcp_specification_becomes_fields_and_checks_answers(app: TestApp) {
    // MCP specification 2025-11-25, client/elicitation: "Structured Data Request".
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Your full name"},
            "email": {"type": "string", "format": "email", "description": "Your email address"},
            "age": {"type": "number", "minimum": 18, "description": "Your age"}
        },
        "required": ["name", "email"]
    });
    let question =
        ask(&app, json!({"title": "Please provide your contact information", "response_schema": schema})).await;
    assert_eq!(question["response_type"], "form", "a schema implies a form");
    assert_eq!(question["response_schema"], schema, "kept as given");
    let fields: Vec<(&str, &str, bool)> = question["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["key"].as_str().unwrap(), f["response_type"].as_str().unwrap(), f["required"] == true))
        .collect();
    // In the order of the properties' names: the server keeps no JSON object's own order.
    assert_eq!(fields, [("age", "number", false), ("email", "email", true), ("name", "text", true)]);
    assert_eq!(question["fields"][0]["min"], 18);

    let cases = [
        (json!({"name": "Monalisa Octocat", "email": "octocat"}), "value.email"),
        (json!({"name": "Monalisa Octocat", "email": "octocat@github.com", "age": 17}), "value.age"),
        (json!({"email": "octocat@github.com"}), "value.name"),
    ];
    for (value, path) in cases {
        let response = app.post(&answer_path(&question), json!({ "value": value })).await;
        assert_eq!(named(&response), [path], "{}", response.text);
    }
    // The specification's own response.
    let content = json!({"name": "Monalisa Octocat", "email": "octocat@github.com", "age": 30});
    let answered = app.post(&answer_path(&question), json!({ "value": content })).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);

    // The enum schemas of the same page: titled and untitled, single and multi-select, with defaults.
    let colors = json!({
        "type": "object",
        "properties": {
            "color": {"type": "string", "title": "Color Selection", "description": "Choose your favorite color",
                      "oneOf": [{"const": "#FF0000", "title": "Red"}, {"const": "#00FF00", "title": "Green"},
                                {"const": "#0000FF", "title": "Blue"}],
                      "default": "#FF0000"},
            "colors": {"type": "array", "title": "Color Selection", "description": "Choose your favorite colors",
                       "minItems": 1, "maxItems": 2,
                       "items": {"type": "string", "enum": ["Red", "Green", "Blue"]},
                       "default": ["Red", "Green"]}
        }
    });
    let question = ask(&app, json!({"title": "Colors", "kind": "non_blocking", "response_schema": colors})).await;
    assert_eq!(question["fields"][0]["options"][1], json!({"value": "#00FF00", "label": "Green"}));
    assert_eq!(question["fields"][1]["max_items"], 2);
    assert_eq!(question["fields"][1]["default"], json!(["Red", "Green"]));
    let too_many = json!({"value": {"colors": ["Red", "Green", "Blue"]}});
    assert_eq!(named(&app.post(&answer_path(&question), too_many).await), ["value.colors"]);
    let answered = app.post(&answer_path(&question), json!({"value": {"color": "#0000FF", "colors": ["Blue"]}})).await;
    assert_eq!(answered.status, StatusCode::OK, "{}", answered.text);
}

async fn a_response_schema_keyword_outside_elicitation_is_refused_by_name(app: TestApp) {
    let string = |extra: Value| {
        let mut property = json!({"type": "string"});
        for (key, value) in extra.as_object().unwrap() {
            property[key] = value.clone();
        }
        json!({"title": "t", "response_schema": {"type": "object", "properties": {"x": property}}})
    };
    let cases = [
        (string(json!({"pattern": "^[a-z]+($"})), "response_schema.properties.x.pattern"),
        (string(json!({"format": "ipv4"})), "response_schema.properties.x.format"),
        (string(json!({"default": 3})), "response_schema.properties.x.default"),
        (
            json!({"title": "t", "response_schema": {"type": "object", "properties": {"x": {"type": "object"}}}}),
            "response_schema.properties.x.type",
        ),
        (
            json!({"title": "t", "response_schema": {"type": "object", "properties": {"x": {"type": "string"}},
                   "additionalProperties": true}}),
            "response_schema.additionalProperties",
        ),
        (
            json!({"title": "t", "response_schema": {"type": "object", "properties": {"x": {"type": "string"}},
                   "required": ["y"]}}),
            "response_schema.required[0]",
        ),
        (
            json!({"title": "t", "response_type": "text",
                   "response_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}),
            "response_type",
        ),
        (
            json!({"title": "t", "response_type": "form",
                   "fields": [{"key": "x", "label": "X", "response_type": "text"}],
                   "response_schema": {"type": "object", "properties": {"x": {"type": "string"}}}}),
            "fields",
        ),
    ];
    for (body, path) in cases {
        let response = app.post("/api/v1/questions", body).await;
        assert_eq!(named(&response), [path], "{}", response.text);
    }
    assert_eq!(app.get("/api/v1/questions").await.json["items"], json!([]), "nothing was stored");
}
