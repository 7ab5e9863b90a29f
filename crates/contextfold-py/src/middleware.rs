//! `Middleware`: one conversation's `CompactionMiddleware`, fed the caller's message dicts
//! before each model call.
//!
//! A call costs what is new. The caller's entries are kept, and the next history is compared
//! with them by identity: only the entries after the last one seen are read (an Anthropic
//! message is one entry; an OpenAI list is read again from its cached JSON, since its entries
//! merge into messages). The last entry seen is read again, so one changed in place starts
//! the history over, as the engine would. What is sent is built from Python objects: the
//! caller's own for the messages it gave and the engine kept as they were, and the
//! compaction's messages written out once per compaction, so the prefix sent between two
//! compactions is the very same objects, and the provider's prompt cache holds.

use crate::convert;
use crate::errors;
use crate::runtime;
use crate::store::Store;
use contextfold::compactor::{Compactor, Target};
use contextfold::core::format::{openai, responses, FormatError, Spans};
use contextfold::core::{Conversation, Message, System};
use contextfold::middleware::{CompactionMiddleware, MiddlewareConfig, MiddlewareState, Prepared};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::{json, Value};
use std::ops::Range;
use std::sync::Arc;

/// The message format a middleware is given and sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    /// Anthropic Messages: one entry, one message.
    Anthropic,
    /// OpenAI Chat Completions messages: runs of one side merge into one message.
    OpenAi,
    /// OpenAI Responses input items: runs of one side merge into one message.
    Responses,
}

impl Wire {
    fn parse(name: &str) -> PyResult<Wire> {
        match name {
            "anthropic" => Ok(Wire::Anthropic),
            "openai" => Ok(Wire::OpenAi),
            "responses" => Ok(Wire::Responses),
            other => Err(errors::setting(format!(
                "unknown middleware format `{other}` (expected anthropic, openai or responses)"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
            Wire::Responses => "responses",
        }
    }

    /// Reads a list of entries (OpenAI or Responses), with the entries of each message.
    fn read_list(self, entries: Vec<Value>) -> Result<(Conversation, Spans), FormatError> {
        match self {
            Wire::Responses => responses::from_value_spanned(Value::Array(entries)),
            _ => openai::from_value_spanned(Value::Array(entries)),
        }
    }

    /// The entries of `messages` in this format.
    fn write_list(self, messages: &[Message]) -> Vec<Value> {
        let conversation = Conversation { messages: messages.to_vec(), ..Conversation::default() };
        match self {
            Wire::Anthropic => messages.iter().map(Message::to_value).collect(),
            Wire::Responses => responses::items(&conversation),
            Wire::OpenAi => match openai::to_value(&conversation) {
                Value::Object(mut map) => match map.remove("messages") {
                    Some(Value::Array(entries)) => entries,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            },
        }
    }
}

/// The caller's history as last read.
#[derive(Default)]
struct Ingested {
    /// The caller's entries, the same objects it gave.
    entries: Vec<Py<PyAny>>,
    /// OpenAI: each entry as JSON, to read the list again.
    values: Vec<Value>,
    /// The messages read from them.
    messages: Vec<Message>,
    /// The entries of each message.
    spans: Vec<Range<usize>>,
    /// How many leading entries are the system prompt (OpenAI).
    system_entries: usize,
    /// The system prompt they hold.
    system: Option<System>,
}

/// One conversation's engine, and what it was last given and sent.
struct Held {
    engine: Arc<CompactionMiddleware>,
    compactor: Compactor,
    config: MiddlewareConfig,
    wire: Wire,
    ingested: Ingested,
    /// The messages a compaction made, as sent (Python objects), and how many messages they
    /// are: kept until the next compaction.
    made: Option<(Vec<Py<PyAny>>, usize)>,
}

/// One conversation's compaction middleware (see the Python wrapper `contextfold.Middleware`).
#[pyclass(module = "contextfold._native", name = "Middleware", frozen)]
pub struct Middleware {
    conversation: Arc<tokio::sync::Mutex<Held>>,
    session: Option<String>,
}

/// The settings both `Middleware()` and `Middleware.restore` take.
struct Settings {
    compactor: Compactor,
    config: MiddlewareConfig,
    wire: Wire,
    session: Option<String>,
}

#[allow(clippy::too_many_arguments)]
fn settings(
    py: Python<'_>,
    window: u64,
    reserve: u64,
    target: f64,
    system: Option<&Bound<'_, PyAny>>,
    tools: Option<&Bound<'_, PyAny>>,
    store: Option<&Bound<'_, Store>>,
    session: Option<String>,
    format: &str,
    strategy: &str,
    summarizer: &str,
    tokenizer: &str,
    recall_tool: bool,
) -> PyResult<Settings> {
    let wire = Wire::parse(format)?;
    let mut config = MiddlewareConfig::new(window, reserve);
    config.compact.target = Target::Window { window, reserve, fraction: target };
    config.compact.strategy = convert::strategy(strategy)?;
    config.compact.evict.recall_tool = recall_tool.then(|| contextfold::store::RECALL_TOOL_NAME.to_string());
    config.system = system.map(read_system).transpose()?;
    config.tools = match tools {
        None => None,
        Some(tools) => match convert::to_json(tools)? {
            Value::Array(tools) => Some(tools),
            _ => return Err(errors::setting("`tools` must be a list of tool definitions")),
        },
    };
    config.check().map_err(errors::config)?;
    let (compactor, _) = convert::compactor(summarizer, config.compact.strategy)?;
    let mut compactor = compactor.with_counter(convert::tokenizer(tokenizer)?.shared());
    let session = match store {
        None if session.is_some() => return Err(errors::setting("a session is kept in a store: give one")),
        None => None,
        Some(store) => {
            let store = store.get().inner.clone();
            let session = match session {
                Some(session) => session,
                None => py.detach(|| store.create_session("python")).map_err(errors::store)?,
            };
            compactor = compactor.with_store(store, session.clone());
            Some(session)
        }
    };
    Ok(Settings { compactor, config, wire, session })
}

/// A system prompt: a string, or a list of Anthropic content blocks.
fn read_system(system: &Bound<'_, PyAny>) -> PyResult<System> {
    let value = convert::to_json(system)?;
    let read = Conversation::from_value(json!({"system": value, "messages": []}))
        .map_err(|err| errors::format(FormatError::Model(err)))?;
    read.system.ok_or_else(|| errors::setting("the system prompt must be a string or a list of blocks"))
}

/// A system prompt as JSON (a string or Anthropic blocks).
fn system_json(system: &Option<System>) -> Value {
    let conversation = Conversation { system: system.clone(), ..Conversation::default() };
    conversation.to_value().get("system").cloned().unwrap_or(Value::Null)
}

impl Held {
    fn new(settings: Settings, engine: CompactionMiddleware) -> Held {
        Held {
            engine: Arc::new(engine),
            compactor: settings.compactor,
            config: settings.config,
            wire: settings.wire,
            ingested: Ingested::default(),
            made: None,
        }
    }

    /// Brings the read history up to `history`, reading only what is new.
    fn ingest(&mut self, py: Python<'_>, history: &[Bound<'_, PyAny>]) -> PyResult<()> {
        let ingested = &mut self.ingested;
        let mut same = ingested.entries.iter().zip(history).take_while(|(seen, given)| given.is(*seen)).count();
        // The last entry the engine saw may have been changed in place.
        if same > 0 {
            let again = convert::to_json(&history[same - 1])?;
            let changed = match self.wire {
                Wire::Anthropic => read_message(again, same - 1)? != ingested.messages[same - 1],
                Wire::OpenAi | Wire::Responses => again != ingested.values[same - 1],
            };
            if changed {
                same -= 1;
            }
        }
        ingested.entries.truncate(same);
        ingested.entries.extend(history[same..].iter().map(|entry| entry.clone().unbind()));
        match self.wire {
            Wire::Anthropic => {
                ingested.messages.truncate(same);
                ingested.spans.truncate(same);
                for (index, entry) in history.iter().enumerate().skip(same) {
                    ingested.messages.push(read_message(convert::to_json(entry)?, index)?);
                    ingested.spans.push(index..index + 1);
                }
            }
            Wire::OpenAi | Wire::Responses => {
                ingested.values.truncate(same);
                for entry in &history[same..] {
                    ingested.values.push(convert::to_json(entry)?);
                }
                let (wire, values) = (self.wire, ingested.values.clone());
                let (conversation, spans) = py.detach(|| wire.read_list(values)).map_err(errors::format)?;
                ingested.messages = conversation.messages;
                ingested.spans = spans.messages;
                ingested.system_entries = spans.system;
                if conversation.system != ingested.system {
                    ingested.system = conversation.system.clone();
                    self.resystem(py, conversation.system)?;
                }
            }
        }
        Ok(())
    }

    /// Goes on with the system prompt `system` (read from an OpenAI list's leading entries).
    fn resystem(&mut self, py: Python<'_>, system: Option<System>) -> PyResult<()> {
        let engine = self.engine.clone();
        let state = py.detach(|| runtime().block_on(engine.snapshot()));
        self.config.system = system;
        let engine =
            CompactionMiddleware::restore(self.compactor.clone(), self.config.clone(), state).map_err(errors::state)?;
        self.engine = Arc::new(engine);
        self.made = None;
        Ok(())
    }

    /// The pending input as messages (its indices follow the history's).
    fn read_pending(&self, py: Python<'_>, pending: &[Bound<'_, PyAny>], offset: usize) -> PyResult<Vec<Message>> {
        match self.wire {
            Wire::Anthropic => pending
                .iter()
                .enumerate()
                .map(|(index, entry)| read_message(convert::to_json(entry)?, offset + index))
                .collect(),
            Wire::OpenAi | Wire::Responses => {
                let (wire, values) = (self.wire, pending.iter().map(convert::to_json).collect::<PyResult<Vec<_>>>()?);
                let (conversation, _) = py
                    .detach(|| wire.read_list(values))
                    .map_err(|err| errors::conversation(format!("pending input: {err}"), None, None))?;
                if conversation.system.is_some() {
                    return Err(errors::conversation(
                        "pending input: a system message belongs at the start of the history".into(),
                        Some(offset),
                        None,
                    ));
                }
                Ok(conversation.messages)
            }
        }
    }

    /// The Python objects of `messages` (a compaction's), in this middleware's format.
    fn write(&self, py: Python<'_>, messages: &[Message]) -> PyResult<Vec<Py<PyAny>>> {
        self.wire.write_list(messages).iter().map(|value| convert::to_python(py, value).map(Bound::unbind)).collect()
    }

    /// The list to send for `prepared`: the system entries, the compaction's messages, the
    /// caller's messages the engine kept as given, the pending input.
    fn sent<'py>(
        &mut self,
        py: Python<'py>,
        prepared: &Prepared,
        history: &[Bound<'py, PyAny>],
        pending: &[Bound<'py, PyAny>],
    ) -> PyResult<Bound<'py, PyList>> {
        let read = self.ingested.messages.len();
        let tail = prepared.unchanged_tail.min(prepared.history.len()).min(read);
        let made = prepared.history.len() - tail;
        if prepared.event.is_some() || self.made.as_ref().map(|(_, count)| *count) != Some(made) {
            let objects = self.write(py, &prepared.history[..made])?;
            self.made = Some((objects, made));
        }
        let list = PyList::empty(py);
        for entry in &history[..self.ingested.system_entries] {
            list.append(entry)?;
        }
        for object in self.made.iter().flat_map(|(objects, _)| objects) {
            list.append(object.bind(py))?;
        }
        let first = if tail == 0 { history.len() } else { self.ingested.spans[read - tail].start };
        for entry in history[first..].iter().chain(pending) {
            list.append(entry)?;
        }
        Ok(list)
    }
}

/// An Anthropic message dict read as message `index`.
fn read_message(value: Value, index: usize) -> PyResult<Message> {
    Message::from_value(value, index).map_err(|err| errors::format(FormatError::Model(err)))
}

/// What `prepare` hands the Python wrapper: the list to send, the event (or `None`), how
/// many of the newest history messages are the caller's own, the estimated request tokens,
/// why no compaction ran, and what went wrong.
type PreparedOutput<'py> = (Bound<'py, PyList>, Option<Bound<'py, PyAny>>, usize, u64, Option<String>, Option<String>);

#[pymethods]
impl Middleware {
    #[new]
    #[pyo3(signature = (window, reserve, *, target=0.2, system=None, tools=None, store=None, session=None,
        format="anthropic", strategy="auto", summarizer="extractive", tokenizer="o200k", recall_tool=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        window: u64,
        reserve: u64,
        target: f64,
        system: Option<&Bound<'_, PyAny>>,
        tools: Option<&Bound<'_, PyAny>>,
        store: Option<&Bound<'_, Store>>,
        session: Option<String>,
        format: &str,
        strategy: &str,
        summarizer: &str,
        tokenizer: &str,
        recall_tool: bool,
    ) -> PyResult<Middleware> {
        let settings = settings(
            py,
            window,
            reserve,
            target,
            system,
            tools,
            store,
            session,
            format,
            strategy,
            summarizer,
            tokenizer,
            recall_tool,
        )?;
        let engine = CompactionMiddleware::new(settings.compactor.clone(), settings.config.clone());
        let session = settings.session.clone();
        Ok(Middleware { conversation: Arc::new(tokio::sync::Mutex::new(Held::new(settings, engine))), session })
    }

    /// A middleware that goes on from `state`, a `snapshot()` of one made with the same
    /// settings.
    #[staticmethod]
    #[pyo3(signature = (state, window, reserve, *, target=0.2, system=None, tools=None, store=None, session=None,
        format="anthropic", strategy="auto", summarizer="extractive", tokenizer="o200k", recall_tool=false))]
    #[allow(clippy::too_many_arguments)]
    fn restore(
        py: Python<'_>,
        state: &Bound<'_, PyAny>,
        window: u64,
        reserve: u64,
        target: f64,
        system: Option<&Bound<'_, PyAny>>,
        tools: Option<&Bound<'_, PyAny>>,
        store: Option<&Bound<'_, Store>>,
        session: Option<String>,
        format: &str,
        strategy: &str,
        summarizer: &str,
        tokenizer: &str,
        recall_tool: bool,
    ) -> PyResult<Middleware> {
        let snapshot = convert::to_json(state)?;
        let bad = |why: &str| errors::StateError::new_err(format!("not a middleware snapshot: {why}"));
        if snapshot.get("format").and_then(Value::as_str) != Some(format) {
            return Err(bad(&format!("it was taken of a middleware for another format than {format}")));
        }
        let engine_state: MiddlewareState =
            serde_json::from_value(snapshot.get("state").cloned().unwrap_or(Value::Null))
                .map_err(|err| bad(&err.to_string()))?;
        let mut settings = settings(
            py,
            window,
            reserve,
            target,
            system,
            tools,
            store,
            session,
            format,
            strategy,
            summarizer,
            tokenizer,
            recall_tool,
        )?;
        if settings.wire != Wire::Anthropic {
            // The system prompt the list's leading entries carried.
            let system = match snapshot.get("system") {
                None | Some(Value::Null) => None,
                Some(value) => {
                    Conversation::from_value(json!({"system": value, "messages": []}))
                        .map_err(|err| bad(&err.to_string()))?
                        .system
                }
            };
            settings.config.system = system;
        }
        let system = settings.config.system.clone();
        let engine = CompactionMiddleware::restore(settings.compactor.clone(), settings.config.clone(), engine_state)
            .map_err(errors::state)?;
        let session = settings.session.clone();
        let mut conversation = Held::new(settings, engine);
        conversation.ingested.system = system;
        Ok(Middleware { conversation: Arc::new(tokio::sync::Mutex::new(conversation)), session })
    }

    /// Decides what to send: see `contextfold.Middleware.prepare`.
    #[pyo3(signature = (history, pending=Vec::new()))]
    fn prepare<'py>(
        &self,
        py: Python<'py>,
        history: Vec<Bound<'py, PyAny>>,
        pending: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<PreparedOutput<'py>> {
        let shared = self.conversation.clone();
        let mut conversation = py.detach(|| runtime().block_on(shared.lock_owned()));
        conversation.ingest(py, &history)?;
        let pending_messages = conversation.read_pending(py, &pending, history.len())?;
        let engine = conversation.engine.clone();
        let messages = &conversation.ingested.messages;
        let prepared = py.detach(|| runtime().block_on(engine.prepare(messages, &pending_messages)));
        let list = conversation.sent(py, &prepared, &history, &pending)?;
        let event = match &prepared.event {
            Some(event) => Some(convert::to_python(
                py,
                &serde_json::to_value(event).map_err(|err| errors::Error::new_err(err.to_string()))?,
            )?),
            None => None,
        };
        Ok((
            list,
            event,
            prepared.unchanged_tail,
            prepared.request_tokens,
            prepared.skipped,
            prepared.error.map(|err| err.to_string()),
        ))
    }

    /// Corrects the estimate with the provider's count of the last request's input tokens.
    fn observe_usage(&self, py: Python<'_>, input_tokens: u64) {
        let shared = self.conversation.clone();
        let conversation = py.detach(|| runtime().block_on(shared.lock_owned()));
        conversation.engine.observe_usage(input_tokens);
    }

    /// The state as JSON-shaped dicts, for `Middleware.restore`.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let shared = self.conversation.clone();
        let (state, wire, system) = py.detach(|| {
            let conversation = runtime().block_on(shared.lock_owned());
            let state = runtime().block_on(conversation.engine.snapshot());
            (state, conversation.wire, conversation.ingested.system.clone())
        });
        let dict = PyDict::new(py);
        dict.set_item("format", wire.name())?;
        dict.set_item("system", convert::to_python(py, &system_json(&system))?)?;
        let state = serde_json::to_value(&state).map_err(|err| errors::Error::new_err(err.to_string()))?;
        dict.set_item("state", convert::to_python(py, &state)?)?;
        Ok(dict)
    }

    /// The store session compactions are kept in, with a store.
    #[getter]
    fn session(&self) -> Option<String> {
        self.session.clone()
    }
}
