//! The live inputs of every field type (spec §17), for the answer widget of the live modal, the inbox's split view
//! and run pages: native date and time inputs, a slider, a star rating, a markdown editor with its preview, a file
//! input with drag and drop that uploads at once, and a table editor. What a person enters is kept in [`Entries`]
//! by field key (`""` for a question that asks for one value), turned into the answer by [`answer_value`], and the
//! server's refusals are shown at the input they name (`value`, `value.<key>`, `value.<key>[row].<column>`).

use std::collections::HashMap;

use leptos::prelude::*;
use serde_json::{Map, Value};

use crate::types::{FormField, Question, ResponseType, TableColumn, UploadedFile};

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
                (None, ResponseType::Number | ResponseType::Integer) if is_slider(field) => {
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

/// Whether a number is entered with a slider.
pub fn is_slider(field: &FormField) -> bool {
    field.rules.widget == Some(crate::types::FieldWidget::Slider)
        && field.rules.min.is_some()
        && field.rules.max.is_some()
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

/// A typed number, or what is wrong with it.
pub fn number_of(raw: &str) -> Result<Value, String> {
    raw.parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| raw.parse::<f64>().ok().and_then(|n| serde_json::Number::from_f64(n).map(Value::Number)))
        .ok_or_else(|| "enter a number".to_owned())
}

/// `+HH:MM` (or `-HH:MM`) for an offset east of UTC in minutes.
pub fn format_offset(minutes: i32) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let minutes = minutes.unsigned_abs();
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

/// A `datetime-local` input's `YYYY-MM-DDTHH:MM[:SS]` as RFC 3339 with `offset` (`+01:00`).
pub fn local_to_rfc3339(local: &str, offset: &str) -> String {
    let seconds = if local.len() == 16 { ":00" } else { "" };
    format!("{local}{seconds}{offset}")
}

/// A `datetime-local` input's text for the RFC 3339 moment `text`, in the zone whose offset at that moment (in
/// minutes east of UTC) `offset_at` gives: what is sent back unchanged, with that zone's offset, is the same moment.
/// Text without an offset is the input's as it is.
pub fn local_text(text: &str, offset_at: &dyn Fn(&str) -> i32) -> String {
    match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(moment) => {
            let offset = chrono::FixedOffset::east_opt(offset_at(text) * 60).unwrap_or(*moment.offset());
            moment.with_timezone(&offset).format("%Y-%m-%dT%H:%M").to_string()
        }
        Err(_) => text.chars().take(16).collect(),
    }
}

/// How a form names the zone of a date and time it reads with `offset` (`+01:00`; empty is UTC).
pub fn zone_label(offset: &str) -> String {
    match offset {
        "" | "Z" | "+00:00" | "-00:00" => "Time zone: UTC".to_owned(),
        offset => format!("Time zone: UTC{offset}"),
    }
}

/// The browser's offset from UTC at the RFC 3339 moment `moment`, in minutes east.
pub fn browser_offset_at(moment: &str) -> i32 {
    #[cfg(feature = "hydrate")]
    {
        let minutes = -js_sys::Date::new(&wasm_bindgen::JsValue::from_str(moment)).get_timezone_offset();
        if minutes.is_finite() {
            return minutes as i32;
        }
    }
    let _ = moment;
    0
}

/// The browser's offset from UTC at a local date and time (daylight saving time included).
pub fn browser_offset(local: &str) -> String {
    #[cfg(feature = "hydrate")]
    {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(local));
        let minutes = -date.get_timezone_offset();
        if minutes.is_finite() {
            return format_offset(minutes as i32);
        }
    }
    let _ = local;
    format_offset(0)
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
pub fn field_value(
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
        ResponseType::Datetime => plain("datetime-local"),
        ResponseType::Email => plain("email"),
        ResponseType::Url => plain("url"),
        ResponseType::Number | ResponseType::Integer if is_slider(&field) => {
            let shown = current.clone();
            let output_id = format!("{input_id}-shown");
            view! {
                <div class="slider">
                    <input type="range" id=input_id.clone() data-testid=testid.clone()
                        min=field.rules.min.as_ref().map(ToString::to_string)
                        max=field.rules.max.as_ref().map(ToString::to_string)
                        step=field.rules.step.as_ref().map(ToString::to_string)
                            .unwrap_or_else(|| if field.response_type == ResponseType::Integer { "1".into() } else { "any".into() })
                        aria-describedby=described.clone() aria-invalid=invalid.clone()
                        prop:value=current.clone() on:input=set.clone()/>
                    <output id=output_id for=input_id.clone() data-testid=format!("{testid}-shown")>{shown}</output>
                </div>
            }
            .into_any()
        }
        ResponseType::Number | ResponseType::Integer => view! {
            <input type="number" id=input_id.clone() data-testid=testid.clone() placeholder=placeholder.clone()
                min=field.rules.min.as_ref().map(ToString::to_string)
                max=field.rules.max.as_ref().map(ToString::to_string)
                step=field.rules.step.as_ref().map(ToString::to_string)
                    .unwrap_or_else(|| if field.response_type == ResponseType::Integer { "1".into() } else { "any".into() })
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
                                <span class="visually-hidden">{if stars == 1 { "1 star".to_owned() } else { format!("{stars} stars") }}</span>
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

/// What a file input takes, said beside it: its media types and largest size (`application/pdf, up to 2 MiB`).
pub fn file_limits(rules: &crate::types::FieldRules) -> Option<String> {
    let mut said = Vec::new();
    if !rules.accept.is_empty() {
        said.push(rules.accept.join(", "));
    }
    if let Some(max) = rules.max_bytes {
        said.push(format!("up to {}", crate::types::size_text(max)));
    }
    (!said.is_empty()).then(|| said.join(", "))
}

/// A file input that also takes a file dropped on it; the file is uploaded at once, and its name and size shown.
#[component]
fn FileEditor(
    field: FormField,
    input_id: String,
    testid: String,
    described: String,
    entries: Entries,
) -> impl IntoView {
    let key = field.key.clone();
    let uploading = RwSignal::new(false);
    let over = RwSignal::new(false);
    let accept = field.rules.accept.join(",");
    let limits = file_limits(&field.rules).map(|limits| format!(" ({limits})"));
    #[cfg(feature = "hydrate")]
    let start = {
        let (key, path) = (key.clone(), path_of(&key));
        let (accept, max_bytes) = (field.rules.accept.clone(), field.rules.max_bytes);
        move |file: web_sys::File| {
            let (key, path) = (key.clone(), path.clone());
            let media_type = file.type_();
            let refuse = |problem: String| {
                entries.errors.update(|e| {
                    e.insert(path.clone(), problem);
                })
            };
            if !crate::types::media_type_accepted(&accept, &media_type) {
                return refuse(format!("must be one of {}", accept.join(", ")));
            }
            if let Some(max) = max_bytes.filter(|max| file.size() > *max as f64) {
                return refuse(format!("must be at most {}", crate::types::size_text(max)));
            }
            entries.errors.update(|e| {
                e.remove(&path);
            });
            uploading.set(true);
            leptos::task::spawn_local(async move {
                let result = crate::api::upload_file(file).await;
                uploading.set(false);
                match result {
                    Ok(uploaded) => entries.files.update(|f| {
                        f.insert(key, uploaded);
                    }),
                    Err(err) => entries.errors.update(|e| {
                        e.insert(path, err.message);
                    }),
                }
            });
        }
    };
    #[cfg(feature = "hydrate")]
    let (start_change, start_drop) = (start.clone(), start);
    let on_change = move |ev: leptos::ev::Event| {
        #[cfg(feature = "hydrate")]
        {
            use wasm_bindgen::JsCast;
            let input = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok());
            if let Some(file) = input.as_ref().and_then(|i| i.files()).and_then(|f| f.get(0)) {
                start_change(file);
            }
            if let Some(input) = input {
                input.set_value("");
            }
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = ev;
    };
    let on_drop = move |ev: leptos::ev::DragEvent| {
        ev.prevent_default();
        over.set(false);
        #[cfg(feature = "hydrate")]
        if let Some(file) = ev.data_transfer().and_then(|d| d.files()).and_then(|f| f.get(0)) {
            start_drop(file);
        }
    };
    let chosen = {
        let key = key.clone();
        move || entries.files.with(|f| f.get(&key).cloned())
    };
    let remove_key = key.clone();
    let (drop_testid, chosen_testid, remove_testid) =
        (format!("{testid}-drop"), format!("{testid}-chosen"), format!("{testid}-remove"));
    view! {
        <div class="dropzone" class:over=move || over.get() data-testid=drop_testid
            on:dragover=move |ev: leptos::ev::DragEvent| { ev.prevent_default(); over.set(true); }
            on:dragleave=move |_| over.set(false)
            on:drop=on_drop>
            <input type="file" id=input_id data-testid=testid.clone() accept=(!accept.is_empty()).then_some(accept)
                aria-describedby=described on:change=on_change/>
            <p class="muted">"or drop a file here" {limits}</p>
            {move || uploading.get().then(|| view! { <p class="muted" role="status">"Uploading…"</p> })}
            {move || chosen().map(|file| view! {
                <p class="file-chosen" data-testid=chosen_testid.clone()>
                    <span>{file.name.clone()}</span> " — " <span>{crate::types::size_text(file.size)}</span>
                    " "
                    <button type="button" class="link" data-testid=remove_testid.clone()
                        on:click={
                            let key = remove_key.clone();
                            move |_| entries.files.update(|f| { f.remove(&key); })
                        }>"Remove"</button>
                </p>
            })}
        </div>
    }
}

/// A table's rows, each cell an input of its column's type, with rows added and removed within the table's bounds.
#[component]
fn TableEditor(field: FormField, label: String, input_id: String, testid: String, entries: Entries) -> impl IntoView {
    let key = field.key.clone();
    let path = path_of(&key);
    let min = field.rules.min_rows.unwrap_or(0) as usize;
    let max = field.rules.max_rows.unwrap_or(crate::types::TABLE_ROWS_MAX) as usize;
    let columns = StoredValue::new(field.rules.columns.clone());
    let rows = {
        let key = key.clone();
        move || entries.tables.with(|t| t.get(&key).cloned().unwrap_or_default())
    };
    let count = {
        let rows = rows.clone();
        move || rows().len()
    };
    let add = {
        let key = key.clone();
        move |_: leptos::ev::MouseEvent| {
            let id = entries.next_row.get_value() + 1;
            entries.next_row.set_value(id);
            entries.tables.update(|t| t.entry(key.clone()).or_default().push(Row { id, cells: HashMap::new() }));
        }
    };
    let caption_id = format!("{input_id}-caption");
    let count_add = count.clone();
    let add_testid = format!("{testid}-add");
    let table_testid = testid.clone();
    view! {
        <div class="table-editor" id=input_id.clone() data-testid=table_testid>
            <table>
                <caption id=caption_id>{label}</caption>
                <thead>
                    <tr>
                        {columns.get_value().into_iter().map(|c| view! { <th scope="col">{c.label}{c.required.then_some(" *")}</th> }).collect_view()}
                        <th scope="col"><span class="visually-hidden">"Remove"</span></th>
                    </tr>
                </thead>
                <tbody>
                    <For each=rows key=|row| row.id children=move |row: Row| {
                        let id = row.id;
                        let key = key.clone();
                        let index = {
                            let key = key.clone();
                            move || {
                                entries.tables.with(|t| {
                                    t.get(&key).and_then(|rows| rows.iter().position(|r| r.id == id)).unwrap_or(0)
                                })
                            }
                        };
                        let index = Signal::derive(index);
                        let testid = testid.clone();
                        let path = path.clone();
                        let remove = {
                            let key = key.clone();
                            move |_: leptos::ev::MouseEvent| {
                                entries.tables.update(|t| {
                                    if let Some(rows) = t.get_mut(&key) {
                                        rows.retain(|r| r.id != id);
                                    }
                                })
                            }
                        };
                        let count = count.clone();
                        let remove_testid = format!("{testid}-remove");
                        view! {
                            <tr>
                                {columns.get_value().into_iter().map(|column| {
                                    view! { <Cell column row_id=id table_key=key.clone() index path=path.clone() testid=testid.clone() entries/> }
                                }).collect_view()}
                                <td>
                                    <button type="button" class="link"
                                        data-testid=move || format!("{remove_testid}-{}", index.get())
                                        aria-label=move || format!("Remove row {}", index.get() + 1)
                                        disabled=move || { count() <= min }
                                        on:click=remove>"Remove"</button>
                                </td>
                            </tr>
                        }
                    }/>
                </tbody>
            </table>
            <button type="button" data-testid=add_testid disabled=move || { count_add() >= max } on:click=add>"Add row"</button>
        </div>
    }
}

/// One cell of a table being edited.
#[component]
fn Cell(
    column: TableColumn,
    row_id: u32,
    table_key: String,
    index: Signal<usize>,
    path: String,
    testid: String,
    entries: Entries,
) -> impl IntoView {
    let column_key = column.key.clone();
    let current = {
        let (table_key, column_key) = (table_key.clone(), column_key.clone());
        move || {
            entries.tables.with(|t| {
                t.get(&table_key)
                    .and_then(|rows| rows.iter().find(|r| r.id == row_id))
                    .and_then(|row| row.cells.get(&column_key).cloned())
                    .unwrap_or_default()
            })
        }
    };
    let set = {
        let (table_key, column_key) = (table_key.clone(), column_key.clone());
        move |ev: leptos::ev::Event| {
            let text = event_target_value(&ev);
            entries.tables.update(|t| {
                if let Some(row) = t.get_mut(&table_key).and_then(|rows| rows.iter_mut().find(|r| r.id == row_id)) {
                    row.cells.insert(column_key.clone(), text);
                }
            });
        }
    };
    let label = column.label.clone();
    let name = move || format!("{label}, row {}", index.get() + 1);
    let cell_path = {
        let column_key = column_key.clone();
        move || format!("{path}[{}].{column_key}", index.get())
    };
    let cell_testid = {
        let column_key = column_key.clone();
        move || format!("{testid}-{}-{column_key}", index.get())
    };
    let error = {
        let cell_path = cell_path.clone();
        move || entries.errors.with(|e| e.get(&cell_path()).cloned())
    };
    let invalid = {
        let error = error.clone();
        move || error().is_some().then_some("true")
    };
    let input = match column.response_type {
        ResponseType::Boolean => view! {
            <select aria-label=name data-testid=cell_testid aria-invalid=invalid prop:value=current on:change=set>
                <option value="">"—"</option>
                <option value="true">"Yes"</option>
                <option value="false">"No"</option>
            </select>
        }
        .into_any(),
        ResponseType::Choice => view! {
            <select aria-label=name data-testid=cell_testid aria-invalid=invalid prop:value=current on:change=set>
                <option value="">"—"</option>
                {column.options.iter().map(|o| view! { <option value=o.value.clone()>{o.label.clone()}</option> }).collect_view()}
            </select>
        }
        .into_any(),
        other => {
            let (kind, step) = match other {
                ResponseType::Number => ("number", Some("any")),
                ResponseType::Integer => ("number", Some("1")),
                ResponseType::Date => ("date", None),
                _ => ("text", None),
            };
            view! {
                <input type=kind step=step aria-label=name data-testid=cell_testid aria-invalid=invalid
                    prop:value=current on:input=set/>
            }
            .into_any()
        }
    };
    view! {
        <td data-label=column.label.clone()>
            {input}
            {move || error().map(|problem| view! { <p class="field-error" data-testid="field-error" data-path=cell_path()>{problem}</p> })}
        </td>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn utc(_: &str) -> String {
        "+00:00".to_owned()
    }

    fn table() -> FormField {
        let mut field = FormField::new("items", "Items", ResponseType::Table);
        field.rules.columns = vec![
            TableColumn {
                key: "item".into(),
                label: "Item".into(),
                response_type: ResponseType::Text,
                options: vec![],
                required: true,
            },
            TableColumn {
                key: "qty".into(),
                label: "Qty".into(),
                response_type: ResponseType::Integer,
                options: vec![],
                required: false,
            },
        ];
        field
    }

    #[test]
    fn a_file_input_says_what_it_takes() {
        let mut rules = crate::types::FieldRules::default();
        assert_eq!(file_limits(&rules), None, "anything, up to the server's limit: nothing to say");
        rules.accept = vec!["application/pdf".into(), "image/*".into()];
        assert_eq!(file_limits(&rules).unwrap(), "application/pdf, image/*");
        rules.max_bytes = Some(2 * 1024 * 1024);
        assert_eq!(file_limits(&rules).unwrap(), "application/pdf, image/*, up to 2 MiB");
    }

    #[test]
    fn a_datetime_is_sent_with_the_offset_of_its_local_time() {
        assert_eq!(local_to_rfc3339("2026-03-01T09:30", "+01:00"), "2026-03-01T09:30:00+01:00");
        assert_eq!(format_offset(-330), "-05:30");
        assert_eq!(format_offset(60), "+01:00");
    }

    /// A default written in one zone opens in the person's own, so that sent back untouched it is the same moment.
    #[test]
    fn a_datetime_default_opens_in_the_browsers_zone() {
        let new_york = |_: &str| -300;
        assert_eq!(local_text("2026-03-01T09:30:00+01:00", &new_york), "2026-03-01T03:30");
        let sent = local_to_rfc3339(&local_text("2026-03-01T09:30:00+01:00", &new_york), "-05:00");
        assert_eq!(
            chrono::DateTime::parse_from_rfc3339(&sent).unwrap(),
            chrono::DateTime::parse_from_rfc3339("2026-03-01T09:30:00+01:00").unwrap()
        );
        assert_eq!(local_text("2026-03-01T09:30", &new_york), "2026-03-01T09:30", "no offset: as written");
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
