//! An answer as the command line gives it: VALUE read by the question's response type, and a form's `--field`s,
//! `--row`s and `--file`s read by their fields' types. What cannot be meant is a usage error before anything is sent.

use app::types::{FieldRules, FormField, ResponseType, TableColumn};
use serde_json::{Value, json};

use crate::cli::client::{CliError, CliResult};

/// Reads `raw` as an answer to a question of `response_type` (with the form's `fields`).
pub(super) fn parse_value(response_type: &str, fields: &[Value], raw: &str) -> CliResult<Value> {
    Ok(match response_type {
        "boolean" | "approval" => Value::Bool(parse_bool(raw)?),
        "multi_choice" => split_list(raw),
        "number" | "integer" | "rating" => Value::from(parse_number("the answer", raw)?),
        "table" => parse_rows_json("the answer", raw)?,
        "form" => {
            let mut object: Value = serde_json::from_str(raw)
                .map_err(|e| CliError::Usage(format!("a form is answered with a JSON object: {e}")))?;
            let Some(map) = object.as_object_mut() else {
                return Err(CliError::Usage("a form is answered with a JSON object, e.g. '{\"count\": 3}'".into()));
            };
            // A shell makes strings of everything; each field is read as its own type, as the value alone is.
            for field in fields {
                let (Some(key), Some(kind)) = (field["key"].as_str(), field["response_type"].as_str()) else {
                    continue;
                };
                if let Some(Value::String(given)) = map.get(key) {
                    let typed = match kind {
                        "number" | "integer" | "rating" => Value::from(parse_number(key, given)?),
                        "boolean" => Value::Bool(parse_bool(given)?),
                        "multi_choice" => split_list(given),
                        "table" => parse_rows_json(key, given)?,
                        _ => continue,
                    };
                    map.insert(key.to_owned(), typed);
                }
            }
            object
        }
        // text, choice, error_recovery: the value as given; the server checks it against the options.
        _ => Value::String(raw.to_owned()),
    })
}

fn parse_bool(raw: &str) -> CliResult<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "yes" | "y" | "true" => Ok(true),
        "no" | "n" | "false" => Ok(false),
        _ => Err(CliError::Usage(format!("expected yes, no, true or false, not {raw:?}"))),
    }
}

/// A number as the command line gives it: a whole number as such, else a finite decimal.
pub(crate) fn parse_number(key: &str, raw: &str) -> CliResult<serde_json::Number> {
    let raw = raw.trim();
    if let Ok(whole) = raw.parse::<i64>() {
        return Ok(whole.into());
    }
    raw.parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .ok_or_else(|| CliError::Usage(format!("{} is a number, not {raw:?}", named(key))))
}

/// "field KEY", or what is named as it is ("the answer").
fn named(key: &str) -> String {
    if key.starts_with("the ") { key.to_owned() } else { format!("field {key}") }
}

/// A table given whole: a JSON array of row objects.
fn parse_rows_json(key: &str, raw: &str) -> CliResult<Value> {
    match serde_json::from_str::<Value>(raw) {
        Ok(rows @ Value::Array(_)) => Ok(rows),
        _ => Err(CliError::Usage(format!(
            "{} is a table: give it as a JSON array of rows ('[{{\"COLUMN\": VALUE}}]'), or row by row with --row",
            named(key)
        ))),
    }
}

/// A value given on the command line as the type of the field (or column) it is for. Strings are left as they are:
/// the server checks dates, times, addresses and choices, and names what does not fit.
fn typed_value(key: &str, kind: ResponseType, raw: &str) -> CliResult<Value> {
    Ok(match kind {
        ResponseType::Number | ResponseType::Integer | ResponseType::Rating => Value::from(parse_number(key, raw)?),
        ResponseType::Boolean => Value::Bool(parse_bool(raw)?),
        ResponseType::MultiChoice => split_list(raw),
        ResponseType::Table => parse_rows_json(key, raw)?,
        ResponseType::File => {
            return Err(CliError::Usage(format!("{} is a file: give it with --file {key}=@PATH", named(key))));
        }
        _ => Value::String(raw.to_owned()),
    })
}

/// One row of a table: a JSON object, or `COLUMN=VALUE,...` with each cell read by its column's type.
fn parse_row(key: &str, columns: &[TableColumn], raw: &str) -> CliResult<Value> {
    let raw = raw.trim();
    if raw.starts_with('{') {
        return match serde_json::from_str::<Value>(raw) {
            Ok(row @ Value::Object(_)) => Ok(row),
            _ => Err(CliError::Usage(format!("a row of {} is not a JSON object: {raw}", named(key)))),
        };
    }
    let mut row = serde_json::Map::new();
    for cell in raw.split(',').map(str::trim).filter(|cell| !cell.is_empty()) {
        let Some((column, text)) = cell.split_once('=') else {
            return Err(CliError::Usage(format!("a row is COLUMN=VALUE,... or a JSON object, not {cell:?}")));
        };
        let column = column.trim();
        let Some(def) = columns.iter().find(|c| c.key == column) else {
            let known: Vec<&str> = columns.iter().map(|c| c.key.as_str()).collect();
            return Err(CliError::Usage(format!(
                "{} has no column {column:?} (its columns: {})",
                named(key),
                known.join(", ")
            )));
        };
        row.insert(column.to_owned(), typed_value(&format!("{key}.{column}"), def.response_type, text.trim())?);
    }
    Ok(Value::Object(row))
}

/// A `--file KEY=@PATH[;type=MEDIA/TYPE]`, read but not yet uploaded.
#[derive(Debug, PartialEq)]
pub(super) struct FileArg {
    pub key: String,
    pub path: std::path::PathBuf,
    /// The media type given with `;type=`, else guessed from the file's name.
    pub media_type: String,
}

/// `@PATH` alone is the file of a question that is itself a file (its key is empty).
pub(super) fn parse_file_arg(raw: &str) -> CliResult<FileArg> {
    let usage = || {
        CliError::Usage(format!(
            "--file takes KEY=@PATH for a form's field (e.g. plan=@plan.pdf), or @PATH for a file question, not {raw:?}"
        ))
    };
    let (key, rest) = match raw.strip_prefix('@') {
        Some(_) => ("", raw),
        None => raw.split_once('=').filter(|(key, _)| !key.trim().is_empty()).ok_or_else(usage)?,
    };
    let rest = rest.strip_prefix('@').ok_or_else(usage)?;
    let (path, media_type) = match rest.rsplit_once(";type=") {
        Some((path, media_type)) if media_type.contains('/') => (path, Some(media_type.trim().to_owned())),
        _ => (rest, None),
    };
    if path.is_empty() {
        return Err(usage());
    }
    let media_type =
        media_type.unwrap_or_else(|| mime_guess::from_path(path).first_or_octet_stream().essence_str().to_owned());
    Ok(FileArg { key: key.trim().to_owned(), path: path.into(), media_type })
}

/// The `--row` values as given, one group per row: a value without `=` is a table field's key, and the value after it
/// that key's row; any other value is a row on its own (`KEY='{...}'`, or a table question's `COLUMN=VALUE,...`).
pub(super) fn group_rows(values: &[String]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut values = values.iter();
    while let Some(value) = values.next() {
        match (value.contains('='), value.trim_start().starts_with('{')) {
            (false, false) => rows.push(std::iter::once(value).chain(values.next()).cloned().collect()),
            _ => rows.push(vec![value.clone()]),
        }
    }
    rows
}

/// What the command line says beyond VALUE: `--field`, `--row` and the uploaded `--file`s (each `(key, the
/// upload's value)`).
#[derive(Debug, Default)]
pub(super) struct Parts<'a> {
    pub fields: &'a [String],
    pub rows: &'a [Vec<String>],
    pub files: Vec<(String, Value)>,
}

/// The answer's value: VALUE read by the question's type, and a form's `--field`s, `--row`s and files on top of it
/// (or a table question's `--row`s after VALUE's rows).
pub(super) fn build_value(question: &Value, raw: Option<&str>, parts: &Parts<'_>) -> CliResult<Value> {
    let response_type = question["response_type"].as_str().unwrap_or("text");
    let fields_json = question["fields"].as_array().cloned().unwrap_or_default();
    if response_type == "file" {
        return match (&parts.files[..], raw) {
            ([(key, file)], None) if key.is_empty() && parts.fields.is_empty() && parts.rows.is_empty() => {
                Ok(file.clone())
            }
            _ => Err(CliError::Usage("this is a file question: give its file, and only it, with --file @PATH".into())),
        };
    }
    if response_type != "form" {
        if !parts.fields.is_empty() || !parts.files.is_empty() {
            return Err(CliError::Usage(format!(
                "--field and --file are for forms; this is a {} question: give its answer as VALUE",
                response_type.replace('_', " ")
            )));
        }
        if response_type == "table" && !parts.rows.is_empty() {
            let rules: FieldRules = serde_json::from_value(question.clone()).unwrap_or_default();
            let mut rows = match raw {
                Some(raw) => parse_rows_json("the answer", raw)?.as_array().cloned().unwrap_or_default(),
                None => Vec::new(),
            };
            for row in parts.rows {
                let [row] = &row[..] else {
                    return Err(CliError::Usage("a table question's --row takes one row: COLUMN=VALUE,...".into()));
                };
                rows.push(parse_row("the answer", &rules.columns, row)?);
            }
            return Ok(Value::Array(rows));
        }
        if !parts.rows.is_empty() {
            return Err(CliError::Usage(format!(
                "--row is for tables; this is a {} question",
                response_type.replace('_', " ")
            )));
        }
        let raw = raw.ok_or_else(|| CliError::Usage("give the answer as VALUE".into()))?;
        return parse_value(response_type, &fields_json, raw);
    }
    let fields: Vec<FormField> = serde_json::from_value(Value::Array(fields_json.clone())).unwrap_or_default();
    let mut object = match raw {
        Some(raw) => parse_value("form", &fields_json, raw)?,
        None => Value::Object(Default::default()),
    };
    let Some(map) = object.as_object_mut() else {
        return Err(CliError::Usage("a form is answered with a JSON object".into()));
    };
    let field_of = |key: &str| -> CliResult<&FormField> {
        fields.iter().find(|f| f.key == key).ok_or_else(|| {
            let known: Vec<&str> = fields.iter().map(|f| f.key.as_str()).collect();
            CliError::Usage(format!("the form has no field {key:?} (its fields: {})", known.join(", ")))
        })
    };
    for given in parts.fields {
        let Some((key, text)) = given.split_once('=') else {
            return Err(CliError::Usage(format!("--field takes KEY=VALUE, not {given:?}")));
        };
        let field = field_of(key.trim())?;
        map.insert(field.key.clone(), typed_value(&field.key, field.response_type, text)?);
    }
    for row in parts.rows {
        let (key, text) = match &row[..] {
            [key, text] => (key.trim(), text.as_str()),
            [given] => match given.split_once('=') {
                Some((key, text)) if text.trim_start().starts_with('{') => (key.trim(), text),
                _ => {
                    return Err(CliError::Usage(format!(
                        "--row takes KEY COLUMN=VALUE,... or KEY='{{JSON}}' for a form's table, not {given:?}"
                    )));
                }
            },
            _ => return Err(CliError::Usage("--row takes one or two values".into())),
        };
        let field = field_of(key)?;
        if field.response_type != ResponseType::Table {
            return Err(CliError::Usage(format!("field {key} is not a table: give it with --field {key}=VALUE")));
        }
        let row = parse_row(key, &field.rules.columns, text)?;
        match map.entry(field.key.clone()).or_insert_with(|| Value::Array(Vec::new())) {
            Value::Array(rows) => rows.push(row),
            _ => return Err(CliError::Usage(format!("field {key} is given whole and row by row: choose one"))),
        }
    }
    for (key, file) in &parts.files {
        if key.is_empty() {
            return Err(CliError::Usage("a form's file is given with --file KEY=@PATH, for its field KEY".into()));
        }
        let field = field_of(key)?;
        if field.response_type != ResponseType::File {
            return Err(CliError::Usage(format!("field {key} is not a file field: give it with --field {key}=VALUE")));
        }
        map.insert(field.key.clone(), file.clone());
    }
    Ok(object)
}

fn split_list(raw: &str) -> Value {
    Value::Array(raw.split(',').map(str::trim).filter(|v| !v.is_empty()).map(|v| json!(v)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn a_boolean_is_yes_no_true_or_false() {
        assert_eq!(parse_value("boolean", &[], "Yes").unwrap(), json!(true));
        assert_eq!(parse_value("boolean", &[], "false").unwrap(), json!(false));
        assert!(matches!(parse_value("boolean", &[], "maybe"), Err(CliError::Usage(_))));
    }

    #[test]
    fn multi_choice_values_are_separated_by_commas() {
        assert_eq!(parse_value("multi_choice", &[], "eu, us,,").unwrap(), json!(["eu", "us"]));
    }

    #[test]
    fn text_choice_and_error_recovery_are_taken_as_given() {
        for kind in ["text", "choice", "error_recovery"] {
            assert_eq!(parse_value(kind, &[], " retry ").unwrap(), json!(" retry "));
        }
    }

    #[test]
    fn form_fields_given_as_strings_are_read_as_their_type() {
        let fields = vec![
            json!({ "key": "count", "response_type": "number" }),
            json!({ "key": "ratio", "response_type": "number" }),
            json!({ "key": "ok", "response_type": "boolean" }),
            json!({ "key": "regions", "response_type": "multi_choice" }),
            json!({ "key": "name", "response_type": "text" }),
        ];
        let raw = r#"{"count": "3", "ratio": 0.5, "ok": "yes", "regions": "eu,us", "name": "42"}"#;
        assert_eq!(
            parse_value("form", &fields, raw).unwrap(),
            json!({ "count": 3, "ratio": 0.5, "ok": true, "regions": ["eu", "us"], "name": "42" })
        );
        assert!(matches!(parse_value("form", &fields, r#"{"count": "three"}"#), Err(CliError::Usage(_))));
        assert!(matches!(parse_value("form", &fields, "[1]"), Err(CliError::Usage(_))));
        assert!(matches!(parse_value("form", &fields, "count=3"), Err(CliError::Usage(_))));
    }

    fn rich_form() -> Value {
        json!({ "response_type": "form", "fields": [
            { "key": "nodes", "label": "Nodes", "response_type": "integer", "required": true },
            { "key": "start", "label": "Start", "response_type": "date" },
            { "key": "canary", "label": "Canary?", "response_type": "boolean" },
            { "key": "plan", "label": "Plan", "response_type": "file" },
            { "key": "disks", "label": "Disks", "response_type": "table", "columns": [
                { "key": "size", "label": "Size", "response_type": "integer" },
                { "key": "ssd", "label": "SSD?", "response_type": "boolean" },
                { "key": "note", "label": "Note", "response_type": "text" }] }
        ] })
    }

    fn parts<'a>(fields: &'a [String], rows: &'a [Vec<String>]) -> Parts<'a> {
        Parts { fields, rows, files: Vec::new() }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_forms_fields_are_read_by_their_types_and_tables_row_by_row() {
        let fields = strings(&["nodes=3", "start=2026-03-01", "canary=yes"]);
        let rows = vec![strings(&["disks", "size=100,ssd=no,note=a=b"]), strings(&[r#"disks={"size": 200}"#])];
        let mut given = parts(&fields, &rows);
        given.files = vec![("plan".into(), json!({ "file_id": "f" }))];
        assert_eq!(
            build_value(&rich_form(), None, &given).unwrap(),
            json!({ "nodes": 3, "start": "2026-03-01", "canary": true, "plan": { "file_id": "f" },
                    "disks": [{ "size": 100, "ssd": false, "note": "a=b" }, { "size": 200 }] })
        );
        // On top of a JSON object, --field wins.
        let fields = strings(&["nodes=4"]);
        assert_eq!(
            build_value(&rich_form(), Some(r#"{"nodes": "2", "start": "2026-01-01"}"#), &parts(&fields, &[])).unwrap(),
            json!({ "nodes": 4, "start": "2026-01-01" })
        );
    }

    #[test]
    fn what_the_command_line_gets_wrong_is_a_usage_error() {
        let form = rich_form();
        for (fields, rows, says) in [
            (strings(&["nodes"]), vec![], "KEY=VALUE"),
            (strings(&["size=3"]), vec![], "no field \"size\""),
            (strings(&["nodes=many"]), vec![], "field nodes is a number"),
            (strings(&["plan=x.pdf"]), vec![], "--file plan=@PATH"),
            (vec![], vec![strings(&["nodes", "size=1"])], "not a table"),
            (vec![], vec![strings(&["disks", "weight=1"])], "no column \"weight\""),
            (vec![], vec![strings(&["disks", "size"])], "COLUMN=VALUE"),
            (vec![], vec![strings(&["disks=size=1"])], "KEY COLUMN=VALUE"),
        ] {
            match build_value(&form, None, &parts(&fields, &rows)) {
                Err(CliError::Usage(message)) => assert!(message.contains(says), "{says}: {message}"),
                other => panic!("{fields:?} {rows:?}: {other:?}"),
            }
        }
        let text = json!({ "response_type": "text" });
        assert!(matches!(build_value(&text, None, &parts(&strings(&["a=b"]), &[])), Err(CliError::Usage(_))));
    }

    #[test]
    fn row_values_are_grouped_by_the_key_before_them() {
        let given = strings(&["disks", "size=1", r#"disks={"size": 2}"#, "size=3,ssd=no", r#"{"size": 4}"#, "disks"]);
        assert_eq!(
            group_rows(&given),
            [
                strings(&["disks", "size=1"]),
                strings(&[r#"disks={"size": 2}"#]),
                strings(&["size=3,ssd=no"]),
                strings(&[r#"{"size": 4}"#]),
                strings(&["disks"])
            ]
        );
    }

    #[test]
    fn a_table_question_takes_rows_and_a_number_question_a_number() {
        let table = json!({ "response_type": "table", "columns": [
            { "key": "item", "label": "Item", "response_type": "text" },
            { "key": "qty", "label": "Qty", "response_type": "number" }] });
        let rows = vec![strings(&["item=disk,qty=2.5"]), strings(&[r#"{"item": "cpu"}"#])];
        assert_eq!(
            build_value(&table, Some(r#"[{"item": "ram"}]"#), &parts(&[], &rows)).unwrap(),
            json!([{ "item": "ram" }, { "item": "disk", "qty": 2.5 }, { "item": "cpu" }])
        );
        assert_eq!(parse_value("rating", &[], "4").unwrap(), json!(4));
        assert!(matches!(parse_value("integer", &[], "four"), Err(CliError::Usage(_))));
        assert_eq!(parse_value("date", &[], "2026-03-01").unwrap(), json!("2026-03-01"), "the server judges dates");
    }

    #[test]
    fn a_file_argument_names_its_field_path_and_media_type() {
        assert_eq!(
            parse_file_arg("plan=@docs/plan.pdf").unwrap(),
            FileArg { key: "plan".into(), path: "docs/plan.pdf".into(), media_type: "application/pdf".into() }
        );
        assert_eq!(parse_file_arg("plan=@plan.bin;type=image/png").unwrap().media_type, "image/png");
        assert_eq!(parse_file_arg("blob=@data").unwrap().media_type, "application/octet-stream");
        for bad in ["plan=plan.pdf", "plan", "=@x", "plan=@", "@", " =@x"] {
            assert!(matches!(parse_file_arg(bad), Err(CliError::Usage(_))), "{bad}");
        }
        let own = parse_file_arg("@scans/id.png").unwrap();
        assert_eq!((own.key.as_str(), own.media_type.as_str()), ("", "image/png"), "a file question's own file");
    }

    #[test]
    fn a_file_question_is_answered_with_its_one_file() {
        let question = json!({ "response_type": "file" });
        let uploaded = json!({ "file_id": "f", "name": "id.png" });
        let own = Parts { fields: &[], rows: &[], files: vec![(String::new(), uploaded.clone())] };
        assert_eq!(build_value(&question, None, &own).unwrap(), uploaded);
        let keyed = Parts { fields: &[], rows: &[], files: vec![("scan".into(), uploaded.clone())] };
        let none = Parts::default();
        for (raw, given) in [(None, &keyed), (Some("id.png"), &own), (Some("id.png"), &none), (None, &none)] {
            match build_value(&question, raw, given) {
                Err(CliError::Usage(message)) => assert!(message.contains("--file @PATH"), "{message}"),
                other => panic!("{raw:?}: {other:?}"),
            }
        }
        let form = Parts { fields: &[], rows: &[], files: vec![(String::new(), uploaded)] };
        match build_value(&rich_form(), None, &form) {
            Err(CliError::Usage(message)) => assert!(message.contains("--file KEY=@PATH"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
}
