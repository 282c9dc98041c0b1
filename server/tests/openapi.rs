//! The OpenAPI document is served, public, and matches the router: every documented operation is routed, every
//! endpoint of the spec is documented, and what an operation answers is among its documented responses.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{Backend, TestApp};
use serde_json::{Value, json};

/// The endpoints of the REST API (docs/api.md), as `(method, path)` of the OpenAPI document.
const DOCUMENTED_ENDPOINTS: &[(&str, &str)] = &[
    ("post", "/api/v1/questions"),
    ("get", "/api/v1/questions"),
    ("get", "/api/v1/questions/{id}"),
    ("get", "/api/v1/questions/{id}/wait"),
    ("post", "/api/v1/questions/{id}/answer"),
    ("post", "/api/v1/questions/answer-batch"),
    ("post", "/api/v1/questions/{id}/cancel"),
    ("get", "/api/v1/events"),
    ("post", "/api/v1/agents"),
    ("get", "/api/v1/agents"),
    ("get", "/api/v1/agents/{id}"),
    ("put", "/api/v1/agents/{id}"),
    ("post", "/api/v1/agents/{name}/ag-ui"),
    ("post", "/api/v1/runs"),
    ("get", "/api/v1/runs"),
    ("get", "/api/v1/runs/{id}"),
    ("get", "/api/v1/runs/{id}/messages"),
    ("get", "/api/v1/runs/{id}/messages/{mid}"),
    ("get", "/api/v1/runs/{id}/tool-calls"),
    ("get", "/api/v1/runs/{id}/tool-calls/{cid}"),
    ("post", "/api/v1/runs/{id}/resume"),
    ("post", "/api/v1/runs/{id}/cancel"),
    ("patch", "/api/v1/members/{user_id}"),
    ("patch", "/api/v1/me"),
    ("put", "/api/v1/me/notifications"),
    ("get", "/api/v1/audit"),
    ("get", "/api/v1/audit/export"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
];

#[tokio::test]
async fn the_document_covers_every_endpoint_and_every_documented_operation_is_routed() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let document = app.call(Method::GET, "/api/v1/openapi.json", None, None).await;
    assert_eq!(document.status, StatusCode::OK, "the document is public");
    let document = document.json;
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    let paths = document["paths"].as_object().unwrap();

    for (method, path) in DOCUMENTED_ENDPOINTS {
        assert!(paths.get(*path).and_then(|p| p.get(*method)).is_some(), "{method} {path} is not documented");
    }
    let schemas = document["components"]["schemas"].as_object().unwrap();
    for schema in ["Question", "NewQuestion", "AnswerBody", "ErrorBody", "QuestionKind", "ResponseType"] {
        assert!(schemas.contains_key(schema), "schema {schema} is missing");
    }

    let question = app.post("/api/v1/questions", json!({"title": "probe", "kind": "non_blocking"})).await.json;
    let id = question["id"].as_str().unwrap();
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().unwrap() {
            operations += 1;
            let documented: Vec<u16> =
                operation["responses"].as_object().unwrap().keys().map(|s| s.parse().unwrap()).collect();
            let concrete = path.replace("{id}", id);
            let method: Method = method.to_uppercase().parse().unwrap();
            let body = (method == Method::POST).then(|| json!({}));
            // The event stream never ends; only its refusal without a token is probed here.
            let token = if path.ends_with("/events") { None } else { Some(app.token.as_str()) };
            let response = app.call(method.clone(), &concrete, token, body).await;
            assert_ne!(response.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path} is documented but not routed");
            assert_ne!(
                response.json["error"]["message"],
                Value::String("route not found".into()),
                "{method} {path} is documented but not routed"
            );
            assert!(
                documented.contains(&response.status.as_u16()),
                "{method} {path} answered {} which is not among its documented responses {documented:?}: {}",
                response.status,
                response.text
            );
        }
    }
    assert!(operations >= DOCUMENTED_ENDPOINTS.len());
}

/// Follows `$ref`s (and a nullable's `oneOf`/`anyOf` around one) to the schema they name.
fn resolve<'a>(document: &'a Value, schema: &'a Value) -> &'a Value {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap();
        return resolve(document, &document["components"]["schemas"][name]);
    }
    for combinator in ["oneOf", "anyOf", "allOf"] {
        if let Some(variants) = schema[combinator].as_array()
            && let Some(real) = variants.iter().find(|v| v["type"] != "null")
        {
            return resolve(document, real);
        }
    }
    schema
}

/// A schema's property `name`: among its own properties, or those of the schemas it is `allOf` (a type with a
/// flattened part, such as `NewQuestion` with its `FieldRules`).
fn property_of<'a>(document: &'a Value, schema: &'a Value, name: &str) -> &'a Value {
    let schema = if schema["$ref"].is_string() { resolve(document, schema) } else { schema };
    if !schema["properties"][name].is_null() {
        return resolve(document, &schema["properties"][name]);
    }
    schema["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|part| property_of(document, part, name))
        .find(|found| !found.is_null())
        .unwrap_or(&Value::Null)
}

fn parameter<'a>(document: &'a Value, path: &str, method: &str, name: &str) -> &'a Value {
    let parameters = document["paths"][path][method]["parameters"].as_array().unwrap();
    let parameter = parameters.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("{method} {path}: {name}"));
    resolve(document, &parameter["schema"])
}

/// What the server checks is in the schema, so that a client (or a fuzzer) that keeps to the schema is not refused.
#[tokio::test]
async fn the_document_states_the_constraints_the_server_checks() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let document = app.call(Method::GET, "/api/v1/openapi.json", None, None).await.json;
    let schemas = &document["components"]["schemas"];
    let property = |schema: &str, name: &str| property_of(&document, &schemas[schema], name).clone();

    let max_steps = property("AgentSpec", "max_steps");
    assert_eq!((max_steps["minimum"].as_f64(), max_steps["maximum"].as_f64()), (Some(1.0), Some(500.0)));
    let run_steps = property("NewRun", "max_steps");
    assert_eq!((run_steps["minimum"].as_f64(), run_steps["maximum"].as_f64()), (Some(1.0), Some(500.0)));
    let name = property("AgentSpec", "name");
    assert_eq!((name["minLength"].as_u64(), name["maxLength"].as_u64()), (Some(1), Some(100)));
    assert!(property("AgentSpec", "model")["pattern"].as_str().unwrap().starts_with("^(openai|script):"));
    let policies = resolve(&document, &schemas["ApprovalPolicy"]["properties"]["tools"]);
    assert_eq!(policies["additionalProperties"], false, "a policy names built-in tools only");
    let named: Vec<&String> = policies["properties"].as_object().unwrap().keys().collect();
    assert_eq!(named.len(), holdpoint::runtime::tools::BUILT_IN.len());
    let tools = property("AgentSpec", "tools");
    assert_eq!(tools["uniqueItems"], true);
    let tool_names = resolve(&document, &tools["items"])["enum"].clone();
    assert_eq!(tool_names, json!(holdpoint::runtime::tools::BUILT_IN), "the tools an agent may name");
    // The served document names the endpoints this server allows, each with the variable of its key.
    let endpoints = schemas["ModelSettings"]["anyOf"].as_array().unwrap();
    assert_eq!(endpoints[0]["properties"]["api_key_env"]["enum"], json!(["OPENAI_API_KEY"]));
    assert_eq!(endpoints[0]["properties"]["base_url"]["enum"].as_array().unwrap().len(), 1, "{endpoints:?}");
    let human_roles = json!(["viewer", "responder", "approver", "admin"]);
    assert_eq!(property("NewMember", "role")["enum"], human_roles, "people hold no agent role");
    assert_eq!(property("MemberUpdate", "role")["enum"], human_roles);
    assert!(property("NewToken", "role")["enum"].as_array().unwrap().contains(&json!("agent")), "tokens may");
    let username = property("NewMember", "username");
    assert_eq!(
        (username["maxLength"].as_u64(), username["pattern"].as_str()),
        (Some(64), Some("^[a-z0-9][a-z0-9._-]*$"))
    );
    assert_eq!(property("NewToken", "name")["maxLength"], 100);

    // The timeouts this server takes (HOLDPOINT_MIN_TIMEOUT_SECONDS, ..._MAX_...): what the libraries read.
    let timeout = property("NewQuestion", "timeout_seconds");
    assert_eq!((timeout["minimum"].as_i64(), timeout["maximum"].as_i64()), (Some(1), Some(86_400)), "{timeout}");
    let run_id = property("NewQuestion", "run_id");
    assert_eq!(run_id["format"], "uuid");
    assert!(run_id["pattern"].as_str().unwrap().starts_with("^[0-9a-fA-F]{8}-"), "an empty string is no UUID");
    for time in ["since", "until"] {
        assert_eq!(parameter(&document, "/api/v1/audit", "get", time)["format"], "date-time");
    }
    let actor_kinds = &parameter(&document, "/api/v1/audit", "get", "actor_kind")["enum"];
    assert_eq!(actor_kinds, &json!(["human", "token", "policy", "timeout"]));
    for path in ["/api/v1/questions", "/api/v1/runs"] {
        let key = parameter(&document, path, "post", "Idempotency-Key");
        assert_eq!(key["pattern"], r"^[!-~]([ -~]{0,253}[!-~])?$", "{path}");
    }
    let worker = &document["paths"]["/api/v1/runs/{id}/worker"]["post"]["requestBody"]["content"]["application/json"];
    let frame = resolve(&document, &worker["schema"]);
    assert_eq!(frame["required"], json!(["op"]));
    let ops = resolve(&document, &frame["properties"]["op"])["enum"].as_array().unwrap().clone();
    for op in &ops {
        // A known operation without its fields fails on a missing field, never as an unknown variant.
        let refused = serde_json::from_value::<holdpoint::worker_api::WorkerCall>(json!({ "op": op }));
        assert!(!refused.as_ref().is_err_and(|err| err.to_string().contains("unknown variant")), "{op}: {refused:?}");
    }
    let unknown = serde_json::from_value::<holdpoint::worker_api::WorkerCall>(json!({ "op": "unheard_of" }));
    assert!(unknown.unwrap_err().to_string().contains("unknown variant"));
}

/// Every link of a creating operation names an operation of the document and one of its parameters.
#[tokio::test]
async fn created_objects_link_to_the_operations_that_read_and_change_them() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let document = app.call(Method::GET, "/api/v1/openapi.json", None, None).await.json;
    let mut operations = std::collections::HashMap::new();
    for item in document["paths"].as_object().unwrap().values() {
        for operation in item.as_object().unwrap().values() {
            let parameters: Vec<String> = operation["parameters"]
                .as_array()
                .map(|ps| ps.iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            operations.insert(operation["operationId"].as_str().unwrap().to_owned(), parameters);
        }
    }
    let mut links = 0;
    for path in ["/api/v1/questions", "/api/v1/runs", "/api/v1/agents", "/api/v1/members", "/api/v1/tokens"] {
        let created = document["paths"][path]["post"]["responses"]["201"]["links"].as_object();
        let created = created.unwrap_or_else(|| panic!("POST {path} links nowhere"));
        for (name, link) in created {
            let target = link["operationId"].as_str().unwrap();
            let parameters = operations.get(target).unwrap_or_else(|| panic!("{name} names no operation: {target}"));
            for (parameter, value) in link["parameters"].as_object().unwrap() {
                assert!(parameters.contains(parameter), "{name}: {target} has no parameter {parameter}");
                assert!(value.as_str().unwrap().starts_with("$response.body#/"), "{name}: {value}");
            }
            links += 1;
        }
    }
    assert!(links >= 13, "{links}");
}

/// The operations `docs/api.md` describes: each heading that is `METHOD /path` (backticks aside).
fn operations_in_the_reference(reference: &str) -> Vec<String> {
    const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
    reference
        .lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').replace('`', ""))
        .filter_map(|heading| {
            let mut words = heading.split_whitespace();
            let (method, path) = (words.next()?, words.next()?);
            (METHODS.contains(&method) && path.starts_with('/')).then(|| format!("{method} {path}"))
        })
        .collect()
}

/// `docs/api.md`, the reference people read, names every operation of the OpenAPI document as a heading, once, and
/// none the document lacks: a new or removed route fails here until the reference says so.
#[tokio::test]
async fn the_api_reference_names_exactly_the_documented_operations() {
    let app = TestApp::start(Backend::Sqlite).await.unwrap();
    let document = app.call(Method::GET, "/api/v1/openapi.json", None, None).await.json;
    let mut documented: Vec<String> = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object().unwrap().keys().map(move |method| format!("{} {path}", method.to_uppercase()))
        })
        .collect();
    documented.sort();
    let reference = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md")).unwrap();
    let mut described = operations_in_the_reference(&reference);
    described.sort();
    let missing: Vec<&String> = documented.iter().filter(|op| !described.contains(op)).collect();
    let unknown: Vec<&String> = described.iter().filter(|op| !documented.contains(op)).collect();
    assert!(missing.is_empty(), "docs/api.md does not describe {missing:?}");
    assert!(unknown.is_empty(), "docs/api.md describes operations the API does not have: {unknown:?}");
    let mut once = described.clone();
    once.dedup();
    assert_eq!(once, described, "docs/api.md describes an operation twice");
}
