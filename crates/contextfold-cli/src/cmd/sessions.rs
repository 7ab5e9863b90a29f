//! `contextfold sessions`: list, export and delete stored sessions.

use crate::args::{SessionsAction, SessionsArgs};
use crate::output;
use anyhow::bail;
use contextfold::core::format::{Format, Layout};
use contextfold::core::Conversation;
use contextfold::input;
use contextfold::store::{Origin, SessionInfo, SessionStore, StoreLocation};
use serde::Serialize;
use std::process::ExitCode;

/// One session as JSON: its id, name, creation time (seconds since the Unix epoch),
/// message and payload counts, and the format it came in.
#[derive(Serialize)]
struct JsonSession<'a> {
    id: &'a str,
    name: &'a str,
    created: u64,
    messages: usize,
    payloads: usize,
    format: Option<String>,
}

pub fn run(args: SessionsArgs) -> anyhow::Result<ExitCode> {
    // Only `rm` and `upgrade` write; the rest open the store read-only.
    let writes =
        matches!(args.action, Some(SessionsAction::Rm { .. } | SessionsAction::Prune { .. } | SessionsAction::Upgrade));
    let (location, store) = if writes { args.store.open_existing()? } else { args.store.open_read_only()? };
    let fail = |err| super::store::error(&location, err);
    match &args.action {
        None => list(store.as_ref(), &location, args.json),
        Some(SessionsAction::Export { id, output }) => {
            let messages = store.export(id).map_err(fail)?;
            let (conversation, format, layout) = match store.session_meta(id).map_err(fail)? {
                Some(meta) => {
                    let origin = Origin::from_value(&meta).map_err(fail)?;
                    (origin.conversation(messages), origin.format, origin.layout)
                }
                // A session stored without its origin comes back as Anthropic messages.
                None => (Conversation { messages, ..Conversation::default() }, Format::Anthropic, Layout::Object),
            };
            input::save(output, &conversation, format.writable(), layout)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(SessionsAction::Rm { id }) => {
            if !store.delete_session(id).map_err(fail)? {
                bail!("no session `{id}` in store {location}");
            }
            eprintln!("deleted session {id}");
            Ok(ExitCode::SUCCESS)
        }
        // Opening it read-write brought it up to date.
        Some(SessionsAction::Prune { older_than }) => {
            let before = now_secs().saturating_sub(older_than.as_secs());
            let deleted = store.prune(before).map_err(fail)?;
            for id in &deleted {
                println!("{id}");
            }
            let noun = if deleted.len() == 1 { "session" } else { "sessions" };
            eprintln!(
                "deleted {} {noun} not written for {} from {location}",
                deleted.len(),
                humantime::format_duration(*older_than)
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(SessionsAction::Upgrade) => {
            match location.schema_version() {
                Some(version) => eprintln!("store {location} is at schema {version}"),
                None => eprintln!("store {location} is up to date"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn list(store: &dyn SessionStore, location: &StoreLocation, json: bool) -> anyhow::Result<ExitCode> {
    let sessions = store.sessions().map_err(|err| super::store::error(location, err))?;
    let mut rows = Vec::with_capacity(sessions.len());
    for info in &sessions {
        let meta = store.session_meta(&info.id).map_err(|err| super::store::error(location, err))?;
        let format = meta.and_then(|meta| meta["format"].as_str().map(str::to_string));
        rows.push((info, format));
    }
    if json {
        for (info, format) in rows {
            let SessionInfo { id, name, created, messages, payloads } = info;
            output::json_line(&JsonSession {
                id,
                name,
                created: *created,
                messages: *messages,
                payloads: *payloads,
                format,
            })?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let width = sessions.iter().map(|info| info.id.len()).max().unwrap_or(2).max(2);
    let mut out =
        format!("{:<width$}  {:<20}  {:>8}  {:>8}  {:<11}  name\n", "id", "created", "messages", "payloads", "format");
    for (info, format) in rows {
        out.push_str(&format!(
            "{:<width$}  {:<20}  {:>8}  {:>8}  {:<11}  {}\n",
            info.id,
            output::utc(info.created),
            info.messages,
            info.payloads,
            format.as_deref().unwrap_or("-"),
            info.name
        ));
    }
    output::print(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Seconds since the Unix epoch.
fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
