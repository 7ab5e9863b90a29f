//! `contextfold evict`: stale tool output to pointers.

use crate::args::EvictArgs;
use crate::output::{self, thousands};
use anyhow::bail;
use contextfold::core::clip::ClipConfig;
use contextfold::core::evict::EvictConfig;
use contextfold::core::tokens::{Memoized, TokenCounter};
use contextfold::eviction::{evict_conversation, EvictOptions, EvictionReport};
use contextfold::input;
use contextfold::store::Origin;
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

    /// The eviction these arguments ask for: [`EvictArgs::config`], then clearing thinking
    /// and clipping when asked.
    pub fn options(&self) -> EvictOptions {
        // 0 is the old spelling of no clipping, as in `compact`.
        let clip = self.max_tool_output.filter(|&limit| limit > 0).map(|limit| ClipConfig {
            preset: self.preset,
            recall_tool: self.persist.recall_tool_name(),
            ..ClipConfig::new(limit)
        });
        EvictOptions { evict: self.config(), keep_thinking_turns: self.keep_thinking_turns, clip }
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
    let mut report = evict_conversation(&mut parsed.conversation, &args.options(), counter);
    if let (Some(persist), Some(original)) = (&persist, original) {
        let recording = persist.session_for(&args.file)?;
        let origin = Origin::new(&original, parsed.format, parsed.layout);
        persist.keep(&recording, report.stored(&recording.session, original.messages, Some(origin))?)?;
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
fn summary_line(file: &str, report: &EvictionReport) -> String {
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
