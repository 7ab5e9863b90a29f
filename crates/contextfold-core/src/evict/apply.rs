//! Applying an eviction: the block counts, each chosen payload planned as an [`Offload`]
//! until the target is met, the minimum-saving rule, then the blocks swapped in place.

use super::pointer::{pointer, restore_hint, short_tokens, Pointed};
use super::select::{choose, Choice};
use super::{EvictConfig, EvictReport, Offload, CLEARED_INPUT_BYTES, POINTER_PREFIX};
use crate::conversation::{Block, Conversation, Message, ToolResultContent};
use crate::hash::payload_ref;
use crate::tokens::{count_block, count_system, count_tools, Thousands, TokenCounter, MESSAGE_OVERHEAD};
use crate::tools::ActionKind;
use serde_json::Value;

pub(super) fn count_blocks(counter: &dyn TokenCounter, message: &Message) -> Vec<u64> {
    message.content.iter().map(|block| count_block(counter, block)).collect()
}

pub(super) fn evict_counted(
    conversation: &mut Conversation,
    config: &EvictConfig,
    counter: &dyn TokenCounter,
    counts: Vec<Vec<u64>>,
) -> EvictReport {
    let tokens_before = conversation.system.as_ref().map_or(0, |system| count_system(counter, system))
        + conversation.tools.as_deref().map_or(0, |tools| count_tools(counter, tools))
        + counts.iter().map(|blocks| MESSAGE_OVERHEAD + blocks.iter().sum::<u64>()).sum::<u64>();
    let mut report = EvictReport { tokens_before, tokens_after: tokens_before, ..EvictReport::default() };
    let (order, pinned) = choose(conversation, config, &counts);
    report.pinned = pinned;
    let mut planned: Vec<Offload> = Vec::new();
    let mut total = tokens_before;
    let mut freed_total = 0;
    for choice in order {
        if config.target_tokens.is_some_and(|target| total <= target) {
            break;
        }
        let tokens = counts[choice.message][choice.block];
        let Some(offload) =
            offload(&conversation.messages[choice.message], choice, tokens, config.recall_tool.as_deref(), counter)
        else {
            continue;
        };
        total -= offload.freed;
        freed_total += offload.freed;
        planned.push(offload);
    }
    if let Some(threshold) = config.clear_at_least {
        if freed_total < threshold && !planned.is_empty() {
            report.skipped = Some(format!(
                "evicting would free {} tokens, less than the minimum of {}",
                Thousands(freed_total),
                Thousands(threshold)
            ));
            planned.clear();
        }
    }
    for item in &mut planned {
        if let Some(block) = conversation.messages[item.message].content.get_mut(item.block) {
            *block = std::mem::replace(&mut item.replacement, Block::text(""));
        }
    }
    for item in &planned {
        *report.by_reason.entry(item.reason).or_default() += 1;
    }
    report.offloaded = planned.len();
    report.items = planned;
    report.tokens_after = total_after(tokens_before, &report.items);
    report
}

fn total_after(before: u64, items: &[Offload]) -> u64 {
    before - items.iter().map(|item| item.freed).sum::<u64>()
}

/// Plans one offload without applying it; `None` when it would free nothing.
fn offload(
    message: &Message,
    choice: Choice,
    tokens: u64,
    recall_tool: Option<&str>,
    counter: &dyn TokenCounter,
) -> Option<Offload> {
    let block = message.content.get(choice.block)?;
    let (payload, reference, replacement) = match block {
        Block::ToolResult(result) => {
            let payload = match &result.content {
                Some(ToolResultContent::Text(text)) => Value::String(text.clone()),
                Some(ToolResultContent::Blocks(blocks)) => Value::Array(blocks.iter().map(Block::to_value).collect()),
                None => return None,
            };
            // An output clipped earlier is pointed at by its original's ref, which the clip
            // stored: recall gives the output as it came, in one hop, not the clipped text.
            let text = result.text();
            let reference =
                crate::clip::clipped_original_ref(&text).map_or_else(|| payload_ref(&payload), str::to_string);
            let lines = text.lines().count();
            let failed = matches!(crate::text::outcome(result), crate::text::Outcome::Failed(_));
            let failure = failed.then(|| crate::text::error_line(&text));
            let pointed = Pointed {
                tool: &choice.tool,
                action: &choice.action,
                lines,
                tokens,
                reason: choice.reason,
                failure: failure.as_deref(),
            };
            let text = pointer(&pointed, &reference, recall_tool);
            let mut replaced = result.clone();
            replaced.content = Some(ToolResultContent::Text(text));
            (payload, reference, Block::ToolResult(replaced))
        }
        Block::ToolUse(tool_use) => {
            let reference = payload_ref(&tool_use.input);
            let mut replaced = tool_use.clone();
            let Value::Object(fields) = &mut replaced.input else { return None };
            for (key, value) in fields.iter_mut() {
                let Value::String(text) = value else { continue };
                if text.len() < CLEARED_INPUT_BYTES {
                    continue;
                }
                *value = Value::String(format!(
                    "{POINTER_PREFIX}`{key}` of this {} call ({} lines, {} tokens; {}) — {}; ref {reference}]",
                    choice.tool,
                    text.lines().count(),
                    short_tokens(counter.count_text(text)),
                    choice.reason.phrase(),
                    restore_hint(ActionKind::FileWrite, recall_tool),
                ));
            }
            (tool_use.input.clone(), reference, Block::ToolUse(replaced))
        }
        _ => return None,
    };
    let freed = tokens.checked_sub(count_block(counter, &replacement)).filter(|&freed| freed > 0)?;
    Some(Offload {
        reference,
        tool: choice.tool,
        kind: choice.action.kind,
        target: choice.action.target,
        message: choice.message,
        block: choice.block,
        tokens,
        freed,
        reason: choice.reason,
        payload,
        replacement,
    })
}
