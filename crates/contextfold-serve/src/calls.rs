//! The record of each model call a conversation made through the proxy, kept in the store
//! beside the conversation's compactions (`SessionStore::put_call`), so that what the proxy
//! saved can be told after it stopped (`contextfold report`, the dashboard).
//!
//! A record is the request's log line as a JSON object: when, the API and model, what was
//! done, the status, the estimated tokens received from the client and sent upstream, the
//! conversation's window, and how long the proxy took. It is written after the line, off the
//! request's path; a store that fails loses the record, never the answer.

use crate::background::Background;
use crate::log::{Action, RequestLog};
use crate::savings::{Added, Totals};
use crate::store::ProxyStore;
use contextfold::replay::Price;
use contextfold::store::SessionId;
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// One call as the tally counts it, from a log line or from a stored record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Call<'a> {
    /// What tells its conversation from the others.
    pub conversation: &'a str,
    /// The request's model.
    pub model: Option<&'a str>,
    /// What was done.
    pub action: Action,
    /// The status the client got.
    pub status: u16,
    /// Estimated tokens received from the client and sent upstream.
    pub tokens: Option<(u64, u64)>,
    /// Estimated tokens of the system prompt and tools, which stay cached through a compaction.
    pub preamble: u64,
    /// Whether it only counted tokens (`count_tokens` is no model call).
    pub counts_tokens: bool,
}

impl<'a> Call<'a> {
    /// Whether the tally counts it: a call of a conversation that succeeded, with token
    /// counts (`count_tokens` is no call).
    pub fn counts(&self) -> bool {
        let conversation_call =
            matches!(self.action, Action::Unchanged | Action::Compacted | Action::Resent | Action::Untouched);
        conversation_call && (200..300).contains(&self.status) && self.tokens.is_some() && !self.counts_tokens
    }

    /// The call `log` describes.
    pub fn of_log(log: &'a RequestLog) -> Call<'a> {
        Call {
            conversation: log.conversation.as_deref().unwrap_or_default(),
            model: log.model.as_deref(),
            action: log.action,
            status: log.status,
            tokens: log.tokens_in.zip(log.tokens_out),
            preamble: log.preamble.unwrap_or(0),
            counts_tokens: log.path.ends_with("/count_tokens"),
        }
    }

    /// The call a stored `record` of `session` describes; `None` when it is not one.
    pub fn of_record(session: &'a str, record: &'a Value) -> Option<Call<'a>> {
        let number = |name: &str| record.get(name).and_then(Value::as_u64);
        Some(Call {
            conversation: session,
            model: record.get("model").and_then(Value::as_str),
            action: Action::parse(record.get("action")?.as_str()?)?,
            status: u16::try_from(number("status")?).ok()?,
            tokens: number("tokens_received").zip(number("tokens_sent")),
            preamble: number("preamble_tokens").unwrap_or(0),
            counts_tokens: false,
        })
    }
}

/// Adds the call stored `record` of `session` describes to `totals`, with the cost the proxy
/// tallied for it when it was made (so a report over the store states what the proxy
/// stated); returns whether it counted.
pub fn add_record(totals: &mut Totals, session: &str, record: &Value) -> bool {
    let Some(call) = Call::of_record(session, record).filter(Call::counts) else { return false };
    let Some((tokens_received, tokens_sent)) = call.tokens else { return false };
    let dollars = |name: &str| record.get(name).and_then(Value::as_f64);
    let cost = dollars("cost_without").zip(dollars("cost_with"));
    let family = cost.and(call.model.and_then(Price::of_model)).map(|(family, _)| family);
    totals.add(&Added { tokens_received, tokens_sent, cost }, call.action == Action::Compacted, family);
    true
}

/// Where the calls of one conversation's branch are recorded.
#[derive(Clone)]
pub struct Recorder {
    /// The store.
    pub store: ProxyStore,
    /// The store session its compactions go to.
    pub session: SessionId,
    /// The conversation's window, in tokens.
    pub window: u64,
    /// Where the write runs, so that a shutdown waits for it.
    pub background: Background,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("session", &self.session).field("window", &self.window).finish()
    }
}

impl Recorder {
    /// Records the call `log` describes, unless it only counted tokens, with the cost the
    /// tally `counted` for it; `timings` are the milliseconds the line states (added, first
    /// byte, total).
    pub fn record(self, log: &RequestLog, counted: Option<Added>, timings: (Option<f64>, Option<f64>, f64)) {
        if log.path.ends_with("/count_tokens") {
            return;
        }
        let (added_ms, first_byte_ms, total_ms) = timings;
        let record = json!({
            "at": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs()),
            "api": log.api.name(),
            "model": log.model,
            "stream": log.stream,
            "action": log.action.name(),
            "note": log.note,
            "status": log.status,
            "tokens_received": log.tokens_in,
            "tokens_sent": log.tokens_out,
            "preamble_tokens": log.preamble,
            "window": self.window,
            "added_ms": added_ms,
            "first_byte_ms": first_byte_ms,
            "total_ms": total_ms,
            "cost_without": counted.and_then(|added| added.cost).map(|(without, _)| without),
            "cost_with": counted.and_then(|added| added.cost).map(|(_, with)| with),
            "usage": log.reported.map(|reported| json!({
                "input": reported.input,
                "cache_read": reported.cache_read,
                "cache_write": reported.cache_write,
                "output": reported.output,
            })),
        });
        let Recorder { store, session, background, .. } = self;
        background.spawn(async move {
            // A failure is logged and counted by the store itself.
            let _ = store.put_call(session, record).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_record_reads_as_the_call_it_was() {
        let record = json!({"model": "claude-sonnet-4-5", "action": "compacted", "status": 200,
                            "tokens_received": 900, "tokens_sent": 300});
        let call = Call::of_record("s-1", &record).expect("a call");
        assert_eq!(call.conversation, "s-1");
        assert_eq!(call.model, Some("claude-sonnet-4-5"));
        assert_eq!((call.action, call.status, call.tokens), (Action::Compacted, 200, Some((900, 300))));
        for broken in [json!({}), json!({"action": "nonsense", "status": 200}), json!({"action": "resent"})] {
            assert_eq!(Call::of_record("s", &broken), None, "{broken}");
        }
        let no_tokens = json!({"action": "unchanged", "status": 502});
        assert_eq!(Call::of_record("s", &no_tokens).expect("a call").tokens, None);
    }

    #[test]
    fn records_add_up_with_the_cost_they_were_made_at() {
        let mut totals = Totals::default();
        let priced = json!({"model": "claude-sonnet-4-5", "action": "compacted", "status": 200,
                            "tokens_received": 900, "tokens_sent": 300, "cost_without": 0.5, "cost_with": 0.25});
        let unpriced = json!({"model": "mystery", "action": "unchanged", "status": 200,
                              "tokens_received": 10, "tokens_sent": 10});
        let failed = json!({"model": "claude-sonnet-4-5", "action": "unchanged", "status": 529,
                            "tokens_received": 10, "tokens_sent": 10});
        assert!(add_record(&mut totals, "s", &priced) && add_record(&mut totals, "s", &unpriced));
        assert!(!add_record(&mut totals, "s", &failed), "a failed call does not count");
        assert_eq!((totals.calls, totals.compactions, totals.unpriced_calls), (2, 1, 1));
        assert_eq!((totals.tokens_received, totals.tokens_sent), (910, 310));
        assert_eq!((totals.cost_without, totals.cost_with, totals.families.clone()), (0.5, 0.25, vec!["sonnet"]));
    }
}
