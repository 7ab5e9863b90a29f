//! The provider's count of a request's input tokens, read from the response as it passes,
//! to calibrate the conversation's estimate (a local tokenizer counts differently from the
//! provider's).
//!
//! Anthropic states it in a stream's first event (`message_start`) and in a whole answer's
//! `usage`: `input_tokens` plus the cache's `cache_creation_input_tokens` and
//! `cache_read_input_tokens`. OpenAI's Chat Completions state `usage.prompt_tokens` in a
//! whole answer and in a stream's last chunk (with `stream_options.include_usage`); the
//! Responses API `usage.input_tokens`, in a stream's `response.completed` event. Both
//! include the cached tokens. The probe reads copies of the bytes it is shown a line at a
//! time, keeps at most a bounded line or answer, and gives up quietly on anything it does
//! not recognise.

use serde_json::Value;

/// What to do with the count, once known.
pub type OnUsage = Box<dyn FnOnce(u64) + Send>;

/// Which API's answer a probe reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions.
    Chat,
    /// The OpenAI Responses API.
    Responses,
}

/// What to learn from one response.
pub struct Observer {
    /// How its answer states the count.
    pub dialect: Dialect,
    /// What to do with it.
    pub report: OnUsage,
}

/// The longest stream line (or whole answer) read for its usage.
const LINE_LIMIT: usize = 4 * 1024 * 1024;

/// Reads one response for its input token count.
pub struct UsageProbe {
    dialect: Dialect,
    stream: bool,
    /// A stream's incomplete last line, or a whole answer so far.
    buffer: Vec<u8>,
    on_usage: Option<OnUsage>,
}

impl UsageProbe {
    /// A probe of a response with this `content-type`; `None` for one it cannot read.
    pub fn new(content_type: Option<&str>, observer: Observer) -> Option<UsageProbe> {
        let content_type = content_type?.to_ascii_lowercase();
        let stream = content_type.starts_with("text/event-stream");
        (stream || content_type.starts_with("application/json")).then(|| UsageProbe {
            dialect: observer.dialect,
            stream,
            buffer: Vec::new(),
            on_usage: Some(observer.report),
        })
    }

    /// Reads the next chunk of the body.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        if self.on_usage.is_none() {
            return;
        }
        if !self.stream {
            self.append(chunk);
            return;
        }
        while let Some(end) = chunk.iter().position(|&byte| byte == b'\n') {
            self.append(&chunk[..end]);
            let line = std::mem::take(&mut self.buffer);
            if let Some(tokens) = self.event_usage(&line) {
                self.report(tokens);
                return;
            }
            if self.on_usage.is_none() {
                return;
            }
            chunk = &chunk[end + 1..];
        }
        self.append(chunk);
    }

    /// The body ended whole.
    pub fn finish(&mut self) {
        if !self.stream {
            let value = serde_json::from_slice::<Value>(&self.buffer).ok();
            if let Some(tokens) = value.as_ref().and_then(|value| self.dialect.whole(value)) {
                self.report(tokens);
            }
        }
        self.give_up();
    }

    fn append(&mut self, bytes: &[u8]) {
        if self.buffer.len() + bytes.len() > LINE_LIMIT {
            self.give_up();
        } else {
            self.buffer.extend_from_slice(bytes);
        }
    }

    /// The count in one line of a stream, when it states it.
    fn event_usage(&self, line: &[u8]) -> Option<u64> {
        let data = line.strip_prefix(b"data:")?;
        // Most events are deltas; only parse the ones that may hold a count.
        if !data.windows(7).any(|window| window == b"\"usage\"") {
            return None;
        }
        let event: Value = serde_json::from_slice(data).ok()?;
        self.dialect.event(&event)
    }

    fn report(&mut self, tokens: u64) {
        if let Some(on_usage) = self.on_usage.take() {
            on_usage(tokens);
        }
        self.buffer = Vec::new();
    }

    fn give_up(&mut self) {
        self.on_usage = None;
        self.buffer = Vec::new();
    }
}

impl Dialect {
    /// The count in a stream event.
    fn event(self, event: &Value) -> Option<u64> {
        match self {
            Dialect::Anthropic => {
                (event["type"] == "message_start").then(|| anthropic_tokens(&event["message"]["usage"])).flatten()
            }
            Dialect::Chat => event.get("usage")?.get("prompt_tokens")?.as_u64(),
            Dialect::Responses => (event["type"] == "response.completed")
                .then(|| event["response"]["usage"]["input_tokens"].as_u64())
                .flatten(),
        }
    }

    /// The count in a whole answer.
    fn whole(self, answer: &Value) -> Option<u64> {
        let usage = answer.get("usage")?;
        match self {
            Dialect::Anthropic => anthropic_tokens(usage),
            Dialect::Chat => usage.get("prompt_tokens")?.as_u64(),
            Dialect::Responses => usage.get("input_tokens")?.as_u64(),
        }
    }
}

/// `input_tokens` plus the tokens read from and written to the cache.
fn anthropic_tokens(usage: &Value) -> Option<u64> {
    let input = usage.get("input_tokens")?.as_u64()?;
    let cached = ["cache_creation_input_tokens", "cache_read_input_tokens"]
        .iter()
        .filter_map(|key| usage.get(*key).and_then(Value::as_u64))
        .sum::<u64>();
    Some(input + cached)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn probe(content_type: &str) -> (UsageProbe, Arc<Mutex<Vec<u64>>>) {
        probe_of(Dialect::Anthropic, content_type)
    }

    fn probe_of(dialect: Dialect, content_type: &str) -> (UsageProbe, Arc<Mutex<Vec<u64>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let report: OnUsage = Box::new(move |tokens| sink.lock().unwrap().push(tokens));
        let probe = UsageProbe::new(Some(content_type), Observer { dialect, report });
        (probe.expect("a readable type"), seen)
    }

    fn observer() -> Observer {
        Observer { dialect: Dialect::Anthropic, report: Box::new(|_| {}) }
    }

    #[test]
    fn openai_states_it_in_the_last_chunk_or_the_completed_event() {
        let chat = "data: {\"choices\":[{\"delta\":{\"content\":\"usage\"}}],\"usage\":null}\n\n\
                    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":812,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n";
        let responses =
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n\
                         event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":\
                         {\"input_tokens\":4321,\"input_tokens_details\":{\"cached_tokens\":4000}}}}\n\n";
        for (dialect, stream, expected) in [(Dialect::Chat, chat, 812), (Dialect::Responses, responses, 4_321)] {
            let (mut probe, seen) = probe_of(dialect, "text/event-stream");
            for chunk in stream.as_bytes().chunks(5) {
                probe.feed(chunk);
            }
            probe.finish();
            assert_eq!(*seen.lock().unwrap(), [expected], "{dialect:?}");
        }
        let (mut whole, seen) = probe_of(Dialect::Chat, "application/json");
        whole.feed(br#"{"object":"chat.completion","usage":{"prompt_tokens":77,"completion_tokens":1}}"#);
        whole.finish();
        let (mut answer, answer_seen) = probe_of(Dialect::Responses, "application/json; charset=utf-8");
        answer.feed(br#"{"object":"response","usage":{"input_tokens":55,"output_tokens":1}}"#);
        answer.finish();
        assert_eq!(*seen.lock().unwrap(), [77]);
        assert_eq!(*answer_seen.lock().unwrap(), [55]);
    }

    #[test]
    fn a_stream_states_its_usage_in_message_start_even_across_chunks() {
        let (mut probe, seen) = probe("text/event-stream; charset=utf-8");
        let stream =
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\
                      \"cache_creation_input_tokens\":200,\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}\n\n\
                      event: ping\ndata: {\"type\":\"ping\"}\n\n";
        for chunk in stream.as_bytes().chunks(7) {
            probe.feed(chunk);
        }
        probe.finish();
        assert_eq!(*seen.lock().unwrap(), [3_210]);
    }

    #[test]
    fn a_whole_answer_states_it_in_usage() {
        let (mut probe, seen) = probe("application/json");
        probe.feed(br#"{"type":"message","usage":{"input_tokens":1234,"output_tokens":5}}"#);
        assert!(seen.lock().unwrap().is_empty(), "read at the end");
        probe.finish();
        assert_eq!(*seen.lock().unwrap(), [1_234]);
    }

    #[test]
    fn anything_else_is_ignored() {
        assert!(UsageProbe::new(Some("text/html"), observer()).is_none());
        assert!(UsageProbe::new(None, observer()).is_none());
        let (mut json, seen) = probe("application/json");
        json.feed(b"{\"usage\": \"none\"}");
        json.finish();
        let (mut long, long_seen) = probe("text/event-stream");
        long.feed(&vec![b'x'; LINE_LIMIT + 1]);
        long.finish();
        assert!(seen.lock().unwrap().is_empty() && long_seen.lock().unwrap().is_empty());
    }
}
