//! `/questions/{id}`: one question in full, with a plain HTML form for its answer, so a person can answer every
//! response type without JavaScript. The form is rendered on the server (`super::plain_answer_form`) and posts to
//! `/ui/answer/{id}`; the server turns the fields into the answer's JSON and checks it exactly as the API does.

use leptos::either::EitherOf3;
use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use uuid::Uuid;

use crate::components::{Badge, Countdown, EscalationChain, ManyHands, capitalise, describe_resolution};
use crate::markdown::Markdown;
use crate::types::{Question, QuestionStatus};
use crate::{QuestionOnPage, question_page};

/// The page: the question, then its answer form while it is pending, or how it was resolved.
#[component]
pub fn QuestionPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|id| Uuid::parse_str(&id).ok()));
    let question = crate::codec::resource(id, |id| async move {
        match id {
            Some(id) => question_page(id).await,
            None => Ok(None),
        }
    });
    view! {
        <main class="page" data-testid="question-page">
            <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || {
                    question.get().map(|result| match result {
                        Ok(Some(QuestionOnPage { question, answer_form, refusal })) => EitherOf3::A(view! { <QuestionView question answer_form refusal/> }),
                        Ok(None) => EitherOf3::B(view! { <h1>"No such question"</h1> <p><a href="/inbox">"Back to the inbox"</a></p> }),
                        Err(err) => EitherOf3::C(view! { <p class="alert" role="alert">{err.to_string()}</p> }),
                    })
                }}
            </Suspense>
        </main>
    }
}

#[component]
fn QuestionView(question: Question, answer_form: Option<String>, refusal: Option<String>) -> impl IntoView {
    Effect::new(move |_| show_datetimes_in_local_time());
    let query = use_query_map();
    // A code, turned into a sentence of ours: a link that puts its own text here must not speak for Holdpoint.
    let pending = question.status == QuestionStatus::Pending;
    let error =
        move || query.with(|q| q.get_str("error").map(|code| crate::navigation::answer_error_message(code, pending)));
    let context = (question.context.as_object().is_some_and(|c| !c.is_empty()))
        .then(|| serde_json::to_string_pretty(&question.context).unwrap_or_default());
    let action = question.action.clone();
    // The arguments the approver allowed the call with, when they edited them.
    let edited = question.response.as_ref().and_then(|response| response.edited_arguments.clone()).filter(|_| !pending);
    let resolution = (!pending).then(|| capitalise(&describe_resolution(&question)));
    // Why it was answered so: a person's reason, or what decided for them.
    let reason = question.response.as_ref().and_then(|response| response.comment.clone()).filter(|_| !pending);
    // A question pending when the page loaded that someone resolves meanwhile (elsewhere, or its deadline passing):
    // the page says so at once, and the form stays, with whatever was typed in it, but sends nothing more.
    let id = question.id;
    let updates = crate::live::use_question_updates();
    let resolved_meanwhile = Memo::new(move |_| {
        updates.with(|events| events.iter().rev().find(|q| q.id == id && q.status != QuestionStatus::Pending).cloned())
    });
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if resolved_meanwhile.with(Option::is_some) {
            close_answer_form();
        }
    });
    view! {
        <p><a href="/inbox">"← Inbox"</a></p>
        <h1 data-testid="question-title">{question.title.clone()}</h1>
        <div class="question-meta">
            <Badge text=question.kind.as_str().replace('_', " ") class="kind"/>
            <Badge text=question.urgency.to_string() class=format!("urgency-{}", question.urgency)/>
            {move || {
                let status = resolved_meanwhile.with(|q| q.as_ref().map(|q| q.status)).unwrap_or(question.status);
                view! { <Badge text=status.to_string() class="status"/> }
            }}
            {question.project.clone().map(|p| view! { <Badge text=p class="project"/> })}
            {move || {
                let waiting = pending && resolved_meanwhile.with(Option::is_none);
                waiting.then_some(question.timeout_at).flatten().map(|t| view! { <Countdown deadline=t/> })
            }}
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
                {edited.map(|edited| view! {
                    <h3>"Allowed with these arguments, as the approver edited them"</h3>
                    <pre tabindex="0" class="arguments" data-testid="action-edited-arguments">{serde_json::to_string_pretty(&edited).unwrap_or_default()}</pre>
                })}
            </section>
        })}
        {context.map(|c| view! { <details class="context"><summary>"Context"</summary><pre tabindex="0">{c}</pre></details> })}
        {move || error().map(|e| view! { <p class="alert" role="alert" data-testid="answer-error">{e}</p> })}
        // A live region on the page from the start, so that what it is given is read out.
        <div role="status" aria-live="polite">
            {move || resolved_meanwhile.get().filter(|_| pending).map(|question| {
                let reason = question.response.as_ref().and_then(|response| response.comment.clone());
                view! {
                    <div class="resolution" data-testid="resolution-meanwhile">
                        <p>{format!(
                            "While this page was open, this question was {}. The form below can no longer be sent; what you typed stays in it.",
                            describe_resolution(&question)
                        )}</p>
                        {reason.map(|reason| view! { <blockquote>{reason}</blockquote> })}
                    </div>
                }
            })}
        </div>
        {resolution.map(|text| view! {
            <div class="resolution" data-testid="resolution">
                <p>{text}</p>
                {reason.map(|reason| view! { <blockquote data-testid="resolution-comment">{reason}</blockquote> })}
            </div>
        })}
        {refusal.map(|refusal| view! { <p class="muted" data-testid="answer-refused">{format!("{}.", capitalise(&refusal))}</p> })}
        {answer_form.map(|html| view! { <div class="answer-form-host" on:input=follow_answer_form inner_html=html></div> })}
    }
}

/// Disables the answer form's buttons: its question was resolved while the page was open. What was typed stays in
/// the fields, to be read or copied.
#[cfg(feature = "hydrate")]
fn close_answer_form() {
    use wasm_bindgen::JsCast;
    let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
    let Ok(buttons) = document.query_selector_all(".answer-form-host button") else { return };
    for i in 0..buttons.length() {
        if let Some(button) = buttons.item(i).and_then(|n| n.dyn_into::<web_sys::Element>().ok()) {
            let _ = button.set_attribute("disabled", "");
        }
    }
}

/// Once the page's script runs, a date and time the form shows in its own zone (a default written with another
/// offset, which the page without its script keeps beside it) is shown in the browser's zone with the browser's
/// offset: the person reads and edits their own time, and sent back untouched it is the same moment.
fn show_datetimes_in_local_time() {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let Some(document) = web_sys::window().and_then(|w| w.document()) else { return };
        let Ok(offsets) = document.query_selector_all(".answer-form-host input[data-offset-of]") else { return };
        for i in 0..offsets.length() {
            let Some(offset) = offsets.item(i).and_then(|n| n.dyn_into::<web_sys::HtmlInputElement>().ok()) else {
                continue;
            };
            let input = offset
                .get_attribute("data-offset-of")
                .and_then(|id| document.get_element_by_id(&id))
                .and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok());
            let Some(input) = input else { continue };
            let (local, own) = (input.value(), offset.value());
            let browser = if local.is_empty() {
                // Nothing shown yet: what the person types is read in the browser's zone, at about this time of year.
                let now = String::from(js_sys::Date::new_0().to_iso_string());
                crate::rich_input::time::format_offset(crate::rich_input::time::browser_offset_at(&now))
            } else if own.is_empty() {
                crate::rich_input::time::browser_offset(&local)
            } else {
                let moment = crate::rich_input::time::local_to_rfc3339(&local, &own);
                let shown = crate::rich_input::time::local_text(&moment, &crate::rich_input::time::browser_offset_at);
                input.set_value(&shown);
                crate::rich_input::time::browser_offset(&shown)
            };
            if !local.is_empty() {
                offset.set_value(&browser);
            }
            if let Some(zone) = document.query_selector(&format!("[data-zone-of=\"{}\"]", input.id())).ok().flatten() {
                zone.set_text_content(Some(&crate::rich_input::time::zone_label(&browser)));
            }
        }
    }
}

/// What the server-rendered answer form does once the page's script runs, on each `input` event inside it: a slider
/// shows its value in its `<output data-shows=ID>` and unticks its "No answer" box (`data-unset-of=ID`), a markdown field renders into its `data-preview-of=ID` preview,
/// and a date and time puts the browser's offset from UTC into its `data-offset-of=ID` hidden input.
fn follow_answer_form(ev: leptos::ev::Event) {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        let Some(element) = ev.target().and_then(|t| t.dyn_into::<web_sys::Element>().ok()) else {
            return;
        };
        let value = if let Some(input) = element.dyn_ref::<web_sys::HtmlInputElement>() {
            input.value()
        } else if let Some(area) = element.dyn_ref::<web_sys::HtmlTextAreaElement>() {
            area.value()
        } else {
            return;
        };
        let Some(form) = element.closest("form").ok().flatten() else {
            return;
        };
        let id = element.id();
        let follower = |attribute: &str| form.query_selector(&format!("[{attribute}=\"{id}\"]")).ok().flatten();
        if let Some(output) = follower("data-shows") {
            output.set_text_content(Some(&value));
        }
        if let Some(unset) = follower("data-unset-of").and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok()) {
            unset.set_checked(false);
        }
        if let Some(preview) = follower("data-preview-of") {
            preview.set_inner_html(&crate::markdown::to_html(&value));
        }
        if let Some(offset) = follower("data-offset-of").and_then(|e| e.dyn_into::<web_sys::HtmlInputElement>().ok()) {
            let browser = crate::rich_input::time::browser_offset(&value);
            if let Some(zone) = follower("data-zone-of") {
                zone.set_text_content(Some(&crate::rich_input::time::zone_label(&browser)));
            }
            offset.set_value(&browser);
        }
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = ev;
}
