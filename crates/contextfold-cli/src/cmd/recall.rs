//! `contextfold recall`: a removed payload, exactly as it was.

use crate::args::RecallArgs;
use crate::output;
use anyhow::bail;
use serde_json::Value;
use std::process::ExitCode;

pub fn run(args: RecallArgs) -> anyhow::Result<ExitCode> {
    let (location, store) = args.store.open_read_only()?;
    let Some(payload) = store.recall(&args.reference).map_err(|err| super::store::error(&location, err))? else {
        bail!("no payload `{}` in store {location}", args.reference);
    };
    // A text payload is its text; a block list is its JSON. Nothing is added, so the
    // output can be piped or compared byte for byte.
    match payload {
        Value::String(text) => output::print(&text)?,
        other => output::print(&serde_json::to_string(&other)?)?,
    }
    Ok(ExitCode::SUCCESS)
}
