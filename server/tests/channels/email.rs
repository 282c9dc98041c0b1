//! Email to a real SMTP server: aiosmtpd on loopback, which parses each message it accepts with Python's own MIME
//! and HTML parsers and reports what it found.

use app::types::Question;
use chrono::Utc;
use holdpoint::channels::action_links::{ActionLinkKey, links_for};
use holdpoint::channels::email::{EmailSender, Mailbox, RenderedEmail, SmtpUrl, render_question};
use holdpoint::channels::{Channel, DeliveryOutcome, EMAIL_MAX_CHOICES};
use uuid::Uuid;

use super::smtp::Sink;

fn sender(sink: &Sink) -> EmailSender {
    let url: SmtpUrl = sink.url().parse().unwrap();
    EmailSender::new(&url, "Holdpoint <holdpoint@example.com>".parse().unwrap()).unwrap()
}

fn question() -> Question {
    let mut question: Question = serde_json::from_value(serde_json::json!({
        "id": Uuid::now_v7(),
        "workspace": "default",
        "project": "infra",
        "run_id": Uuid::now_v7(),
        "tool_call_id": "call_1",
        "parent_run_ids": [],
        "kind": "approval",
        "response_type": "approval",
        "title": "Run <rm -rf /tmp/build> & clean? — ünïcode",
        "body": "The agent wants to **clean** the build.\n\n<script>alert(1)</script>",
        "options": [],
        "fields": [],
        "action": {"tool_name": "shell", "arguments": {"command": "rm -rf /tmp/build && echo '<done>'"}},
        "allow_edit": false,
        "context": {"host": "build-1"},
        "urgency": "high",
        "timeout_at": "2099-01-01T00:00:00Z",
        "default_response": null,
        "status": "pending",
        "response": null,
        "answered_by": null,
        "resolution": null,
        "created_at": "2026-11-27T12:00:00Z",
        "updated_at": "2026-11-27T12:00:00Z",
        "resolved_at": null
    }))
    .unwrap();
    question.timeout_at = Some(Utc::now() + chrono::Duration::minutes(15));
    question
}

#[tokio::test]
async fn an_approval_arrives_with_a_text_and_an_html_part_and_working_links() {
    let mut sink = Sink::start().await;
    let key = ActionLinkKey::generate();
    let question = question();
    let recipient = Uuid::now_v7();
    let public_url = "https://hp.example.com";
    let links = links_for(&key, &question, recipient, Channel::Email, EMAIL_MAX_CHOICES, public_url, Utc::now());
    let open_url = format!("{public_url}/questions/{}?from=email&channel=1", question.id);
    let email = render_question(&question, &links, &open_url);
    let to: Mailbox = "Alice Example <alice@example.com>".parse().unwrap();

    let outcome = sender(&sink).send(to, &email).await;
    assert_eq!(outcome, DeliveryOutcome::Sent { reference: None });

    let got = sink.next_message().await;
    assert_eq!(got["mail_from"], "holdpoint@example.com");
    assert_eq!(got["rcpt_tos"], serde_json::json!(["alice@example.com"]));
    assert_eq!(got["subject"], format!("[HIGH] Approval: {}", question.title));
    assert_eq!(got["to"], "Alice Example <alice@example.com>");
    assert_eq!(got["auto_submitted"], "auto-generated");
    assert!(got["message_id"].as_str().unwrap().ends_with("@example.com>"), "{got}");
    assert_eq!(got["content_type"], "multipart/alternative");
    let parts = got["parts"].as_array().unwrap();
    let types: Vec<&str> = parts.iter().map(|p| p["content_type"].as_str().unwrap()).collect();
    assert_eq!(types, ["text/plain", "text/html"], "plain text first: clients show the last part they can");

    // The text part: what a plain-text client shows, exactly as rendered, links included.
    let text = parts[0]["content"].as_str().unwrap().replace("\r\n", "\n");
    assert_eq!(text, email.text);
    for link in &links {
        assert!(text.contains(&format!("  {}: {}\n", link.answer.label, link.url)), "{text}");
    }
    assert!(text.contains(&format!("Open in Holdpoint: {open_url}")), "{text}");
    assert!(text.contains("    {\n      \"command\": \"rm -rf /tmp/build && echo '<done>'\"\n    }"), "{text}");

    // The HTML part, as an HTML parser reads it: the links lead exactly where they should, the question's text comes
    // back as written, and nothing in the question became markup.
    let html = &parts[1];
    let hrefs: Vec<(&str, &str)> = html["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["href"].as_str().unwrap(), l["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        hrefs,
        [
            (links[0].url.as_str(), "Approve"),
            (links[1].url.as_str(), "Reject"),
            (open_url.as_str(), "Open in Holdpoint")
        ]
    );
    let shown = html["text"].as_str().unwrap();
    assert!(shown.contains(&question.title), "{shown}");
    assert!(shown.contains("<script>alert(1)</script>"), "the body's markup is shown as text: {shown}");
    assert!(shown.contains("echo '<done>'"), "{shown}");
    let tags: Vec<&str> = html["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert!(!tags.contains(&"script"), "{tags:?}");
    assert!(tags.contains(&"strong"), "the body's Markdown is rendered: {tags:?}");

    // Each link's token is what it says: this question, this recipient, its value, through email.
    for link in &links {
        let token = link.url.rsplit('/').next().unwrap();
        let claims = key.verify(token, Utc::now()).unwrap();
        assert_eq!((claims.question_id, claims.recipient_id, claims.channel), (question.id, recipient, Channel::Email));
        assert_eq!(claims.value, link.answer.value);
    }
}

#[tokio::test]
async fn a_refused_mailbox_fails_for_good_and_a_busy_one_is_retried() {
    let sink = Sink::start().await;
    let email = RenderedEmail { subject: "s".into(), text: "t".into(), html: "<p>t</p>".into() };
    let sender = sender(&sink);
    let outcome = sender.send("unknown@example.com".parse().unwrap(), &email).await;
    assert!(
        matches!(&outcome, DeliveryOutcome::Failed { reason, address_gone: false } if reason.contains("550")),
        "{outcome:?}"
    );
    let outcome = sender.send("busy@example.com".parse().unwrap(), &email).await;
    assert!(matches!(&outcome, DeliveryOutcome::Retry { reason, .. } if reason.contains("451")), "{outcome:?}");
}

#[tokio::test]
async fn an_smtp_server_that_is_down_is_retried_and_one_that_comes_up_gets_the_message() {
    // A port nothing listens on: bound, then freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url: SmtpUrl = format!("smtp://127.0.0.1:{port}?tls=none").parse().unwrap();
    let down = EmailSender::new(&url, "holdpoint@example.com".parse().unwrap()).unwrap();
    let email = RenderedEmail { subject: "s".into(), text: "t".into(), html: "<p>t</p>".into() };
    let outcome = down.send("alice@example.com".parse().unwrap(), &email).await;
    assert!(matches!(outcome, DeliveryOutcome::Retry { .. }), "{outcome:?}");

    let mut sink = Sink::start().await;
    let outcome = sender(&sink).send("alice@example.com".parse().unwrap(), &email).await;
    assert_eq!(outcome, DeliveryOutcome::Sent { reference: None });
    assert_eq!(sink.next_message().await["subject"], "s");
}

#[tokio::test]
async fn starttls_is_required_by_default_so_a_server_without_it_gets_nothing() {
    // aiosmtpd here offers no STARTTLS: a bare smtp:// URL must not fall back to sending in the clear.
    let sink = Sink::start().await;
    let url: SmtpUrl = format!("smtp://127.0.0.1:{}", sink.port).parse().unwrap();
    let sender = EmailSender::new(&url, "holdpoint@example.com".parse().unwrap()).unwrap();
    let email = RenderedEmail { subject: "s".into(), text: "t".into(), html: "<p>t</p>".into() };
    let outcome = sender.send("alice@example.com".parse().unwrap(), &email).await;
    // Retrying would not help either: the server (or whoever sits between) has to offer STARTTLS first.
    assert!(matches!(&outcome, DeliveryOutcome::Failed { reason, .. } if reason.contains("STARTTLS")), "{outcome:?}");
}
