//! The strategies replay compares: contextfold's own, and emulations of what others do.
//!
//! Every strategy is stateful across calls, like a real agent's context management: it
//! keeps a working copy that it extends with each new message, and what it cleared or
//! summarized stays so until it acts again. The emulations follow the documented behaviour
//! of each tool, scaled to the window under test; they are emulations, not the tools.
//!
//! A step says what changed since the strategy's previous request (how many of its messages
//! it kept, what follows them), so a call costs what changed, not the session's length.

use crate::compactor::{CompactConfig, Compactor, Strategy as CompactStrategy, Target};
use crate::middleware::{CompactionMiddleware, MiddlewareConfig};
use crate::policy::{All, RateLimit, Threshold};
use crate::summarize::{BoxFuture, Extractive, SummaryRequest, Usage};
use contextfold_core::boundary::boundaries;
use contextfold_core::conversation::{Block, ContentShape, Message, Role, System, ToolResultContent};
use contextfold_core::summary::assemble;
use contextfold_core::tokens::{count_message, TokenCounter, TokenLedger};
use contextfold_core::Conversation;
use serde_json::Value;
use std::sync::Arc;

/// What a strategy sends for one call: its previous request's first `kept` messages, then
/// `appended`.
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// How many leading messages of the previous request this one keeps as they were.
    pub kept: usize,
    /// The messages after those.
    pub appended: Vec<Message>,
    /// Whether the strategy compacted (cleared, masked, summarized, truncated) before it.
    pub compacted: bool,
    /// Summarizer calls made for this step.
    pub summarizer_calls: usize,
    /// Tokens those calls used.
    pub summarizer_usage: Usage,
}

/// A context-management strategy under replay.
pub trait ReplayStrategy: Send {
    /// The name in reports.
    fn name(&self) -> &str;
    /// The request for a call whose history (the recorded messages before it) is `history`.
    fn step<'a>(&'a mut self, history: &'a [Message]) -> BoxFuture<'a, Step>;
}

/// The strategies replay knows, by name.
pub const STRATEGIES: [&str; 10] = [
    "none",
    "contextfold",
    "contextfold-threshold",
    "contextfold-evict",
    "contextfold-summarize",
    "anthropic-clear",
    "mask-10",
    "codex",
    "langchain",
    "truncate",
];

/// What every strategy needs to know.
#[derive(Clone)]
pub struct Setting {
    /// The model's window.
    pub window: u64,
    /// Tokens kept free for the answer.
    pub reserve: u64,
    /// The session's system prompt.
    pub system: Option<System>,
    /// The session's tool definitions.
    pub tools: Option<Vec<Value>>,
    /// The token counter.
    pub counter: Arc<dyn TokenCounter>,
    /// The compactor contextfold's strategies use (its summarizer too).
    pub compactor: Compactor,
    /// contextfold compacts when the next request reaches this share of the usable window.
    pub trigger: f64,
    /// contextfold compacts to this share of the usable window.
    pub target: f64,
}

impl Setting {
    fn usable(&self) -> u64 {
        self.window.saturating_sub(self.reserve)
    }
}

/// Builds the strategy called `name`.
pub fn strategy(name: &str, setting: &Setting) -> Option<Box<dyn ReplayStrategy>> {
    let usable = setting.usable();
    Some(match name {
        "none" => Box::new(Emulation::new("none", setting, Rule::Never)),
        "contextfold" => Box::new(Contextfold::cost_aware(name, setting)),
        "contextfold-threshold" => Box::new(Contextfold::new(name, setting, CompactStrategy::Auto)),
        "contextfold-evict" => Box::new(Contextfold::new(name, setting, CompactStrategy::Evict)),
        "contextfold-summarize" => Box::new(Contextfold::new(name, setting, CompactStrategy::Summarize)),
        "anthropic-clear" => {
            Box::new(Emulation::new(name, setting, Rule::ClearToolResults { trigger: usable * 8 / 10, keep: 3 }))
        }
        "mask-10" => Box::new(Emulation::new(name, setting, Rule::Mask { keep_steps: 10 })),
        "codex" => {
            Box::new(Emulation::new(name, setting, Rule::Codex { trigger: usable * 9 / 10, user_tokens: 20_000 }))
        }
        "langchain" => {
            Box::new(Emulation::new(name, setting, Rule::LangChain { trigger: usable * 8 / 10, keep_messages: 20 }))
        }
        "truncate" => Box::new(Emulation::new(name, setting, Rule::Truncate { trigger: usable, to: usable / 2 })),
        _ => return None,
    })
}

/// contextfold's middleware with its default policy.
struct Contextfold {
    name: String,
    middleware: CompactionMiddleware,
    /// Messages of the previous request.
    sent: usize,
}

impl Contextfold {
    /// The middleware configuration both variants share: the session's system prompt and
    /// tools, compacting to `setting.target` of the usable window.
    fn config(setting: &Setting) -> MiddlewareConfig {
        let mut config = MiddlewareConfig::new(setting.window, setting.reserve);
        config.system = setting.system.clone();
        config.tools = setting.tools.clone();
        config.compact.target =
            Target::Window { window: setting.window, reserve: setting.reserve, fraction: setting.target };
        config
    }

    /// The threshold policy at `setting.trigger`, with compaction `strategy`.
    fn new(name: &str, setting: &Setting, strategy: CompactStrategy) -> Contextfold {
        let mut config = Contextfold::config(setting);
        config.compact.strategy = strategy;
        let policy = All(vec![Arc::new(Threshold::Fraction(setting.trigger)), Arc::new(RateLimit::default())]);
        let middleware = CompactionMiddleware::new(setting.compactor.clone(), config).with_policy(Arc::new(policy));
        Contextfold { name: name.to_string(), middleware, sent: 0 }
    }

    /// contextfold's defaults: the cost-aware policy, evictions batched so that each cache
    /// rewrite frees at least a tenth of the usable window.
    fn cost_aware(name: &str, setting: &Setting) -> Contextfold {
        let middleware = CompactionMiddleware::new(setting.compactor.clone(), Contextfold::config(setting));
        Contextfold { name: name.to_string(), middleware, sent: 0 }
    }
}

impl ReplayStrategy for Contextfold {
    fn name(&self) -> &str {
        &self.name
    }

    fn step<'a>(&'a mut self, history: &'a [Message]) -> BoxFuture<'a, Step> {
        Box::pin(async move {
            let prepared = self.middleware.prepare(history, &[]).await;
            let (compacted, summarizer_calls, summarizer_usage) = match &prepared.event {
                Some(event) => (true, event.summarizer_calls, event.summarizer_usage),
                None => (false, 0, Usage::default()),
            };
            // Without a compaction the working copy only grew. The prepared request is dropped
            // before the next call, so the middleware extends its copy in place.
            let kept = if compacted { 0 } else { self.sent.min(prepared.history.len()) };
            let appended = prepared.iter().skip(kept).cloned().collect();
            self.sent = prepared.history.len() + prepared.pending.len();
            Step { kept, appended, compacted, summarizer_calls, summarizer_usage }
        })
    }
}

/// What an emulated tool does.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// Sends the full history.
    Never,
    /// Anthropic's `clear_tool_uses`: over the trigger, clear all but the most recent
    /// `keep` tool results.
    ClearToolResults { trigger: u64, keep: usize },
    /// Observation masking (the SWE-agent study): outputs older than the last `keep_steps`
    /// assistant steps become a placeholder.
    Mask { keep_steps: usize },
    /// Codex: over the trigger, keep the user's own messages (newest, up to `user_tokens`)
    /// plus one summary; drop all assistant and tool traffic.
    Codex { trigger: u64, user_tokens: u64 },
    /// LangChain's summarization: over the trigger, summarize all but the last
    /// `keep_messages` messages, the cut moved back to keep tool pairs.
    LangChain { trigger: u64, keep_messages: usize },
    /// Drop the oldest turns once over the trigger, down to `to` tokens.
    Truncate { trigger: u64, to: u64 },
}

/// A working copy managed by a [`Rule`].
struct Emulation {
    name: String,
    rule: Rule,
    setting: Setting,
    seen: usize,
    working: Vec<Message>,
    ledger: TokenLedger<'static>,
    summary: Option<String>,
    summarizer: Extractive,
    /// Summaries written since the last step.
    summaries: usize,
    /// Messages of the previous request.
    sent: usize,
    /// The first message changed since the previous request.
    changed_from: usize,
    /// Results before this message are all replaced (the masking and clearing rules).
    replaced_before: usize,
}

impl Emulation {
    fn new(name: &str, setting: &Setting, rule: Rule) -> Emulation {
        Emulation {
            name: name.to_string(),
            rule,
            setting: setting.clone(),
            seen: 0,
            working: Vec::new(),
            ledger: TokenLedger::shared(Arc::clone(&setting.counter)),
            summary: None,
            summarizer: Extractive::default().counter(Arc::clone(&setting.counter)),
            summaries: 0,
            sent: 0,
            changed_from: 0,
            replaced_before: 0,
        }
    }

    fn summarize(&mut self, folded: &[Message]) -> String {
        let request = SummaryRequest {
            head: folded.to_vec(),
            previous: self.summary.clone(),
            // The same budget as contextfold's own summaries: the comparison is of strategies,
            // not of summary sizes.
            max_summary_tokens: CompactConfig::default().summary_tokens,
            ..SummaryRequest::default()
        };
        let text = self.summarizer.summarize_now(&request).text;
        self.summaries += 1;
        self.summary = Some(text.clone());
        text
    }

    fn template(&self) -> Conversation {
        Conversation {
            system: self.setting.system.clone(),
            tools: self.setting.tools.clone(),
            ..Conversation::default()
        }
    }

    /// Applies the rule to the working copy; the first message it changed, if any.
    fn apply(&mut self) -> Option<usize> {
        if matches!(self.rule, Rule::Never) {
            return None;
        }
        if matches!(self.rule, Rule::Mask { .. }) {
            // Masking needs no counts; it only looks at the steps since it last masked.
            return self.mask();
        }
        let tokens = self.ledger.sync(&self.working);
        match self.rule {
            Rule::Never | Rule::Mask { .. } => None,
            Rule::ClearToolResults { trigger, keep } => {
                if tokens <= trigger {
                    return None;
                }
                let positions = result_positions(&self.working, self.replaced_before);
                let cut = positions.len().saturating_sub(keep);
                // The results kept stay candidates for the next clearing.
                self.replaced_before = positions.get(cut).map_or(self.working.len(), |(message, _)| *message);
                replace_results(&mut self.working, &positions[..cut], |_| "[tool result cleared]".to_string())
            }
            Rule::Codex { trigger, user_tokens } => {
                if tokens <= trigger {
                    return None;
                }
                let history = std::mem::take(&mut self.working);
                let summary = self.summarize(&history);
                // The user's own words, newest first, up to the budget, then in order.
                let mut kept: Vec<Block> = Vec::new();
                let mut used = 0;
                for message in
                    history.iter().rev().filter(|message| message.role == Role::User && message.is_authored())
                {
                    let texts: Vec<Block> =
                        message.content.iter().filter(|block| matches!(block, Block::Text(_))).cloned().collect();
                    let size = count_message(&*self.setting.counter, &Message::new(Role::User, texts.clone()));
                    if used + size > user_tokens {
                        break;
                    }
                    used += size;
                    kept.splice(0..0, texts);
                }
                let folded = assemble(&self.template(), Some(&summary), &kept, &[]);
                self.working = folded.messages;
                Some(0)
            }
            Rule::LangChain { trigger, keep_messages } => {
                if tokens <= trigger || self.working.len() <= keep_messages {
                    return None;
                }
                let wanted = self.working.len() - keep_messages;
                let cut = boundaries(&self.working).into_iter().map(|cut| cut.index).rfind(|&index| index <= wanted)?;
                let head: Vec<Message> = self.working[..cut].to_vec();
                let summary = self.summarize(&head);
                self.working = assemble(&self.template(), Some(&summary), &[], &self.working[cut..]).messages;
                Some(0)
            }
            Rule::Truncate { trigger, to } => {
                if tokens <= trigger {
                    return None;
                }
                let mut suffix = vec![0u64; self.working.len() + 1];
                for index in (0..self.working.len()).rev() {
                    suffix[index] = suffix[index + 1] + self.ledger.message_tokens(index).unwrap_or(0);
                }
                let cuts: Vec<usize> = boundaries(&self.working).into_iter().map(|cut| cut.index).collect();
                let cut = cuts.iter().copied().find(|&index| suffix[index] <= to).or(cuts.last().copied())?;
                self.working = assemble(&self.template(), None, &[], &self.working[cut..]).messages;
                Some(0)
            }
        }
    }

    /// Observation masking: outputs older than the last `keep_steps` assistant steps become a
    /// placeholder; only the messages since the last masking are looked at.
    fn mask(&mut self) -> Option<usize> {
        let Rule::Mask { keep_steps } = self.rule else { return None };
        let mut seen = 0;
        let boundary = (self.replaced_before..self.working.len()).rev().find(|&index| {
            seen += usize::from(self.working[index].role == Role::Assistant);
            seen == keep_steps
        })?;
        let positions: Vec<(usize, usize)> = result_positions(&self.working[..boundary], self.replaced_before);
        self.replaced_before = boundary;
        replace_results(&mut self.working, &positions, |lines| {
            format!("[Old environment output ({lines} lines) omitted for brevity]")
        })
    }
}

impl ReplayStrategy for Emulation {
    fn name(&self) -> &str {
        &self.name
    }

    fn step<'a>(&'a mut self, history: &'a [Message]) -> BoxFuture<'a, Step> {
        Box::pin(async move {
            if history.len() < self.seen {
                self.working.clear();
                self.seen = 0;
                self.sent = 0;
                self.replaced_before = 0;
            }
            self.changed_from = self.sent;
            self.working.extend_from_slice(&history[self.seen..]);
            self.seen = history.len();
            let changed = self.apply();
            if let Some(first) = changed {
                self.changed_from = self.changed_from.min(first);
                if !matches!(self.rule, Rule::Mask { .. }) {
                    self.ledger.resync(&self.working);
                }
                if matches!(self.rule, Rule::Codex { .. } | Rule::LangChain { .. } | Rule::Truncate { .. }) {
                    self.replaced_before = 0;
                }
            }
            let summarizer_calls = std::mem::take(&mut self.summaries);
            let kept = self.changed_from.min(self.working.len());
            self.sent = self.working.len();
            Step {
                kept,
                appended: self.working[kept..].to_vec(),
                compacted: changed.is_some(),
                summarizer_calls,
                ..Step::default()
            }
        })
    }
}

/// (message, block) of every tool_result from message `from` on not already replaced.
fn result_positions(messages: &[Message], from: usize) -> Vec<(usize, usize)> {
    let mut positions = Vec::new();
    for (index, message) in messages.iter().enumerate().skip(from) {
        for (position, block) in message.content.iter().enumerate() {
            if let Block::ToolResult(result) = block {
                if !is_placeholder(result.content.as_ref()) {
                    positions.push((index, position));
                }
            }
        }
    }
    positions
}

fn is_placeholder(content: Option<&ToolResultContent>) -> bool {
    matches!(content, Some(ToolResultContent::Text(text)) if text == "[tool result cleared]" || text.starts_with("[Old environment output ("))
}

/// Replaces the payloads at `positions` with `placeholder(lines)`; the first message changed.
fn replace_results(
    messages: &mut [Message],
    positions: &[(usize, usize)],
    placeholder: impl Fn(usize) -> String,
) -> Option<usize> {
    for &(message, block) in positions {
        if let Some(Block::ToolResult(result)) =
            messages.get_mut(message).and_then(|message| message.content.get_mut(block))
        {
            let lines = result.text().lines().count();
            result.content = Some(ToolResultContent::Text(placeholder(lines)));
        }
        if let Some(message) = messages.get_mut(message) {
            message.shape = ContentShape::Blocks;
        }
    }
    positions.first().map(|(message, _)| *message)
}
