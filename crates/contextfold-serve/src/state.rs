//! A conversation's state as the store keeps it, so that a restarted proxy or another
//! replica goes on with the conversation exactly where this one left it: the middleware's
//! snapshot, with what configured it (the window, and the system prompt and tools its first
//! request had), and the store session its compactions go to. Serialized as JSON, sealed
//! ([`crate::secrets`]): the record's secrets are masked and only their places kept.

use crate::secrets::{self, Hole, Secrets, Sources};
use contextfold::middleware::MiddlewareState;
use contextfold::store::SessionId;
use contextfold_core::{Conversation, System};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// The key of a conversation's state.
pub fn key(conversation: u64) -> String {
    format!("serve:{conversation:016x}")
}

/// What the store keeps of one conversation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The store session its compactions are kept in.
    pub session: Option<SessionId>,
    /// The window it is compacted in.
    pub window: u64,
    /// Its system prompt and tools, as a conversation without messages.
    pub frame: Value,
    /// The middleware's state.
    pub middleware: MiddlewareState,
}

impl Record {
    /// The frame of `system` and `tools`.
    pub fn frame(system: Option<&System>, tools: Option<&[Value]>) -> Value {
        secrets::frame(system, tools)
    }

    /// The system prompt and tools of the frame.
    pub fn system_and_tools(&self) -> Result<(Option<System>, Option<Vec<Value>>), String> {
        let mut frame = self.frame.clone();
        if let Some(map) = frame.as_object_mut() {
            map.entry("messages").or_insert_with(|| Value::Array(Vec::new()));
        }
        let conversation = Conversation::from_value(frame).map_err(|err| err.to_string())?;
        Ok((conversation.system, conversation.tools))
    }

    /// Reads bytes written by a [`Writer`], each secret taken from `request`.
    pub fn from_bytes(bytes: &[u8], secrets: &mut Secrets, request: secrets::Sources<'_>) -> Result<Record, String> {
        let Sealed { mut record, secrets: holes } = serde_json::from_slice(bytes).map_err(|err| err.to_string())?;
        secrets.unseal(&mut record, &holes, request);
        serde_json::from_value(record).map_err(|err| err.to_string())
    }
}

/// A record as stored: masked, and where its secrets are.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed<R> {
    record: R,
    secrets: Vec<Hole>,
}

/// Where a record's parts are, as JSON pointers.
const FRAME: &str = "/frame";
const WORKING: &str = "/middleware/working";

/// Writes a conversation's records, sealing each large part once: the frame (system prompt
/// and tools) when first written, the messages compactions made when they change (named by
/// the number [`snapshot_since`](contextfold::middleware::CompactionMiddleware::snapshot_since)
/// gives), and only the rest (counters) at every other call. Between compactions a record
/// differs from the last only in its counters, so a call no longer writes out and searches
/// the window's worth of messages again. What it writes is byte for byte what a fresh writer
/// writes for the same record, and reads back with [`Record::from_bytes`] as records always
/// have.
#[derive(Debug)]
pub struct Writer {
    secrets: Secrets,
    frame: Frame,
    /// The compacted messages sealed, and their number.
    working: Option<(u64, Part)>,
}

/// The frame, as given until it is first written.
#[derive(Debug)]
enum Frame {
    Plain(Value),
    Sealed(Part),
}

/// A sealed part of a record: its JSON as written, and where its secrets were.
#[derive(Debug)]
struct Part {
    text: Box<RawValue>,
    holes: Vec<Hole>,
}

impl Part {
    fn seal(mut value: Value, at: &str, secrets: &mut Secrets, request: Option<Sources<'_>>) -> Result<Part, String> {
        let holes = secrets.seal_part(&mut value, at, request);
        let text = serde_json::value::to_raw_value(&value).map_err(|err| err.to_string())?;
        Ok(Part { text, holes })
    }
}

impl Writer {
    /// A writer of records with `frame` ([`Record::frame`]), knowing where `secrets` were.
    pub fn new(frame: Value, secrets: Secrets) -> Writer {
        Writer { secrets, frame: Frame::Plain(frame), working: None }
    }

    /// The number of the compacted messages it holds sealed: a snapshot taken since it may
    /// leave them out.
    pub fn made(&self) -> Option<u64> {
        self.working.as_ref().map(|(made, _)| *made)
    }

    /// The bytes of the record of `session`, `window` and `middleware`, whose compacted
    /// messages are named `made` (left out of `middleware` when they are [`Writer::made`]):
    /// sealed, with where in `request` (or a request seen before) each secret is.
    pub fn write(
        &mut self,
        session: Option<SessionId>,
        window: u64,
        middleware: MiddlewareState,
        made: u64,
        request: Option<Sources<'_>>,
    ) -> Result<Vec<u8>, String> {
        let record = Record { session, window, frame: Value::Null, middleware };
        let mut rest = serde_json::to_value(record).map_err(|err| err.to_string())?;
        if let Frame::Plain(frame) = &mut self.frame {
            self.frame = Frame::Sealed(Part::seal(std::mem::take(frame), FRAME, &mut self.secrets, request)?);
        }
        let working = rest.pointer_mut(WORKING).map(Value::take).unwrap_or_default();
        if self.made() != Some(made) {
            self.working = Some((made, Part::seal(working, WORKING, &mut self.secrets, request)?));
        }
        let mut holes = self.secrets.seal_part(&mut rest, "", request);
        let (Frame::Sealed(frame), Some((_, working))) = (&self.frame, &self.working) else {
            return Err("the record's parts were not sealed".into());
        };
        holes.extend(frame.holes.iter().chain(&working.holes).cloned());
        let parts = [(FRAME, &*frame.text), (WORKING, &*working.text)];
        let record = Spliced { value: &rest, at: String::new(), parts: &parts };
        serde_json::to_vec(&Sealed { record, secrets: holes }).map_err(|err| err.to_string())
    }
}

/// `value` written as JSON with each part (JSON written before, at an object key) in place
/// of what is at its pointer.
struct Spliced<'a> {
    value: &'a Value,
    at: String,
    parts: &'a [(&'a str, &'a RawValue)],
}

impl Serialize for Spliced<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if let Some((_, part)) = self.parts.iter().find(|(at, _)| *at == self.at) {
            return part.serialize(serializer);
        }
        let holds_a_part = self
            .parts
            .iter()
            .any(|(at, _)| at.strip_prefix(self.at.as_str()).is_some_and(|rest| rest.starts_with('/')));
        match self.value {
            Value::Object(map) if holds_a_part => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    let at = format!("{}/{}", self.at, secrets::escape(key));
                    out.serialize_entry(key, &Spliced { value, at, parts: self.parts })?;
                }
                out.end()
            }
            value => value.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextfold::compactor::Compactor;
    use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig, Whole};
    use contextfold_core::{HistoryChain, Message, Role};
    use serde_json::json;

    const KEY: &str = "AKIAZ7QW3ER5TY8UI2OP";

    /// Reads and fixes, each output quoting a key of its own, and the last turn's key too.
    fn history() -> Vec<Message> {
        let mut messages = vec![json!({"role": "user", "content": "Fix the modules."})];
        for turn in 0..14 {
            let output: String =
                (0..40).map(|line| format!("module{turn}.py:{line}: def f_{line}(x): return x * {line}\n")).collect();
            messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{turn}"),
                "name": "Read", "input": {"file_path": format!("module{turn}.py")}}]}));
            messages
                .push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{turn}"),
                "content": format!("{output}AWS key AKIAZ7QW3ER5TY8UI{turn:03}, and {KEY}")}]}));
        }
        messages.into_iter().map(|value| Message::from_value(value, 0).unwrap()).collect()
    }

    #[tokio::test]
    async fn a_writer_that_keeps_sealed_parts_writes_what_a_fresh_one_writes() {
        let history = history();
        let system = System::Text(format!("export AWS_ACCESS_KEY_ID={KEY}"));
        let frame = Record::frame(Some(&system), None);
        let middleware = CompactionMiddleware::new(Compactor::default(), MiddlewareConfig::new(6_000, 1_000));
        let mut writer = Writer::new(frame.clone(), Secrets::default());
        let (mut kept, mut compactions, mut masks) = (0, 0, 0);
        for end in (2..=history.len()).filter(|&end| history[end - 1].role == Role::User) {
            let messages = &history[..end];
            let chain = HistoryChain::of(messages);
            let whole = Whole::new(messages, &chain);
            let request = Sources { messages: &whole, system: Some(&system), tools: None };
            compactions += usize::from(middleware.prepare(messages, &[]).await.event.is_some());
            let known = writer.made();
            let (snapshot, made) = middleware.snapshot_since(known).await;
            kept += usize::from(known == Some(made));
            let bytes = writer.write(None, 6_000, snapshot, made, Some(request)).unwrap();
            let fresh = Writer::new(frame.clone(), Secrets::default())
                .write(None, 6_000, middleware.snapshot().await, made, Some(request))
                .unwrap();
            let text = String::from_utf8(bytes.clone()).unwrap();
            assert_eq!(text, String::from_utf8(fresh).unwrap(), "the record at {end}");
            assert!(!text.contains("AKIAZ7QW3ER5TY8UI"), "a key is stored at {end}: {text}");
            masks = masks.max(text.matches("[REDACTED:").count());
            let read = Record::from_bytes(&bytes, &mut Secrets::default(), request).unwrap();
            let snapshot = serde_json::to_value(middleware.snapshot().await).unwrap();
            assert_eq!((serde_json::to_value(&read.middleware).unwrap(), &read.frame), (snapshot, &frame), "at {end}");
        }
        assert!(compactions > 1 && kept > compactions, "{compactions} compactions, parts kept at {kept} calls");
        assert!(masks > 2, "the compacted messages quote keys: {masks} masks at most");
    }
}
