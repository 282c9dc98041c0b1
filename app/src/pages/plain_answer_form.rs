//! The question page's plain answer form, rendered on the server only: it works without the page's script, and
//! keeping its many input kinds out of the page's WebAssembly keeps the page small. The page shows it as HTML and,
//! once its script runs, [`super::question`] follows the form's `input` events: a slider shows its value as it
//! moves (`<output data-shows=ID>`), a markdown field its preview (`data-preview-of=ID`), and a date and time carries
//! the browser's offset from UTC (`<input type=hidden data-offset-of=ID>`; without the script it is read as UTC, or
//! as its default's own offset) and names that zone beside it (`data-zone-of=ID`).

use leptos::either::{EitherOf3, EitherOf6};
use leptos::prelude::*;

use crate::types::{FormField, Question, QuestionOption, ResponseType};
use crate::{ADD_ROW, AnswerDraft, rows_input};

/// The form of a pending question for the person whose CSRF token is `csrf`, with what they sent last time if the
/// server refused it, as HTML.
pub fn plain_answer_form(question: &Question, csrf: &str, draft: AnswerDraft) -> String {
    // The form's components keep the draft in a `StoredValue`, which needs an owner.
    Owner::new().with(|| view! { <AnswerForm question=question.clone() csrf=csrf.to_owned() draft/> }.to_html())
}

/// The form for one response type: the answer's inputs, then the comment, then the button(s) that send it (for a
/// yes/no question or an approval the buttons are the answer). Field names: `value` (repeated for several choices),
/// `field.<key>` for form fields, `<name>.offset` beside a date and time, `<name>.unset` beside an optional slider,
/// `<name>[<row>].<column>` for a table's cells, `edited_arguments`, `comment`, `csrf`. A form with a file input is sent as `multipart/form-data`, the
/// file with it. `draft` is what was sent last time, if the server refused it: the inputs show it again.
#[component]
fn AnswerForm(question: Question, csrf: String, draft: AnswerDraft) -> impl IntoView {
    let action = format!("/ui/answer/{}", question.id);
    let has_file = question.response_type == ResponseType::File
        || question.fields.iter().any(|f| f.response_type == ResponseType::File);
    let draft = StoredValue::new(draft);
    let send = |label: &'static str| view! { <button type="submit" class="primary" data-testid="answer-submit">{label}</button> };
    let (inputs, buttons) = match question.response_type {
        ResponseType::Text => (
            EitherOf6::A(view! {
                <label for="answer-value">"Your answer"</label>
                <textarea id="answer-value" name="value" rows="4" required data-testid="answer-text">{draft.with_value(|d| d.value("value").map(str::to_owned))}</textarea>
            }),
            EitherOf3::A(send("Send answer")),
        ),
        ResponseType::Boolean => (
            EitherOf6::B(()),
            EitherOf3::B(view! {
                <div class="button-row">
                    <button type="submit" name="value" value="true" class="primary" data-testid="answer-yes">"Yes"</button>
                    <button type="submit" name="value" value="false" data-testid="answer-no">"No"</button>
                </div>
            }),
        ),
        ResponseType::Choice | ResponseType::MultiChoice | ResponseType::ErrorRecovery => {
            let multiple = question.response_type == ResponseType::MultiChoice;
            let (legend, options, label) = match question.response_type {
                ResponseType::ErrorRecovery => {
                    ("How should the agent go on?", crate::answer::recovery_options(&question), "Send")
                }
                _ => (if multiple { "Choose any" } else { "Choose one" }, question.options.clone(), "Send answer"),
            };
            (
                EitherOf6::C(view! {
                    <fieldset>
                        <legend>{legend}</legend>
                        <OptionInputs name="value".to_owned() options multiple draft/>
                    </fieldset>
                }),
                EitherOf3::A(send(label)),
            )
        }
        ResponseType::Approval => {
            // What the person sent last time, if the server refused it, else the call's own arguments.
            let arguments = draft.with_value(|d| d.value("edited_arguments").map(str::to_owned)).unwrap_or_else(|| {
                question
                    .action
                    .as_ref()
                    .map(|a| serde_json::to_string_pretty(&a.arguments).unwrap_or_default())
                    .unwrap_or_default()
            });
            (
                EitherOf6::D(question.allow_edit.then(|| {
                    view! {
                        <label for="edited-arguments">"Arguments (edit before approving if needed)"</label>
                        <textarea id="edited-arguments" name="edited_arguments" rows="8" class="mono" spellcheck="false"
                            aria-describedby="edited-arguments-error" data-testid="edited-arguments">{arguments}</textarea>
                        {draft_error(draft, "edited_arguments", "edited-arguments-error")}
                    }
                })),
                EitherOf3::C(view! {
                    <div class="button-row">
                        <button type="submit" name="value" value="true" class="primary" data-testid="answer-approve">"Approve"</button>
                        <button type="submit" name="value" value="false" class="danger" data-testid="answer-reject">"Reject"</button>
                    </div>
                }),
            )
        }
        ResponseType::Form => (
            EitherOf6::E(view! {
                {question.fields.clone().into_iter().map(|field| {
                    let name = format!("field.{}", field.key);
                    let testid = format!("answer-field-{}", field.key);
                    view! { <PlainField field name testid draft/> }
                }).collect_view()}
            }),
            EitherOf3::A(send("Send answers")),
        ),
        // The rich single-value types: the input of the type, read by the server as its type.
        ResponseType::Number
        | ResponseType::Integer
        | ResponseType::Rating
        | ResponseType::Date
        | ResponseType::Datetime
        | ResponseType::Time
        | ResponseType::Email
        | ResponseType::Url
        | ResponseType::Markdown
        | ResponseType::Table
        | ResponseType::File => {
            let field = crate::rich_input::single_field(&question);
            (
                EitherOf6::F(
                    view! { <PlainField field name="value".to_owned() testid="answer-input".to_owned() draft/> },
                ),
                EitherOf3::A(send("Send answer")),
            )
        }
    };
    let comment_label = match question.response_type {
        ResponseType::ErrorRecovery => "Guidance (optional)",
        ResponseType::Approval => "Comment (optional; a rejection's reason goes to the agent)",
        _ => "Comment (optional)",
    };
    view! {
        <form method="post" action=action class="stack answer-form" data-testid="answer-form"
            enctype=has_file.then_some("multipart/form-data")>
            <input type="hidden" name="csrf" value=csrf/>
            {inputs}
            <label for="answer-comment">{comment_label}</label>
            <textarea id="answer-comment" name="comment" rows="2" data-testid="answer-comment">{draft.with_value(|d| d.value("comment").map(str::to_owned))}</textarea>
            {buttons}
        </form>
    }
}

#[component]
fn OptionInputs(
    name: String,
    options: Vec<QuestionOption>,
    multiple: bool,
    draft: StoredValue<AnswerDraft>,
    /// The values checked when nothing was sent yet (a form field's default).
    #[prop(optional)]
    preset: Vec<String>,
) -> impl IntoView {
    let kind = if multiple { "checkbox" } else { "radio" };
    options
        .into_iter()
        .enumerate()
        .map(|(i, option)| {
            let id = format!("{name}-{i}");
            let checked = draft.with_value(|d| d.sent(&name, &option.value)) || preset.contains(&option.value);
            view! {
                <div class="option">
                    <input type=kind id=id.clone() name=name.clone() value=option.value.clone() required=!multiple
                        checked=checked data-testid=format!("option-{}", option.value)/>
                    <label for=id>{option.label}</label>
                    {option.description.map(|d| view! { <span class="muted">" — " {d}</span> })}
                </div>
            }
        })
        .collect_view()
}

/// The problem the server named for `path` when it refused the last answer, beside its input.
fn draft_error(draft: StoredValue<AnswerDraft>, path: &str, id: &str) -> Option<AnyView> {
    let problem = draft.with_value(|d| d.errors.get(path).cloned())?;
    Some(view! { <p class="field-error" id=id.to_owned() data-testid="field-error" data-path=path.to_owned()>{problem}</p> }.into_any())
}

/// One field of the plain form, named `name` (`value`, or `field.<key>` in a form), with its label, help, the input
/// of its type and what the server said about it last time.
#[component]
fn PlainField(field: FormField, name: String, testid: String, draft: StoredValue<AnswerDraft>) -> impl IntoView {
    let path = crate::rich_input::path_of(&field.key);
    let id = name.replace(['.', '[', ']'], "-");
    let error_id = format!("{id}-error");
    let help_id = format!("{id}-help");
    let invalid = draft.with_value(|d| d.errors.contains_key(&path)).then_some("true");
    let described = [invalid.map(|_| error_id.clone()), field.description.as_ref().map(|_| help_id.clone())]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let described = (!described.is_empty()).then_some(described);
    let label =
        if field.required && !field.key.is_empty() { format!("{} *", field.label) } else { field.label.clone() };
    // What the input starts with: what was sent last time, else the field's default.
    let sent = draft.with_value(|d| d.value(&name).map(str::to_owned));
    let had_draft = draft.with_value(|d| !d.values.is_empty());
    let initial = sent.or_else(|| {
        (!had_draft).then(|| field.default.as_ref().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)))?
    });
    let required = field.required;
    let placeholder = field.placeholder.clone();
    let bound = |n: &Option<serde_json::Number>| n.as_ref().map(ToString::to_string);
    let step = crate::rich_input::step_of(&field);
    let grouped = matches!(field.response_type, ResponseType::Rating | ResponseType::MultiChoice | ResponseType::Table);
    let input = match field.response_type {
        ResponseType::Number | ResponseType::Integer if crate::rich_input::is_slider(&field) => {
            let start = initial.clone().or_else(|| bound(&field.rules.min)).unwrap_or_default();
            // A range input always sends a value: an optional one has a "No answer" box beside it, ticked until
            // the slider is moved (the page's script unticks it then; see `question::follow_answer_form`).
            let ticked = draft.with_value(|d| d.value(&format!("{name}.unset")) == Some("true"));
            let unanswered = !required && (ticked || initial.is_none());
            let unset = (!required).then(|| {
                view! {
                    <label class="slider-unset">
                        <input type="checkbox" name=format!("{name}.unset") value="true" data-unset-of=id.clone()
                            checked=unanswered data-testid=format!("{testid}-unset")/>
                        {crate::rich_input::SLIDER_UNSET}
                    </label>
                }
            });
            view! {
                <div class="slider">
                    <input type="range" id=id.clone() name=name.clone() data-testid=testid.clone()
                        min=bound(&field.rules.min) max=bound(&field.rules.max) step=step.clone() value=start.clone()
                        aria-describedby=described.clone() aria-invalid=invalid/>
                    <output for=id.clone() data-shows=id.clone() data-testid=format!("{testid}-shown")>{start}</output>
                    {unset}
                </div>
            }
            .into_any()
        }
        ResponseType::Number | ResponseType::Integer => view! {
            <input type="number" id=id.clone() name=name.clone() data-testid=testid.clone() required=required
                min=bound(&field.rules.min) max=bound(&field.rules.max) step=step.clone() value=initial.clone()
                placeholder=placeholder.clone() aria-describedby=described.clone() aria-invalid=invalid/>
        }
        .into_any(),
        ResponseType::Rating => {
            let max = field.rules.rating_max();
            view! {
                <fieldset class="rating" id=id.clone() data-testid=testid.clone() aria-describedby=described.clone()>
                    <legend>{label.clone()}</legend>
                    {(1..=max).map(|stars| {
                        let value = stars.to_string();
                        let checked = initial.as_deref() == Some(value.as_str());
                        view! {
                            <label class="star" data-testid=format!("{testid}-{stars}")>
                                <input type="radio" class="visually-hidden" name=name.clone() value=value checked=checked required=required/>
                                <span aria-hidden="true">"★"</span>
                                <span class="visually-hidden">{crate::rich_input::stars_text(stars)}</span>
                            </label>
                        }
                    }).collect_view()}
                </fieldset>
            }
            .into_any()
        }
        ResponseType::Datetime => {
            let offset_name = format!("{name}.offset");
            // A page without its script cannot know the browser's zone: a default shows its own wall time and
            // keeps its own offset, so sent back untouched it is the same moment.
            let own_offset = initial.as_deref().and_then(|v| chrono::DateTime::parse_from_rfc3339(v).ok());
            let offset = draft
                .with_value(|d| d.value(&offset_name).map(str::to_owned))
                .or_else(|| own_offset.map(|moment| moment.format("%:z").to_string()))
                .unwrap_or_default();
            let start = initial.clone().map(|v| v.chars().take(16).collect::<String>());
            view! {
                <input type="datetime-local" id=id.clone() name=name.clone() data-testid=testid.clone() required=required
                    value=start aria-describedby=described.clone() aria-invalid=invalid/>
                <input type="hidden" name=offset_name value=offset.clone() data-offset-of=id.clone()/>
                <span class="muted zone" data-zone-of=id.clone() data-testid=format!("{testid}-zone")>
                    {crate::rich_input::time::zone_label(&offset)}
                </span>
            }
            .into_any()
        }
        ResponseType::Markdown | ResponseType::Text => {
            let markdown = field.response_type == ResponseType::Markdown;
            view! {
                <textarea id=id.clone() name=name.clone() rows=if markdown { "6" } else { "3" } data-testid=testid.clone()
                    required=required placeholder=placeholder.clone() aria-describedby=described.clone() aria-invalid=invalid>{initial.clone()}</textarea>
                {markdown.then(|| view! {
                    <details class="markdown-preview">
                        <summary>"Preview"</summary>
                        <div class="markdown" data-preview-of=id.clone() data-testid=format!("{testid}-preview")
                            inner_html=crate::markdown::to_html(initial.as_deref().unwrap_or_default())></div>
                    </details>
                })}
            }
            .into_any()
        }
        ResponseType::Boolean => view! {
            <select id=id.clone() name=name.clone() data-testid=testid.clone() required=required
                aria-describedby=described.clone() aria-invalid=invalid>
                <option value="">"—"</option>
                <option value="true" selected=initial.as_deref() == Some("true")>"Yes"</option>
                <option value="false" selected=initial.as_deref() == Some("false")>"No"</option>
            </select>
        }
        .into_any(),
        ResponseType::Choice => view! {
            <select id=id.clone() name=name.clone() data-testid=testid.clone() required=required
                aria-describedby=described.clone() aria-invalid=invalid>
                <option value="">"—"</option>
                {field.options.iter().map(|o| view! {
                    <option value=o.value.clone() selected=initial.as_deref() == Some(o.value.as_str())>{o.label.clone()}</option>
                }).collect_view()}
            </select>
        }
        .into_any(),
        ResponseType::MultiChoice => view! {
            <fieldset id=id.clone() data-testid=testid.clone() aria-describedby=described.clone()>
                <legend>{label.clone()}</legend>
                <OptionInputs name=name.clone() options=field.options.clone() multiple=true draft preset=preset_choices(&field, had_draft)/>
            </fieldset>
        }
        .into_any(),
        ResponseType::File => {
            let kept = draft.with_value(|d| d.files.get(&name).cloned());
            let accept = (!field.rules.accept.is_empty()).then(|| field.rules.accept.join(","));
            let limits = crate::rich_input::file::file_limits(&field.rules);
            view! {
                <div class="dropzone">
                    <input type="file" id=id.clone() name=name.clone() data-testid=testid.clone() accept=accept
                        required=required && kept.is_none() aria-describedby=described.clone() aria-invalid=invalid/>
                    {limits.map(|limits| view! { <p class="muted">{limits}</p> })}
                    {kept.map(|file| view! {
                        <p class="file-chosen" data-testid=format!("{testid}-chosen")>
                            "Uploaded: " {file.name.clone()} " — " {crate::types::size_text(file.size)}
                            " (kept unless you choose another)"
                        </p>
                        <input type="hidden" name=name.clone() value=file.file_id.to_string()/>
                    })}
                </div>
            }
            .into_any()
        }
        ResponseType::Table => view! { <PlainTable field=field.clone() name=name.clone() label=label.clone() testid=testid.clone() draft/> }.into_any(),
        _ => {
            let kind = match field.response_type {
                ResponseType::Date => "date",
                ResponseType::Time => "time",
                ResponseType::Email => "email",
                ResponseType::Url => "url",
                _ => "text",
            };
            view! {
                <input type=kind id=id.clone() name=name.clone() data-testid=testid.clone() required=required
                    value=initial.clone() placeholder=placeholder.clone() aria-describedby=described.clone() aria-invalid=invalid/>
            }
            .into_any()
        }
    };
    view! {
        <div class="field">
            {(!grouped).then(|| view! { <label for=id.clone()>{label.clone()}</label> })}
            {field.description.clone().map(|d| view! { <p class="muted field-help" id=help_id>{d}</p> })}
            {input}
            {draft_error(draft, &path, &error_id)}
        </div>
    }
}

/// How many rows the plain form offers a table: its least, three to fill in otherwise, as many as were sent last
/// time, never more than it may have.
/// A multi-choice field's default choices, when nothing was sent yet.
fn preset_choices(field: &FormField, had_draft: bool) -> Vec<String> {
    match (&field.default, had_draft) {
        (Some(serde_json::Value::Array(chosen)), false) => {
            chosen.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        }
        _ => Vec::new(),
    }
}

/// A table field's default rows, when nothing was sent yet: each row's cells as their inputs' text.
fn preset_rows(field: &FormField, draft: &AnswerDraft) -> Vec<std::collections::HashMap<String, String>> {
    let Some(serde_json::Value::Array(rows)) = field.default.as_ref().filter(|_| draft.values.is_empty()) else {
        return Vec::new();
    };
    let text = |value: &serde_json::Value| value.as_str().map_or_else(|| value.to_string(), str::to_owned);
    rows.iter()
        .map(|row| {
            row.as_object()
                .map(|cells| cells.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), text(v))).collect())
                .unwrap_or_default()
        })
        .collect()
}

fn plain_rows(field: &FormField, draft: &AnswerDraft, name: &str) -> u32 {
    let prefix = format!("{name}[");
    let sent = draft
        .values
        .iter()
        .filter_map(|(n, _)| n.strip_prefix(&prefix)?.split_once(']')?.0.parse::<u32>().ok())
        .max()
        .map_or(0, |row| row + 1);
    let preset = u32::try_from(preset_rows(field, draft).len()).unwrap_or(u32::MAX);
    // As many as the form showed when it was sent, one more after its "Add row".
    let shown = draft.value(&rows_input(name)).and_then(|rows| rows.parse::<u32>().ok()).unwrap_or(0);
    field.rules.min_rows.unwrap_or(0).max(3).max(sent).max(preset).max(shown).min(max_rows(field))
}

fn max_rows(field: &FormField) -> u32 {
    field.rules.max_rows.unwrap_or(crate::types::TABLE_ROWS_MAX).min(crate::types::TABLE_ROWS_MAX)
}

/// A table in the plain form: rows of inputs named `<name>[<row>].<column>`; rows left blank at the end are not
/// sent. "Add row" sends the form without answering: the page comes back with what was typed and one row more, so
/// a table takes up to its `max_rows` with JavaScript or without.
#[component]
fn PlainTable(
    field: FormField,
    name: String,
    label: String,
    testid: String,
    draft: StoredValue<AnswerDraft>,
) -> impl IntoView {
    let rows = draft.with_value(|d| plain_rows(&field, d, &name));
    let more = rows < max_rows(&field);
    let preset = draft.with_value(|d| preset_rows(&field, d));
    let path = crate::rich_input::path_of(&field.key);
    let columns = field.rules.columns.clone();
    view! {
        <div class="table-editor" data-testid=testid.clone()>
            <table>
                <caption>{label}</caption>
                <thead>
                    <tr>{columns.iter().map(|c| view! { <th scope="col">{c.label.clone()}{c.required.then_some(" *")}</th> }).collect_view()}</tr>
                </thead>
                <tbody>
                    {(0..rows).map(|row| {
                        view! {
                            <tr>
                                {columns.iter().map(|column| {
                                    let cell = format!("{name}[{row}].{}", column.key);
                                    let cell_path = format!("{path}[{row}].{}", column.key);
                                    let value = draft
                                        .with_value(|d| d.value(&cell).map(str::to_owned))
                                        .or_else(|| preset.get(row as usize)?.get(&column.key).cloned());
                                    let invalid = draft.with_value(|d| d.errors.contains_key(&cell_path)).then_some("true");
                                    let aria = format!("{}, row {}", column.label, row + 1);
                                    let cell_testid = format!("{testid}-{row}-{}", column.key);
                                    let input = match column.response_type {
                                        ResponseType::Boolean => view! {
                                            <select name=cell.clone() aria-label=aria data-testid=cell_testid aria-invalid=invalid>
                                                <option value="">"—"</option>
                                                <option value="true" selected=value.as_deref() == Some("true")>"Yes"</option>
                                                <option value="false" selected=value.as_deref() == Some("false")>"No"</option>
                                            </select>
                                        }.into_any(),
                                        ResponseType::Choice => view! {
                                            <select name=cell.clone() aria-label=aria data-testid=cell_testid aria-invalid=invalid>
                                                <option value="">"—"</option>
                                                {column.options.iter().map(|o| view! {
                                                    <option value=o.value.clone() selected=value.as_deref() == Some(o.value.as_str())>{o.label.clone()}</option>
                                                }).collect_view()}
                                            </select>
                                        }.into_any(),
                                        other => {
                                            let (kind, step) = crate::rich_input::cell_input(other);
                                            view! {
                                                <input type=kind step=step name=cell.clone() aria-label=aria data-testid=cell_testid
                                                    value=value aria-invalid=invalid/>
                                            }.into_any()
                                        }
                                    };
                                    view! {
                                        <td data-label=column.label.clone()>
                                            {input}
                                            {draft_error(draft, &cell_path, &format!("{}-error", cell.replace(['.', '[', ']'], "-")))}
                                        </td>
                                    }
                                }).collect_view()}
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <input type="hidden" name=rows_input(&name) value=rows.to_string()/>
            {more.then(|| view! {
                <button type="submit" class="secondary" name=ADD_ROW value=name.clone() formnovalidate
                    data-testid=format!("{testid}-add-row")>"Add row"</button>
            })}
            <p class="muted">"Rows left blank at the end are not sent."</p>
        </div>
    }
}
