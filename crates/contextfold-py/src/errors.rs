//! The exceptions the package raises: one base class, `contextfold.Error`, and a subclass
//! per kind of failure, each carrying the engine's own message (and, for a conversation that
//! cannot be read or compacted, the index of the message at fault).

use contextfold::compactor::{CompactError, ConfigError as EngineConfigError};
use contextfold::core::format::FormatError;
use contextfold::middleware::StateError as EngineStateError;
use contextfold::store::StoreError as EngineStoreError;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::{create_exception, PyErr};

create_exception!(_native, Error, PyException, "The base class of every error contextfold raises.");
create_exception!(
    _native,
    ConversationError,
    Error,
    "The conversation cannot be read, or breaks a rule repair cannot fix; `message_index` and `block_index` say where."
);
create_exception!(_native, ConfigError, Error, "Settings that cannot work (or contradict each other).");
create_exception!(_native, CompactionError, Error, "The compaction could not produce a valid conversation.");
create_exception!(_native, StoreError, Error, "The store failed, or could not be opened.");
create_exception!(_native, StateError, Error, "A middleware snapshot that cannot be restored.");

/// A `ConversationError` with `message` at message `message_index` (block `block_index`).
pub fn conversation(message: String, message_index: Option<usize>, block_index: Option<usize>) -> PyErr {
    Python::attach(|py| {
        let err = ConversationError::new_err(message);
        let value = err.value(py);
        // Setting attributes on a fresh exception object cannot fail.
        let _ = value.setattr("message_index", message_index);
        let _ = value.setattr("block_index", block_index);
        err
    })
}

/// The exception for a conversation that cannot be read.
pub fn format(err: FormatError) -> PyErr {
    let (message_index, block_index) = match &err {
        FormatError::Model(model) => (model.location.message, model.location.block),
        FormatError::Item { index, .. } => (Some(*index), None),
        _ => (None, None),
    };
    conversation(err.to_string(), message_index, block_index)
}

/// The exception for a compaction that failed.
pub fn compact(err: CompactError) -> PyErr {
    match err {
        CompactError::Input(problems) => {
            let (message, block) =
                problems.first().map_or((None, None), |problem| (Some(problem.message), problem.block));
            conversation(CompactError::Input(problems).to_string(), message, block)
        }
        CompactError::Config(err) => config(err),
        CompactError::Store { source, .. } => store(source),
        other => CompactionError::new_err(other.to_string()),
    }
}

/// The exception for settings that cannot work.
pub fn config(err: EngineConfigError) -> PyErr {
    ConfigError::new_err(err.to_string())
}

/// The exception for a store that failed.
pub fn store(err: EngineStoreError) -> PyErr {
    StoreError::new_err(err.to_string())
}

/// The exception for a snapshot that cannot be restored.
pub fn state(err: EngineStateError) -> PyErr {
    StateError::new_err(err.to_string())
}

/// The exception for a value a setting does not accept (`what` names it).
pub fn setting(what: impl std::fmt::Display) -> PyErr {
    ConfigError::new_err(what.to_string())
}
