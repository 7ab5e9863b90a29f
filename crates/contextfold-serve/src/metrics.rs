//! The proxy's metrics, served at `GET /metrics` in the Prometheus text format.
//!
//! A request's metrics are added where its log line is written ([`crate::log::RequestLog`]),
//! and its tokens and costs with what the savings tally adds for the same line
//! ([`crate::savings`]): the metrics, the log and the summary printed at shutdown are fed by
//! one call, so they cannot disagree. The proxy's own endpoints (`/metrics`, `/health`,
//! `/ready`) write no log line and are not counted.

use crate::action::Action;
use crate::calls::Added;
use crate::route::Api;
use crate::usage::Reported;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// The `Content-Type` of `/metrics`: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// The upper bounds of the latency histograms' buckets, in seconds: from a millisecond (what
/// the proxy adds to a request that does not compact) to two minutes (a long answer's first
/// byte).
const LATENCY_BUCKETS: [f64; 16] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// The labels of `contextfold_requests_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    api: &'static str,
    action: &'static str,
    /// The status the client got; 0 when it left before the answer began.
    status: u16,
}

/// The label of `contextfold_estimated_input_cost_dollars_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    with_contextfold: bool,
}

/// One request, as its log line describes it when it is written.
pub struct Line {
    /// The request's API.
    pub api: Api,
    /// What was done.
    pub action: Action,
    /// The status the client got (0: none).
    pub status: u16,
    /// From the request's arrival to its forwarding upstream, when it went upstream.
    pub added: Option<Duration>,
    /// From the request's arrival to the first byte relayed to the client, when one was.
    pub first_byte: Option<Duration>,
    /// The tokens the upstream reported, when its answer was read for them.
    pub reported: Option<Reported>,
    /// A compaction's steps (`evict+summarize`, …), when one ran.
    pub steps: Option<String>,
}

/// The label of `contextfold_compactions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StepLabels {
    steps: String,
}

/// The label of `contextfold_upstream_tokens_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    kind: &'static str,
}

/// The metrics of one proxy.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    compactions: Family<StepLabels, Counter>,
    tokens_received: Counter,
    tokens_sent: Counter,
    cost: Family<CostLabels, Counter<f64, AtomicU64>>,
    upstream_tokens: Family<TokenLabels, Counter>,
    added_latency: Histogram,
    first_byte: Histogram,
    store_errors: Counter,
    conversations: Gauge,
    bytes_held: Gauge,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let metrics = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            compactions: Family::default(),
            tokens_received: Counter::default(),
            tokens_sent: Counter::default(),
            cost: Family::default(),
            upstream_tokens: Family::default(),
            added_latency: Histogram::new(LATENCY_BUCKETS),
            first_byte: Histogram::new(LATENCY_BUCKETS),
            store_errors: Counter::default(),
            conversations: Gauge::default(),
            bytes_held: Gauge::default(),
        };
        metrics.registered()
    }
}

impl Metrics {
    /// `self` with every metric in its registry, each with its help text (the encoder adds
    /// `_total` to a counter's name).
    fn registered(mut self) -> Metrics {
        let registry = &mut self.registry;
        registry.register(
            "contextfold_requests",
            "Requests by API, by what the proxy did with them (its log line's action) and by the status the client got (0: the client left before the answer)",
            self.requests.clone(),
        );
        registry.register(
            "contextfold_compactions",
            "Requests for which a compaction ran (those whose upstream then failed included), by the steps it took",
            self.compactions.clone(),
        );
        registry.register(
            "contextfold_tokens_received",
            "Estimated tokens of the conversation calls answered with success, as clients sent them",
            self.tokens_received.clone(),
        );
        registry.register(
            "contextfold_tokens_sent",
            "Estimated tokens of the conversation calls answered with success, as sent upstream",
            self.tokens_sent.clone(),
        );
        registry.register(
            "contextfold_estimated_input_cost_dollars",
            "Estimated input cost in US dollars of the calls of models with a known list price, prompt caching counted: as received (with_contextfold=false) and as sent (with_contextfold=true)",
            self.cost.clone(),
        );
        registry.register(
            "contextfold_upstream_tokens",
            "Tokens the upstream reported for the answers the proxy read (conversation calls): kind=input (read fresh), cache_read, cache_write, output",
            self.upstream_tokens.clone(),
        );
        registry.register(
            "contextfold_added_latency_seconds",
            "Time from a request's arrival to its forwarding upstream: reading its body and preparing it, compaction included",
            self.added_latency.clone(),
        );
        registry.register(
            "contextfold_first_byte_seconds",
            "Time from a request's arrival to the first byte of the answer relayed to the client",
            self.first_byte.clone(),
        );
        registry.register(
            "contextfold_store_errors",
            "Calls to the store that failed (the proxy went on from memory)",
            self.store_errors.clone(),
        );
        registry.register(
            "contextfold_conversations_held",
            "Conversations whose state the proxy holds in memory",
            self.conversations.clone(),
        );
        registry.register(
            "contextfold_bytes_held",
            "Bytes of the client histories held, each conversation's last, by the size of their text (read into the model once), with the offsets and hashes the next request is split against",
            self.bytes_held.clone(),
        );
        self
    }

    /// Counts the request `line` describes.
    pub fn observe(&self, line: &Line) {
        let labels = RequestLabels { api: line.api.name(), action: line.action.name(), status: line.status };
        self.requests.get_or_create(&labels).inc();
        if line.action == Action::Compacted {
            let steps = line.steps.clone().unwrap_or_default();
            self.compactions.get_or_create(&StepLabels { steps }).inc();
        }
        if let Some(added) = line.added {
            self.added_latency.observe(added.as_secs_f64());
        }
        if let Some(first_byte) = line.first_byte {
            self.first_byte.observe(first_byte.as_secs_f64());
        }
        if let Some(reported) = line.reported {
            let kinds = [
                ("input", reported.input),
                ("cache_read", reported.cache_read),
                ("cache_write", reported.cache_write),
                ("output", reported.output),
            ];
            for (kind, tokens) in kinds {
                self.upstream_tokens.get_or_create(&TokenLabels { kind }).inc_by(tokens);
            }
        }
    }

    /// Adds what the savings tally added for one call.
    pub fn add(&self, added: &Added) {
        self.tokens_received.inc_by(added.tokens_received);
        self.tokens_sent.inc_by(added.tokens_sent);
        if let Some((without, with)) = added.cost {
            self.cost.get_or_create(&CostLabels { with_contextfold: false }).inc_by(without);
            self.cost.get_or_create(&CostLabels { with_contextfold: true }).inc_by(with);
        }
    }

    /// The counter the store adds its failures to.
    pub fn store_errors(&self) -> Counter {
        self.store_errors.clone()
    }

    /// The metrics as Prometheus text, with `held` conversations and `bytes` of bodies in memory.
    pub fn encode(&self, held: usize, bytes: u64) -> String {
        self.conversations.set(i64::try_from(held).unwrap_or(i64::MAX));
        self.bytes_held.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        let mut text = String::new();
        // Writing to a `String` cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_named_with_its_help() {
        let metrics = Metrics::default();
        let line = |action, status, added| Line {
            api: Api::OpenAi,
            action,
            status,
            added,
            first_byte: None,
            reported: None,
            steps: None,
        };
        metrics.observe(&line(Action::Compacted, 200, Some(Duration::from_millis(3))));
        let reported = Some(Reported { input: 5, cache_read: 1_000, cache_write: 20, output: 9 });
        metrics.observe(&Line { reported, ..line(Action::Unchanged, 200, None) });
        metrics.observe(&line(Action::Refused, 401, None));
        metrics.add(&Added { tokens_received: 10, tokens_sent: 4, cost: Some((0.5, 0.25)) });
        metrics.store_errors().inc();
        let text = metrics.encode(7, 4_096);
        for name in [
            "contextfold_requests_total",
            "contextfold_compactions_total",
            "contextfold_tokens_received_total",
            "contextfold_tokens_sent_total",
            "contextfold_estimated_input_cost_dollars_total",
            "contextfold_upstream_tokens_total",
            "contextfold_added_latency_seconds",
            "contextfold_first_byte_seconds",
            "contextfold_store_errors_total",
            "contextfold_conversations_held",
            "contextfold_bytes_held",
        ] {
            assert!(text.contains(&format!("# HELP {name} ")), "{name}:\n{text}");
        }
        assert!(
            text.contains("contextfold_requests_total{api=\"openai\",action=\"compacted\",status=\"200\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("contextfold_estimated_input_cost_dollars_total{with_contextfold=\"true\"} 0.25"),
            "{text}"
        );
        assert!(text.contains("contextfold_added_latency_seconds_count 1"), "{text}");
        assert!(text.contains("contextfold_upstream_tokens_total{kind=\"cache_read\"} 1000"), "{text}");
        assert!(text.contains("contextfold_upstream_tokens_total{kind=\"output\"} 9"), "{text}");
        assert!(text.contains("contextfold_conversations_held 7"), "{text}");
        assert!(text.contains("contextfold_bytes_held 4096"), "{text}");
        let evicted = Line { steps: Some("evict".into()), ..line(Action::Compacted, 200, None) };
        metrics.observe(&evicted);
        let text = metrics.encode(7, 4_096);
        assert!(text.contains("contextfold_compactions_total{steps=\"evict\"} 1"), "{text}");
        assert!(text.contains("contextfold_store_errors_total 1"), "{text}");
    }
}
