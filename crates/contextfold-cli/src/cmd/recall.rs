//! `contextfold recall`: a removed payload, exactly as it was.

use crate::args::RecallArgs;
use crate::output;
use anyhow::bail;
use contextfold::store::SessionStore;
use serde_json::Value;
use std::process::ExitCode;

pub fn run(args: RecallArgs) -> anyhow::Result<ExitCode> {
    let path = &args.store.store;
    let store = super::store::open_read_only(path)?;
    let Some(payload) = store.recall(&args.reference).map_err(|err| super::store::error(path, err))? else {
        bail!("no payload `{}` in store {}", args.reference, path.display());
    };
    // A text payload is its text; a block list is its JSON. Nothing is added, so the
    // output can be piped or compared byte for byte.
    match payload {
        Value::String(text) => output::print(&text)?,
        other => output::print(&serde_json::to_string(&other)?)?,
    }
    Ok(ExitCode::SUCCESS)
}
