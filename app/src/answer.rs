//! The live answer widget: the right input for each response type, answered through the REST API from the browser.
//! Used by the live modal and inline on run pages. (The question page keeps its plain HTML form, for no-JS use.)

use std::collections::HashMap;

use leptos::either::{EitherOf4, EitherOf6};
use leptos::prelude::*;
use serde_json::{Map, Value};

use crate::api::post_json;
use crate::types::{AnswerBody, AnswerRequest, FormField, Question, QuestionOption, ResponseType};

/// The options of an error-recovery question: the three the spec names, then the question's own.
pub fn recovery_options(question: &Question) -> Vec<QuestionOption> {
    let mut options: Vec<QuestionOption> = crate::types::RECOVERY_ACTIONS
        .into_iter()
        .map(|(value, label, description)| QuestionOption {
            value: value.into(),
            label: label.into(),
            description: Some(description.into()),
        })
        .collect();
    options.extend(question.options.iter().cloned());
    options
}

/// A line diff (longest common subsequence): `' '` kept, `'-'` removed, `'+'` added.
pub fn line_diff(before: &str, after: &str) -> Vec<(char, String)> {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push((' ', a[i].to_owned()));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] > lcs[i + 1][j]) {
            out.push(('+', b[j].to_owned()));
            j += 1;
        } else {
            out.push(('-', a[i].to_owned()));
            i += 1;
        }
    }
    out
}

/// Parses edited approval arguments: a JSON object, or a sentence saying what is wrong.
pub fn parse_arguments(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("The arguments must be a JSON object ({ ... }).".into()),
        Err(err) => Err(format!("Not valid JSON: {err}")),
    }
}

/// A typed number, or a sentence naming the field.
fn number_of(raw: &str, label: &str) -> Result<Value, String> {
    raw.parse::<i64>()
        .map(Value::from)
        .ok()
        .or_else(|| raw.parse::<f64>().ok().and_then(|n| serde_json::Number::from_f64(n).map(Value::Number)))
        .ok_or_else(|| format!("{label}: enter a number"))
}

/// Builds a form answer from the inputs' text; a sentence for the first field that does not fit.
pub fn form_value(
    fields: &[FormField],
    scalars: &HashMap<String, String>,
    multi: &HashMap<String, Vec<String>>,
) -> Result<Value, String> {
    let mut object = Map::new();
    for field in fields {
        let value = match field.response_type {
            ResponseType::MultiChoice => {
                let chosen = multi.get(&field.key).cloned().unwrap_or_default();
                (!chosen.is_empty()).then(|| Value::from(chosen))
            }
            _ => {
                let raw = scalars.get(&field.key).map(|s| s.trim()).unwrap_or_default();
                if raw.is_empty() {
                    None
                } else {
                    Some(match field.response_type {
                        ResponseType::Number | ResponseType::Integer | ResponseType::Rating => {
                            number_of(raw, &field.label)?
                        }
                        ResponseType::Boolean => Value::Bool(raw == "true"),
                        _ => Value::String(raw.to_owned()),
                    })
                }
            }
        };
        match value {
            Some(value) => {
                object.insert(field.key.clone(), value);
            }
            None if field.required => return Err(format!("{}: required", field.label)),
            None => {}
        }
    }
    Ok(Value::Object(object))
}

/// The inputs for one question and the buttons that send its answer. `prefix` namespaces the `data-testid`s.
#[component]
pub fn AnswerWidget(
    question: Question,
    #[prop(into)] prefix: String,
    /// Called with the answered question once the server has accepted the answer.
    on_answered: Callback<Question>,
) -> impl IntoView {
    let id = question.id;
    let comment = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let text = RwSignal::new(String::new());
    let chosen = RwSignal::new(None::<String>);
    let many = RwSignal::new(Vec::<String>::new());
    let scalars = RwSignal::new(HashMap::<String, String>::new());
    let multi = RwSignal::new(HashMap::<String, Vec<String>>::new());
    let original_args = question
        .action
        .as_ref()
        .map(|a| serde_json::to_string_pretty(&a.arguments).unwrap_or_default())
        .unwrap_or_default();
    let args_text = RwSignal::new(original_args.clone());
    let args_parsed = Memo::new(move |_| args_text.with(|t| parse_arguments(t)));
    let original_value = question.action.as_ref().map(|a| a.arguments.clone());

    let grant_offer = crate::grant_offer::offers_grant(&question).then(|| crate::grant_offer::new_offer(&question));
    let send = move |value: Value, edited: Option<Value>| {
        error.set(None);
        busy.set(true);
        let answer = AnswerBody {
            value,
            comment: Some(comment.get_untracked()).filter(|c| !c.trim().is_empty()),
            edited_arguments: edited,
        };
        // Only an approval makes a grant.
        let grant = grant_offer.filter(|_| answer.value == Value::Bool(true)).and_then(|offer| offer.request());
        let body = AnswerRequest { answer, grant };
        leptos::task::spawn_local(async move {
            let result = post_json::<_, Question>(&format!("/questions/{id}/answer"), &body).await;
            busy.set(false);
            match result {
                Ok(answered) => on_answered.run(answered),
                Err(err) => error.set(Some(err.describe())),
            }
        });
    };
    let p = prefix.clone();
    let tid = move |name: &str| format!("{p}-{name}");

    let options_view = |options: Vec<QuestionOption>, multiple: bool, tid: &dyn Fn(&str) -> String| {
        let group = format!("{}-{}", tid("option"), id.simple());
        options
            .into_iter()
            .map(|option| {
                let value = option.value.clone();
                let input_id = format!("{group}-{}", option.value);
                let testid = tid(&format!("option-{}", option.value));
                let on_change = {
                    let value = value.clone();
                    move |ev: leptos::ev::Event| {
                        let checked = event_target_checked(&ev);
                        if multiple {
                            many.update(|m| {
                                m.retain(|v| v != &value);
                                if checked {
                                    m.push(value.clone());
                                }
                            });
                        } else if checked {
                            chosen.set(Some(value.clone()));
                        }
                    }
                };
                view! {
                    <div class="option">
                        <input
                            type=if multiple { "checkbox" } else { "radio" }
                            id=input_id.clone()
                            name=group.clone()
                            value=value
                            data-testid=testid
                            on:change=on_change
                        />
                        <label for=input_id>{option.label}</label>
                        {option.description.map(|d| view! { <span class="muted">" — " {d}</span> })}
                    </div>
                }
            })
            .collect_view()
    };

    let submit_label = if question.response_type == ResponseType::ErrorRecovery { "Send" } else { "Send answer" };
    let submit_button = {
        let testid = tid("submit");
        move |on_click: Box<dyn Fn() + Send + Sync>| {
            view! {
                <div class="button-row">
                    <button type="button" class="primary" data-testid=testid.clone() disabled=move || busy.get() on:click=move |_| on_click()>
                        {submit_label}
                    </button>
                </div>
            }
        }
    };

    let response_type = question.response_type;
    let (inputs, buttons) = match question.response_type {
        // The rich single-value types are typed as text until they get inputs of their own; a number is sent as one.
        ResponseType::Text
        | ResponseType::Markdown
        | ResponseType::Email
        | ResponseType::Url
        | ResponseType::Date
        | ResponseType::Datetime
        | ResponseType::Time
        | ResponseType::Number
        | ResponseType::Integer
        | ResponseType::Rating => {
            let input_id = format!("{}-text-{}", prefix, id.simple());
            (
                EitherOf6::A(view! {
                    <label for=input_id.clone()>"Your answer"</label>
                    <textarea id=input_id rows="3" data-testid=tid("text") on:input=move |ev| text.set(event_target_value(&ev))></textarea>
                }),
                EitherOf4::A({
                    submit_button(Box::new(move || {
                        let value = text.get_untracked();
                        if value.trim().is_empty() {
                            error.set(Some("Write an answer first.".into()));
                        } else if response_type.is_numeric() {
                            match number_of(value.trim(), "Your answer") {
                                Ok(number) => send(number, None),
                                Err(err) => error.set(Some(err)),
                            }
                        } else {
                            send(Value::String(value), None);
                        }
                    }))
                }),
            )
        }
        ResponseType::Boolean => (
            EitherOf6::B(()),
            EitherOf4::B(view! {
                <div class="button-row">
                    <button type="button" class="primary" data-primary data-testid=tid("yes") disabled=move || busy.get() on:click=move |_| send(Value::Bool(true), None)>"Yes"</button>
                    <button type="button" data-testid=tid("no") disabled=move || busy.get() on:click=move |_| send(Value::Bool(false), None)>"No"</button>
                </div>
            }),
        ),
        ResponseType::Choice | ResponseType::MultiChoice | ResponseType::ErrorRecovery => {
            let multiple = question.response_type == ResponseType::MultiChoice;
            let options = if question.response_type == ResponseType::ErrorRecovery {
                recovery_options(&question)
            } else {
                question.options.clone()
            };
            let legend = match question.response_type {
                ResponseType::ErrorRecovery => "How should the agent go on?",
                ResponseType::MultiChoice => "Choose any",
                _ => "Choose one",
            };
            (
                EitherOf6::C(view! {
                    <fieldset>
                        <legend>{legend}</legend>
                        {options_view(options, multiple, &tid)}
                    </fieldset>
                }),
                EitherOf4::A({
                    submit_button(Box::new(move || {
                        if multiple {
                            send(Value::from(many.get_untracked()), None);
                        } else if let Some(value) = chosen.get_untracked() {
                            send(Value::String(value), None);
                        } else {
                            error.set(Some("Choose an option first.".into()));
                        }
                    }))
                }),
            )
        }
        ResponseType::Approval => {
            let allow_edit = question.allow_edit;
            let args_id = format!("{}-args-{}", prefix, id.simple());
            let original_for_diff = original_args.clone();
            let decide = move |approve: bool| {
                let edited = if allow_edit && approve {
                    match args_parsed.get_untracked() {
                        Ok(value) if Some(&value) != original_value.as_ref() => Some(value),
                        Ok(_) => None,
                        Err(err) => {
                            error.set(Some(err));
                            return;
                        }
                    }
                } else {
                    None
                };
                send(Value::Bool(approve), edited);
            };
            let decide_reject = decide.clone();
            (
                EitherOf6::D(view! {
                    {if allow_edit {
                        leptos::either::Either::Left(view! {
                            <label for=args_id.clone()>"Arguments (you may edit them before approving)"</label>
                            <textarea id=args_id class="mono" rows="8" spellcheck="false" data-testid=tid("arguments")
                                prop:value=move || args_text.get()
                                on:input=move |ev| args_text.set(event_target_value(&ev))></textarea>
                            {move || args_parsed.get().err().map(|e| view! { <p class="field-error" role="alert" data-testid="arguments-error">{e}</p> })}
                            {move || {
                                let edited = args_text.get();
                                (edited != original_for_diff).then(|| {
                                    let lines = line_diff(&original_for_diff, &edited);
                                    view! {
                                        <div class="diff" data-testid="arguments-diff" aria-label="Changes to the arguments">
                                            {lines.into_iter().map(|(mark, line)| {
                                                let class = match mark { '+' => "diff-add", '-' => "diff-del", _ => "diff-same" };
                                                view! { <div class=class>{format!("{mark} {line}")}</div> }
                                            }).collect_view()}
                                        </div>
                                    }
                                })
                            }}
                        })
                    } else {
                        leptos::either::Either::Right(view! { <pre tabindex="0" class="arguments" data-testid=tid("arguments-view")>{original_args.clone()}</pre> })
                    }}
                    {grant_offer.map(|offer| view! {
                        <crate::grant_offer::GrantOfferView question=question.clone() prefix=prefix.clone() offer/>
                    })}
                }),
                EitherOf4::C(view! {
                    <div class="button-row">
                        <button type="button" class="primary" data-primary data-testid=tid("approve")
                            disabled=move || busy.get() || (allow_edit && args_parsed.with(Result::is_err))
                            on:click=move |_| decide(true)>"Approve"</button>
                        <button type="button" class="danger" data-testid=tid("reject") disabled=move || busy.get()
                            on:click=move |_| decide_reject(false)>"Reject"</button>
                    </div>
                }),
            )
        }
        ResponseType::Form => {
            let fields = question.fields.clone();
            let fields_for_send = fields.clone();
            (
                EitherOf6::E(view! {
                    {fields.into_iter().map(|field| view! { <FormFieldEditor field prefix=prefix.clone() question_id=id scalars multi/> }).collect_view()}
                }),
                EitherOf4::A({
                    submit_button(Box::new(move || {
                        match form_value(&fields_for_send, &scalars.get_untracked(), &multi.get_untracked()) {
                            Ok(value) => send(value, None),
                            Err(err) => error.set(Some(err)),
                        }
                    }))
                }),
            )
        }
        ResponseType::Table | ResponseType::File => {
            (EitherOf6::F(view! { <p class="alert">"This question cannot be answered here."</p> }), EitherOf4::D(()))
        }
    };
    let comment_id = format!("{}-comment-{}", prefix, id.simple());
    let comment_label = if question.response_type == ResponseType::ErrorRecovery {
        "Guidance for the agent (optional)"
    } else if question.response_type == ResponseType::Approval {
        "Comment (optional; a rejection's reason goes to the agent)"
    } else {
        "Comment (optional)"
    };
    let error_testid = tid("error");
    view! {
        <div class="stack answer-widget">
            {inputs}
            <label for=comment_id.clone()>{comment_label}</label>
            <textarea id=comment_id rows="2" data-testid=tid("comment") on:input=move |ev| comment.set(event_target_value(&ev))></textarea>
            {buttons}
            {move || error.get().map(|e| view! { <p class="alert" role="alert" data-testid=error_testid.clone()>{e}</p> })}
        </div>
    }
}

#[component]
fn FormFieldEditor(
    field: FormField,
    prefix: String,
    question_id: uuid::Uuid,
    scalars: RwSignal<HashMap<String, String>>,
    multi: RwSignal<HashMap<String, Vec<String>>>,
) -> impl IntoView {
    let key = field.key.clone();
    let input_id = format!("{prefix}-field-{}-{}", question_id.simple(), field.key);
    let testid = format!("{prefix}-field-{}", field.key);
    let label = if field.required { format!("{} *", field.label) } else { field.label.clone() };
    let set_scalar = {
        let key = key.clone();
        move |ev: leptos::ev::Event| {
            let value = event_target_value(&ev);
            scalars.update(|s| {
                s.insert(key.clone(), value);
            });
        }
    };
    let input = match field.response_type {
        ResponseType::Number | ResponseType::Integer | ResponseType::Rating => view! {
            <input type="number" step="any" id=input_id.clone() data-testid=testid on:input=set_scalar/>
        }
        .into_any(),
        ResponseType::Boolean => view! {
            <select id=input_id.clone() data-testid=testid on:change=set_scalar>
                <option value="">"—"</option>
                <option value="true">"Yes"</option>
                <option value="false">"No"</option>
            </select>
        }
        .into_any(),
        ResponseType::Choice => view! {
            <select id=input_id.clone() data-testid=testid on:change=set_scalar>
                <option value="">"—"</option>
                {field.options.iter().map(|o| view! { <option value=o.value.clone()>{o.label.clone()}</option> }).collect_view()}
            </select>
        }
        .into_any(),
        ResponseType::MultiChoice => view! {
            <div id=input_id.clone() data-testid=testid class="checks">
                {field.options.iter().map(|o| {
                    let value = o.value.clone();
                    let key = key.clone();
                    let box_id = format!("{input_id}-{}", o.value);
                    view! {
                        <div class="option">
                            <input type="checkbox" id=box_id.clone() value=value.clone() on:change=move |ev| {
                                let checked = event_target_checked(&ev);
                                multi.update(|m| {
                                    let chosen = m.entry(key.clone()).or_default();
                                    chosen.retain(|v| v != &value);
                                    if checked { chosen.push(value.clone()); }
                                });
                            }/>
                            <label for=box_id>{o.label.clone()}</label>
                        </div>
                    }
                }).collect_view()}
            </div>
        }
        .into_any(),
        _ => view! { <input type="text" id=input_id.clone() data-testid=testid on:input=set_scalar/> }.into_any(),
    };
    view! {
        <label for=input_id.clone()>{label}</label>
        {input}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_line_shows_as_removed_then_added() {
        let diff = line_diff("{\n  \"a\": 1,\n  \"b\": 2\n}", "{\n  \"a\": 1,\n  \"b\": 3\n}");
        let marks: String = diff.iter().map(|(m, _)| *m).collect();
        assert_eq!(marks, "  -+ ");
    }

    #[test]
    fn edited_arguments_must_be_a_json_object() {
        assert!(parse_arguments("{\"x\": 1}").is_ok());
        assert!(parse_arguments("[1]").is_err());
        assert!(parse_arguments("{").is_err());
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
        ];
        let scalars = HashMap::from([("users".to_owned(), "12".to_owned()), ("urgent".to_owned(), "true".to_owned())]);
        let multi = HashMap::from([("tags".to_owned(), vec!["a".to_owned()])]);
        assert_eq!(
            form_value(&fields, &scalars, &multi).unwrap(),
            serde_json::json!({"users": 12, "urgent": true, "tags": ["a"]})
        );
        assert!(form_value(&fields, &HashMap::new(), &multi).unwrap_err().contains("required"));
    }
}
