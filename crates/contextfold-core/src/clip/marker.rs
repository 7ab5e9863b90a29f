//! The clip marker: the line that stands in the middle of a clipped output, saying what was
//! cut (lines, tokens, bytes), naming the full output's ref and how to get the rest, and for
//! a failed output the telling line the cut part held.

use super::{ClipConfig, CLIP_PREFIX};
use crate::text::clip_chars;
use crate::tools::ActionKind;
use std::borrow::Cow;

fn short_tokens(tokens: u64, counted: bool) -> String {
    let about = if counted { "" } else { "~" };
    match tokens {
        1 if counted => "1 token".to_string(),
        0..=9_999 => format!("{about}{tokens} tokens"),
        10_000..=999_999 => format!("~{}k tokens", (tokens + 500) / 1000),
        _ => format!("~{:.1}M tokens", tokens as f64 / 1_000_000.0),
    }
}

fn short_bytes(bytes: usize) -> String {
    match bytes {
        0..=9_999 => format!("{bytes} bytes"),
        10_000..=999_999 => format!("{:.0} kB", bytes as f64 / 1000.0),
        _ => format!("{:.1} MB", bytes as f64 / 1_000_000.0),
    }
}

fn hint(kind: ActionKind, recall_tool: Option<&str>) -> Cow<'static, str> {
    if let Some(tool) = recall_tool {
        return Cow::Owned(format!("call {tool} with this ref for the full output"));
    }
    Cow::Borrowed(match kind {
        ActionKind::FileRead => "re-read the file (or a line range of it) for the rest",
        ActionKind::Search => "narrow the search for the rest",
        ActionKind::WebFetch => "fetch the URL again for the rest",
        _ => "re-run the command with narrower output for the rest",
    })
}

/// How many characters of a failed output's telling line a marker holds.
const FAILURE_CHARS: usize = 160;

/// What a marker says about the cut part.
pub(super) struct Cut<'a> {
    pub(super) lines: Option<usize>,
    pub(super) tokens: (u64, bool),
    pub(super) bytes: usize,
    pub(super) pretty: bool,
    /// The telling line of a failed output, when the cut part holds it.
    pub(super) failure: Option<&'a str>,
}

/// The marker for `cut`.
pub(super) fn marker(cut: &Cut, kind: ActionKind, config: &ClipConfig, reference: &str) -> String {
    let Cut { lines, tokens: (tokens, counted), bytes, pretty, failure } = *cut;
    let size = format!("{}, {}", short_tokens(tokens, counted), short_bytes(bytes));
    let what = match lines {
        Some(1) => format!("1 line ({size})"),
        Some(lines) => format!("{lines} lines ({size})"),
        None => size,
    };
    let shown = if pretty { " (JSON, shown pretty-printed)" } else { "" };
    let failure = failure.map(|line| format!("; failed: {}", clip_chars(line, FAILURE_CHARS))).unwrap_or_default();
    format!(
        "{CLIP_PREFIX}{what} from the middle of this output{shown}{failure} — {}; ref {reference}]",
        hint(kind, config.recall_tool.as_deref())
    )
}
