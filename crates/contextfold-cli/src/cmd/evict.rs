//! `contextfold evict`: stale tool output to pointers.

use crate::args::EvictArgs;
use crate::output::{self, thousands};
use anyhow::bail;
use contextfold::core::clip::{clip, ClipConfig, Clipped};
use contextfold::core::evict::{evict, EvictConfig, EvictReport, Offload, Reason};
use contextfold::core::thinking::clear_thinking;
use contextfold::core::tokens::{count_conversation, Memoized, TokenCounter};
use contextfold::input;
use contextfold::store::{Origin, Payload, StoredCompaction};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

impl EvictArgs {
    /// The library configuration these arguments ask for.
    pub fn config(&self) -> EvictConfig {
        EvictConfig {
            preset: self.preset,
            keep_recent: Some(self.keep_tool_results),
            keep_recent_tokens: self.keep_tool_tokens,
            clear_at_least: self.clear_at_least,
            target_tokens: self.target_tokens,
            pinned_paths: self.pinned_paths.clone(),
            exclude_tools: self.exclude_tools.clone(),
            clear_inputs_over: self.clear_inputs_over,
            recall_tool: self.persist.recall_tool_name(),
            ..EvictConfig::default()
        }
    }
}

/// The `--json` report: the eviction report, the thinking blocks cleared, what was clipped,
/// and the stored session.
#[derive(Serialize)]
struct Report {
    tokens_before: u64,
    tokens_after: u64,
    offloaded: usize,
    by_reason: BTreeMap<Reason, usize>,
    items: Vec<Offload>,
    thinking_cleared: usize,
    skipped: Option<String>,
    pinned: Vec<String>,
    clipped: Vec<Clipped>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<String>,
}

impl Report {
    fn new(evicted: EvictReport, thinking_cleared: usize, clipped: Vec<Clipped>) -> Report {
        let EvictReport { tokens_before, tokens_after, offloaded, by_reason, items, skipped, pinned, .. } = evicted;
        Report {
            tokens_before,
            tokens_after,
            offloaded,
            by_reason,
            items,
            thinking_cleared,
            skipped,
            pinned,
            clipped,
            session: None,
        }
    }
}

pub fn run(args: EvictArgs) -> anyhow::Result<ExitCode> {
    if args.persist.no_redact && args.persist.store.is_none() {
        bail!("--no-redact concerns what --store keeps; evict sends nothing to a summarizer");
    }
    let persist = args.persist.open(1)?;
    let mut parsed = super::load(&args.file, &args.input)?;
    // Eviction works in place; the store keeps the history as it came in.
    let original = persist.as_ref().map(|_| parsed.conversation.clone());
    let memoized = Memoized::new(args.counting.tokenizer.counter());
    let counter: &dyn TokenCounter = if args.counting.tokenizer.is_exact() {
        super::count_ahead(&memoized, &parsed.conversation);
        &memoized
    } else {
        args.counting.tokenizer.counter()
    };
    let mut report = evict(&mut parsed.conversation, &args.config(), counter);
    // Clearing thinking removes blocks, so it is a step of its own, after eviction.
    let thinking_cleared =
        args.keep_thinking_turns.map_or(0, |turns| clear_thinking(&mut parsed.conversation.messages, turns));
    if thinking_cleared > 0 {
        report.tokens_after = count_conversation(counter, &parsed.conversation);
    }
    // 0 is the old spelling of no clipping, as in `compact`.
    let clipped = match args.max_tool_output.filter(|&limit| limit > 0) {
        Some(limit) => {
            let clip_config = ClipConfig {
                preset: args.preset,
                recall_tool: args.persist.recall_tool_name(),
                ..ClipConfig::new(limit)
            };
            let clipped = clip(&mut parsed.conversation, &clip_config, counter);
            if !clipped.is_empty() {
                report.tokens_after = count_conversation(counter, &parsed.conversation);
            }
            clipped
        }
        None => Vec::new(),
    };
    let mut report = Report::new(report, thinking_cleared, clipped);
    if let (Some(persist), Some(original)) = (&persist, original) {
        let recording = persist.session_for(&args.file)?;
        let payloads = (report.items.iter().map(|item| Payload::from_offload(&recording.session, item)))
            .chain(report.clipped.iter().map(|item| Payload::from_clipped(&recording.session, item)))
            .collect();
        let stored = StoredCompaction {
            origin: Some(Origin::new(&original, parsed.format, parsed.layout)),
            history: original.messages,
            payloads,
            summary: None,
            report: serde_json::to_value(&report)?,
        };
        persist.keep(&recording, stored)?;
        report.session = Some(recording.session);
    }
    // On a terminal without -o, a report and the shape of the result, as `compact` shows.
    let on_terminal = args.output.is_none() && !args.json && std::io::stdout().is_terminal();
    let output = match (&args.output, args.json) {
        (Some(path), _) => Some(path.as_path()),
        (None, false) if !on_terminal => Some(Path::new("-")),
        (None, _) => None,
    };
    if let Some(path) = output {
        input::save(path, &parsed.conversation, parsed.format.writable(), parsed.layout)?;
    }
    if args.json {
        output::json_line(&report)?;
    } else {
        let line = summary_line(&input::Shown(args.file.clone()).to_string(), &report);
        if on_terminal {
            let mut out = format!("{line}\n");
            out.push_str(&output::shape(&parsed.conversation));
            out.push_str("(write the conversation with -o FILE, or redirect standard output)\n");
            output::print(&out)?;
        } else {
            eprintln!("{line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What was evicted and clipped, in one line with the reasons.
fn summary_line(file: &str, report: &Report) -> String {
    let mut line = format!(
        "{file}: evicted {} payload(s): {} → {} tokens",
        report.offloaded,
        thousands(report.tokens_before),
        thousands(report.tokens_after)
    );
    if !report.by_reason.is_empty() {
        let reasons: Vec<String> =
            report.by_reason.iter().map(|(reason, count)| format!("{} {count}", reason.name())).collect();
        line.push_str(&format!(" ({})", reasons.join(", ")));
    }
    if report.thinking_cleared > 0 {
        line.push_str(&format!("; cleared {} thinking block(s)", report.thinking_cleared));
    }
    if !report.clipped.is_empty() {
        line.push_str(&format!("; clipped {} output(s)", report.clipped.len()));
    }
    if let Some(skipped) = &report.skipped {
        line.push_str(&format!("; nothing evicted: {skipped}"));
    }
    if let Some(session) = &report.session {
        line.push_str(&format!("; stored as session {session}"));
    }
    line
}
