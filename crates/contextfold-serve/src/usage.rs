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

/// The tokens the upstream reported for one answer: input it read fresh, from the prompt
/// cache and into it, and output. OpenAI's cached tokens are part of its input count; they are
/// counted here as read from the cache and not as fresh input, as Anthropic states them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reported {
    /// Input tokens neither read from nor written to the cache.
    pub input: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Input tokens written to the cache.
    pub cache_write: u64,
    /// Output tokens.
    pub output: u64,
}

impl Reported {
    /// Every input token, cached or not: what the calibration compares with its estimate.
    pub fn input_total(&self) -> u64 {
        self.input + self.cache_read + self.cache_write
    }
}

/// Reads one response for the tokens the upstream reports.
pub struct UsageProbe {
    dialect: Dialect,
    stream: bool,
    /// A stream's incomplete last line, or a whole answer so far.
    buffer: Vec<u8>,
    /// Given the input count as soon as it is known.
    on_usage: Option<OnUsage>,
    /// What was reported so far: the input once known, the output as it grows.
    reported: Option<Reported>,
    /// Whether the probe stopped reading (a line too long, or the body ended).
    done: bool,
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
            reported: None,
            done: false,
        })
    }

    /// What the upstream reported, when it did.
    pub fn reported(&self) -> Option<Reported> {
        self.reported
    }

    /// Reads the next chunk of the body.
    pub fn feed(&mut self, mut chunk: &[u8]) {
        if self.done {
            return;
        }
        if !self.stream {
            self.append(chunk);
            return;
        }
        while let Some(end) = chunk.iter().position(|&byte| byte == b'\n') {
            self.append(&chunk[..end]);
            let line = std::mem::take(&mut self.buffer);
            if let Some(usage) = event_usage(&line) {
                self.dialect.event(&usage, self.reported.get_or_insert_with(Reported::default));
                self.report_input();
            }
            if self.done {
                return;
            }
            chunk = &chunk[end + 1..];
        }
        self.append(chunk);
    }

    /// The body ended whole.
    pub fn finish(&mut self) {
        if !self.stream && !self.done {
            let value = serde_json::from_slice::<Value>(&self.buffer).ok();
            if let Some(usage) = value.as_ref().and_then(|answer| answer.get("usage")).filter(|usage| usage.is_object())
            {
                self.dialect.usage(usage, self.reported.get_or_insert_with(Reported::default));
                self.report_input();
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

    /// Gives the input count to the observer, the first time it is known.
    fn report_input(&mut self) {
        let Some(reported) = self.reported.filter(|reported| reported.input_total() > 0) else { return };
        if let Some(on_usage) = self.on_usage.take() {
            on_usage(reported.input_total());
        }
    }

    fn give_up(&mut self) {
        self.done = true;
        self.buffer = Vec::new();
    }
}

/// The event of one stream line that may state a count, parsed.
fn event_usage(line: &[u8]) -> Option<Value> {
    let data = line.strip_prefix(b"data:")?;
    // Most events are deltas; only parse the ones that may hold a count.
    if !data.windows(7).any(|window| window == b"\"usage\"") {
        return None;
    }
    serde_json::from_slice(data).ok()
}

impl Dialect {
    /// Adds what a stream `event` states to `reported`.
    fn event(self, event: &Value, reported: &mut Reported) {
        let usage = match self {
            // `message_start` states the input (and the first output count), `message_delta`
            // the output so far.
            Dialect::Anthropic if event["type"] == "message_start" => &event["message"]["usage"],
            Dialect::Anthropic if event["type"] == "message_delta" => &event["usage"],
            Dialect::Anthropic => return,
            Dialect::Chat => &event["usage"],
            Dialect::Responses if event["type"] == "response.completed" => &event["response"]["usage"],
            Dialect::Responses => return,
        };
        if usage.is_object() {
            self.usage(usage, reported);
        }
    }

    /// Adds what a `usage` object states to `reported`; a count it leaves out stays as it was.
    fn usage(self, usage: &Value, reported: &mut Reported) {
        let count = |value: &Value| value.as_u64();
        let set = |slot: &mut u64, value: Option<u64>| {
            if let Some(value) = value {
                *slot = value;
            }
        };
        match self {
            Dialect::Anthropic => {
                set(&mut reported.input, count(&usage["input_tokens"]));
                set(&mut reported.cache_read, count(&usage["cache_read_input_tokens"]));
                set(&mut reported.cache_write, count(&usage["cache_creation_input_tokens"]));
                set(&mut reported.output, count(&usage["output_tokens"]));
            }
            Dialect::Chat | Dialect::Responses => {
                let (input, details, output) = match self {
                    Dialect::Chat => ("prompt_tokens", "prompt_tokens_details", "completion_tokens"),
                    _ => ("input_tokens", "input_tokens_details", "output_tokens"),
                };
                let cached = count(&usage[details]["cached_tokens"]).unwrap_or(0);
                if let Some(input) = count(&usage[input]) {
                    reported.cache_read = cached.min(input);
                    reported.input = input - reported.cache_read;
                }
                set(&mut reported.output, count(&usage[output]));
            }
        }
    }
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

    /// What `stream` (fed in small chunks) or a whole answer reports, split.
    fn reported(dialect: Dialect, content_type: &str, body: &str) -> Option<Reported> {
        let (mut probe, _) = probe_of(dialect, content_type);
        for chunk in body.as_bytes().chunks(3) {
            probe.feed(chunk);
        }
        probe.finish();
        probe.reported()
    }

    #[test]
    fn the_split_of_input_cache_and_output_is_read_to_the_end_of_the_answer() {
        let anthropic = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":10,\
                         \"cache_creation_input_tokens\":200,\"cache_read_input_tokens\":3000,\"output_tokens\":1}}}\n\n\
                         event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"usage\"}}\n\n\
                         event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":57}}\n\n";
        let split = Reported { input: 10, cache_read: 3_000, cache_write: 200, output: 57 };
        assert_eq!(reported(Dialect::Anthropic, "text/event-stream", anthropic), Some(split));
        let chat = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":812,\"completion_tokens\":9,\
                    \"prompt_tokens_details\":{\"cached_tokens\":800}}}\n\ndata: [DONE]\n\n";
        let split = Reported { input: 12, cache_read: 800, cache_write: 0, output: 9 };
        assert_eq!(reported(Dialect::Chat, "text/event-stream", chat), Some(split));
        let responses = r#"{"object":"response","usage":{"input_tokens":4321,"output_tokens":7,"input_tokens_details":{"cached_tokens":4000}}}"#;
        let split = Reported { input: 321, cache_read: 4_000, cache_write: 0, output: 7 };
        assert_eq!(reported(Dialect::Responses, "application/json", responses), Some(split));
        let whole = r#"{"type":"message","usage":{"input_tokens":5,"output_tokens":2}}"#;
        assert_eq!(reported(Dialect::Anthropic, "application/json", whole).map(|r| (r.input, r.output)), Some((5, 2)));
        assert_eq!(reported(Dialect::Anthropic, "application/json", "{}"), None);
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
