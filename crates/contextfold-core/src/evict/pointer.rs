//! The pointer text: the one line that stands in for an evicted payload, naming the tool, its
//! target, the size removed, the reason, how to restore it, and its `ref`.

use super::{Reason, POINTER_PREFIX};
use crate::text::clip_chars;
use crate::tools::{Action, ActionKind};
use std::borrow::Cow;

/// `9400` → `9.4k`.
pub fn short_tokens(tokens: u64) -> String {
    if tokens >= 1000 {
        format!("{:.1}k", tokens as f64 / 1000.0)
    } else {
        tokens.to_string()
    }
}

fn clip(text: &str, max_chars: usize) -> String {
    clip_chars(text.lines().next().unwrap_or(""), max_chars)
}

/// How the model gets a payload back: with the recall tool when it has one, else by redoing
/// what produced it.
pub(super) fn restore_hint(kind: ActionKind, recall_tool: Option<&str>) -> Cow<'static, str> {
    if let Some(tool) = recall_tool {
        return Cow::Owned(format!("call {tool} with this ref to restore"));
    }
    Cow::Borrowed(match kind {
        ActionKind::FileRead => "re-read the file to restore",
        ActionKind::FileWrite | ActionKind::FileEdit => "read the file to see its current state",
        ActionKind::Search => "re-run the search to restore",
        ActionKind::Shell => "re-run the command to restore",
        ActionKind::WebFetch => "fetch the URL again to restore",
        ActionKind::Other => "re-run the tool to restore",
    })
}

/// What a pointer says about the payload it stands for.
#[derive(Debug, Clone, Copy)]
pub struct Pointed<'a> {
    /// The tool that produced it.
    pub tool: &'a str,
    /// What the call did, on what.
    pub action: &'a Action,
    /// Lines of the payload.
    pub lines: usize,
    /// Tokens of the payload.
    pub tokens: u64,
    /// Why it went.
    pub reason: Reason,
    /// For a failed call, the telling line of its error: a pointer keeps what went wrong.
    pub failure: Option<&'a str>,
}

/// The pointer text for a payload; `recall_tool` as in [`EvictConfig::recall_tool`].
pub fn pointer(pointed: &Pointed, reference: &str, recall_tool: Option<&str>) -> String {
    let action = pointed.action;
    let target = action.target.as_deref().map(|target| format!(" {}", clip(target, 80))).unwrap_or_default();
    let range = action.range.as_deref().map(|range| format!(" [{range}]")).unwrap_or_default();
    let failure = pointed.failure.map(|line| format!("; failed: {}", clip(line, 160))).unwrap_or_default();
    format!(
        "{POINTER_PREFIX}{}{target}{range} ({} lines, {} tokens; {}{failure}) — {}; ref {reference}]",
        pointed.tool,
        pointed.lines,
        short_tokens(pointed.tokens),
        pointed.reason.phrase(),
        restore_hint(action.kind, recall_tool)
    )
}
