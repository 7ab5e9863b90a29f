//! Recording one compaction in a store, and giving back the conversation it came from.
//!
//! [`record`] keeps the input history, every removed payload, the summary and the report in
//! one session, with the session's [`Origin`] (input format, layout, system prompt, tools
//! and other top-level fields) as its metadata, so [`Origin::conversation`] can rebuild the
//! input exactly from the stored messages. With a [`Redactor`], secrets are masked in all of
//! it before anything is written.

use super::{message_hash, Payload, SessionId, SessionStore, StoreError, Summary};
use crate::redact::Redactor;
use contextfold_core::clip::Clipped;
use contextfold_core::evict::Offload;
use contextfold_core::format::{Format, Layout};
use contextfold_core::hash::StableHasher;
use contextfold_core::summary::split_summary;
use contextfold_core::{Conversation, Message};
use serde_json::{json, Value};

/// Where a stored conversation came from: everything of it but its messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// The format it was read as.
    pub format: Format,
    /// Whether it was a request object or a bare array of messages.
    pub layout: Layout,
    /// The conversation without its messages: system prompt, tools, other fields.
    pub frame: Conversation,
}

impl Origin {
    /// The origin of `conversation`, read as `format` in `layout`.
    pub fn new(conversation: &Conversation, format: Format, layout: Layout) -> Origin {
        let frame = Conversation {
            system: conversation.system.clone(),
            messages: Vec::new(),
            tools: conversation.tools.clone(),
            extra: conversation.extra.clone(),
        };
        Origin { format, layout, frame }
    }

    /// The session metadata: `{"format", "layout", "frame", "extra"}`, the frame's other
    /// fields apart so that reading them back keeps their order.
    pub fn to_value(&self) -> Value {
        let layout = match self.layout {
            Layout::Object => "object",
            Layout::Array => "array",
        };
        let frame = Conversation { extra: Default::default(), ..self.frame.clone() };
        json!({"format": self.format.name(), "layout": layout, "frame": frame.to_value(), "extra": self.frame.extra})
    }

    /// Reads session metadata written by [`Origin::to_value`].
    pub fn from_value(meta: &Value) -> Result<Origin, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("session metadata: {what}"));
        let format: Format = meta["format"]
            .as_str()
            .ok_or_else(|| corrupt("no format"))?
            .parse()
            .map_err(|err: String| corrupt(&err))?;
        let layout = match meta["layout"].as_str() {
            Some("array") => Layout::Array,
            Some("object") => Layout::Object,
            _ => return Err(corrupt("no layout")),
        };
        let mut frame = Conversation::from_value(meta["frame"].clone()).map_err(|err| corrupt(&err.message))?;
        frame.extra = match &meta["extra"] {
            Value::Object(extra) => extra.clone(),
            _ => return Err(corrupt("no extra fields")),
        };
        Ok(Origin { format, layout, frame })
    }

    /// The conversation with `messages`: the stored history in its original frame.
    pub fn conversation(&self, messages: Vec<Message>) -> Conversation {
        Conversation { messages, ..self.frame.clone() }
    }
}

/// Which session a compaction goes to.
#[derive(Debug, Clone, Copy)]
pub enum Destination<'a> {
    /// A new session with this name.
    New(&'a str),
    /// An existing session: its history grows by what it does not hold yet.
    Existing(&'a str),
}

/// One compaction, as it is recorded.
#[derive(Debug, Clone, Copy)]
pub struct Compaction<'a> {
    /// The conversation that was compacted (its history is stored).
    pub input: &'a Conversation,
    /// Where it came from.
    pub format: Format,
    /// Its layout.
    pub layout: Layout,
    /// The compacted conversation, where the summary is found.
    pub output: &'a Conversation,
    /// The payloads eviction removed.
    pub offloaded: &'a [Offload],
    /// The payloads clipping cut.
    pub clipped: &'a [Clipped],
    /// Messages of `input` folded into the summary.
    pub folded: usize,
    /// The summarizer that wrote the summary, if any, and what it cost.
    pub summarizer: Option<(&'a str, crate::summarize::Usage)>,
    /// The report, as JSON.
    pub report: &'a Value,
}

/// Records `compaction` in `store`, in session `into`, masking secrets with `redactor`;
/// returns the session's id.
///
/// The history, payloads, summary and report are written in one transaction. A new session
/// is deleted again when that fails, so a failed call leaves nothing behind.
pub fn record(
    store: &dyn SessionStore,
    into: Destination<'_>,
    compaction: &Compaction<'_>,
    redactor: Option<&Redactor>,
) -> Result<SessionId, StoreError> {
    let session = match into {
        Destination::New(name) => store.create_session(name)?,
        Destination::Existing(id) => id.to_string(),
    };
    let result = write(store, &session, compaction, redactor);
    if let (Err(_), Destination::New(_)) = (&result, into) {
        // Best effort: the error that matters is the first one.
        let _ = store.delete_session(&session);
    }
    result.map(|()| session)
}

fn write(
    store: &dyn SessionStore,
    session: &str,
    compaction: &Compaction<'_>,
    redactor: Option<&Redactor>,
) -> Result<(), StoreError> {
    let mut messages = compaction.input.messages.clone();
    let mut meta = Origin::new(compaction.input, compaction.format, compaction.layout).to_value();
    let mut payloads: Vec<Payload> = compaction
        .offloaded
        .iter()
        .map(|item| Payload::from_offload(session, item))
        .chain(compaction.clipped.iter().map(|item| Payload::from_clipped(session, item)))
        .collect();
    let mut summary = summary(compaction);
    let mut report = compaction.report.clone();
    if let Some(redactor) = redactor {
        redactor.redact_value(&mut meta);
        redact_stored(redactor, &mut messages, &mut payloads, summary.as_mut(), &mut report);
    }
    store.set_session_meta(session, &meta)?;
    store.persist_compaction(session, &messages, &payloads, summary.as_ref(), &report)?;
    Ok(())
}

/// Masks the secrets of everything a compaction stores: its history, its payloads (and their
/// targets, a command line may hold a token), its summary and its report; returns how many.
pub(crate) fn redact_stored(
    redactor: &Redactor,
    messages: &mut [Message],
    payloads: &mut [Payload],
    summary: Option<&mut Summary>,
    report: &mut Value,
) -> usize {
    let mut count: usize = messages.iter_mut().map(|message| redactor.redact_message(message)).sum();
    for payload in payloads {
        count += redactor.redact_value(&mut payload.payload);
        count += payload.target.as_mut().map_or(0, |target| redactor.redact_string(target));
    }
    count += summary.map_or(0, |summary| redactor.redact_string(&mut summary.text));
    count + redactor.redact_value(report)
}

/// The summary this compaction wrote (none when it folded nothing), keyed by the hash of
/// the messages it folded.
fn summary(compaction: &Compaction<'_>) -> Option<Summary> {
    let (summarizer, usage) = compaction.summarizer.filter(|_| compaction.folded > 0)?;
    let text = compaction.output.messages.iter().find_map(split_summary)?.summary;
    let mut hasher = StableHasher::default();
    for message in compaction.input.messages.iter().take(compaction.folded) {
        hasher.write(message_hash(message).as_bytes());
    }
    Some(Summary { head_hash: format!("{:016x}", hasher.finish()), summarizer: summarizer.to_string(), text, usage })
}
