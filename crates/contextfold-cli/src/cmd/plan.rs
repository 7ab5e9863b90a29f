//! `contextfold plan`: a dry run of where `compact`'s cut would fall.
//!
//! The tail budget is the one `compact` uses for the same budget flags (by default half the
//! input, less the system prompt, tools, summary and first request), so `plan` and
//! `compact` agree on whether there is anything to cut. The plan is of the conversation as
//! it is: `compact` evicts first, which `plan` reports as what eviction would free.

use crate::args::PlanArgs;
use crate::output::{self, thousands};
use contextfold::core::evict::{evict, EvictConfig};
use contextfold::core::plan::{plan, PinFirst, PlanConfig};
use contextfold::core::tokens::{count_messages, count_system, count_tools, TokenCounter};
use contextfold::core::Conversation;
use contextfold::input::Shown;
use serde_json::json;
use std::process::ExitCode;

impl PlanArgs {
    /// The budget in tokens and the plan configuration these arguments ask for.
    pub fn config(&self, conversation: &Conversation, counter: &dyn TokenCounter) -> (u64, PlanConfig) {
        let mut compact = self.cut.config(&self.target);
        compact.plan.min_tail_tokens = self.min_tail_tokens;
        compact.plan.pin_first = if self.no_pin_first { PinFirst::Folded } else { PinFirst::Pinned };
        let (target, plan) = compact.plan_config(conversation, counter);
        (target, PlanConfig { min_progress: self.min_progress, ..plan })
    }
}

/// A conversation's tokens: the total `stats`, `count` and `compact` report, and its parts.
struct Totals {
    system: u64,
    tools: u64,
    messages: u64,
}

impl Totals {
    fn of(conversation: &Conversation, counter: &dyn TokenCounter) -> Totals {
        Totals {
            system: conversation.system.as_ref().map_or(0, |system| count_system(counter, system)),
            tools: conversation.tools.as_deref().map_or(0, |tools| count_tools(counter, tools)),
            messages: count_messages(counter, &conversation.messages),
        }
    }

    fn total(&self) -> u64 {
        self.system + self.tools + self.messages
    }
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    // The budgets `compact` refuses (0 tokens, a reserve not below its window) are usage
    // errors here too, before any input is read.
    args.target.target().check()?;
    let parsed = super::load(&args.file, &args.input)?;
    let counter = args.counting.tokenizer.counter();
    let conversation = &parsed.conversation;
    let mut evicted = conversation.clone();
    let eviction = evict(&mut evicted, &EvictConfig::default(), counter);
    let freed = eviction.tokens_before - eviction.tokens_after;
    let file = Shown(args.file.clone()).to_string();
    let totals = Totals::of(conversation, counter);
    let (target, config) = args.config(conversation, counter);
    let max_tail = config.max_tail_tokens.unwrap_or_default();
    // Like `compact`, nothing is cut from a conversation already within its budget.
    let outcome = if totals.total() <= target {
        Err(format!(
            "the conversation's {} tokens are within the budget of {}",
            thousands(totals.total()),
            thousands(target)
        ))
    } else {
        plan(conversation, &config, counter).map_err(|reason| reason.to_string())
    };
    let evict_json = json!({"offloaded": eviction.offloaded, "tokens_freed": freed, "by_reason": eviction.by_reason});
    if args.json {
        let mut value = json!({
            "file": file,
            "total_tokens": totals.total(),
            "system_tokens": totals.system,
            "tools_tokens": totals.tools,
            "message_tokens": totals.messages,
            "target_tokens": target,
            "max_tail_tokens": max_tail,
        });
        let fields = match &outcome {
            Ok(plan) => json!({
                "cut": {"index": plan.cut.index, "kind": plan.cut.kind.name()},
                "head_messages": plan.head.len(),
                "head_tokens": plan.head_tokens,
                "tail_messages": conversation.messages.len() - plan.cut.index,
                "tail_tokens": plan.tail_tokens,
                "pinned_tokens": plan.pinned_tokens,
                "previous_summary": plan.previous_summary.is_some(),
                "notes": plan.notes,
                "evict": evict_json,
            }),
            Err(reason) => json!({"cut": null, "reason": reason, "evict": evict_json}),
        };
        if let (Some(value), serde_json::Value::Object(fields)) = (value.as_object_mut(), fields) {
            value.extend(fields);
        }
        output::json_line(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = format!(
        "{file}: {} tokens in total (messages {}, system {}, tool definitions {}); a budget of {} leaves the verbatim tail {}\n",
        thousands(totals.total()),
        thousands(totals.messages),
        thousands(totals.system),
        thousands(totals.tools),
        thousands(target),
        thousands(max_tail),
    );
    match &outcome {
        Ok(plan) => {
            out.push_str(&format!(
                "  cut before message {} ({})\n  head: {} messages, {} tokens{}\n  tail: {} messages, {} tokens\n",
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
        Err(reason) => out.push_str(&format!("  no cut: {reason}\n")),
    }
    out.push_str(&format!(
        "  eviction would free {} tokens ({} payloads); compact evicts first, so its cut may fall later\n",
        thousands(freed),
        eviction.offloaded
    ));
    output::print(&out)?;
    Ok(ExitCode::SUCCESS)
}
