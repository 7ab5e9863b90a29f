//! `contextfold._native`: the engine for Python. The Pythonic API (`contextfold`, with its
//! dataclasses, docstrings and adapters) wraps these functions and classes; every call into
//! the engine runs with the GIL released, on one small Tokio runtime shared by the process.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod compact;
mod convert;
mod errors;
mod middleware;
mod store;

use pyo3::prelude::*;
use std::sync::OnceLock;

/// The runtime every call blocks on: current-thread (no threads of its own until a store or
/// summarizer call needs its blocking pool), so importing the module starts nothing.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|err| panic!("contextfold cannot start its async runtime: {err}"))
    })
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add_function(wrap_pyfunction!(compact::compact, module)?)?;
    module.add_function(wrap_pyfunction!(compact::count_tokens, module)?)?;
    module.add_class::<middleware::Middleware>()?;
    module.add_class::<store::Store>()?;
    module.add("Error", py.get_type::<errors::Error>())?;
    module.add("ConversationError", py.get_type::<errors::ConversationError>())?;
    module.add("ConfigError", py.get_type::<errors::ConfigError>())?;
    module.add("CompactionError", py.get_type::<errors::CompactionError>())?;
    module.add("StoreError", py.get_type::<errors::StoreError>())?;
    module.add("StateError", py.get_type::<errors::StateError>())?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
