//! What has been entered, as the answer's value: each field's text in its type, and every problem by the path the
//! server would name it by.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::time::{browser_offset, local_to_rfc3339};
use super::{Entered, path_of};
use crate::types::{FormField, ResponseType};

/// A typed number, or what is wrong with it.
fn number_of(raw: &str) -> Result<Value, String> {
    raw.parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| raw.parse::<f64>().ok().and_then(|n| serde_json::Number::from_f64(n).map(Value::Number)))
        .ok_or_else(|| "enter a number".to_owned())
}

/// A cell's or field's text as the value of its type; `None` when blank.
fn typed(response_type: ResponseType, raw: &str, offset: &dyn Fn(&str) -> String) -> Result<Option<Value>, String> {
    if raw.trim().is_empty() {
        return Ok(None);
    }
    let trimmed = raw.trim();
    Ok(Some(match response_type {
        ResponseType::Number | ResponseType::Integer | ResponseType::Rating => number_of(trimmed)?,
        ResponseType::Boolean => Value::Bool(trimmed == "true"),
        ResponseType::Datetime => Value::String(local_to_rfc3339(trimmed, &offset(trimmed))),
        // Markdown keeps its spaces and lines as typed.
        ResponseType::Markdown | ResponseType::Text => Value::String(raw.to_owned()),
        _ => Value::String(trimmed.to_owned()),
    }))
}

/// One field's value; `Err((path, problem))` for what does not fit.
fn field_value(
    field: &FormField,
    entered: &Entered,
    offset: &dyn Fn(&str) -> String,
) -> Result<Option<Value>, (String, String)> {
    let path = path_of(&field.key);
    let value = match field.response_type {
        ResponseType::MultiChoice => {
            let chosen = entered.multi.get(&field.key).cloned().unwrap_or_default();
            (!chosen.is_empty()).then(|| Value::from(chosen))
        }
        ResponseType::File => entered.files.get(&field.key).map(|file| serde_json::to_value(file).unwrap_or_default()),
        ResponseType::Table => {
            let rows = entered.tables.get(&field.key).cloned().unwrap_or_default();
            let mut out = Vec::with_capacity(rows.len());
            for (i, row) in rows.iter().enumerate() {
                let mut cells = Map::new();
                for column in &field.rules.columns {
                    let raw = row.get(&column.key).map(String::as_str).unwrap_or_default();
                    let cell = typed(column.response_type, raw, offset)
                        .map_err(|problem| (format!("{path}[{i}].{}", column.key), problem))?;
                    if let Some(cell) = cell {
                        cells.insert(column.key.clone(), cell);
                    }
                }
                out.push(Value::Object(cells));
            }
            // Blank rows after the last one filled in are not sent, as on the page without its script: the editor
            // always shows a row, which must not answer an optional table left alone with `[{}]`.
            while out.last().is_some_and(|row| row.as_object().is_some_and(Map::is_empty)) {
                out.pop();
            }
            (!out.is_empty() || field.rules.min_rows.is_some_and(|min| min > 0)).then_some(Value::Array(out))
        }
        other => {
            let raw = entered.scalars.get(&field.key).map(String::as_str).unwrap_or_default();
            typed(other, raw, offset).map_err(|problem| (path.clone(), problem))?
        }
    };
    match value {
        None if field.required => Err((path, "required".to_owned())),
        value => Ok(value),
    }
}

/// The answer of a form (an object of its fields) or of a question asking one value (`fields` is then its
/// [`single_field`]); every problem found, by path.
pub fn answer_value(form: bool, fields: &[FormField], entered: &Entered) -> Result<Value, HashMap<String, String>> {
    answer_value_at(form, fields, entered, &browser_offset)
}

fn answer_value_at(
    form: bool,
    fields: &[FormField],
    entered: &Entered,
    offset: &dyn Fn(&str) -> String,
) -> Result<Value, HashMap<String, String>> {
    let mut object = Map::new();
    let mut errors = HashMap::new();
    for field in fields {
        match field_value(field, entered, offset) {
            Ok(Some(value)) if !form => return Ok(value),
            Ok(Some(value)) => {
                object.insert(field.key.clone(), value);
            }
            Ok(None) => {}
            Err((path, problem)) => {
                errors.insert(path, problem);
            }
        }
    }
    if errors.is_empty() { Ok(Value::Object(object)) } else { Err(errors) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TableColumn;
    use serde_json::json;

    fn utc(_: &str) -> String {
        "+00:00".to_owned()
    }

    fn table() -> FormField {
        let mut field = FormField::new("items", "Items", ResponseType::Table);
        field.rules.columns = vec![
            TableColumn { required: true, ..TableColumn::new("item", "Item", ResponseType::Text) },
            TableColumn::new("qty", "Qty", ResponseType::Integer),
        ];
        field
    }

    #[test]
    fn a_table_is_sent_as_typed_rows_and_a_bad_cell_is_named_by_row_and_column() {
        let fields = vec![table()];
        let mut entered = Entered::default();
        let row = |item: &str, qty: &str| {
            HashMap::from([("item".to_owned(), item.to_owned()), ("qty".to_owned(), qty.to_owned())])
        };
        entered.tables.insert("items".into(), vec![row("disk", "2"), row("cpu", "")]);
        assert_eq!(
            answer_value_at(true, &fields, &entered, &utc).unwrap(),
            json!({"items": [{"item": "disk", "qty": 2}, {"item": "cpu"}]})
        );
        entered.tables.insert("items".into(), vec![row("disk", "2"), row("cpu", "many")]);
        let errors = answer_value_at(true, &fields, &entered, &utc).unwrap_err();
        assert_eq!(errors.keys().collect::<Vec<_>>(), ["value.items[1].qty"]);
    }

    /// The editor opens with one blank row: left alone, an optional table is no answer, and blank rows after the
    /// last one filled in are not sent, while a blank row before it keeps the row numbers the person saw.
    #[test]
    fn blank_rows_at_the_end_of_a_table_are_not_sent() {
        let fields = vec![table()];
        let mut entered = Entered::default();
        let row = |item: &str| HashMap::from([("item".to_owned(), item.to_owned()), ("qty".to_owned(), String::new())]);
        entered.tables.insert("items".into(), vec![row("")]);
        assert_eq!(answer_value_at(true, &fields, &entered, &utc).unwrap(), json!({}));
        entered.tables.insert("items".into(), vec![row(""), row("disk"), row(""), row("")]);
        assert_eq!(
            answer_value_at(true, &fields, &entered, &utc).unwrap(),
            json!({"items": [{}, {"item": "disk"}]}),
            "a blank row before a filled one stays, for the server to name"
        );
    }

    #[test]
    fn a_single_value_is_the_answer_itself_and_must_be_given() {
        let mut field = FormField::new("", "Your answer", ResponseType::Rating);
        field.required = true;
        let mut entered = Entered::default();
        assert_eq!(
            answer_value_at(false, std::slice::from_ref(&field), &entered, &utc)
                .unwrap_err()
                .keys()
                .collect::<Vec<_>>(),
            ["value"]
        );
        entered.scalars.insert(String::new(), "4".into());
        assert_eq!(answer_value_at(false, &[field], &entered, &utc).unwrap(), json!(4));
    }

    #[test]
    fn a_form_answer_has_each_field_in_its_type_and_required_fields_are_checked() {
        let field =
            |key: &str, response_type, required| FormField { required, ..FormField::new(key, key, response_type) };
        let fields = vec![
            field("users", ResponseType::Number, true),
            field("urgent", ResponseType::Boolean, false),
            field("tags", ResponseType::MultiChoice, false),
            field("note", ResponseType::Text, false),
            field("when", ResponseType::Datetime, false),
        ];
        let mut entered = Entered {
            scalars: HashMap::from([
                ("users".to_owned(), "12".to_owned()),
                ("urgent".to_owned(), "true".to_owned()),
                ("when".to_owned(), "2026-03-01T09:30".to_owned()),
            ]),
            multi: HashMap::from([("tags".to_owned(), vec!["a".to_owned()])]),
            ..Default::default()
        };
        assert_eq!(
            answer_value_at(true, &fields, &entered, &|_| "+01:00".to_owned()).unwrap(),
            json!({"users": 12, "urgent": true, "tags": ["a"], "when": "2026-03-01T09:30:00+01:00"})
        );
        entered.scalars.remove("users");
        assert_eq!(answer_value_at(true, &fields, &entered, &utc).unwrap_err()["value.users"], "required");
    }
}
