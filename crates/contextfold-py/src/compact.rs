//! `compact` and `count_tokens`: one conversation in, as the dicts (or JSON text) a caller
//! has, read and written in its own format, with the GIL released for the engine's work.
//!
//! The settings are the CLI's `compact` flags with the CLI's defaults, and the input is read
//! by the CLI's reader (`format::parse`, the format detected as the CLI detects it), so the
//! same conversation and settings give the report `contextfold compact --json` prints.

use crate::{convert, errors, runtime};
use contextfold::compactor::{ClipLimit, CompactConfig, Target, Undersized};
use contextfold::core::format::{self, Format};
use contextfold::core::plan::PlanConfig;
use contextfold::core::tokens::count_conversation;
use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;

/// The input as the reader takes it: text as given, anything else as its JSON.
fn input_text(conversation: &Bound<'_, PyAny>) -> PyResult<Text> {
    match conversation.cast::<PyString>() {
        Ok(text) => Ok(Text::Raw(text.to_cow()?.into_owned())),
        Err(_) => Ok(Text::Json(convert::to_json(conversation)?)),
    }
}

/// A conversation to read: JSON text (or a Claude Code log), or a JSON value.
enum Text {
    Raw(String),
    Json(Value),
}

impl Text {
    fn parse(self, format: Option<Format>) -> PyResult<format::Parsed> {
        let text = match self {
            Text::Raw(text) => text,
            Text::Json(value) => value.to_string(),
        };
        format::parse(&text, format).map_err(errors::format)
    }
}

/// What `compact` hands back to the Python wrapper: the conversation in its format, the
/// report (the `--json` object), the format's name and the reader's notes.
type CompactOutput = (Py<PyAny>, Py<PyAny>, &'static str, Vec<String>);

/// The compaction configuration the CLI's flags of the same names make.
#[allow(clippy::too_many_arguments)]
fn config(
    budget: Option<u64>,
    window: Option<u64>,
    reserve: Option<u64>,
    target_fraction: f64,
    keep_turns: Option<usize>,
    max_tail_tokens: Option<u64>,
    summary_tokens: u64,
    max_tool_output: Option<u64>,
) -> PyResult<CompactConfig> {
    let target = match (budget, window) {
        (Some(_), Some(_)) => return Err(errors::setting("give a budget or a window, not both")),
        (Some(budget), None) => Target::Budget(budget),
        (None, Some(window)) => {
            Target::Window { window, reserve: reserve.unwrap_or(16_000), fraction: target_fraction }
        }
        (None, None) if reserve.is_some() => {
            return Err(errors::setting("a reserve is kept out of a window: give one"))
        }
        (None, None) => Target::Shrink(0.5),
    };
    let defaults = CompactConfig::default();
    let config = CompactConfig {
        target,
        plan: PlanConfig { keep_turns, max_tail_tokens, ..defaults.plan.clone() },
        summary_tokens,
        // A size the caller asked for that no summary fits is an error naming the smallest
        // that works; the default (half the input) is raised to it instead.
        undersized: match target {
            Target::Shrink(_) => Undersized::Raise,
            _ => Undersized::Fail,
        },
        max_tool_output: match max_tool_output {
            None => ClipLimit::Auto,
            Some(0) => ClipLimit::Off,
            Some(tokens) => ClipLimit::Tokens(tokens),
        },
        ..defaults
    };
    config.check().map_err(errors::config)?;
    Ok(config)
}

/// Compacts `conversation` (see the Python wrapper `contextfold.compact`).
#[pyfunction]
#[pyo3(signature = (conversation, *, budget=None, window=None, reserve=None, target_fraction=0.5,
    strategy="auto", summarizer="extractive", format=None, tokenizer="o200k", keep_turns=None,
    max_tail_tokens=None, summary_tokens=4000, max_tool_output=None))]
#[allow(clippy::too_many_arguments)]
pub fn compact(
    py: Python<'_>,
    conversation: &Bound<'_, PyAny>,
    budget: Option<u64>,
    window: Option<u64>,
    reserve: Option<u64>,
    target_fraction: f64,
    strategy: &str,
    summarizer: &str,
    format: Option<&str>,
    tokenizer: &str,
    keep_turns: Option<usize>,
    max_tail_tokens: Option<u64>,
    summary_tokens: u64,
    max_tool_output: Option<u64>,
) -> PyResult<CompactOutput> {
    let mut config =
        config(budget, window, reserve, target_fraction, keep_turns, max_tail_tokens, summary_tokens, max_tool_output)?;
    config.strategy = convert::strategy(strategy)?;
    let format = convert::format(format)?;
    let counter = convert::tokenizer(tokenizer)?.shared();
    let (compactor, note) = convert::compactor(summarizer, config.strategy)?;
    let compactor = compactor.with_counter(counter);
    let text = input_text(conversation)?;
    let (output, report, format, notes) = py.detach(move || -> PyResult<_> {
        let parsed = text.parse(format)?;
        let mut compacted =
            runtime().block_on(compactor.compact(&parsed.conversation, &config)).map_err(errors::compact)?;
        compacted.report.notes.extend(note);
        let written = format::to_value(&compacted.conversation, parsed.format.writable(), parsed.layout)
            .map_err(errors::format)?;
        let report = serde_json::to_value(&compacted.report).map_err(|err| errors::Error::new_err(err.to_string()))?;
        Ok((written, report, parsed.format.writable(), parsed.notes))
    })?;
    Ok((convert::to_python(py, &output)?.unbind(), convert::to_python(py, &report)?.unbind(), format.name(), notes))
}

/// Counts the tokens of a conversation (dicts, read as `compact` reads them), or of a
/// string as plain text.
#[pyfunction]
#[pyo3(signature = (conversation_or_text, tokenizer="o200k", *, format=None))]
pub fn count_tokens(
    py: Python<'_>,
    conversation_or_text: &Bound<'_, PyAny>,
    tokenizer: &str,
    format: Option<&str>,
) -> PyResult<u64> {
    let counter = convert::tokenizer(tokenizer)?.counter();
    let format = convert::format(format)?;
    if let Ok(text) = conversation_or_text.cast::<PyString>() {
        let text = text.to_cow()?.into_owned();
        return Ok(py.detach(move || counter.count_text(&text)));
    }
    let value = convert::to_json(conversation_or_text)?;
    py.detach(move || {
        let parsed = Text::Json(value).parse(format)?;
        Ok(count_conversation(counter, &parsed.conversation))
    })
}
