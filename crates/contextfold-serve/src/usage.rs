//! The provider's count of a request's input tokens, read from the response as it passes,
//! to calibrate the conversation's estimate (a local tokenizer counts differently from the
//! provider's).
//!
//! A stream states it in its first event (`message_start`), a whole answer in its `usage`;
//! either way it is `input_tokens` plus the cache's `cache_creation_input_tokens` and
//! `cache_read_input_tokens`. The probe only reads copies of the bytes it is shown, keeps at
//! most a bounded prefix, and gives up quietly on anything it does not recognise.

use serde_json::Value;

/// What to do with the count, once known.
pub type OnUsage = Box<dyn FnOnce(u64) + Send>;

/// The most of a stream read for its `message_start` event.
const STREAM_LIMIT: usize = 64 * 1024;
/// The largest whole answer read for its usage.
const JSON_LIMIT: usize = 4 * 1024 * 1024;

/// Reads one response for its input token count.
pub struct UsageProbe {
    stream: bool,
    buffer: Vec<u8>,
    on_usage: Option<OnUsage>,
}

impl UsageProbe {
    /// A probe of a response with this `content-type`; `None` for one it cannot read.
    pub fn new(content_type: Option<&str>, on_usage: OnUsage) -> Option<UsageProbe> {
        let content_type = content_type?.to_ascii_lowercase();
        let stream = content_type.starts_with("text/event-stream");
        (stream || content_type.starts_with("application/json")).then(|| UsageProbe {
            stream,
            buffer: Vec::new(),
            on_usage: Some(on_usage),
        })
    }

    /// Reads the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.on_usage.is_none() {
            return;
        }
        let limit = if self.stream { STREAM_LIMIT } else { JSON_LIMIT };
        if self.buffer.len() + chunk.len() > limit {
            self.give_up();
            return;
        }
        self.buffer.extend_from_slice(chunk);
        if self.stream {
            if let Some(tokens) = stream_usage(&self.buffer) {
                self.report(tokens);
            }
        }
    }

    /// The body ended whole.
    pub fn finish(&mut self) {
        if !self.stream {
            if let Some(tokens) = serde_json::from_slice::<Value>(&self.buffer)
                .ok()
                .as_ref()
                .and_then(|value| input_tokens(&value["usage"]))
            {
                self.report(tokens);
            }
        }
        self.give_up();
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

/// The input tokens of a `message_start` event among the complete lines of `buffer`.
fn stream_usage(buffer: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(buffer).ok().or_else(|| {
        // A chunk may end inside a character; read what is whole.
        let valid = std::str::from_utf8(buffer).err()?.valid_up_to();
        std::str::from_utf8(&buffer[..valid]).ok()
    })?;
    let complete = &text[..text.rfind('\n')?];
    complete.lines().filter_map(|line| line.strip_prefix("data:")).find_map(|data| {
        let event: Value = serde_json::from_str(data.trim()).ok()?;
        (event["type"] == "message_start").then(|| input_tokens(&event["message"]["usage"])).flatten()
    })
}

/// `input_tokens` plus the tokens read from and written to the cache.
fn input_tokens(usage: &Value) -> Option<u64> {
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
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let probe = UsageProbe::new(Some(content_type), Box::new(move |tokens| sink.lock().unwrap().push(tokens)));
        (probe.expect("a readable type"), seen)
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
        assert!(UsageProbe::new(Some("text/html"), Box::new(|_| {})).is_none());
        assert!(UsageProbe::new(None, Box::new(|_| {})).is_none());
        let (mut json, seen) = probe("application/json");
        json.feed(b"{\"usage\": \"none\"}");
        json.finish();
        let (mut long, long_seen) = probe("text/event-stream");
        long.feed(&vec![b'x'; STREAM_LIMIT + 1]);
        long.finish();
        assert!(seen.lock().unwrap().is_empty() && long_seen.lock().unwrap().is_empty());
    }
}
