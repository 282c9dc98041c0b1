//! The live inputs of every field type (docs/api.md), for the answer widget of the live modal, the inbox's split view
//! and run pages: native date and time inputs, a slider, a star rating, a markdown editor with its preview, a file
//! input with drag and drop that uploads at once, and a table editor. What a person enters is kept in [`Entries`]
//! by field key (`""` for a question that asks for one value), turned into the answer by [`answer_value`], and the
//! server's refusals are shown at the input they name (`value`, `value.<key>`, `value.<key>[row].<column>`).

mod answer;
pub mod file;
mod table;
pub mod time;

use std::collections::HashMap;

use leptos::prelude::*;
use serde_json::Value;

pub use answer::answer_value;
use file::FileEditor;
use table::TableEditor;
use time::{browser_offset_at, local_text};

use crate::types::{FormField, Question, ResponseType, UploadedFile};

/// One row of a table being edited: its cells' text by column key, and an id that stays with it as rows come and go.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub id: u32,
    pub cells: HashMap<String, String>,
}

/// What a person has entered so far, by field key.
#[derive(Clone, Copy)]
pub struct Entries {
    /// Text of every one-value input (numbers and choices too), as typed.
    pub scalars: RwSignal<HashMap<String, String>>,
    /// The choices of `multi_choice` fields.
    pub multi: RwSignal<HashMap<String, Vec<String>>>,
    /// Uploaded files, as `POST /files` returned them.
    pub files: RwSignal<HashMap<String, UploadedFile>>,
    /// Tables' rows.
    pub tables: RwSignal<HashMap<String, Vec<Row>>>,
    /// What is wrong, by the path the server names it by.
    pub errors: RwSignal<HashMap<String, String>>,
    /// The next row id.
    next_row: StoredValue<u32>,
}

impl Entries {
    /// Entries holding the fields' defaults.
    pub fn new(fields: &[FormField]) -> Self {
        let mut scalars = HashMap::new();
        let mut multi = HashMap::new();
        let mut tables = HashMap::new();
        let mut next_row = 0;
        for field in fields {
            let key = field.key.clone();
            match (&field.default, field.response_type) {
                (Some(Value::Array(items)), ResponseType::MultiChoice) => {
                    multi.insert(key, items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect());
                }
                (Some(Value::Array(rows)), ResponseType::Table) => {
                    let rows = rows
                        .iter()
                        .map(|row| {
                            next_row += 1;
                            let cells = row
                                .as_object()
                                .map(|cells| cells.iter().map(|(k, v)| (k.clone(), scalar_text(v))).collect())
                                .unwrap_or_default();
                            Row { id: next_row, cells }
                        })
                        .collect();
                    tables.insert(key, rows);
                }
                (_, ResponseType::Table) => {
                    let rows = (0..initial_rows(field))
                        .map(|_| {
                            next_row += 1;
                            Row { id: next_row, cells: HashMap::new() }
                        })
                        .collect();
                    tables.insert(key, rows);
                }
                (Some(Value::String(text)), ResponseType::Datetime) => {
                    scalars.insert(key, local_text(text, &browser_offset_at));
                }
                (Some(value), _) => {
                    scalars.insert(key, scalar_text(value));
                }
                // A required slider starts at its least value, as it is drawn; an optional one starts unanswered,
                // so a value is sent only when the person moves it.
                (None, ResponseType::Number | ResponseType::Integer) if is_slider(field) && field.required => {
                    scalars.insert(key, field.rules.min.as_ref().map(ToString::to_string).unwrap_or_default());
                }
                (None, _) => {}
            }
        }
        Entries {
            scalars: RwSignal::new(scalars),
            multi: RwSignal::new(multi),
            files: RwSignal::new(HashMap::new()),
            tables: RwSignal::new(tables),
            errors: RwSignal::new(HashMap::new()),
            next_row: StoredValue::new(next_row),
        }
    }

    /// What has been entered, read once.
    pub fn snapshot(&self) -> Entered {
        Entered {
            scalars: self.scalars.get_untracked(),
            multi: self.multi.get_untracked(),
            files: self.files.get_untracked(),
            tables: self
                .tables
                .get_untracked()
                .into_iter()
                .map(|(key, rows)| (key, rows.into_iter().map(|row| row.cells).collect()))
                .collect(),
        }
    }

    fn set_scalar(&self, key: &str, text: String) {
        self.scalars.update(|s| {
            s.insert(key.to_owned(), text);
        });
    }

    fn scalar(&self, key: &str) -> String {
        self.scalars.with(|s| s.get(key).cloned().unwrap_or_default())
    }

    fn error(&self, path: &str) -> Option<String> {
        self.errors.with(|e| e.get(path).cloned())
    }
}

/// How many rows a table starts with: its least, and one to begin with when it may have none.
pub fn initial_rows(field: &FormField) -> u32 {
    let max = field.rules.max_rows.unwrap_or(crate::types::TABLE_ROWS_MAX);
    field.rules.min_rows.unwrap_or(0).max(1).min(max)
}

/// What an optional slider shows before it is moved (and after it is cleared): no value is sent.
pub const SLIDER_UNSET: &str = "No answer";

/// Whether a number is entered with a slider.
pub fn is_slider(field: &FormField) -> bool {
    field.rules.widget == Some(crate::types::FieldWidget::Slider)
        && field.rules.min.is_some()
        && field.rules.max.is_some()
}

/// The `step` of a number's input: the field's own, else whole numbers for an integer and any number otherwise.
pub fn step_of(field: &FormField) -> String {
    field.rules.step.as_ref().map_or_else(
        || if field.response_type == ResponseType::Integer { "1" } else { "any" }.to_owned(),
        ToString::to_string,
    )
}

/// What a screen reader says for a rating's choice of `stars`.
pub fn stars_text(stars: u32) -> String {
    if stars == 1 { "1 star".to_owned() } else { format!("{stars} stars") }
}

/// The `type` and `step` of a table cell's input, for the column types a cell enters as text (choices and yes/no
/// are selects).
pub fn cell_input(response_type: ResponseType) -> (&'static str, Option<&'static str>) {
    match response_type {
        ResponseType::Number => ("number", Some("any")),
        ResponseType::Integer => ("number", Some("1")),
        ResponseType::Date => ("date", None),
        _ => ("text", None),
    }
}

/// A default's text in an input.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What has been entered, as plain values.
#[derive(Debug, Clone, Default)]
pub struct Entered {
    pub scalars: HashMap<String, String>,
    pub multi: HashMap<String, Vec<String>>,
    pub files: HashMap<String, UploadedFile>,
    pub tables: HashMap<String, Vec<HashMap<String, String>>>,
}

/// The path the server names a field's value by: `value` for a question's one value, `value.<key>` in a form.
pub fn path_of(key: &str) -> String {
    if key.is_empty() { "value".to_owned() } else { format!("value.{key}") }
}

/// The one field a question that asks for one value of a rich type is answered through.
pub fn single_field(question: &Question) -> FormField {
    FormField {
        options: question.options.clone(),
        required: true,
        rules: question.rules.clone(),
        ..FormField::new("", "Your answer", question.response_type)
    }
}

/// The error under an input: always there (the input's `aria-describedby` names it), empty until there is one.
fn error_line(entries: Entries, path: String, id: String) -> impl IntoView {
    let problem = {
        let path = path.clone();
        move || entries.error(&path)
    };
    view! { <p class="field-error" id=id data-testid="field-error" data-path=path>{problem}</p> }
}

/// The label, help, input and error of one field. `ids` makes the element ids unique on the page; `testid` names
/// the input for tests.
#[component]
pub fn FieldEditor(field: FormField, ids: String, testid: String, entries: Entries) -> impl IntoView {
    let key = field.key.clone();
    let path = path_of(&key);
    let input_id = format!("{ids}-{}", if key.is_empty() { "value" } else { &key });
    let help_id = format!("{input_id}-help");
    let error_id = format!("{input_id}-error");
    let label = if field.required && !key.is_empty() { format!("{} *", field.label) } else { field.label.clone() };
    let described = {
        let mut ids = vec![error_id.clone()];
        if field.description.is_some() {
            ids.push(help_id.clone());
        }
        ids.join(" ")
    };
    let invalid = {
        let path = path.clone();
        move || entries.errors.with(|e| e.contains_key(&path)).then_some("true")
    };
    let placeholder = field.placeholder.clone().unwrap_or_default();
    let set = {
        let key = key.clone();
        move |ev: leptos::ev::Event| entries.set_scalar(&key, event_target_value(&ev))
    };
    let current = {
        let key = key.clone();
        move || entries.scalar(&key)
    };
    let plain = |kind: &'static str| {
        view! {
            <input type=kind id=input_id.clone() data-testid=testid.clone() placeholder=placeholder.clone()
                aria-describedby=described.clone() aria-invalid=invalid.clone()
                prop:value=current.clone() on:input=set.clone()/>
        }
        .into_any()
    };
    let grouped = matches!(field.response_type, ResponseType::Rating | ResponseType::MultiChoice | ResponseType::Table);
    let input = match field.response_type {
        ResponseType::Date => plain("date"),
        ResponseType::Time => plain("time"),
        // The person reads and types their own wall time: the form says which zone that is, as the answer will.
        ResponseType::Datetime => {
            let current = current.clone();
            view! {
                {plain("datetime-local")}
                <span class="muted zone" data-testid=format!("{testid}-zone")>{move || time::zone_of(&current())}</span>
            }
            .into_any()
        }
        ResponseType::Email => plain("email"),
        ResponseType::Url => plain("url"),
        ResponseType::Number | ResponseType::Integer if is_slider(&field) => {
            let shown = {
                let current = current.clone();
                move || Some(current()).filter(|value| !value.is_empty()).unwrap_or_else(|| SLIDER_UNSET.to_owned())
            };
            let output_id = format!("{input_id}-shown");
            // Unanswered, the thumb rests at the least value (as the page's plain form draws it), not at the middle
            // where a range input without a value puts it.
            let thumb = {
                let (current, least) = (current.clone(), field.rules.min.as_ref().map(ToString::to_string));
                move || Some(current()).filter(|value| !value.is_empty()).or_else(|| least.clone()).unwrap_or_default()
            };
            // An optional slider can be taken back to no answer: a range input always has a value of its own.
            let clear = (!field.required).then(|| {
                let (key, current) = (key.clone(), current.clone());
                view! {
                    <button type="button" class="link" data-testid=format!("{testid}-clear")
                        hidden=move || current().is_empty()
                        on:click=move |_| entries.set_scalar(&key, String::new())>"Clear"</button>
                }
            });
            view! {
                <div class="slider">
                    <input type="range" id=input_id.clone() data-testid=testid.clone()
                        min=field.rules.min.as_ref().map(ToString::to_string)
                        max=field.rules.max.as_ref().map(ToString::to_string)
                        step=step_of(&field)
                        aria-describedby=described.clone() aria-invalid=invalid.clone()
                        prop:value=thumb on:input=set.clone()/>
                    <output id=output_id for=input_id.clone() data-testid=format!("{testid}-shown")>{shown}</output>
                    {clear}
                </div>
            }
            .into_any()
        }
        ResponseType::Number | ResponseType::Integer => view! {
            <input type="number" id=input_id.clone() data-testid=testid.clone() placeholder=placeholder.clone()
                min=field.rules.min.as_ref().map(ToString::to_string)
                max=field.rules.max.as_ref().map(ToString::to_string)
                step=step_of(&field)
                aria-describedby=described.clone() aria-invalid=invalid.clone()
                prop:value=current.clone() on:input=set.clone()/>
        }
        .into_any(),
        ResponseType::Rating => {
            let max = field.rules.rating_max();
            let group = input_id.clone();
            view! {
                <fieldset class="rating" id=input_id.clone() data-testid=testid.clone() aria-describedby=described.clone()>
                    <legend>{label.clone()}</legend>
                    {(1..=max).map(|stars| {
                        let key = key.clone();
                        let checked = {
                            let key = key.clone();
                            move || entries.scalars.with(|s| s.get(&key).is_some_and(|v| v == &stars.to_string()))
                        };
                        view! {
                            <label class="star" data-testid=format!("{testid}-{stars}")>
                                <input type="radio" class="visually-hidden" name=group.clone() value=stars.to_string()
                                    prop:checked=checked
                                    on:change=move |_| entries.set_scalar(&key, stars.to_string())/>
                                <span aria-hidden="true">"★"</span>
                                <span class="visually-hidden">{stars_text(stars)}</span>
                            </label>
                        }
                    }).collect_view()}
                </fieldset>
            }
            .into_any()
        }
        ResponseType::Markdown => {
            let source = current.clone();
            view! {
                <textarea id=input_id.clone() rows="6" data-testid=testid.clone() placeholder=placeholder.clone()
                    aria-describedby=described.clone() aria-invalid=invalid.clone()
                    prop:value=current.clone() on:input=set.clone()></textarea>
                <details class="markdown-preview">
                    <summary>"Preview"</summary>
                    <div class="markdown" data-testid=format!("{testid}-preview")
                        inner_html=move || crate::markdown::to_html(&source())></div>
                </details>
            }
            .into_any()
        }
        ResponseType::Boolean => view! {
            <select id=input_id.clone() data-testid=testid.clone() aria-describedby=described.clone()
                aria-invalid=invalid.clone() prop:value=current.clone() on:change=set.clone()>
                <option value="">"—"</option>
                <option value="true">"Yes"</option>
                <option value="false">"No"</option>
            </select>
        }
        .into_any(),
        ResponseType::Choice => view! {
            <select id=input_id.clone() data-testid=testid.clone() aria-describedby=described.clone()
                aria-invalid=invalid.clone() prop:value=current.clone() on:change=set.clone()>
                <option value="">"—"</option>
                {field.options.iter().map(|o| view! { <option value=o.value.clone()>{o.label.clone()}</option> }).collect_view()}
            </select>
        }
        .into_any(),
        ResponseType::MultiChoice => view! {
            <fieldset id=input_id.clone() data-testid=testid.clone() class="checks" aria-describedby=described.clone()>
                <legend>{label.clone()}</legend>
                {field.options.iter().map(|o| {
                    let value = o.value.clone();
                    let key = key.clone();
                    let box_id = format!("{input_id}-{}", o.value);
                    let checked = {
                        let (key, value) = (key.clone(), value.clone());
                        move || entries.multi.with(|m| m.get(&key).is_some_and(|c| c.contains(&value)))
                    };
                    view! {
                        <div class="option">
                            <input type="checkbox" id=box_id.clone() value=value.clone() prop:checked=checked on:change=move |ev| {
                                let on = event_target_checked(&ev);
                                entries.multi.update(|m| {
                                    let chosen = m.entry(key.clone()).or_default();
                                    chosen.retain(|v| v != &value);
                                    if on { chosen.push(value.clone()); }
                                });
                            }/>
                            <label for=box_id>{o.label.clone()}</label>
                        </div>
                    }
                }).collect_view()}
            </fieldset>
        }
        .into_any(),
        ResponseType::File => view! {
            <FileEditor field=field.clone() input_id=input_id.clone() testid=testid.clone() described=described.clone() entries/>
        }
        .into_any(),
        ResponseType::Table => view! {
            <TableEditor field=field.clone() label=label.clone() input_id=input_id.clone() testid=testid.clone() entries/>
        }
        .into_any(),
        ResponseType::Text => view! {
            <textarea id=input_id.clone() rows="3" data-testid=testid.clone() placeholder=placeholder.clone()
                aria-describedby=described.clone() aria-invalid=invalid.clone()
                prop:value=current.clone() on:input=set.clone()></textarea>
        }
        .into_any(),
        ResponseType::Approval | ResponseType::ErrorRecovery | ResponseType::Form => plain("text"),
    };
    view! {
        <div class="field">
            {(!grouped).then(|| view! { <label for=input_id.clone()>{label.clone()}</label> })}
            {field.description.clone().map(|d| view! { <p class="muted field-help" id=help_id.clone()>{d}</p> })}
            {input}
            {error_line(entries, path, error_id)}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_input_steps_by_its_rule_or_else_by_its_type() {
        let mut field = FormField::new("n", "N", ResponseType::Integer);
        assert_eq!(step_of(&field), "1");
        field.response_type = ResponseType::Number;
        assert_eq!(step_of(&field), "any");
        field.rules.step = Some(serde_json::Number::from(5));
        assert_eq!(step_of(&field), "5");
    }

    #[test]
    fn a_table_cell_enters_numbers_and_dates_in_their_own_inputs() {
        assert_eq!(cell_input(ResponseType::Integer), ("number", Some("1")));
        assert_eq!(cell_input(ResponseType::Number), ("number", Some("any")));
        assert_eq!(cell_input(ResponseType::Date), ("date", None));
        assert_eq!(cell_input(ResponseType::Email), ("text", None));
        assert_eq!(stars_text(1), "1 star");
        assert_eq!(stars_text(4), "4 stars");
    }
}
