//! Prometheus metrics, served as text at `/metrics`.
//!
//! Counters are per instance (Prometheus sums them across instances); the pending gauge is read from the database
//! at scrape time, so every instance reports the true number whoever created the questions.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::store::{Store, StoreResult};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResolvedLabels {
    kind: String,
    /// The final status: answered, defaulted, expired, cancelled.
    status: String,
}

/// Every label of every metric takes its values from a closed set, so that no client can add series: kinds and
/// statuses are the domain's enums, methods are the standard ones (anything else is `other`), routes are patterns.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    /// A standard method's name, or `other`: a method is any token a client cares to send.
    method: &'static str,
    /// The matched route pattern (`/api/v1/questions/{id}`), never the raw path, to keep cardinality bounded.
    route: String,
    status: u16,
}

/// The `method` label of `method`.
fn method_label(method: &axum::http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        "OPTIONS" => "OPTIONS",
        "CONNECT" => "CONNECT",
        "TRACE" => "TRACE",
        _ => "other",
    }
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric Holdpoint exports.
pub struct Metrics {
    registry: Registry,
    questions_created: Family<KindLabel, Counter>,
    questions_resolved: Family<ResolvedLabels, Counter>,
    questions_timed_out: Family<ResolvedLabels, Counter>,
    time_to_answer: HistogramFamily<KindLabel>,
    questions_pending: Family<KindLabel, Gauge>,
    sse_subscribers: Gauge,
    http_latency: HistogramFamily<HttpLabels>,
    run_transitions: Family<RunStatusLabel, Counter>,
    run_claim_attempts: Family<ClaimOutcomeLabel, Counter>,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClaimOutcomeLabel {
    /// `claimed`, `none` (no run was queued) or `error`.
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunStatusLabel {
    status: String,
}

fn time_to_answer_histogram() -> Histogram {
    // 1 s .. ~36 h: people answer in seconds when the modal is open and in hours from the inbox.
    Histogram::new(exponential_buckets(1.0, 2.0, 18))
}

fn http_latency_histogram() -> Histogram {
    // 0.25 ms .. ~8 s.
    Histogram::new(exponential_buckets(0.000_25, 2.0, 16))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("holdpoint");
        let questions_created = Family::<KindLabel, Counter>::default();
        registry.register("questions_created", "Questions created, by kind", questions_created.clone());
        let run_transitions = Family::<RunStatusLabel, Counter>::default();
        registry.register(
            "run_transitions",
            "Runs leaving a worker, by the status they left in (waiting, paused, completed, failed)",
            run_transitions.clone(),
        );
        let run_claim_attempts = Family::<ClaimOutcomeLabel, Counter>::default();
        registry.register(
            "run_claim_attempts",
            "Times this instance's workers looked for a queued run to execute, by outcome (claimed, none, error)",
            run_claim_attempts.clone(),
        );
        let questions_resolved = Family::<ResolvedLabels, Counter>::default();
        registry.register(
            "questions_resolved",
            "Questions resolved, by kind and final status",
            questions_resolved.clone(),
        );
        let questions_timed_out = Family::<ResolvedLabels, Counter>::default();
        registry.register(
            "questions_timed_out",
            "Questions whose deadline passed (status defaulted or expired); rate() of it is the timeout rate",
            questions_timed_out.clone(),
        );
        let time_to_answer: HistogramFamily<KindLabel> = Family::new_with_constructor(time_to_answer_histogram);
        registry.register(
            "question_time_to_answer_seconds",
            "Time from a question's creation to a person's answer, by kind",
            time_to_answer.clone(),
        );
        let questions_pending = Family::<KindLabel, Gauge>::default();
        registry.register("questions_pending", "Questions waiting for a person, by kind", questions_pending.clone());
        let sse_subscribers = Gauge::default();
        registry.register("sse_subscribers", "Open event-stream connections on this instance", sse_subscribers.clone());
        let http_latency: HistogramFamily<HttpLabels> = Family::new_with_constructor(http_latency_histogram);
        registry.register(
            "http_request_duration_seconds",
            "HTTP request latency, by method, route and status",
            http_latency.clone(),
        );
        Metrics {
            run_transitions,
            run_claim_attempts,
            registry,
            questions_created,
            questions_resolved,
            questions_timed_out,
            time_to_answer,
            questions_pending,
            sse_subscribers,
            http_latency,
        }
    }

    /// Counts a run leaving its worker in `status`.
    pub fn run_transition(&self, status: &str) {
        self.run_transitions.get_or_create(&RunStatusLabel { status: status.to_owned() }).inc();
    }

    /// Counts a worker's attempt to claim a queued run; `outcome` is `claimed`, `none` or `error`.
    pub fn run_claim_attempt(&self, outcome: &str) {
        self.run_claim_attempts.get_or_create(&ClaimOutcomeLabel { outcome: outcome.to_owned() }).inc();
    }

    pub fn question_created(&self, kind: &str) {
        self.questions_created.get_or_create(&KindLabel { kind: kind.to_owned() }).inc();
    }

    /// Records a transition out of `pending`; `waited` is how long the question was pending.
    pub fn question_resolved(&self, kind: &str, status: &str, waited: Duration) {
        let labels = ResolvedLabels { kind: kind.to_owned(), status: status.to_owned() };
        self.questions_resolved.get_or_create(&labels).inc();
        match status {
            "answered" => {
                self.time_to_answer.get_or_create(&KindLabel { kind: kind.to_owned() }).observe(waited.as_secs_f64())
            }
            "defaulted" | "expired" => {
                self.questions_timed_out.get_or_create(&labels).inc();
            }
            _ => {}
        }
    }

    /// Counts an open SSE connection until the returned guard drops.
    pub fn sse_subscriber(&self) -> SubscriberGuard {
        self.sse_subscribers.inc();
        SubscriberGuard(self.sse_subscribers.clone())
    }

    /// Observes one request's latency; `route` must be a route pattern (or a fixed word), never a raw path.
    pub fn http_request(&self, method: &axum::http::Method, route: &str, status: u16, elapsed: Duration) {
        let labels = HttpLabels { method: method_label(method), route: route.to_owned(), status };
        self.http_latency.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }

    /// The text exposition, with the pending gauge read from the database now.
    pub async fn render(&self, store: &dyn Store) -> StoreResult<String> {
        self.questions_pending.clear();
        for (kind, count) in store.pending_counts().await? {
            self.questions_pending.get_or_create(&KindLabel { kind }).set(count);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        Ok(text)
    }
}

/// Decrements the subscriber gauge when the connection ends.
pub struct SubscriberGuard(Gauge);

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    #[test]
    fn standard_methods_are_labelled_by_name_and_any_other_as_other() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        assert_eq!(method_label(&Method::from_bytes(b"PROPFIND").unwrap()), "other");
        assert_eq!(method_label(&Method::from_bytes(b"get").unwrap()), "other");
    }
}
