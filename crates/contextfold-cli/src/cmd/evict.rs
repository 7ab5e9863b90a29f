//! `contextfold evict`: stale tool output to pointers.

use crate::args::EvictArgs;
use crate::output::{self, thousands};
use contextfold::core::clip::{clip, ClipConfig, Clipped};
use contextfold::core::evict::{evict, EvictConfig, EvictReport};
use contextfold::core::tokens::count_conversation;
use contextfold::input;
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;

impl EvictArgs {
    /// The library configuration these arguments ask for.
    pub fn config(&self) -> EvictConfig {
        EvictConfig {
            preset: self.preset,
            keep_recent: Some(self.keep),
            keep_recent_tokens: self.keep_tokens,
            clear_at_least: self.clear_at_least,
            target_tokens: self.target,
            pinned_paths: self.pinned_paths.clone(),
            exclude_tools: self.exclude_tools.clone(),
            clear_inputs_over: self.clear_inputs_over,
            keep_thinking_turns: self.keep_thinking_turns,
            ..EvictConfig::default()
        }
    }
}

/// The `--json` report: the eviction report and what was clipped.
#[derive(Serialize)]
struct Report {
    #[serde(flatten)]
    evicted: EvictReport,
    clipped: Vec<Clipped>,
}

pub fn run(args: EvictArgs) -> anyhow::Result<ExitCode> {
    let mut parsed = super::load(&args.file, args.input.format)?;
    let counter = args.counting.tokenizer.counter();
    let mut report = evict(&mut parsed.conversation, &args.config(), counter);
    let clipped = match args.max_tool_output {
        Some(limit) => {
            let clip_config = ClipConfig { preset: args.preset, ..ClipConfig::new(limit) };
            let clipped = clip(&mut parsed.conversation, &clip_config, counter);
            if !clipped.is_empty() {
                report.tokens_after = count_conversation(counter, &parsed.conversation);
            }
            clipped
        }
        None => Vec::new(),
    };
    let output = match (&args.output, args.json) {
        (Some(path), _) => Some(path.as_path()),
        (None, false) => Some(Path::new("-")),
        (None, true) => None,
    };
    if let Some(path) = output {
        input::save(path, &parsed.conversation, parsed.format.writable(), parsed.layout)?;
    }
    if args.json {
        output::json_line(&Report { evicted: report, clipped })?;
    } else {
        let mut line = format!(
            "evicted {} payload(s): {} → {} tokens",
            report.offloaded,
            thousands(report.tokens_before),
            thousands(report.tokens_after)
        );
        if !report.by_reason.is_empty() {
            let reasons: Vec<String> =
                report.by_reason.iter().map(|(reason, count)| format!("{reason} {count}")).collect();
            line.push_str(&format!(" ({})", reasons.join(", ")));
        }
        if !clipped.is_empty() {
            line.push_str(&format!("; clipped {} output(s)", clipped.len()));
        }
        if let Some(skipped) = &report.skipped {
            line.push_str(&format!("; nothing evicted: {skipped}"));
        }
        eprintln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
