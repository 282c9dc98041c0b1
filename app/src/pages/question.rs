//! `/questions/{id}`: one question in full, with a plain HTML form for its answer, so a person can answer every
//! response type without JavaScript. The form posts to `/ui/answer/{id}`; the server turns the fields into the
//! answer's JSON and checks it exactly as the API does.

use leptos::either::{EitherOf4, EitherOf5, EitherOf6};
use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use uuid::Uuid;

use crate::components::{Badge, Countdown, EscalationChain, ManyHands, capitalise, describe_resolution};
use crate::markdown::Markdown;
use crate::types::{FormField, Question, QuestionOption, QuestionStatus, ResponseType, SessionInfo};
use crate::{current_session, question_detail};

/// The page: the question, then its answer form while it is pending, or how it was resolved.
#[component]
pub fn QuestionPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|id| Uuid::parse_str(&id).ok()));
    let question = crate::codec::resource(id, |id| async move {
        match id {
            Some(id) => question_detail(id).await,
            None => Ok(None),
        }
    });
    let session = crate::codec::resource(|| (), |_| current_session());
    view! {
        <main class="page" data-testid="question-page">
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || {
                    let session = session.get().and_then(Result::ok);
                    question.get().map(|result| match (result, session) {
                        (Ok(Some(q)), Some(s)) => EitherOf4::A(view! { <QuestionView question=q session=s/> }),
                        (Ok(None), _) => EitherOf4::B(view! { <h1>"No such question"</h1> <p><a href="/inbox">"Back to the inbox"</a></p> }),
                        (Err(err), _) => EitherOf4::C(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                        (Ok(Some(_)), None) => EitherOf4::D(view! { <p class="alert" role="alert">"Sign in again."</p> }),
                    })
                }}
            </Suspense>
        </main>
    }
}

#[component]
fn QuestionView(question: Question, session: SessionInfo) -> impl IntoView {
    let query = use_query_map();
    // A code, turned into a sentence of ours: a link that puts its own text here must not speak for Holdpoint.
    let error = move || query.with(|q| q.get_str("error").map(crate::navigation::answer_error_message));
    let context = (question.context.as_object().is_some_and(|c| !c.is_empty()))
        .then(|| serde_json::to_string_pretty(&question.context).unwrap_or_default());
    let action = question.action.clone();
    let pending = question.status == QuestionStatus::Pending;
    let resolution = (!pending).then(|| capitalise(&describe_resolution(&question)));
    // Why it was answered so: a person's reason, or what decided for them.
    let reason = question.response.as_ref().and_then(|response| response.comment.clone()).filter(|_| !pending);
    view! {
        <p><a href="/inbox">"← Inbox"</a></p>
        <h1 data-testid="question-title">{question.title.clone()}</h1>
        <div class="question-meta">
            <Badge text=question.kind.as_str().replace('_', " ") class="kind"/>
            <Badge text=question.urgency.to_string() class=format!("urgency-{}", question.urgency)/>
            <Badge text=question.status.to_string() class="status"/>
            {question.project.clone().map(|p| view! { <Badge text=p class="project"/> })}
            {pending.then_some(question.timeout_at).flatten().map(|t| view! { <Countdown deadline=t/> })}
        </div>
        <EscalationChain question=question.clone() testid="question"/>
        <ManyHands question=question.clone() testid="question"/>
        {(!question.body.is_empty()).then(|| view! { <Markdown source=question.body.clone() testid="question-body"/> })}
        {action.map(|a| view! {
            <section class="action" aria-label="Action to approve">
                <h2>"Action: " <code>{a.tool_name}</code></h2>
                // Arguments a person may edit are shown once, in the answer form's field.
                {(!(pending && question.allow_edit)).then(|| view! {
                    <pre tabindex="0" class="arguments" data-testid="action-arguments">{serde_json::to_string_pretty(&a.arguments).unwrap_or_default()}</pre>
                })}
            </section>
        })}
        {context.map(|c| view! { <details class="context"><summary>"Context"</summary><pre tabindex="0">{c}</pre></details> })}
        {move || error().map(|e| view! { <p class="alert" role="alert" data-testid="answer-error">{e}</p> })}
        {resolution.map(|text| view! {
            <div class="resolution" data-testid="resolution">
                <p>{text}</p>
                {reason.map(|reason| view! { <blockquote data-testid="resolution-comment">{reason}</blockquote> })}
            </div>
        })}
        {pending.then(|| view! { <AnswerForm question=question.clone() csrf=session.csrf_token.clone()/> })}
    }
}

/// The form for one response type: the answer's inputs, then the comment, then the button(s) that send it (for a
/// yes/no question or an approval the buttons are the answer). Field names: `value` (repeated for several choices),
/// `field.<key>` for form fields, `edited_arguments`, `comment`, `csrf`.
#[component]
fn AnswerForm(question: Question, csrf: String) -> impl IntoView {
    let action = format!("/ui/answer/{}", question.id);
    let send = |label: &'static str| view! { <button type="submit" class="primary" data-testid="answer-submit">{label}</button> };
    let (inputs, buttons) = match question.response_type {
        ResponseType::Text => (
            EitherOf6::A(view! {
                <label for="answer-value">"Your answer"</label>
                <textarea id="answer-value" name="value" rows="4" required data-testid="answer-text"></textarea>
            }),
            EitherOf4::A(send("Send answer")),
        ),
        ResponseType::Boolean => (
            EitherOf6::B(()),
            EitherOf4::B(view! {
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
                        <OptionInputs name="value".to_owned() options multiple/>
                    </fieldset>
                }),
                EitherOf4::A(send(label)),
            )
        }
        ResponseType::Approval => {
            let arguments = question
                .action
                .as_ref()
                .map(|a| serde_json::to_string_pretty(&a.arguments).unwrap_or_default())
                .unwrap_or_default();
            (
                EitherOf6::D(question.allow_edit.then(|| {
                    view! {
                        <label for="edited-arguments">"Arguments (edit before approving if needed)"</label>
                        <textarea id="edited-arguments" name="edited_arguments" rows="8" class="mono" spellcheck="false"
                            data-testid="edited-arguments">{arguments}</textarea>
                    }
                })),
                EitherOf4::C(view! {
                    <div class="button-row">
                        <button type="submit" name="value" value="true" class="primary" data-testid="answer-approve">"Approve"</button>
                        <button type="submit" name="value" value="false" class="danger" data-testid="answer-reject">"Reject"</button>
                    </div>
                }),
            )
        }
        ResponseType::Form => (
            EitherOf6::E(view! {
                {question.fields.clone().into_iter().map(|field| view! { <FormFieldInput field/> }).collect_view()}
            }),
            EitherOf4::A(send("Send answers")),
        ),
        // The rich single-value types: a plain input of the nearest HTML type, read by the server as its type.
        ResponseType::Number
        | ResponseType::Integer
        | ResponseType::Rating
        | ResponseType::Date
        | ResponseType::Datetime
        | ResponseType::Time
        | ResponseType::Email
        | ResponseType::Url
        | ResponseType::Markdown => {
            let kind = match question.response_type {
                ResponseType::Number => "number",
                ResponseType::Integer | ResponseType::Rating => "number",
                ResponseType::Date => "date",
                ResponseType::Time => "time",
                ResponseType::Email => "email",
                ResponseType::Url => "url",
                _ => "text",
            };
            let step = if question.response_type == ResponseType::Number { "any" } else { "1" };
            (
                EitherOf6::F(
                    view! {
                        <label for="answer-value">"Your answer"</label>
                        <input type=kind step=step id="answer-value" name="value" required data-testid="answer-input"/>
                    }
                    .into_any(),
                ),
                EitherOf4::A(send("Send answer")),
            )
        }
        // The plain form has no table editor yet, and a file is uploaded first, which takes the page's script.
        ResponseType::Table | ResponseType::File => (
            EitherOf6::F(view! { <p class="alert">"This question cannot be answered here."</p> }.into_any()),
            EitherOf4::D(()),
        ),
    };
    let comment_label = match question.response_type {
        ResponseType::ErrorRecovery => "Guidance (optional)",
        ResponseType::Approval => "Comment (optional; a rejection's reason goes to the agent)",
        _ => "Comment (optional)",
    };
    view! {
        <form method="post" action=action class="stack answer-form" data-testid="answer-form">
            <input type="hidden" name="csrf" value=csrf/>
            {inputs}
            <label for="answer-comment">{comment_label}</label>
            <textarea id="answer-comment" name="comment" rows="2" data-testid="answer-comment"></textarea>
            {buttons}
        </form>
    }
}

#[component]
fn OptionInputs(name: String, options: Vec<QuestionOption>, multiple: bool) -> impl IntoView {
    let kind = if multiple { "checkbox" } else { "radio" };
    options
        .into_iter()
        .enumerate()
        .map(|(i, option)| {
            let id = format!("{name}-{i}");
            view! {
                <div class="option">
                    <input type=kind id=id.clone() name=name.clone() value=option.value.clone() required=!multiple data-testid=format!("option-{}", option.value)/>
                    <label for=id>{option.label}</label>
                    {option.description.map(|d| view! { <span class="muted">" — " {d}</span> })}
                </div>
            }
        })
        .collect_view()
}

#[component]
fn FormFieldInput(field: FormField) -> impl IntoView {
    let name = format!("field.{}", field.key);
    let id = format!("field-{}", field.key);
    let label = if field.required { format!("{} *", field.label) } else { field.label.clone() };
    let input = match field.response_type {
        ResponseType::Number | ResponseType::Integer | ResponseType::Rating => {
            EitherOf5::A(view! { <input type="number" step="any" id=id.clone() name=name required=field.required/> })
        }
        ResponseType::Boolean => EitherOf5::B(view! {
            <select id=id.clone() name=name required=field.required>
                <option value="">"—"</option>
                <option value="true">"Yes"</option>
                <option value="false">"No"</option>
            </select>
        }),
        ResponseType::Choice => EitherOf5::C(view! {
            <select id=id.clone() name=name required=field.required>
                <option value="">"—"</option>
                {field.options.iter().map(|o| view! { <option value=o.value.clone()>{o.label.clone()}</option> }).collect_view()}
            </select>
        }),
        ResponseType::MultiChoice => EitherOf5::D(view! {
            <fieldset id=id.clone()><OptionInputs name options=field.options.clone() multiple=true/></fieldset>
        }),
        _ => EitherOf5::E(view! { <input type="text" id=id.clone() name=name required=field.required/> }),
    };
    view! {
        <label for=id>{label}</label>
        {input}
    }
}
