//! `Store`: the cold layer, where compactions keep what they removed, read back by ref
//! (`recall`) or by words (`search`). Every call is a short transaction, run with the GIL
//! released.

use crate::{convert, errors};
use contextfold::store::{HitLocation, SessionStore, StoreLocation};
use contextfold::Message;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Arc;

/// A session store: a SQLite file (created when missing) or a PostgreSQL database
/// (`postgres://user@host/db`).
#[pyclass(module = "contextfold._native", name = "Store", frozen)]
pub struct Store {
    /// The store itself, shared with the middlewares that keep their compactions in it.
    pub(crate) inner: Arc<dyn SessionStore>,
    /// Where it is, without a URL's password.
    shown: String,
}

#[pymethods]
impl Store {
    #[new]
    fn new(py: Python<'_>, path_or_url: PathBuf) -> PyResult<Store> {
        let text = path_or_url.to_string_lossy().into_owned();
        let location = StoreLocation::parse(&text).map_err(errors::store)?;
        let shown = location.to_string();
        let inner = py.detach(|| location.open()).map_err(errors::store)?;
        Ok(Store { inner, shown })
    }

    /// The payload stored under `reference` (a `cf-…` ref from a pointer or clip marker),
    /// exactly as it was: a string or a list of content blocks; `None` when no session holds it.
    fn recall<'py>(&self, py: Python<'py>, reference: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let found = py.detach(|| self.inner.recall(reference)).map_err(errors::store)?;
        found.map(|value| convert::to_python(py, &value)).transpose()
    }

    /// Messages and payloads holding every word of `query` (any case), in one session or
    /// all, at most `limit`: dicts with `session`, `message` (its position in the stored
    /// history) or `ref` (a payload's), and `snippet` (the match marked `[`…`]`).
    #[pyo3(signature = (query, *, limit=10, session=None))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: &str,
        limit: usize,
        session: Option<&str>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let hits = py.detach(|| self.inner.search(session, query, limit)).map_err(errors::store)?;
        hits.into_iter()
            .map(|hit| {
                let dict = PyDict::new(py);
                dict.set_item("session", hit.session)?;
                match hit.location {
                    HitLocation::Message(position) => dict.set_item("message", position)?,
                    HitLocation::Payload(reference) => dict.set_item("ref", reference)?,
                }
                dict.set_item("snippet", hit.snippet)?;
                Ok(dict)
            })
            .collect()
    }

    /// Every session, oldest first: dicts with `id`, `name`, `messages`, `payloads` and
    /// `created` (seconds since the Unix epoch).
    fn sessions<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let sessions = py.detach(|| self.inner.sessions()).map_err(errors::store)?;
        sessions
            .into_iter()
            .map(|info| {
                let dict = PyDict::new(py);
                dict.set_item("id", info.id)?;
                dict.set_item("name", info.name)?;
                dict.set_item("messages", info.messages)?;
                dict.set_item("payloads", info.payloads)?;
                dict.set_item("created", info.created)?;
                Ok(dict)
            })
            .collect()
    }

    /// A session's stored history, as Anthropic Messages dicts.
    fn export<'py>(&self, py: Python<'py>, session: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let messages = py.detach(|| self.inner.export(session)).map_err(errors::store)?;
        messages.iter().map(Message::to_value).map(|value| convert::to_python(py, &value)).collect()
    }

    /// Creates an empty session called `name` and returns its id.
    fn create_session(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        py.detach(|| self.inner.create_session(name)).map_err(errors::store)
    }

    fn __repr__(&self) -> String {
        format!("Store({:?})", self.shown)
    }
}
