//! Prometheus metrics, served at `/metrics` in the format the scraper asks for: OpenMetrics to a client whose
//! `Accept` names `application/openmetrics-text`, the classic Prometheus text format (0.0.4) to every other.
//!
//! Counters are per instance (Prometheus sums them across instances); the pending gauge is read from the database
//! at scrape time, so every instance reports the true number whoever created the questions. The process's own
//! figures (memory, CPU, open files) are read from `/proc` at scrape time where there is one.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::store::{Store, StoreResult};

/// The formats `/metrics` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0: counters' samples end in `_total`, the family does not; `# EOF` closes it.
    OpenMetrics,
    /// Prometheus' classic text format: a counter's family is named like its samples, and there is no `# EOF`.
    Classic,
}

impl Exposition {
    /// The format an `Accept` header asks for: OpenMetrics only when it says so.
    pub fn negotiate(accept: Option<&str>) -> Self {
        match accept {
            Some(accept) if accept.contains("application/openmetrics-text") => Exposition::OpenMetrics,
            _ => Exposition::Classic,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Classic => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// The classic text format of an OpenMetrics exposition: counters' `# HELP` and `# TYPE` lines name the family as
/// its samples are named (`_total`), `# UNIT` lines (classic has none) and `# EOF` go. Gauges and histograms read
/// the same in both.
fn classic_from_open_metrics(text: &str) -> String {
    let counters: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters.contains(name).then(|| format!("{prefix}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelCallLabels {
    /// `ok`, `unavailable` (an outage past the retry window: the run paused) or `failed`.
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelRetryLabels {
    /// Why the attempt failed: `rate_limited` (429), `server_error` (5xx, 408) or `network` (no answer in time, or
    /// none that could be read).
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelTokenLabels {
    /// `prompt` or `completion`, as the provider counted them.
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    /// `sent`, `retried` or `failed`.
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GatewayCallLabels {
    /// The upstream's name (admins register a bounded number of them).
    upstream: String,
    /// What the rules decided: `allow`, `ask` or `deny`.
    decision: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabels {
    /// `email`, `slack` or `push`.
    channel: &'static str,
    /// `sent`, `retried` or `failed`.
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryChannelLabel {
    channel: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolCallLabels {
    /// A built-in tool that runs (`http_request`, `shell`), or `other`.
    tool: &'static str,
    /// `completed` or `error`.
    status: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleMatchLabels {
    /// A rule's name: the workspace admins' document bounds the values.
    rule: String,
    /// `enforce` or `dry_run`.
    mode: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

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
    model_calls: HistogramFamily<ModelCallLabels>,
    model_retries: Family<ModelRetryLabels, Counter>,
    model_tokens: Family<ModelTokenLabels, Counter>,
    tool_calls: HistogramFamily<ToolCallLabels>,
    deliveries: Family<DeliveryLabels, Counter>,
    delivery_latency: HistogramFamily<DeliveryChannelLabel>,
    webhook_attempts: Family<WebhookLabels, Counter>,
    webhook_latency: Histogram,
    gateway_calls: Family<GatewayCallLabels, Counter>,
    gateway_upstream_duration: HistogramFamily<UpstreamLabel>,
    rule_matches: Family<RuleMatchLabels, Counter>,
    process: ProcessFigures,
}

fn model_call_histogram() -> Histogram {
    // 50 ms .. ~27 min: a model answers in seconds, and a call retrying through an outage lasts up to its window.
    Histogram::new(exponential_buckets(0.05, 2.0, 16))
}

fn delivery_latency_histogram() -> Histogram {
    // 10 ms to about 45 hours: a notification sent at once, or after retries for up to a day.
    Histogram::new(exponential_buckets(0.01, 2.0, 24))
}

fn tool_call_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The process's own resources, named as Prometheus' client libraries name them (behind Holdpoint's prefix), set at
/// each scrape.
#[derive(Default)]
struct ProcessFigures {
    resident_memory_bytes: Gauge,
    virtual_memory_bytes: Gauge,
    open_fds: Gauge,
    cpu_seconds: prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
    start_time_seconds: Gauge,
}

impl ProcessFigures {
    fn register(&self, registry: &mut Registry) {
        registry.register("process_resident_memory_bytes", "Resident memory", self.resident_memory_bytes.clone());
        registry.register("process_virtual_memory_bytes", "Virtual memory", self.virtual_memory_bytes.clone());
        registry.register("process_open_fds", "Open file descriptors (sockets included)", self.open_fds.clone());
        registry.register("process_cpu_seconds", "User and system CPU time spent", self.cpu_seconds.clone());
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch",
            self.start_time_seconds.clone(),
        );
    }

    /// Reads `/proc/self`; leaves the figures as they are where it cannot (another system, a restricted `/proc`).
    fn refresh(&self) {
        let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return };
        // The fields after the command name, which is in parentheses and may hold spaces.
        let Some((_, after)) = stat.rsplit_once(") ") else { return };
        let fields: Vec<&str> = after.split_whitespace().collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        // Linux's USER_HZ, the unit of utime and stime, is 100 on every architecture it runs on.
        const TICKS_PER_SECOND: f64 = 100.0;
        if let (Some(utime), Some(stime)) = (number(11), number(12)) {
            self.cpu_seconds.set((utime + stime) as f64 / TICKS_PER_SECOND);
        }
        if let Some(bytes) = number(20) {
            self.virtual_memory_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        if let Some(pages) = number(21) {
            // 4 KiB pages, the size on the platforms Holdpoint is built for.
            self.resident_memory_bytes.set(i64::try_from(pages * 4096).unwrap_or(i64::MAX));
        }
        if let (Some(started), Ok(uptime)) = (number(19), std::fs::read_to_string("/proc/uptime")) {
            let since_boot = uptime.split_whitespace().next().and_then(|u| u.parse::<f64>().ok());
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            if let Some(since_boot) = since_boot {
                let boot = now.as_secs_f64() - since_boot;
                self.start_time_seconds.set((boot + started as f64 / TICKS_PER_SECOND) as i64);
            }
        }
        if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(i64::try_from(entries.count()).unwrap_or(i64::MAX));
        }
    }
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
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION") }).set(1);
        registry.register("build_info", "The running build: always 1, with the version as a label", build_info);
        let process = ProcessFigures::default();
        process.register(&mut registry);
        let model_calls: HistogramFamily<ModelCallLabels> = Family::new_with_constructor(model_call_histogram);
        registry.register(
            "model_call_duration_seconds",
            "Model calls of the runs this instance executes, retries included, by outcome (ok, unavailable, failed)",
            model_calls.clone(),
        );
        let model_retries = Family::<ModelRetryLabels, Counter>::default();
        registry.register(
            "model_call_retries",
            "Failed model attempts that were retried, by reason (rate_limited, server_error, network)",
            model_retries.clone(),
        );
        let model_tokens = Family::<ModelTokenLabels, Counter>::default();
        registry.register(
            "model_tokens",
            "Tokens the model providers reported for the runs' calls, by kind (prompt, completion)",
            model_tokens.clone(),
        );
        let tool_calls: HistogramFamily<ToolCallLabels> = Family::new_with_constructor(tool_call_histogram);
        registry.register(
            "tool_call_duration_seconds",
            "Tool calls this instance ran, by tool and status (completed, error)",
            tool_calls.clone(),
        );
        let deliveries = Family::<DeliveryLabels, Counter>::default();
        registry.register(
            "deliveries",
            "Attempts of the outbox to deliver a notification, by channel and outcome (sent, retried, failed)",
            deliveries.clone(),
        );
        let delivery_latency: HistogramFamily<DeliveryChannelLabel> =
            Family::new_with_constructor(delivery_latency_histogram);
        registry.register(
            "delivery_latency_seconds",
            "From a question being asked to its notification being sent, by channel",
            delivery_latency.clone(),
        );
        let webhook_attempts = Family::<WebhookLabels, Counter>::default();
        registry.register(
            "webhook_attempts",
            "Attempts to deliver an event to a webhook or callback URL, by outcome (sent, retried, failed)",
            webhook_attempts.clone(),
        );
        let webhook_latency = delivery_latency_histogram();
        registry.register(
            "webhook_latency_seconds",
            "From an event being queued for an endpoint to the endpoint taking it",
            webhook_latency.clone(),
        );
        let gateway_calls = Family::<GatewayCallLabels, Counter>::default();
        registry.register(
            "gateway_calls",
            "Tool calls through the MCP gateway, by upstream and the rules' decision (allow, ask, deny)",
            gateway_calls.clone(),
        );
        let gateway_upstream_duration: HistogramFamily<UpstreamLabel> =
            Family::new_with_constructor(tool_call_histogram);
        registry.register(
            "gateway_upstream_duration_seconds",
            "Time upstream MCP servers took to answer the calls the gateway forwarded, by upstream",
            gateway_upstream_duration.clone(),
        );
        let rule_matches = Family::<RuleMatchLabels, Counter>::default();
        registry.register(
            "rule_matches",
            "Calls an approval rule matched, by rule and mode (enforce, dry_run)",
            rule_matches.clone(),
        );
        Metrics {
            gateway_calls,
            gateway_upstream_duration,
            rule_matches,
            deliveries,
            delivery_latency,
            webhook_attempts,
            webhook_latency,
            model_calls,
            model_retries,
            model_tokens,
            tool_calls,
            process,
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

    /// Counts a call approval rule `rule` matched; `mode` is `enforce` or `dry_run`.
    pub fn rule_matched(&self, rule: &str, mode: &'static str) {
        self.rule_matches.get_or_create(&RuleMatchLabels { rule: rule.to_owned(), mode }).inc();
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

    /// Observes one model call of a run; `outcome` is `ok`, `unavailable` or `failed`.
    pub fn model_call(&self, outcome: &'static str, elapsed: Duration) {
        self.model_calls.get_or_create(&ModelCallLabels { outcome }).observe(elapsed.as_secs_f64());
    }

    /// Counts a failed model attempt that is retried; `reason` is `rate_limited`, `server_error` or `network`.
    pub fn model_retry(&self, reason: &'static str) {
        self.model_retries.get_or_create(&ModelRetryLabels { reason }).inc();
    }

    /// Adds the tokens a provider reported for one model call.
    pub fn model_tokens(&self, prompt: u64, completion: u64) {
        self.model_tokens.get_or_create(&ModelTokenLabels { kind: "prompt" }).inc_by(prompt);
        self.model_tokens.get_or_create(&ModelTokenLabels { kind: "completion" }).inc_by(completion);
    }

    /// Counts one attempt of the outbox: `sent`, `retried` or `failed` (given up); a sent one's time since its question
    /// was asked is observed too.
    pub fn delivery(&self, channel: holdpoint_types::Channel, outcome: &'static str, since_asked: Option<Duration>) {
        let channel = channel.as_str();
        self.deliveries.get_or_create(&DeliveryLabels { channel, outcome }).inc();
        if let Some(latency) = since_asked {
            self.delivery_latency.get_or_create(&DeliveryChannelLabel { channel }).observe(latency.as_secs_f64());
        }
    }

    /// Counts one attempt of a webhook delivery: `sent`, `retried` or `failed` (given up); a sent one's time since it
    /// was queued is observed too.
    pub fn webhook_attempt(&self, outcome: &'static str, since_queued: Option<Duration>) {
        self.webhook_attempts.get_or_create(&WebhookLabels { outcome }).inc();
        if let Some(latency) = since_queued {
            self.webhook_latency.observe(latency.as_secs_f64());
        }
    }

    /// Counts one tool call through the MCP gateway with what the rules decided about it.
    pub fn gateway_call(&self, upstream: &str, decision: &'static str) {
        self.gateway_calls.get_or_create(&GatewayCallLabels { upstream: upstream.to_owned(), decision }).inc();
    }

    /// Observes how long an upstream took to answer a forwarded call.
    pub fn gateway_upstream(&self, upstream: &str, elapsed: Duration) {
        self.gateway_upstream_duration
            .get_or_create(&UpstreamLabel { upstream: upstream.to_owned() })
            .observe(elapsed.as_secs_f64());
    }

    /// Observes one tool call that ran; `completed` tells `completed` from `error`.
    pub fn tool_call(&self, tool: &str, completed: bool, elapsed: Duration) {
        let tool = match tool {
            "http_request" => "http_request",
            "shell" => "shell",
            _ => "other",
        };
        let status = if completed { "completed" } else { "error" };
        self.tool_calls.get_or_create(&ToolCallLabels { tool, status }).observe(elapsed.as_secs_f64());
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

    /// The exposition in `format`, with the pending gauge read from the database and the process's figures now.
    pub async fn render(&self, store: &dyn Store, format: Exposition) -> StoreResult<String> {
        self.questions_pending.clear();
        for (kind, count) in store.pending_counts().await? {
            self.questions_pending.get_or_create(&KindLabel { kind }).set(count);
        }
        self.process.refresh();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String cannot fail");
        Ok(match format {
            Exposition::OpenMetrics => text,
            Exposition::Classic => classic_from_open_metrics(&text),
        })
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

    #[test]
    fn the_classic_format_names_counters_like_their_samples_and_has_no_eof() {
        let open = "# HELP holdpoint_questions_created Questions created.\n# TYPE holdpoint_questions_created counter\n\
            holdpoint_questions_created_total{kind=\"blocking\"} 3\n# HELP holdpoint_sse_subscribers Open.\n\
            # TYPE holdpoint_sse_subscribers gauge\nholdpoint_sse_subscribers 1\n# EOF\n";
        let classic = classic_from_open_metrics(open);
        assert_eq!(
            classic,
            "# HELP holdpoint_questions_created_total Questions created.\n\
             # TYPE holdpoint_questions_created_total counter\n\
             holdpoint_questions_created_total{kind=\"blocking\"} 3\n# HELP holdpoint_sse_subscribers Open.\n\
             # TYPE holdpoint_sse_subscribers gauge\nholdpoint_sse_subscribers 1\n"
        );
    }

    #[test]
    fn openmetrics_is_sent_only_to_a_scraper_that_asks_for_it() {
        let prometheus = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Exposition::negotiate(Some(prometheus)), Exposition::OpenMetrics);
        assert_eq!(Exposition::negotiate(Some("text/plain")), Exposition::Classic);
        assert_eq!(Exposition::negotiate(None), Exposition::Classic);
    }
    use axum::http::Method;

    #[test]
    fn standard_methods_are_labelled_by_name_and_any_other_as_other() {
        assert_eq!(method_label(&Method::GET), "GET");
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        assert_eq!(method_label(&Method::from_bytes(b"PROPFIND").unwrap()), "other");
        assert_eq!(method_label(&Method::from_bytes(b"get").unwrap()), "other");
    }
}
