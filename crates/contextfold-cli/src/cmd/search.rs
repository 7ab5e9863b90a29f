//! `contextfold search`: full-text search over stored history and payloads.

use crate::args::SearchArgs;
use crate::output;
use contextfold::store::{Hit, HitLocation};
use serde::Serialize;
use std::process::ExitCode;

/// One hit as JSON: `session`, then `message` (its position in the history) or `ref`, then
/// `snippet` (the match marked `[`…`]`).
#[derive(Serialize)]
struct JsonHit<'a> {
    session: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<usize>,
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    reference: Option<&'a str>,
    snippet: &'a str,
}

impl<'a> From<&'a Hit> for JsonHit<'a> {
    fn from(hit: &'a Hit) -> Self {
        let (message, reference) = match &hit.location {
            HitLocation::Message(position) => (Some(*position), None),
            HitLocation::Payload(reference) => (None, Some(reference.as_str())),
        };
        JsonHit { session: &hit.session, message, reference, snippet: &hit.snippet }
    }
}

pub fn run(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let (location, store) = args.store.open_read_only()?;
    let query = args.query.join(" ");
    if let Some(session) = &args.session {
        // An unknown session is an error, not a search with no matches.
        store.session_meta(session).map_err(|err| super::store::error(&location, err))?;
    }
    let hits =
        store.search(args.session.as_deref(), &query, args.limit).map_err(|err| super::store::error(&location, err))?;
    if args.json {
        for hit in &hits {
            output::json_line(&JsonHit::from(hit))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    for hit in &hits {
        let location = match &hit.location {
            HitLocation::Message(position) => format!("message {position}"),
            HitLocation::Payload(reference) => format!("payload {reference}"),
        };
        // One hit per line: a snippet's own line breaks would split it.
        let snippet = hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
        out.push_str(&format!("{} {location}: {snippet}\n", hit.session));
    }
    output::print(&out)?;
    if hits.is_empty() {
        eprintln!("no matches for `{query}`");
    }
    Ok(ExitCode::SUCCESS)
}
