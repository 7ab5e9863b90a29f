//! What the proxy saved, tallied from each request's log line as it is written: calls,
//! compactions, tokens received from clients and sent upstream, and the estimated input cost
//! with and without contextfold.
//!
//! The cost is the replay's prompt-cache model ([`Price::input_cost`]) at the list price of
//! the request's model family ([`Price::of_model`]); a model of no known family is counted in
//! tokens only. Each conversation's request reads from the cache what it shares with the one
//! before: the client's requests grow by appending, so a request received shares all of the
//! previous one; what contextfold sends shares the previous one too, except after a
//! compaction, which shares only the system prompt and tools in front of the messages.

use crate::action::Action;
use crate::calls::{Added, Call};
use contextfold::replay::Price;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// The most conversations whose last request sizes are remembered; past it they are
/// forgotten and a conversation's next request counts as a first one.
const MAX_CONVERSATIONS: usize = 10_000;

/// The totals so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    /// Conversation requests answered with success (token counts excluded).
    pub calls: u64,
    /// Of which compacted.
    pub compactions: u64,
    /// Estimated tokens of the requests as clients sent them.
    pub tokens_received: u64,
    /// Estimated tokens of the requests as sent upstream.
    pub tokens_sent: u64,
    /// Estimated input cost in US dollars without contextfold (the requests as received).
    pub cost_without: f64,
    /// Estimated input cost in US dollars with contextfold (the requests as sent).
    pub cost_with: f64,
    /// The model families priced, by name (`sonnet`, …), in the order first seen.
    pub families: Vec<&'static str>,
    /// Calls whose model has no known list price (counted in tokens, not in cost).
    pub unpriced_calls: u64,
}

impl Totals {
    /// One line saying what the totals are.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{} calls, {} compactions; {} tokens received, {} sent",
            self.calls, self.compactions, self.tokens_received, self.tokens_sent
        );
        if !self.families.is_empty() {
            line += &format!(
                "; estimated input cost ${:.2} without contextfold, ${:.2} with ({} list price, prompt caching counted)",
                self.cost_without,
                self.cost_with,
                self.families.join(", ")
            );
        }
        if self.unpriced_calls > 0 {
            line += &format!("; {} calls of models with no known list price are not in the cost", self.unpriced_calls);
        }
        line
    }
}

/// The tally, shared by every request.
#[derive(Debug, Default)]
pub struct Savings {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    totals: Totals,
    /// Each conversation's last request: tokens received, tokens sent.
    last: HashMap<String, (u64, u64)>,
}

impl Savings {
    /// The totals so far.
    pub fn totals(&self) -> Totals {
        self.lock().totals.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts `call`, when it [counts](Call::counts), and gives `then` what it added, before
    /// another call is counted.
    pub fn record(&self, call: &Call<'_>, then: impl FnOnce(&Added)) {
        let Some((received, sent)) = call.tokens.filter(|_| call.counts()) else { return };
        let compacted = call.action == Action::Compacted;
        let mut state = self.lock();
        let key = call.conversation.to_string();
        let previous = state.last.get(&key).copied();
        if previous.is_none() && state.last.len() >= MAX_CONVERSATIONS {
            state.last.clear();
        }
        state.last.insert(key, (received, sent));
        let priced = call.model.and_then(Price::of_model);
        let cost = priced.map(|(_, price)| {
            let read_received = previous.map_or(0, |(received_before, _)| received_before.min(received));
            let read_sent = match previous {
                Some((_, sent_before)) if !compacted => sent_before.min(sent),
                // A compaction leaves the system prompt and tools in front, still cached.
                Some((_, sent_before)) => call.preamble.min(sent_before).min(sent),
                None => 0,
            };
            let without = price.input_cost(read_received, received - read_received, true);
            (without, price.input_cost(read_sent, sent - read_sent, true))
        });
        let added = Added { tokens_received: received, tokens_sent: sent, cost };
        state.totals.add(&added, compacted, priced.map(|(family, _)| family));
        then(&added);
    }
}

impl Totals {
    /// Adds a call that [counts](Call::counts): what it `added`, whether it `compacted`, and
    /// its model's family when it is priced.
    pub fn add(&mut self, added: &Added, compacted: bool, family: Option<&'static str>) {
        self.calls += 1;
        self.compactions += u64::from(compacted);
        self.tokens_received += added.tokens_received;
        self.tokens_sent += added.tokens_sent;
        match (added.cost, family) {
            (Some((without, with)), Some(family)) => {
                if !self.families.contains(&family) {
                    self.families.push(family);
                }
                self.cost_without += without;
                self.cost_with += with;
            }
            _ => self.unpriced_calls += 1,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogFormat;
    use crate::log::RequestLog;
    use serde_json::json;

    fn call(conversation: &str, model: &str, tokens: (u64, u64), action: Action) -> RequestLog {
        let mut log = RequestLog::new(LogFormat::Text, "POST", "/v1/messages");
        log.conversation = Some(conversation.into());
        log.model = Some(model.into());
        (log.tokens_in, log.tokens_out) = (Some(tokens.0), Some(tokens.1));
        log.preamble = Some(20_000);
        log.action = action;
        log.status = 200;
        log
    }

    #[test]
    fn the_tally_prices_each_conversation_with_the_cache_model() {
        let savings = Savings::default();
        savings.record(&call("a", "claude-sonnet-4-5", (100_000, 100_000), Action::Unchanged).call(), |_| {});
        savings.record(&call("a", "claude-sonnet-4-5", (150_000, 40_000), Action::Compacted).call(), |_| {});
        savings.record(&call("a", "claude-sonnet-4-5", (160_000, 50_000), Action::Resent).call(), |_| {});
        let mut not_a_call = call("a", "claude-sonnet-4-5", (1, 1), Action::Refused);
        not_a_call.status = 401;
        savings.record(&not_a_call.call(), |_| {});
        let mut counted = call("b", "claude-sonnet-4-5", (9, 9), Action::Unchanged);
        counted.path = "/v1/messages/count_tokens".into();
        savings.record(&counted.call(), |_| {});
        savings.record(&call("c", "gpt-5", (10, 10), Action::Unchanged).call(), |_| {});
        let totals = savings.totals();
        assert_eq!((totals.calls, totals.compactions, totals.unpriced_calls), (4, 1, 1));
        assert_eq!((totals.tokens_received, totals.tokens_sent), (410_010, 190_010));
        let price = Price::parse("sonnet").unwrap();
        let without = price.input_cost(0, 100_000, true)
            + price.input_cost(100_000, 50_000, true)
            + price.input_cost(150_000, 10_000, true);
        let with = price.input_cost(0, 100_000, true)
            + price.input_cost(20_000, 20_000, true)
            + price.input_cost(40_000, 10_000, true);
        assert!((totals.cost_without - without).abs() < 1e-12 && (totals.cost_with - with).abs() < 1e-12);
        assert_eq!(totals.families, ["sonnet"]);
        let line = totals.line();
        assert!(line.starts_with("4 calls, 1 compactions; 410010 tokens received, 190010 sent; estimated input cost $"));
        assert!(line.ends_with("; 1 calls of models with no known list price are not in the cost"), "{line}");
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
