//! Recording one compaction in a store, and giving back the conversation it came from.
//!
//! [`StoredCompaction::write`] is the one way a compaction reaches a store (the compactor's
//! [`with_store`](crate::compactor::Compactor::with_store) and the CLI's `evict --store` both
//! go through it): the history, every removed payload, the summary and the report in one
//! transaction, with the session's [`Origin`] (input format, layout, system prompt, tools and
//! other top-level fields) as its metadata when known, so [`Origin::conversation`] can
//! rebuild the input exactly from the stored messages. With a [`Redactor`], secrets are
//! masked in all of it before anything is written.

use super::{Appended, Payload, SessionStore, StoreError, Summary};
use crate::redact::Redactor;
use contextfold_core::format::{Format, Layout, UnknownFormat};
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
            .map_err(|err: UnknownFormat| corrupt(&err.to_string()))?;
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

/// One compaction as a store keeps it. Owned, so that it can be written off the async
/// runtime's threads.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCompaction {
    /// The history that was compacted, as the caller has it.
    pub history: Vec<Message>,
    /// Where the conversation came from, kept as the session's metadata when known.
    pub origin: Option<Origin>,
    /// Every payload removed (evicted or clipped), under its ref.
    pub payloads: Vec<Payload>,
    /// The summary written, when one was.
    pub summary: Option<Summary>,
    /// The report, as JSON.
    pub report: Value,
}

impl StoredCompaction {
    /// Writes it into `session` of `store`, masking secrets with `redactor` first: the
    /// origin, then the history, payloads, summary and report in one transaction.
    pub fn write(
        mut self,
        store: &dyn SessionStore,
        session: &str,
        redactor: Option<&Redactor>,
    ) -> Result<Appended, StoreError> {
        let mut meta = self.origin.as_ref().map(Origin::to_value);
        if let Some(redactor) = redactor {
            if let Some(meta) = &mut meta {
                redactor.redact_value(meta);
            }
            redact_stored(redactor, &mut self.history, &mut self.payloads, self.summary.as_mut(), &mut self.report);
        }
        if let Some(meta) = &meta {
            store.set_session_meta(session, meta)?;
        }
        store.persist_compaction(session, &self.history, &self.payloads, self.summary.as_ref(), &self.report)
    }
}

/// Masks the secrets of everything a compaction stores: its history, its payloads (and their
/// targets, a command line may hold a token), its summary and its report; returns how many.
fn redact_stored(
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
