//! `contextfold plan`: a dry run of where the cut would fall.

use crate::args::PlanArgs;
use crate::output::{self, thousands};
use contextfold::core::evict::{evict, EvictConfig};
use contextfold::core::plan::{plan, PinFirst, PlanConfig};
use contextfold::input::Shown;
use serde_json::json;
use std::process::ExitCode;

impl PlanArgs {
    /// The library configuration these arguments ask for.
    pub fn config(&self) -> PlanConfig {
        let no_limit = self.keep_turns.is_none() && self.keep_tokens.is_none() && self.min_tail_tokens.is_none();
        PlanConfig {
            keep_turns: self.keep_turns,
            min_tail_tokens: self.min_tail_tokens,
            max_tail_tokens: if no_limit { PlanConfig::default().max_tail_tokens } else { self.keep_tokens },
            pin_first: if self.no_pin_first { PinFirst::Folded } else { PinFirst::Pinned },
            min_progress: self.min_progress,
        }
    }
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let parsed = super::load(&args.file, &args.input)?;
    let counter = args.counting.tokenizer.counter();
    let conversation = &parsed.conversation;
    let mut evicted = conversation.clone();
    let eviction = evict(&mut evicted, &EvictConfig::default(), counter);
    let freed = eviction.tokens_before - eviction.tokens_after;
    let file = Shown(args.file.clone()).to_string();
    let outcome = plan(conversation, &args.config(), counter);
    if args.json {
        let value = match &outcome {
            Ok(plan) => json!({
                "file": file,
                "cut": {"index": plan.cut.index, "kind": plan.cut.kind.name()},
                "head_messages": plan.head.len(),
                "head_tokens": plan.head_tokens,
                "tail_messages": conversation.messages.len() - plan.cut.index,
                "tail_tokens": plan.tail_tokens,
                "pinned_tokens": plan.pinned_tokens,
                "total_tokens": plan.total_tokens,
                "previous_summary": plan.previous_summary.is_some(),
                "notes": plan.notes,
                "evict": {"offloaded": eviction.offloaded, "tokens_freed": freed, "by_reason": eviction.by_reason},
            }),
            Err(reason) => json!({
                "file": file,
                "cut": null,
                "reason": reason.to_string(),
                "evict": {"offloaded": eviction.offloaded, "tokens_freed": freed, "by_reason": eviction.by_reason},
            }),
        };
        output::json_line(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    match &outcome {
        Ok(plan) => {
            out.push_str(&format!(
                "{file}: cut before message {} ({})\n  head: {} messages, {} tokens{}\n  tail: {} messages, {} tokens\n",
                plan.cut.index,
                plan.cut.kind.name().replace('_', " "),
                plan.head.len(),
                thousands(plan.head_tokens),
                if plan.previous_summary.is_some() { " (folding a previous summary)" } else { "" },
                conversation.messages.len() - plan.cut.index,
                thousands(plan.tail_tokens),
            ));
            if plan.pinned_tokens > 0 {
                out.push_str(&format!("  pinned first request: {} tokens\n", thousands(plan.pinned_tokens)));
            }
            for note in &plan.notes {
                out.push_str(&format!("  note: {note}\n"));
            }
        }
        Err(reason) => out.push_str(&format!("{file}: no cut: {reason}\n")),
    }
    out.push_str(&format!("  eviction would free {} tokens ({} payloads)\n", thousands(freed), eviction.offloaded));
    output::print(&out)?;
    Ok(ExitCode::SUCCESS)
}
