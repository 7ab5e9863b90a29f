//! What a translation between formats could not carry, counted by kind.
//!
//! A reader or writer that drops something a format cannot say counts it here as it goes,
//! so a conversion can tell exactly what it lost (`contextfold convert`'s `lost`) instead of
//! a general warning. Counting in the translation itself, rather than comparing the result
//! afterwards, keeps each count tied to the rule that dropped it.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// A kind of thing a format cannot carry. The `snake_case` name is its `kind` in `--json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LossKind {
    /// Signatures of thinking blocks (OpenAI has no field for them).
    ThinkingSignature,
    /// Encrypted thinking blocks (OpenAI has no form for them).
    RedactedThinking,
    /// `is_error: true` of tool results (OpenAI tool messages have no such flag).
    ErrorFlag,
    /// Fields of blocks other than text blocks (`cache_control`, …).
    BlockFields,
    /// The order of text and tool calls in an assistant message (text is written first).
    ToolCallOrder,
    /// The boundaries between several thinking blocks of one message (joined into one text).
    ThinkingJoined,
    /// The block structure of a system prompt given as blocks (joined into one text); the
    /// count is the number of blocks joined.
    SystemBlocks,
    /// The block structure of a tool result's content (text blocks joined by newlines).
    ResultBlocksJoined,
    /// The place of images and documents inside tool results (moved after them).
    ResultMediaMoved,
    /// Fields of a user message that holds only tool results (its tool messages have none).
    MessageFields,
    /// `cache_control` of tool definitions.
    ToolDefinitionFields,
    /// Blocks the target has no form for, written as they are (the target may reject them).
    PassedThrough,
    /// The `developer` role of OpenAI messages (read as system).
    DeveloperRole,
    /// Fields of OpenAI system and developer messages besides `content` (`name`, …).
    SystemMessageFields,
    /// Fields of OpenAI tool and function messages besides their id and `content` (`name`, …).
    ToolMessageFields,
    /// The `detail` setting of OpenAI `image_url` parts.
    ImageDetail,
    /// The system role of later OpenAI system messages where the Anthropic rules allow none
    /// (read as user text).
    SystemAsUser,
    /// User messages without any content (not written: `validate` reports them).
    EmptyUserMessage,
}

impl LossKind {
    /// What was lost, for `count` items, as a sentence fragment.
    fn describe(self, count: usize) -> String {
        let n = count;
        let s = if count == 1 { "" } else { "s" };
        match self {
            LossKind::ThinkingSignature => format!("{n} thinking signature{s} (OpenAI has no field for them)"),
            LossKind::RedactedThinking => {
                format!("{n} redacted_thinking block{s} (OpenAI has no form for encrypted thinking)")
            }
            LossKind::ErrorFlag => format!("{n} is_error flag{s} of tool results (OpenAI tool messages have none)"),
            LossKind::BlockFields => format!("the extra fields (such as cache_control) of {n} block{s}"),
            LossKind::ToolCallOrder => format!("the order of text and tool calls in {n} assistant message{s}"),
            LossKind::ThinkingJoined => {
                format!("the boundaries between thinking blocks in {n} assistant message{s} (joined into one)")
            }
            LossKind::SystemBlocks => format!("the block structure of the system prompt ({n} blocks joined into one text)"),
            LossKind::ResultBlocksJoined => {
                format!("the block structure of {n} tool result{s} (text blocks joined by newlines)")
            }
            LossKind::ResultMediaMoved => format!(
                "the place of {n} image{s} or document{s} inside tool results (moved to the user message after them)"
            ),
            LossKind::MessageFields => format!("the fields of {n} user message{s} holding only tool results"),
            LossKind::ToolDefinitionFields => format!("the cache_control of {n} tool definition{s}"),
            LossKind::PassedThrough => {
                format!("{n} block{s} with no OpenAI form, written in Anthropic shape (the OpenAI API may reject them)")
            }
            LossKind::DeveloperRole => format!("the developer role of {n} message{s} (read as system)"),
            LossKind::SystemMessageFields => {
                format!("the fields besides content (such as name) of {n} system or developer message{s}")
            }
            LossKind::ToolMessageFields => {
                format!("the fields besides the call id and content (such as name) of {n} tool message{s}")
            }
            LossKind::ImageDetail => format!("the detail setting of {n} image_url part{s}"),
            LossKind::SystemAsUser => format!(
                "the system role of {n} later system message{s} where the Anthropic format allows none (read as user text)"
            ),
            LossKind::EmptyUserMessage => {
                format!("{n} user message{s} without content (not written; `contextfold validate` shows where)")
            }
        }
    }
}

/// One kind of loss and how often it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Loss {
    /// What was lost.
    pub kind: LossKind,
    /// How many times.
    pub count: usize,
}

/// The sentence, e.g. "206 thinking signatures (OpenAI has no field for them)".
impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind.describe(self.count))
    }
}

/// A tally of losses, kept while translating.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Losses(BTreeMap<LossKind, usize>);

impl Losses {
    /// Counts one loss of `kind`.
    pub(crate) fn add(&mut self, kind: LossKind) {
        *self.0.entry(kind).or_default() += 1;
    }

    /// Counts `count` losses of `kind` at once (none when `count` is 0).
    pub(crate) fn add_many(&mut self, kind: LossKind, count: usize) {
        if count > 0 {
            *self.0.entry(kind).or_default() += count;
        }
    }

    /// Counts one loss of `kind` when `lost` holds.
    pub(crate) fn add_if(&mut self, lost: bool, kind: LossKind) {
        if lost {
            self.add(kind);
        }
    }

    /// The tally, in the order of [`LossKind`].
    pub(crate) fn into_vec(self) -> Vec<Loss> {
        self.0.into_iter().map(|(kind, count)| Loss { kind, count }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_count_and_read_as_sentences() {
        let mut losses = Losses::default();
        losses.add(LossKind::ErrorFlag);
        losses.add(LossKind::ThinkingSignature);
        losses.add(LossKind::ThinkingSignature);
        losses.add_if(false, LossKind::ImageDetail);
        let lost = losses.into_vec();
        assert_eq!(
            lost.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "2 thinking signatures (OpenAI has no field for them)",
                "1 is_error flag of tool results (OpenAI tool messages have none)"
            ]
        );
        assert_eq!(
            serde_json::to_value(lost[0]).unwrap(),
            serde_json::json!({"kind": "thinking_signature", "count": 2})
        );
    }
}
