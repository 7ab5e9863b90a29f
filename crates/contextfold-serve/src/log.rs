//! One log line per request, through `tracing`: what came in, what was done, what the
//! upstream answered and how long it took. No header, body or query string is ever logged,
//! so no key or token can be.

pub use crate::action::Action;
use crate::calls::{Added, Call, Recorder};
use crate::config::LogFormat;
use crate::metrics::Line;
use crate::route::Api;
use crate::usage::Reported;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use std::time::{SystemTime, UNIX_EPOCH};

/// The log line of one request, filled in as it goes and written once, when its response
/// ends (or fails, or the client leaves): a line dropped unwritten, because the client left
/// before the answer began, is written as it is dropped.
#[derive(Debug)]
pub struct RequestLog {
    format: LogFormat,
    started: Instant,
    /// The request's API (whose upstream it goes to).
    pub api: Api,
    /// The method.
    pub method: String,
    /// The path, without the query string (it may hold a key).
    pub path: String,
    /// The session id.
    pub session: Option<String>,
    /// The conversation, shortened.
    pub conversation: Option<String>,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// Estimated tokens of the client's request.
    pub tokens_in: Option<u64>,
    /// Estimated tokens of what was sent.
    pub tokens_out: Option<u64>,
    /// Estimated tokens of the system prompt and tools (a conversation's).
    pub preamble: Option<u64>,
    /// What was done.
    pub action: Action,
    /// The compaction's strategy, or why nothing was compacted.
    pub note: Option<String>,
    /// The status the client got.
    pub status: u16,
    /// The request's model, when it names one.
    pub model: Option<String>,
    /// The counts the line is added to when it is written ([`crate::Stats::savings`]).
    pub tally: Option<Arc<crate::Stats>>,
    /// Where the call is recorded when the line is written (a conversation with a store).
    pub recorder: Option<Recorder>,
    /// The tokens the upstream reported, when its answer was read for them.
    pub reported: Option<Reported>,
    first_byte: Option<Duration>,
    /// When the request was handed to the upstream: what the proxy added before it.
    forwarded: Option<Duration>,
    bytes: u64,
    written: bool,
}

/// The longest text a line shows of what it names (a path, a model, a note).
const MAX_SHOWN: usize = 300;

/// `text` as a line may show it: control characters escaped, so nothing forges a line, and
/// cut to [`MAX_SHOWN`] characters.
fn shown(text: &str) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == MAX_SHOWN {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        if !self.written {
            self.write("client closed before the answer");
        }
    }
}

impl RequestLog {
    /// The call this line describes.
    pub fn call(&self) -> Call<'_> {
        Call {
            conversation: self.conversation.as_deref().unwrap_or_default(),
            model: self.model.as_deref(),
            action: self.action,
            status: self.status,
            tokens: self.tokens_in.zip(self.tokens_out),
            preamble: self.preamble.unwrap_or(0),
            counts_tokens: self.counts_tokens(),
        }
    }

    /// Whether the request only counted tokens (`count_tokens` is no model call).
    fn counts_tokens(&self) -> bool {
        self.path.ends_with("/count_tokens")
    }

    /// The record of the call this line describes, in a conversation whose window is
    /// `window`, with the cost the tally `counted` for it; `timings` are the milliseconds the
    /// line states (added, first byte, total). `None` when it only counted tokens.
    pub fn call_record(
        &self,
        window: u64,
        counted: Option<Added>,
        timings: (Option<f64>, Option<f64>, f64),
    ) -> Option<Value> {
        if self.counts_tokens() {
            return None;
        }
        let (added_ms, first_byte_ms, total_ms) = timings;
        let record = json!({
            "at": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs()),
            "api": self.api.name(),
            "model": self.model,
            "stream": self.stream,
            "action": self.action.name(),
            "note": self.note,
            "status": self.status,
            "tokens_received": self.tokens_in,
            "tokens_sent": self.tokens_out,
            "preamble_tokens": self.preamble,
            "window": window,
            "added_ms": added_ms,
            "first_byte_ms": first_byte_ms,
            "total_ms": total_ms,
            "cost_without": counted.and_then(|added| added.cost).map(|(without, _)| without),
            "cost_with": counted.and_then(|added| added.cost).map(|(_, with)| with),
            "usage": self.reported.map(|reported| json!({
                "input": reported.input,
                "cache_read": reported.cache_read,
                "cache_write": reported.cache_write,
                "output": reported.output,
            })),
        });
        Some(record)
    }

    /// The line of a request that just arrived.
    pub fn new(format: LogFormat, method: &str, path: &str) -> RequestLog {
        RequestLog {
            format,
            started: Instant::now(),
            api: Api::Anthropic,
            method: method.to_string(),
            path: path.to_string(),
            session: None,
            conversation: None,
            stream: false,
            tokens_in: None,
            tokens_out: None,
            preamble: None,
            action: Action::Forwarded,
            note: None,
            status: 0,
            model: None,
            tally: None,
            recorder: None,
            reported: None,
            first_byte: None,
            forwarded: None,
            bytes: 0,
            written: false,
        }
    }

    /// Records that the request is being handed to the upstream now.
    pub fn forwarding(&mut self) {
        self.forwarded = Some(self.started.elapsed());
    }

    /// Records `len` bytes relayed to the client.
    pub fn relayed(&mut self, len: usize) {
        self.first_byte.get_or_insert_with(|| self.started.elapsed());
        self.bytes += len as u64;
    }

    /// Writes the line; `end` says how the response ended (`complete`, `cut: …`,
    /// `client closed`).
    pub fn emit(mut self, end: &str) {
        self.write(end);
    }

    fn write(&mut self, end: &str) {
        self.written = true;
        let mut counted = None;
        if let Some(stats) = &self.tally {
            let metrics = stats.metrics();
            stats.savings().record(&self.call(), |added| {
                metrics.add(added);
                counted = Some(*added);
            });
        }
        let ms = |duration: Duration| (duration.as_secs_f64() * 1e4).round() / 10.0;
        let total_ms = ms(self.started.elapsed());
        let first_byte_ms = self.first_byte.map(ms);
        let added_ms = self.forwarded.map(ms);
        match self.format {
            LogFormat::Json => tracing::info!(
                target: "contextfold_serve",
                api = self.api.name(),
                method = %self.method,
                path = %shown(&self.path),
                session = self.session.as_deref(),
                conversation = self.conversation.as_deref(),
                model = self.model.as_deref().map(shown),
                stream = self.stream,
                tokens_in = self.tokens_in,
                tokens_out = self.tokens_out,
                preamble_tokens = self.preamble,
                action = self.action.name(),
                compacted = self.action == Action::Compacted,
                note = self.note.as_deref().map(shown),
                status = self.status,
                first_byte_ms,
                added_ms,
                total_ms,
                bytes = self.bytes,
                end,
                "request"
            ),
            LogFormat::Text => {
                tracing::info!(target: "contextfold_serve", "{}", self.text_line(end, total_ms, first_byte_ms))
            }
        }
        // After the line, which a client that has its answer may be waiting for.
        if let Some(recorder) = self.recorder.take() {
            if let Some(record) = self.call_record(recorder.window, counted, (added_ms, first_byte_ms, total_ms)) {
                recorder.write(record);
            }
        }
        if let Some(stats) = &self.tally {
            stats.metrics().observe(&Line {
                api: self.api,
                action: self.action,
                status: self.status,
                added: self.forwarded,
                first_byte: self.first_byte,
                reported: self.reported,
                // The note of a compaction is its steps, and what went wrong after `;`.
                steps: (self.action == Action::Compacted).then(|| {
                    self.note.as_deref().and_then(|note| note.split(';').next()).unwrap_or_default().to_string()
                }),
            });
        }
    }

    fn text_line(&self, end: &str, total_ms: f64, first_byte_ms: Option<f64>) -> String {
        let mut line = format!("{} {}", self.method, shown(&self.path));
        if let Some(session) = &self.session {
            line += &format!(" session={session}");
        }
        if let Some(conversation) = &self.conversation {
            line += &format!(" conversation={conversation}");
        }
        if let Some(model) = &self.model {
            line += &format!(" model={}", shown(model));
        }
        if let Some(preamble) = self.preamble {
            line += &format!(" preamble={preamble}");
        }
        if self.stream {
            line += " stream";
        }
        match (self.tokens_in, self.tokens_out) {
            (Some(tokens_in), Some(tokens_out)) => line += &format!(" tokens {tokens_in} → {tokens_out}"),
            (Some(tokens), None) | (None, Some(tokens)) => line += &format!(" tokens {tokens}"),
            (None, None) => {}
        }
        line += &format!(" {}", self.action.name());
        if let Some(note) = &self.note {
            line += &format!(" ({})", shown(note));
        }
        match self.status {
            0 => line += &format!(" no answer in {total_ms} ms"),
            status => line += &format!(" status {status} in {total_ms} ms"),
        }
        if let Some(first_byte_ms) = first_byte_ms {
            line += &format!(" (first byte {first_byte_ms} ms)");
        }
        if end != "complete" {
            line += &format!(", {end}");
        }
        line
    }
}

/// Sends `tracing` events of level info and above to standard error, one line each: the
/// per-request lines as text, or as JSON objects with the fields at the top level.
pub fn init_logging(format: LogFormat) {
    init_logging_with(format, std::io::stderr);
}

/// [`init_logging`] to `file` instead of standard error (a program that shares the terminal
/// with another, as `contextfold wrap` does with the agent).
pub fn init_logging_to(format: LogFormat, file: std::fs::File) {
    init_logging_with(format, std::sync::Mutex::new(file));
}

fn init_logging_with<W>(format: LogFormat, writer: W)
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_writer(writer).with_max_level(tracing::Level::INFO);
    // A second call (tests, embedding programs) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => builder.with_ansi(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_line_says_what_happened() {
        let mut log = RequestLog::new(LogFormat::Text, "POST", "/v1/messages");
        log.session = Some("cc-1".into());
        log.conversation = Some("9f3e12ab".into());
        log.preamble = Some(18_000);
        log.stream = true;
        log.tokens_in = Some(152_104);
        log.tokens_out = Some(48_210);
        log.action = Action::Compacted;
        log.note = Some("evict+summarize".into());
        log.status = 200;
        let line = log.text_line("complete", 812.0, Some(310.5));
        assert_eq!(
            line,
            "POST /v1/messages session=cc-1 conversation=9f3e12ab preamble=18000 stream tokens 152104 → 48210 compacted \
             (evict+summarize) status 200 in 812 ms (first byte 310.5 ms)"
        );
        assert!(log.text_line("client closed", 1.0, None).ends_with("status 200 in 1 ms, client closed"));
        log.written = true;
    }

    #[test]
    fn what_a_line_names_is_escaped_and_bounded() {
        let mut log = RequestLog::new(LogFormat::Text, "POST", "/v1/messages");
        log.note = Some(format!("a\nPOST /forged status 200{}", "x".repeat(5_000_000)));
        let line = log.text_line("complete", 1.0, None);
        assert!(!line.contains('\n'), "no line is forged");
        assert!(line.contains("a\\nPOST /forged"));
        assert!(line.len() < 1_000, "{}", line.len());
        log.written = true;
    }
}
