//! `contextfold report`: what the proxy saved, per session and in total, from the calls
//! `serve --store` recorded, tallied as the proxy tallies them at shutdown.

use crate::args::ReportArgs;
use crate::output;
use contextfold::store::SessionInfo;
use contextfold_serve::savings::add_record;
use contextfold_serve::savings::Totals;
use serde::Serialize;
use serde_json::Value;
use std::process::ExitCode;

/// The totals of a session or of all, as JSON.
#[derive(Serialize)]
struct JsonTotals<'a> {
    calls: u64,
    compactions: u64,
    tokens_received: u64,
    tokens_sent: u64,
    /// Estimated dollars, `None` when no call's model has a known list price.
    cost_without: Option<f64>,
    cost_with: Option<f64>,
    families: &'a [&'static str],
    unpriced_calls: u64,
}

impl<'a> From<&'a Totals> for JsonTotals<'a> {
    fn from(totals: &'a Totals) -> Self {
        let priced = !totals.families.is_empty();
        JsonTotals {
            calls: totals.calls,
            compactions: totals.compactions,
            tokens_received: totals.tokens_received,
            tokens_sent: totals.tokens_sent,
            cost_without: priced.then_some(totals.cost_without),
            cost_with: priced.then_some(totals.cost_with),
            families: &totals.families,
            unpriced_calls: totals.unpriced_calls,
        }
    }
}

#[derive(Serialize)]
struct JsonSession<'a> {
    id: &'a str,
    name: &'a str,
    /// When its first and last counted calls were made (seconds since the Unix epoch).
    first_call: u64,
    last_call: u64,
    #[serde(flatten)]
    totals: JsonTotals<'a>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    /// The start of the period counted (seconds since the Unix epoch), with `--since`.
    since: Option<u64>,
    sessions: Vec<JsonSession<'a>>,
    total: JsonTotals<'a>,
    /// Sessions with no call in the period (or none recorded at all).
    sessions_without_calls: usize,
}

/// One session's tally.
struct Row<'a> {
    info: &'a SessionInfo,
    totals: Totals,
    first_call: u64,
    last_call: u64,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let (location, store) = args.store.open_read_only()?;
    let fail = |err| super::store::error(&location, err);
    let since = args.since.map(|since| now_secs().saturating_sub(since.as_secs()));
    let sessions = store.sessions().map_err(fail)?;
    let mut total = Totals::default();
    let mut rows = Vec::new();
    for info in &sessions {
        let records = store.calls(&info.id).map_err(fail)?;
        if let Some(row) = tally(info, &records, since, &mut total) {
            rows.push(row);
        }
    }
    let without_calls = sessions.len() - rows.len();
    if args.json {
        let sessions = rows
            .iter()
            .map(|row| JsonSession {
                id: &row.info.id,
                name: &row.info.name,
                first_call: row.first_call,
                last_call: row.last_call,
                totals: JsonTotals::from(&row.totals),
            })
            .collect();
        let report =
            JsonReport { since, sessions, total: JsonTotals::from(&total), sessions_without_calls: without_calls };
        output::json_line(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    output::print(&text(&rows, &total, without_calls, since))?;
    Ok(ExitCode::SUCCESS)
}

/// The tally of `records` made at or after `since`, added to `all` too; `None` when none
/// counts.
fn tally<'a>(info: &'a SessionInfo, records: &[Value], since: Option<u64>, all: &mut Totals) -> Option<Row<'a>> {
    let mut totals = Totals::default();
    let (mut first_call, mut last_call) = (u64::MAX, 0);
    for record in records {
        let at = record.get("at").and_then(Value::as_u64).unwrap_or(0);
        if since.is_some_and(|since| at < since) || !add_record(&mut totals, &info.id, record) {
            continue;
        }
        add_record(all, &info.id, record);
        (first_call, last_call) = (first_call.min(at), last_call.max(at));
    }
    (totals.calls > 0).then_some(Row { info, totals, first_call, last_call })
}

/// The report as a table and a closing paragraph.
fn text(rows: &[Row<'_>], total: &Totals, without_calls: usize, since: Option<u64>) -> String {
    let width = rows.iter().map(|row| row.info.id.len()).max().unwrap_or(2).max(7);
    let mut out = format!(
        "{:<width$}  {:>6}  {:>11}  {:>15}  {:>12}  {:>6}  {:>12}  {:>10}  {:<20}  name\n",
        "session",
        "calls",
        "compactions",
        "tokens received",
        "tokens sent",
        "saved",
        "cost without",
        "cost with",
        "last call"
    );
    for row in rows {
        let totals = &row.totals;
        let dollars = |cost: f64| if totals.families.is_empty() { "-".to_string() } else { format!("${cost:.2}") };
        out.push_str(&format!(
            "{:<width$}  {:>6}  {:>11}  {:>15}  {:>12}  {:>6}  {:>12}  {:>10}  {:<20}  {}\n",
            row.info.id,
            totals.calls,
            totals.compactions,
            output::thousands(totals.tokens_received),
            output::thousands(totals.tokens_sent),
            saved(totals),
            dollars(totals.cost_without),
            dollars(totals.cost_with),
            output::utc(row.last_call),
            row.info.name
        ));
    }
    let period = since.map_or(String::new(), |since| format!(" since {}", output::utc(since)));
    let sessions = if rows.len() == 1 { "session" } else { "sessions" };
    out.push_str(&format!("\n{} {sessions}{period}: {}\n", rows.len(), total.line()));
    if without_calls > 0 {
        out.push_str(&format!(
            "{without_calls} other sessions have no call recorded{period} (stored by compact or evict, or idle)\n"
        ));
    }
    out
}

/// The share of received tokens not sent, as a percentage.
fn saved(totals: &Totals) -> String {
    match totals.tokens_received {
        0 => "-".to_string(),
        received => format!("{:.0}%", 100.0 * received.saturating_sub(totals.tokens_sent) as f64 / received as f64),
    }
}

/// Seconds since the Unix epoch.
fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_secs())
}
