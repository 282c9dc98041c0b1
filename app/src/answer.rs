//! The live answer widget: the right input for each response type, answered through the REST API from the browser.
//! Used by the live modal, the inbox's split view and run pages; the inputs of the rich field types are
//! [`crate::rich_input`]'s. (The question page keeps its plain HTML form, for use without JavaScript.)

use std::collections::HashMap;

use leptos::either::{EitherOf3, EitherOf5};
use leptos::prelude::*;
use serde_json::Value;

use crate::api::post_json;
use crate::rich_input::{Entries, FieldEditor, answer_value};
use crate::types::{AnswerBody, AnswerRequest, Question, QuestionOption, ResponseType};

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

/// An answer's problems, one line each named by the labels of what they are about, in the form's order: what the
/// form's summary says (each input also shows its own). `problems` are by the paths the checks name
/// (`value.<key>`, `value.<key>[row].<column>`); one at no input of `fields` keeps its path.
pub fn problem_lines(fields: &[crate::types::FormField], problems: &HashMap<String, String>) -> Vec<String> {
    let mut said = std::collections::HashSet::new();
    let mut lines = Vec::new();
    for field in fields {
        let path = crate::rich_input::path_of(&field.key);
        let mut here: Vec<(Option<usize>, &String, &String)> = problems
            .iter()
            .filter(|(at, _)| **at == path || at.starts_with(&format!("{path}[")))
            .map(|(at, problem)| (row_of(&path, at), at, problem))
            .collect();
        here.sort();
        for (row, at, problem) in here {
            said.insert(at.clone());
            let column = at.rsplit_once("].").and_then(|(_, key)| field.rules.columns.iter().find(|c| c.key == key));
            let place = match (row, column) {
                (Some(row), Some(column)) => format!("{}, row {}, {}", field.label, row + 1, column.label),
                (Some(row), None) => format!("{}, row {}", field.label, row + 1),
                _ => field.label.clone(),
            };
            lines.push(format!("{place}: {problem}"));
        }
    }
    let mut elsewhere: Vec<_> = problems.iter().filter(|(at, _)| !said.contains(*at)).collect();
    elsewhere.sort();
    lines.extend(elsewhere.into_iter().map(|(at, problem)| format!("{at}: {problem}")));
    lines
}

/// The table row `at` (`value.parts[1].item`) is about, counted from 0.
fn row_of(path: &str, at: &str) -> Option<usize> {
    at.strip_prefix(path)?.strip_prefix('[')?.split_once(']')?.0.parse().ok()
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
    // The fields a form or a question of a rich type is answered through, and what has been entered in them.
    let rich_fields = match question.response_type {
        ResponseType::Form => question.fields.clone(),
        _ => vec![crate::rich_input::single_field(&question)],
    };
    let entries = Entries::new(&rich_fields);
    let original_args = question
        .action
        .as_ref()
        .map(|a| serde_json::to_string_pretty(&a.arguments).unwrap_or_default())
        .unwrap_or_default();
    let args_text = RwSignal::new(original_args.clone());
    let args_parsed = Memo::new(move |_| args_text.with(|t| parse_arguments(t)));
    let original_value = question.action.as_ref().map(|a| a.arguments.clone());

    let grant_offer = crate::grant_offer::offers_grant(&question).then(|| crate::grant_offer::new_offer(&question));
    let fields_for_problems = StoredValue::new(rich_fields.clone());
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
                Err(err) => {
                    // Each refusal the server names a field for goes next to its input, and into the summary by
                    // the input's label.
                    let problems = err.field_errors();
                    let lines = fields_for_problems.with_value(|fields| problem_lines(fields, &problems));
                    entries.errors.set(problems);
                    error.set(Some(if lines.is_empty() { err.describe() } else { lines.join("\n") }));
                }
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
        ResponseType::Text => {
            let input_id = format!("{}-text-{}", prefix, id.simple());
            (
                EitherOf5::A(view! {
                    <label for=input_id.clone()>"Your answer"</label>
                    <textarea id=input_id rows="3" data-testid=tid("text") on:input=move |ev| text.set(event_target_value(&ev))></textarea>
                }),
                EitherOf3::A({
                    submit_button(Box::new(move || {
                        let value = text.get_untracked();
                        if value.trim().is_empty() {
                            error.set(Some("Write an answer first.".into()));
                        } else {
                            send(Value::String(value), None);
                        }
                    }))
                }),
            )
        }
        ResponseType::Boolean => (
            EitherOf5::B(()),
            EitherOf3::B(view! {
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
                EitherOf5::C(view! {
                    <fieldset>
                        <legend>{legend}</legend>
                        {options_view(options, multiple, &tid)}
                    </fieldset>
                }),
                EitherOf3::A({
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
                EitherOf5::D(view! {
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
                EitherOf3::C(view! {
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
        // A form, and the single-value types with inputs of their own (dates, numbers, ratings, tables, ...).
        ResponseType::Form
        | ResponseType::Markdown
        | ResponseType::Email
        | ResponseType::Url
        | ResponseType::Date
        | ResponseType::Datetime
        | ResponseType::Time
        | ResponseType::Number
        | ResponseType::Integer
        | ResponseType::Rating
        | ResponseType::Table
        | ResponseType::File => {
            let form = response_type == ResponseType::Form;
            let ids = format!("{}-field-{}", prefix, id.simple());
            let fields_for_send = rich_fields.clone();
            (
                EitherOf5::E(view! {
                    {rich_fields.into_iter().map(|field| {
                        let testid = if field.key.is_empty() { tid("value") } else { tid(&format!("field-{}", field.key)) };
                        view! { <FieldEditor field ids=ids.clone() testid entries/> }
                    }).collect_view()}
                }),
                EitherOf3::A({
                    submit_button(Box::new(move || match answer_value(form, &fields_for_send, &entries.snapshot()) {
                        Ok(value) => {
                            entries.errors.set(HashMap::new());
                            send(value, None)
                        }
                        Err(problems) => {
                            // Said beside each input, and once more here by label, in the form's order.
                            let lines = problem_lines(&fields_for_send, &problems);
                            entries.errors.set(problems);
                            error.set(Some(lines.join("\n")));
                        }
                    }))
                }),
            )
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
    fn problems_are_summed_up_by_label_and_row_in_the_forms_order() {
        use crate::types::{FormField, TableColumn};
        let mut parts = FormField::new("parts", "Parts to order", ResponseType::Table);
        parts.rules.columns =
            vec![TableColumn { required: true, ..TableColumn::new("item", "Item", ResponseType::Text) }];
        let fields = vec![FormField::new("when", "Go-live date", ResponseType::Date), parts];
        let problems: HashMap<String, String> = [
            ("value.parts[10].item", "is required"),
            ("value.parts[1].item", "is required"),
            ("value.when", "is not a date"),
            ("value.other", "is not a field of this form"),
        ]
        .into_iter()
        .map(|(at, problem)| (at.to_owned(), problem.to_owned()))
        .collect();
        assert_eq!(
            problem_lines(&fields, &problems),
            [
                "Go-live date: is not a date",
                "Parts to order, row 2, Item: is required",
                "Parts to order, row 11, Item: is required",
                "value.other: is not a field of this form",
            ]
        );
    }

    #[test]
    fn edited_arguments_must_be_a_json_object() {
        assert!(parse_arguments("{\"x\": 1}").is_ok());
        assert!(parse_arguments("[1]").is_err());
        assert!(parse_arguments("{").is_err());
    }
}
