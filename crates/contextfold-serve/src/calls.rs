//! The record of each model call a conversation made through the proxy, kept in the store
//! beside the conversation's compactions (`SessionStore::put_call`), so that what the proxy
//! saved can be told after it stopped (`contextfold report`, the dashboard).
//!
//! A record is the request's log line as a JSON object: when, the API and model, what was
//! done, the status, the estimated tokens received from the client and sent upstream, the
//! conversation's window, and how long the proxy took. It is written after the line, off the
//! request's path; a store that fails loses the record, never the answer.

use crate::action::Action;
use crate::background::Background;
use crate::store::ProxyStore;
use contextfold::store::SessionId;
use serde_json::Value;

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

/// What one call added to the totals, for the metrics to add too (under the tally's lock,
/// so that they add in the same order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Added {
    /// Estimated tokens of the request as the client sent it.
    pub tokens_received: u64,
    /// Estimated tokens of the request as sent upstream.
    pub tokens_sent: u64,
    /// The estimated input cost without and with contextfold, when the model is priced.
    pub cost: Option<(f64, f64)>,
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
    /// Writes `record`, the call's log line as [`RequestLog::call_record`] makes it, off the
    /// request's path.
    ///
    /// [`RequestLog::call_record`]: crate::log::RequestLog::call_record
    pub fn write(self, record: Value) {
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
    use serde_json::json;

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
}
