//! Between Python values and the engine's: JSON-shaped values through `pythonize`, and the
//! names a setting accepts (strategy, tokenizer, format, summarizer) read as the CLI reads
//! its flags.

use crate::errors;
use contextfold::compactor::{Compactor, Strategy};
use contextfold::core::format::Format;
use contextfold::core::tokens::Tokenizer;
use contextfold::redact::Redactor;
use contextfold::summarize::Summarizer;
use pyo3::prelude::*;
use serde_json::Value;
use std::sync::Arc;

/// A Python value (dicts, lists, strings, numbers, booleans, None) as JSON.
pub fn to_json(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    pythonize::depythonize(value).map_err(|err| {
        errors::conversation(format!("not a JSON-shaped value (dicts, lists, strings, numbers): {err}"), None, None)
    })
}

/// JSON as a Python value.
pub fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    pythonize::pythonize(py, value).map_err(|err| errors::Error::new_err(err.to_string()))
}

/// A strategy name: `auto`, `evict` or `summarize`.
pub fn strategy(name: &str) -> PyResult<Strategy> {
    name.parse().map_err(errors::setting)
}

/// A tokenizer name: `o200k`, `cl100k`, `estimate` or `chars4`.
pub fn tokenizer(name: &str) -> PyResult<Tokenizer> {
    name.parse().map_err(errors::setting)
}

/// A format name, or `None` to detect it.
pub fn format(name: Option<&str>) -> PyResult<Option<Format>> {
    name.map(|name| name.parse().map_err(errors::setting)).transpose()
}

/// A compactor with the summarizer `name` names (`extractive`, `anthropic[:MODEL]`,
/// `openai[:MODEL]`, the model ones configured from the environment as the CLI's are), with
/// its secrets masked before a model sees them; and the note to report when a model
/// summarizer could not be set up and `strategy` lets the extractive one stand in.
pub fn compactor(name: &str, strategy: Strategy) -> PyResult<(Compactor, Option<String>)> {
    let (provider, model) = match name.split_once(':') {
        Some((provider, model)) => (provider, Some(model)),
        None => (name, None),
    };
    let built: Result<Arc<dyn Summarizer>, String> = match provider {
        "extractive" => return Ok((Compactor::default(), None)),
        "anthropic" => {
            let mut builder = contextfold::summarize::http::Anthropic::from_env();
            if let Some(model) = model {
                builder = builder.model(model);
            }
            builder.build().map(|built| Arc::new(built) as Arc<dyn Summarizer>).map_err(|err| err.to_string())
        }
        "openai" => {
            let mut builder = contextfold::summarize::http::OpenAiCompatible::from_env();
            if let Some(model) = model {
                builder = builder.model(model);
            }
            builder.build().map(|built| Arc::new(built) as Arc<dyn Summarizer>).map_err(|err| err.to_string())
        }
        _ => {
            return Err(errors::setting(format!(
                "unknown summarizer `{name}` (expected extractive, anthropic[:MODEL] or openai[:MODEL])"
            )))
        }
    };
    match built {
        Ok(model) => Ok((Compactor::new(model).with_redactor(Redactor::default()), None)),
        Err(err) if strategy == Strategy::Auto => {
            Ok((Compactor::default(), Some(format!("{err}; using the extractive summarizer instead"))))
        }
        Err(err) => Err(errors::setting(format!("cannot set up the summarizer: {err}"))),
    }
}
