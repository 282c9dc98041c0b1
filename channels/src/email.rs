//! Email over SMTP: a question as a multipart/alternative message, plain text first (readable as it is
//! in a plain-text client) and HTML second, with what the question asks for ([`super::asked`]: each field's label,
//! kind and bounds, a table's columns), one action link per quick answer (yes or no, a choice, an approval) and a
//! link to the question in Holdpoint ("Answer in Holdpoint" when the message offers no one-click answer); and the
//! SMTP transport that sends it.
//!
//! The transport is lettre's asynchronous SMTP client on tokio with rustls (the TLS stack and certificate verifier
//! the rest of the server uses), configured by one URL (`HOLDPOINT_SMTP_URL`):
//! - `smtp://user:pass@host:587` submits with STARTTLS, which must succeed (587 when no port is given);
//! - `smtps://user:pass@host:465` speaks TLS from the first byte (465 when no port is given);
//! - `?tls=opportunistic` uses STARTTLS when the server offers it, `?tls=none` never does: for a relay on the same
//!   host or network only, as credentials and messages then cross in the clear.

use std::time::Duration;

use holdpoint_types::{Question, QuestionKind, ResponseType};
pub use lettre::message::Mailbox;
use lettre::message::MultiPart;
use lettre::message::header::{HeaderName, HeaderValue};
use lettre::transport::smtp::Error as SmtpError;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use uuid::Uuid;

use super::DeliveryOutcome;
use super::action_links::ActionLink;

/// How long one SMTP exchange (connect, each command) may take before the attempt is abandoned and retried later.
const SMTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how mail is submitted: `HOLDPOINT_SMTP_URL`. Its password never shows in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct SmtpUrl {
    /// The URL as lettre reads it, the `tls` parameter rewritten to what lettre understands.
    lettre_url: String,
    /// The URL for messages and logs, password redacted.
    redacted: String,
}

impl std::fmt::Debug for SmtpUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl std::str::FromStr for SmtpUrl {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut url = url::Url::parse(text.trim()).map_err(|e| format!("the SMTP URL is not a URL: {e}"))?;
        if url.host_str().is_none_or(str::is_empty) {
            return Err("the SMTP URL names no host".into());
        }
        let tls = url.query_pairs().find(|(key, _)| key == "tls").map(|(_, value)| value.into_owned());
        let rest: Vec<(String, String)> =
            url.query_pairs().filter(|(key, _)| key != "tls").map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        if !rest.is_empty() {
            return Err(format!("the SMTP URL takes only the `tls` parameter, not {:?}", rest[0].0));
        }
        // lettre reads a bare `smtp://` as no TLS at all; ours means STARTTLS required, the safe default for
        // submission, and `tls=none` is how one asks for the clear.
        let lettre_tls = match (url.scheme(), tls.as_deref()) {
            ("smtp", None | Some("required")) => Some("required"),
            ("smtp", Some("opportunistic")) => Some("opportunistic"),
            ("smtp", Some("none")) => None,
            ("smtps", None) => None,
            ("smtp", Some(other)) => {
                return Err(format!("tls={other} is not one of required, opportunistic or none"));
            }
            ("smtps", Some(_)) => return Err("smtps:// always uses TLS; it takes no `tls` parameter".into()),
            (scheme, _) => return Err(format!("the SMTP URL must start with smtp:// or smtps://, not {scheme}://")),
        };
        url.set_query(None);
        let mut redacted = url.to_string();
        if let Some(password) = url.password() {
            // The URL's own serialization of the password, so that the one in the text is the one replaced.
            redacted = redacted.replacen(&format!(":{password}@"), ":[redacted]@", 1);
        }
        if let Some(tls) = lettre_tls {
            url.query_pairs_mut().append_pair("tls", tls);
        }
        if let Some(tls) = tls {
            redacted.push_str(&format!("?tls={tls}"));
        }
        Ok(SmtpUrl { lettre_url: url.to_string(), redacted })
    }
}

/// A setting of the email channel that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EmailConfigError {
    #[error("HOLDPOINT_SMTP_URL {url:?} cannot be used: {reason}")]
    Transport { url: String, reason: String },
    #[error(
        "HOLDPOINT_EMAIL_FROM {0:?} is not a mail address \
         (`holdpoint@example.com` or `Holdpoint <holdpoint@example.com>`)"
    )]
    From(String),
}

/// Parses the sender address of `HOLDPOINT_EMAIL_FROM`.
pub fn parse_mailbox(text: &str) -> Result<Mailbox, EmailConfigError> {
    text.trim().parse().map_err(|_| EmailConfigError::From(text.to_owned()))
}

/// Sends messages through one SMTP server. Cheap to clone: clones share a pool of connections.
#[derive(Clone)]
pub struct EmailSender {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for EmailSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailSender").field("from", &self.from.to_string()).finish_non_exhaustive()
    }
}

impl EmailSender {
    /// A sender through the server of `url`, with `from` as the sender of every message. Connects only when the
    /// first message is sent. Call it inside the tokio runtime: the connection pool starts a task of its own.
    pub fn new(url: &SmtpUrl, from: Mailbox) -> Result<Self, EmailConfigError> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(&url.lettre_url)
            .map_err(|e| EmailConfigError::Transport { url: url.redacted.clone(), reason: e.to_string() })?
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        Ok(EmailSender { transport, from })
    }

    /// The sender of every message.
    pub fn from(&self) -> &Mailbox {
        &self.from
    }

    /// The message for `email` to `to`: multipart/alternative, text then HTML (a client shows the last part it
    /// can), marked as sent by a program so that vacation replies stay away (RFC 3834).
    pub fn message(&self, to: Mailbox, email: &RenderedEmail) -> Result<Message, String> {
        let domain = self.from.email.domain().to_owned();
        Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(email.subject.clone())
            .message_id(Some(format!("<{}@{domain}>", uuid::Uuid::now_v7())))
            .raw_header(HeaderValue::new(HeaderName::new_from_ascii_str("Auto-Submitted"), "auto-generated".to_owned()))
            .multipart(MultiPart::alternative_plain_html(email.text.clone(), email.html.clone()))
            .map_err(|e| format!("the message cannot be built: {e}"))
    }

    /// Sends `email` to `to`, and says how it went: a 5xx reply (a mailbox that does not exist, a message refused)
    /// is a failure that trying again would not mend; a 4xx reply, a timeout or a connection that fails is retried.
    pub async fn send(&self, to: Mailbox, email: &RenderedEmail) -> DeliveryOutcome {
        let message = match self.message(to, email) {
            Ok(message) => message,
            Err(reason) => return DeliveryOutcome::failed(reason),
        };
        match self.transport.send(message).await {
            Ok(_) => DeliveryOutcome::Sent { reference: None },
            Err(error) => classify(&error),
        }
    }
}

fn classify(error: &SmtpError) -> DeliveryOutcome {
    let reason = format!("SMTP: {error}");
    if error.is_permanent() || error.is_client() {
        DeliveryOutcome::failed(reason)
    } else {
        DeliveryOutcome::retry(reason, None)
    }
}

/// A question's subject as a delivery of `cause` says it: a reminder and an escalation say so first, so the second
/// message about a question is not mistaken for the first.
pub fn subject_for(cause: holdpoint_types::DeliveryCause, subject: &str) -> String {
    match cause {
        holdpoint_types::DeliveryCause::Asked => subject.to_owned(),
        holdpoint_types::DeliveryCause::Reminded => format!("Reminder: {subject}"),
        holdpoint_types::DeliveryCause::Escalated => format!("Escalated to you: {subject}"),
    }
}

/// A question as a message: subject and both bodies.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedEmail {
    pub subject: String,
    pub text: String,
    pub html: String,
}

/// What the kind of a question is called in a message.
fn kind_label(kind: QuestionKind) -> &'static str {
    match kind {
        QuestionKind::Blocking => "Question",
        QuestionKind::NonBlocking => "Question (the agent goes on meanwhile)",
        QuestionKind::Approval => "Approval",
        QuestionKind::ErrorRecovery => "Error recovery",
    }
}

/// The facts of a question shown above its links, as `(label, value)`.
fn facts(question: &Question) -> Vec<(&'static str, String)> {
    let mut facts = vec![("Urgency", question.urgency.to_string()), ("Kind", kind_label(question.kind).to_owned())];
    if let Some(deadline) = super::deadline_text(question) {
        facts.push(("Deadline", deadline));
    }
    if let Some(project) = &question.project {
        facts.push(("Project", project.clone()));
    }
    if let Some(run) = question.run_id {
        let mut lineage: Vec<String> = question.parent_run_ids.iter().map(Uuid::to_string).collect();
        lineage.push(run.to_string());
        facts.push(("Run", lineage.join(" → ")));
    }
    facts
}

/// Whether the question's context says anything (an empty object says nothing).
fn has_context(question: &Question) -> bool {
    !(question.context.is_null() || question.context.as_object().is_some_and(|o| o.is_empty()))
}

/// Renders `question` as a message with `links` (one per quick answer, already signed for the recipient) and
/// `open_url` (the question in Holdpoint). Every piece of the question's text is escaped in the HTML part; the
/// body's Markdown is rendered by the same renderer as the web UI's.
pub fn render_question(question: &Question, links: &[ActionLink], open_url: &str) -> RenderedEmail {
    let urgency_tag = question.urgency.as_str().to_uppercase();
    let subject = format!("[{urgency_tag}] {}: {}", kind_label(question.kind), question.title);
    let action = question.action.as_ref().filter(|_| question.response_type == ResponseType::Approval);
    RenderedEmail {
        subject,
        text: render_text(question, action, links, open_url),
        html: render_html(question, action, links, open_url),
    }
}

fn render_text(
    question: &Question,
    action: Option<&holdpoint_types::ApprovalAction>,
    links: &[ActionLink],
    open_url: &str,
) -> String {
    let mut out = String::new();
    out.push_str(&question.title);
    out.push_str("\n\n");
    for (label, value) in facts(question) {
        out.push_str(&format!("{label}: {value}\n"));
    }
    if !question.body.trim().is_empty() {
        out.push('\n');
        out.push_str(question.body.trim_end());
        out.push('\n');
    }
    if let Some(action) = action {
        out.push_str(&format!("\nTool: {}\nArguments:\n", action.tool_name));
        for line in super::pretty_arguments(&action.arguments).lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    }
    if has_context(question) {
        out.push_str("\nContext:\n");
        for line in super::pretty_arguments(&question.context).lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
    }
    // Where one click answers, the links say what the answers are.
    let asked = if links.is_empty() { super::asked::asked(question) } else { Vec::new() };
    if !asked.is_empty() {
        out.push_str(&format!("\n{}\n", asked_heading(question)));
        for line in super::asked::asked_lines(&asked) {
            out.push_str("  ");
            out.push_str(&line);
            out.push('\n');
        }
    }
    if !links.is_empty() {
        out.push_str("\nAnswer with one click (you will be asked to confirm):\n");
        for link in links {
            out.push_str(&format!("  {}: {}\n", link.answer.label, link.url));
        }
    }
    out.push_str(&format!("\n{}: {open_url}\n", open_label(question, links)));
    out
}

/// What the summary of what is asked is headed with.
fn asked_heading(question: &Question) -> &'static str {
    if question.response_type == ResponseType::Form { "What is asked:" } else { "The answer is:" }
}

/// The link to the question says what it is for: answering, when the message itself offers no way to; else opening.
fn open_label(question: &Question, links: &[ActionLink]) -> &'static str {
    if links.is_empty() && question.status == holdpoint_types::QuestionStatus::Pending {
        "Answer in Holdpoint"
    } else {
        "Open in Holdpoint"
    }
}

/// `text` as the content of an element.
fn escape(text: &str) -> String {
    html_escape::encode_text(text).into_owned()
}

/// `text` as the value of an attribute in double quotes.
fn escape_attribute(text: &str) -> String {
    html_escape::encode_double_quoted_attribute(text).into_owned()
}

fn render_html(
    question: &Question,
    action: Option<&holdpoint_types::ApprovalAction>,
    links: &[ActionLink],
    open_url: &str,
) -> String {
    use super::AnswerStyle;
    // Mail clients drop <style> blocks and external sheets: what styling there is goes inline.
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head>\
         <body style=\"font-family:-apple-system,'Segoe UI',Roboto,sans-serif;color:#1a1a1a;line-height:1.45\">\n",
    );
    out.push_str(&format!("<h2 style=\"margin:0 0 12px\">{}</h2>\n", escape(&question.title)));
    out.push_str("<table style=\"border-collapse:collapse;margin-bottom:12px\">\n");
    for (label, value) in facts(question) {
        out.push_str(&format!(
            "<tr><th style=\"text-align:left;padding:2px 12px 2px 0;color:#555\">{}</th><td>{}</td></tr>\n",
            escape(label),
            escape(&value)
        ));
    }
    out.push_str("</table>\n");
    if !question.body.trim().is_empty() {
        out.push_str(&format!("<div>{}</div>\n", holdpoint_types::markdown::to_html(&question.body)));
    }
    let pre = "background:#f4f4f5;padding:8px;border-radius:4px;white-space:pre-wrap;font-size:13px";
    if let Some(action) = action {
        out.push_str(&format!(
            "<p style=\"margin-bottom:4px\">Tool <code>{}</code> with the arguments:</p>\n\
             <pre style=\"{pre}\">{}</pre>\n",
            escape(&action.tool_name),
            escape(&super::pretty_arguments(&action.arguments))
        ));
    }
    if has_context(question) {
        out.push_str(&format!(
            "<p style=\"margin-bottom:4px\">Context:</p>\n<pre style=\"{pre}\">{}</pre>\n",
            escape(&super::pretty_arguments(&question.context))
        ));
    }
    // Where one click answers, the links say what the answers are.
    let asked = if links.is_empty() { super::asked::asked(question) } else { Vec::new() };
    if !asked.is_empty() {
        out.push_str(&format!("<p style=\"margin-bottom:4px\">{}</p>\n<ul>\n", escape(asked_heading(question))));
        for item in &asked {
            let required = if item.required && item.label.is_some() { " (required)" } else { "" };
            out.push_str("<li>");
            if let Some(label) = &item.label {
                out.push_str(&format!("<strong>{}</strong>{required}: ", escape(label)));
            }
            out.push_str(&escape(&item.kind));
            if let Some(description) = item.description.as_deref().filter(|d| !d.trim().is_empty()) {
                out.push_str(&format!("<br><span style=\"color:#555\">{}</span>", escape(description.trim())));
            }
            if !item.columns.is_empty() {
                out.push_str("<br>with the columns:<ul>");
                for column in &item.columns {
                    out.push_str(&format!("<li>{}</li>", escape(column)));
                }
                out.push_str("</ul>");
            }
            out.push_str("</li>\n");
        }
        out.push_str("</ul>\n");
    }
    if !links.is_empty() {
        out.push_str("<p>");
        for link in links {
            let colour = match link.answer.style {
                AnswerStyle::Primary => "background:#1f6feb;color:#ffffff",
                AnswerStyle::Danger => "background:#cf222e;color:#ffffff",
                AnswerStyle::Plain => "background:#eaeef2;color:#1a1a1a",
            };
            out.push_str(&format!(
                "<a href=\"{}\" style=\"{colour};padding:8px 16px;border-radius:6px;text-decoration:none;\
                 display:inline-block;margin:0 8px 8px 0\">{}</a>\n",
                escape_attribute(&link.url),
                escape(&link.answer.label)
            ));
        }
        out.push_str(
            "</p>\n<p style=\"color:#555;font-size:13px\">Each link asks you to confirm before it answers.</p>\n",
        );
    }
    out.push_str(&format!("<p><a href=\"{}\">{}</a></p>\n", escape_attribute(open_url), open_label(question, links)));
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_questions::*;
    use crate::{EMAIL_MAX_CHOICES, quick_answers};

    fn links(question: &Question) -> Vec<ActionLink> {
        quick_answers(question, EMAIL_MAX_CHOICES)
            .into_iter()
            .enumerate()
            .map(|(i, answer)| ActionLink {
                answer,
                url: format!("https://hp.example.com/act/token-{i}?a=1&b=2"),
                id: Uuid::now_v7(),
            })
            .collect()
    }

    #[test]
    fn an_smtp_url_means_starttls_required_unless_it_says_otherwise() {
        let plain: SmtpUrl = "smtp://relay.example.com".parse().unwrap();
        assert_eq!(plain.lettre_url, "smtp://relay.example.com?tls=required");
        let opportunistic: SmtpUrl = "smtp://relay.example.com:25?tls=opportunistic".parse().unwrap();
        assert_eq!(opportunistic.lettre_url, "smtp://relay.example.com:25?tls=opportunistic");
        let clear: SmtpUrl = "smtp://127.0.0.1:2525?tls=none".parse().unwrap();
        assert_eq!(clear.lettre_url, "smtp://127.0.0.1:2525");
        let implicit: SmtpUrl = "smtps://u:p@smtp.example.com:465".parse().unwrap();
        assert_eq!(implicit.lettre_url, "smtps://u:p@smtp.example.com:465");
    }

    #[test]
    fn an_smtp_url_of_another_kind_is_refused_with_the_reason() {
        for (url, says) in [
            ("http://smtp.example.com", "smtp:// or smtps://"),
            ("smtp://smtp.example.com?tls=maybe", "tls=maybe"),
            ("smtps://smtp.example.com?tls=none", "always uses TLS"),
            ("smtp://smtp.example.com?timeout=5", "only the `tls` parameter"),
            ("smtp:///nohost", "no host"),
            ("not a url", "not a URL"),
        ] {
            let error = url.parse::<SmtpUrl>().unwrap_err();
            assert!(error.contains(says), "{url}: {error}");
        }
    }

    #[test]
    fn an_smtp_urls_password_never_shows_in_debug() {
        let url: SmtpUrl = "smtp://mailer:s3cret-pass@smtp.example.com:587?tls=required".parse().unwrap();
        let debug = format!("{url:?}");
        assert!(!debug.contains("s3cret-pass"), "{debug}");
        assert_eq!(debug, "smtp://mailer:[redacted]@smtp.example.com:587?tls=required");
    }

    #[test]
    fn a_sender_address_is_checked() {
        assert_eq!(parse_mailbox("Holdpoint <hp@example.com>").unwrap().email.to_string(), "hp@example.com");
        assert!(parse_mailbox("not an address").is_err());
    }

    #[test]
    fn an_approval_reads_in_plain_text_with_its_arguments_and_links() {
        let question = approval();
        let email = render_question(&question, &links(&question), "https://hp.example.com/questions/1");
        assert_eq!(email.subject, "[HIGH] Approval: Run <rm -rf /tmp/build> & clean?");
        let text = &email.text;
        for expected in [
            "Urgency: high\n",
            "Kind: Approval\n",
            "Deadline: 2026-11-27 14:05 UTC (then it expires)\n",
            "Project: infra\n",
            "Tool: shell\n",
            "    {\n      \"command\": \"rm -rf /tmp/build && echo '<done>'\"\n    }\n",
            "  Approve: https://hp.example.com/act/token-0?a=1&b=2\n",
            "  Reject: https://hp.example.com/act/token-1?a=1&b=2\n",
            "Open in Holdpoint: https://hp.example.com/questions/1\n",
            "\"host\": \"build-1\"",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
        }
        assert!(!text.contains("&amp;") && !text.contains("&lt;"), "the text part is not escaped: {text}");
    }

    #[test]
    fn the_html_part_escapes_every_piece_of_the_question() {
        let question = approval();
        let email = render_question(&question, &links(&question), "https://hp.example.com/questions/1");
        let html = &email.html;
        assert!(html.contains("Run &lt;rm -rf /tmp/build&gt; &amp; clean?"), "{html}");
        assert!(html.contains("echo '&lt;done&gt;'"), "{html}");
        assert!(html.contains("<strong>clean</strong>"), "the body's Markdown is rendered: {html}");
        assert!(html.contains("href=\"https://hp.example.com/act/token-0?a=1&amp;b=2\""), "{html}");
        assert!(!html.contains("<rm") && !html.contains("<done>"), "{html}");
    }

    #[test]
    fn a_body_with_markup_cannot_add_markup_to_the_message() {
        let question = Question { body: "<script>alert(1)</script> <img src=x onerror=y>".into(), ..approval() };
        let email = render_question(&question, &[], "https://hp.example.com/questions/1");
        assert!(!email.html.contains("<script") && !email.html.contains("<img"), "{}", email.html);
    }

    #[test]
    fn a_text_question_has_no_answer_links_and_is_answered_in_holdpoint() {
        let question = text();
        let email = render_question(&question, &links(&question), "https://hp.example.com/questions/9");
        assert!(!email.text.contains("one click"), "{}", email.text);
        assert!(!email.text.contains("Tool:"), "{}", email.text);
        assert!(email.text.contains("Answer in Holdpoint: https://hp.example.com/questions/9"), "{}", email.text);
        assert_eq!(email.subject, "[NORMAL] Question: What should the release be called?");
    }

    #[test]
    fn a_form_of_rich_fields_says_what_is_asked_and_is_answered_in_holdpoint() {
        let question = rich_form();
        assert!(links(&question).is_empty(), "a form has no one-click answer");
        let email = render_question(&question, &[], "https://hp.example.com/questions/7");
        for expected in [
            "What is asked:\n  - Nodes (required): a whole number from 1 to 9, in steps of 2\n      Worker nodes\n",
            "  - Disks: a table of 1 to 4 rows\n      with the columns:\n        Size (GiB): a whole number, required\n",
            "  - Plan: a file (application/pdf, image/*), up to 5 MiB\n",
            "\nAnswer in Holdpoint: https://hp.example.com/questions/7\n",
        ] {
            assert!(email.text.contains(expected), "{expected:?} missing from:\n{}", email.text);
        }
        assert!(!email.text.contains("one click"), "{}", email.text);
        let html = &email.html;
        assert!(
            html.contains("<li><strong>Nodes</strong> (required): a whole number from 1 to 9, in steps of 2"),
            "{html}"
        );
        assert!(html.contains("<li>Size (GiB): a whole number, required</li>"), "{html}");
        assert!(html.contains(">Answer in Holdpoint</a>"), "{html}");
    }

    #[test]
    fn a_rich_single_value_question_says_what_the_answer_is() {
        let question = Question {
            response_type: ResponseType::Rating,
            rules: holdpoint_types::FieldRules { max: Some(7.into()), ..Default::default() },
            ..text()
        };
        let email = render_question(&question, &links(&question), "https://hp.example.com/questions/2");
        assert!(email.text.contains("The answer is:\n  - A rating of 1 to 7 stars\n"), "{}", email.text);
        assert!(email.text.contains("Answer in Holdpoint: "), "{}", email.text);
    }

    #[test]
    fn a_choice_links_each_option_by_its_label() {
        let question = choice(3);
        let email = render_question(&question, &links(&question), "https://hp.example.com/questions/1");
        assert!(email.text.contains("  Region <1>: https://hp.example.com/act/token-1?a=1&b=2\n"), "{}", email.text);
        assert!(email.html.contains(">Region &lt;1&gt;</a>"), "{}", email.html);
    }
}
