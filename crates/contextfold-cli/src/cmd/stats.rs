//! `contextfold stats`: where a conversation's tokens go.

use crate::args::StatsArgs;
use crate::output::{self, thousands};
use crate::progress::Progress;
use contextfold::core::stats::{stats, Stats};
use contextfold::input::Shown;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

#[derive(Serialize)]
struct Report<'a> {
    file: String,
    format: &'static str,
    #[serde(flatten)]
    stats: &'a Stats,
    notes: &'a [String],
}

pub fn run(args: StatsArgs) -> anyhow::Result<ExitCode> {
    let counter = args.counting.tokenizer.counter();
    let mut failed = false;
    for path in &args.files {
        let shown = Shown(path.clone());
        let progress = Progress::start(&shown.to_string());
        let parsed = match super::load_showing(path, &args.input, Some(&progress)) {
            Ok(parsed) => parsed,
            Err(err) => {
                eprintln!("contextfold: {err}");
                failed = true;
                continue;
            }
        };
        let stats = stats(&parsed.conversation, &progress.counting(counter));
        drop(progress);
        if args.json {
            output::json_line(&Report {
                file: shown.to_string(),
                format: parsed.format.name(),
                stats: &stats,
                notes: &parsed.notes,
            })?;
        } else {
            output::print(&report(&shown, parsed.format.name(), &stats))?;
        }
    }
    Ok(super::exit(failed, ExitCode::SUCCESS))
}

/// `name 1,234 · name 567`, largest first.
fn ranked(counts: &BTreeMap<String, u64>) -> String {
    let mut entries: Vec<(&String, &u64)> = counts.iter().collect();
    entries.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    entries.iter().map(|(name, count)| format!("{name} {}", thousands(**count))).collect::<Vec<_>>().join(" · ")
}

fn report(file: &Shown, format: &str, stats: &Stats) -> String {
    let tokens = &stats.tokens;
    let mut out = String::new();
    let _ = writeln!(out, "{file} ({format}; tokens by {})", stats.tokenizer);
    let _ = writeln!(
        out,
        "  messages {}, user turns {}, tool calls {}",
        thousands(stats.messages as u64),
        thousands(stats.turns as u64),
        thousands(stats.tool_calls as u64)
    );
    let _ = writeln!(
        out,
        "  tokens {} total: system {}, tool definitions {}, {}",
        thousands(tokens.total),
        thousands(tokens.system),
        thousands(tokens.tools),
        ranked(&tokens.by_role)
    );
    let _ = writeln!(out, "  message content by block: {}", ranked(&tokens.by_block));
    if !tokens.by_tool.is_empty() {
        let _ = writeln!(out, "  tool calls and results by tool: {}", ranked(&tokens.by_tool));
        let calls = stats.tool_calls_by_tool.iter().map(|(name, count)| (name.clone(), *count as u64)).collect();
        let _ = writeln!(out, "  tool calls: {}", ranked(&calls));
    }
    if !stats.largest_tool_results.is_empty() {
        let _ = writeln!(out, "  largest tool results:");
        for result in &stats.largest_tool_results {
            let error = if result.is_error { " (error)" } else { "" };
            let _ = writeln!(
                out,
                "    {:>9}  {:<12} message {:<4} {}{error}",
                thousands(result.tokens),
                result.tool,
                result.message,
                result.preview
            );
        }
    }
    for warning in &stats.warnings {
        let place = match warning.block {
            Some(block) => format!("message {}, block {block}", warning.message),
            None => format!("message {}", warning.message),
        };
        let _ = writeln!(out, "  warning: {place}: {} [{}]", warning.text, warning.rule);
    }
    if stats.valid {
        let _ = writeln!(out, "  valid");
    } else {
        let _ = writeln!(out, "  {} problem(s):", stats.problems.len());
        for problem in &stats.problems {
            let place = match problem.block {
                Some(block) => format!("message {}, block {block}", problem.message),
                None => format!("message {}", problem.message),
            };
            let _ = writeln!(out, "    {place}: {} [{}]", problem.text, problem.rule);
        }
    }
    out
}
