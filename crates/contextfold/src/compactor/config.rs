//! How to compact: the target, the strategy, the limits, and the builder that refuses
//! settings that contradict each other instead of clamping them.

use contextfold_core::clip::MIN_CLIP_TOKENS;
use contextfold_core::evict::EvictConfig;
use contextfold_core::plan::PlanConfig;
use contextfold_core::prompt::Instructions;
use serde::Serialize;

/// How many tokens the compacted conversation may hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Target {
    /// An absolute budget.
    Budget(u64),
    /// A fraction of a model window less an output reserve.
    Window {
        /// The model's context window.
        window: u64,
        /// Tokens kept free for the answer.
        reserve: u64,
        /// The share of the usable window to aim for.
        fraction: f64,
    },
    /// A fraction of the conversation's own size (manual compaction without a budget).
    Shrink(f64),
}

impl Target {
    /// The target in tokens for a conversation of `current` tokens, before its system
    /// prompt and tools are known (as if they took nothing).
    pub fn tokens(&self, current: u64) -> u64 {
        self.tokens_after(current, 0)
    }

    /// The target in tokens for a conversation of `current` tokens whose system prompt and
    /// tools take `preamble`. A window's fraction is of the room the preamble leaves: the
    /// preamble is sent whole whatever the target, so a fraction of the whole window would
    /// leave the messages nothing when the preamble is large (a coding agent's is often
    /// 15–20k tokens).
    pub fn tokens_after(&self, current: u64, preamble: u64) -> u64 {
        match *self {
            Target::Budget(budget) => budget,
            Target::Window { window, reserve, fraction } => {
                let usable = window.saturating_sub(reserve);
                let preamble = preamble.min(usable);
                preamble + ((usable - preamble) as f64 * fraction) as u64
            }
            Target::Shrink(fraction) => (current as f64 * fraction) as u64,
        }
    }

    /// The usable window of a [`Target::Window`] (`None` for the others).
    pub fn usable(&self) -> Option<u64> {
        match *self {
            Target::Window { window, reserve, .. } => Some(window.saturating_sub(reserve)),
            _ => None,
        }
    }

    /// The target in tokens when it does not depend on the conversation (`None` for
    /// [`Target::Shrink`]).
    pub fn fixed_tokens(&self) -> Option<u64> {
        match self {
            Target::Shrink(_) => None,
            other => Some(other.tokens(0)),
        }
    }

    /// Checks that the target can be met by some conversation: a budget above zero, a
    /// reserve below its window, a fraction in (0, 1].
    pub fn check(&self) -> Result<(), ConfigError> {
        match *self {
            Target::Budget(0) => Err(ConfigError::ZeroBudget),
            Target::Budget(_) => Ok(()),
            Target::Window { window, reserve, fraction } => {
                check_window(window, reserve)?;
                check_fraction("target", fraction)
            }
            Target::Shrink(fraction) => check_fraction("shrink", fraction),
        }
    }
}

/// Checks a model window and its output reserve.
fn check_window(window: u64, reserve: u64) -> Result<(), ConfigError> {
    if window == 0 {
        return Err(ConfigError::ZeroWindow);
    }
    if reserve >= window {
        return Err(ConfigError::ReserveNotBelowWindow { reserve, window });
    }
    Ok(())
}

fn check_fraction(name: &'static str, value: f64) -> Result<(), ConfigError> {
    if value > 0.0 && value <= 1.0 {
        Ok(())
    } else {
        Err(ConfigError::Fraction { name, value })
    }
}

/// What the compactor may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Strategy {
    /// Evict first; summarize only if eviction cannot reach the target.
    #[default]
    Auto,
    /// Evict only.
    Evict,
    /// Summarize the head (after the plan), without evicting first.
    Summarize,
}

/// A strategy name that is not `auto`, `evict` or `summarize`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown strategy `{0}` (expected auto, evict or summarize)")]
pub struct UnknownStrategy(pub String);

impl std::str::FromStr for Strategy {
    type Err = UnknownStrategy;

    fn from_str(name: &str) -> Result<Strategy, UnknownStrategy> {
        match name {
            "auto" => Ok(Strategy::Auto),
            "evict" => Ok(Strategy::Evict),
            "summarize" => Ok(Strategy::Summarize),
            other => Err(UnknownStrategy(other.to_string())),
        }
    }
}

/// The limit above which a single tool output is clipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ClipLimit {
    /// 10% of the target (at least [`MIN_CLIP_TOKENS`]).
    #[default]
    Auto,
    /// This many tokens (at least [`MIN_CLIP_TOKENS`]: below it the clip marker alone would
    /// not fit).
    Tokens(u64),
    /// Never clip.
    Off,
}

impl ClipLimit {
    /// The limit in tokens for a target of `target` tokens; `None` when off.
    pub fn tokens(&self, target: u64) -> Option<u64> {
        match *self {
            ClipLimit::Auto => Some((target / 10).max(MIN_CLIP_TOKENS)),
            ClipLimit::Tokens(tokens) => Some(tokens.max(MIN_CLIP_TOKENS)),
            ClipLimit::Off => None,
        }
    }
}

/// What to do when the target is too small for any summary: below the system prompt, the
/// tools, a minimal summary and the newest turn that cannot be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Undersized {
    /// Fail with [`CompactError::TooSmall`](super::CompactError::TooSmall), naming the
    /// smallest workable target (the CLI's choice: a user asked for a size).
    #[default]
    Fail,
    /// Compact to the smallest workable target instead, and say so in the report (the
    /// middleware's choice: a request must go out).
    Raise,
}

/// How to compact. The [`Default`] halves the conversation with [`Strategy::Auto`], a summary
/// of at most 4,000 tokens (and half the target) and at most 8 summarizer calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactConfig {
    /// How big the result may be.
    pub target: Target,
    /// What the compactor may do.
    pub strategy: Strategy,
    /// Where to cut; its `max_tail_tokens` is lowered to what the target leaves for the tail.
    pub plan: PlanConfig,
    /// What to evict; its `target_tokens` is set from the target.
    pub evict: EvictConfig,
    /// The most tokens the summary may hold.
    pub summary_tokens: u64,
    /// Language and focus for LLM summaries.
    #[serde(skip)]
    pub instructions: Instructions,
    /// The most summarizer calls for one compaction (a head too big for one request is
    /// summarized in at most this many chunks).
    pub max_chunks: usize,
    /// When to clip a single tool output.
    pub max_tool_output: ClipLimit,
    /// A hard cap on the result (the usable window), unlike the target, which is an aim: when
    /// the tail that cannot be cut leaves less room than the summary's budget, the summary
    /// shrinks so the result stays under this cap.
    pub limit: Option<u64>,
    /// What to do when the target is too small for any summary.
    pub undersized: Undersized,
}

impl Default for CompactConfig {
    fn default() -> Self {
        CompactConfig {
            target: Target::Shrink(0.5),
            strategy: Strategy::Auto,
            plan: PlanConfig::default(),
            evict: EvictConfig { keep_recent: Some(3), ..EvictConfig::default() },
            summary_tokens: 4_000,
            instructions: Instructions::default(),
            max_chunks: 8,
            max_tool_output: ClipLimit::Auto,
            limit: None,
            undersized: Undersized::Fail,
        }
    }
}

impl CompactConfig {
    /// A builder starting from the [`Default`].
    pub fn builder() -> CompactConfigBuilder {
        CompactConfigBuilder { config: CompactConfig::default() }
    }

    /// Checks that the settings can be met together; [`Compactor::compact`](super::Compactor::compact)
    /// checks them too, so a config built by hand is held to the same rules.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.target.check()?;
        if self.summary_tokens == 0 {
            return Err(ConfigError::ZeroSummary);
        }
        if self.max_chunks == 0 {
            return Err(ConfigError::ZeroChunks);
        }
        if let Some(target) = self.target.fixed_tokens() {
            if let Some(tail) = self.plan.min_tail_tokens.filter(|&tail| tail > target) {
                return Err(ConfigError::TailOverTarget { tail, target });
            }
            if let Some(limit) = self.limit.filter(|&limit| limit < target) {
                return Err(ConfigError::LimitBelowTarget { limit, target });
            }
        }
        if self.limit == Some(0) {
            return Err(ConfigError::ZeroLimit);
        }
        if !(0.0..=1.0).contains(&self.plan.min_progress) {
            return Err(ConfigError::Fraction { name: "min_progress", value: self.plan.min_progress });
        }
        Ok(())
    }
}

/// Builds a [`CompactConfig`]; [`build`](CompactConfigBuilder::build) refuses settings that
/// contradict each other.
#[derive(Debug, Clone)]
pub struct CompactConfigBuilder {
    config: CompactConfig,
}

impl CompactConfigBuilder {
    /// Compact to `tokens` (default: half the conversation's size).
    pub fn budget(mut self, tokens: u64) -> Self {
        self.config.target = Target::Budget(tokens);
        self
    }

    /// Compact to `fraction` of `window` less `reserve` (default: half the conversation's size).
    pub fn window(mut self, window: u64, reserve: u64, fraction: f64) -> Self {
        self.config.target = Target::Window { window, reserve, fraction };
        self
    }

    /// Compact to `fraction` of the conversation's own size (default 0.5).
    pub fn shrink(mut self, fraction: f64) -> Self {
        self.config.target = Target::Shrink(fraction);
        self
    }

    /// What the compactor may do (default [`Strategy::Auto`]).
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.config.strategy = strategy;
        self
    }

    /// Where to cut (default [`PlanConfig::default`]); the settings below change parts of it.
    pub fn plan(mut self, plan: PlanConfig) -> Self {
        self.config.plan = plan;
        self
    }

    /// Keep at least the last `turns` user turns verbatim (default: as many as fit).
    pub fn keep_turns(mut self, turns: usize) -> Self {
        self.config.plan.keep_turns = Some(turns);
        self
    }

    /// Keep at most `tokens` of verbatim tail (default 16,000, and never more than the
    /// target leaves).
    pub fn keep_tail_tokens(mut self, tokens: u64) -> Self {
        self.config.plan.max_tail_tokens = Some(tokens);
        self
    }

    /// Keep at least `tokens` of verbatim tail (default: no minimum); more than the target
    /// is refused.
    pub fn min_tail_tokens(mut self, tokens: u64) -> Self {
        self.config.plan.min_tail_tokens = Some(tokens);
        self
    }

    /// The most tokens the summary may hold (default 4,000, and at most half the target).
    pub fn summary_tokens(mut self, tokens: u64) -> Self {
        self.config.summary_tokens = tokens;
        self
    }

    /// Language and focus of LLM summaries (default: the conversation's language, no focus).
    pub fn instructions(mut self, instructions: Instructions) -> Self {
        self.config.instructions = instructions;
        self
    }

    /// The most summarizer calls per compaction (default 8).
    pub fn max_chunks(mut self, chunks: usize) -> Self {
        self.config.max_chunks = chunks;
        self
    }

    /// When to clip a single tool output (default [`ClipLimit::Auto`], 10% of the target).
    pub fn max_tool_output(mut self, limit: ClipLimit) -> Self {
        self.config.max_tool_output = limit;
        self
    }

    /// A hard cap on the result beside the target (default none).
    pub fn limit(mut self, tokens: u64) -> Self {
        self.config.limit = Some(tokens);
        self
    }

    /// Pointers, clip markers and the summary name the recall tool `name` (such as
    /// [`RECALL_TOOL_NAME`](crate::store::RECALL_TOOL_NAME)) the model has (default none;
    /// only with a store that keeps the payloads).
    pub fn recall_tool(mut self, name: impl Into<String>) -> Self {
        self.config.evict.recall_tool = Some(name.into());
        self
    }

    /// What to evict (default: [`EvictConfig`] keeping the 3 most recent results).
    pub fn evict(mut self, evict: EvictConfig) -> Self {
        self.config.evict = evict;
        self
    }

    /// What to do when the target is too small for any summary (default [`Undersized::Fail`]).
    pub fn undersized(mut self, undersized: Undersized) -> Self {
        self.config.undersized = undersized;
        self
    }

    /// The configuration, or the first pair of settings that contradict each other.
    pub fn build(self) -> Result<CompactConfig, ConfigError> {
        self.config.check()?;
        Ok(self.config)
    }
}

/// Settings that cannot work, alone or together; each names the values involved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A budget of zero tokens.
    #[error("a budget of 0 tokens holds nothing; give a budget of at least one token")]
    ZeroBudget,
    /// A window of zero tokens.
    #[error("a window of 0 tokens holds nothing; give the model's context window")]
    ZeroWindow,
    /// An output reserve that leaves nothing of the window.
    #[error("the output reserve of {reserve} tokens leaves nothing of the {window}-token window; reserve less than the window")]
    ReserveNotBelowWindow {
        /// The reserve.
        reserve: u64,
        /// The window.
        window: u64,
    },
    /// A fraction outside (0, 1].
    #[error("{name} must be a fraction above 0 and at most 1, not {value}")]
    Fraction {
        /// Which setting.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// A verbatim tail required to be larger than the whole target.
    #[error("a verbatim tail of at least {tail} tokens cannot fit the target of {target} tokens; keep a smaller tail or raise the target")]
    TailOverTarget {
        /// The tail's minimum.
        tail: u64,
        /// The target.
        target: u64,
    },
    /// A hard limit below the target.
    #[error("the limit of {limit} tokens is below the target of {target} tokens; the target must fit under the limit")]
    LimitBelowTarget {
        /// The limit.
        limit: u64,
        /// The target.
        target: u64,
    },
    /// A hard limit of zero.
    #[error("a limit of 0 tokens holds nothing; give the usable window")]
    ZeroLimit,
    /// A summary budget of zero.
    #[error("a summary of at most 0 tokens holds nothing; give summary_tokens above 0")]
    ZeroSummary,
    /// No summarizer calls allowed.
    #[error("max_chunks of 0 allows no summarizer call; allow at least one")]
    ZeroChunks,
    /// The middleware's compaction target is not under its usable window.
    #[error("the compaction target of {target} tokens is not under the usable window of {usable} tokens; aim lower")]
    TargetOverWindow {
        /// The target.
        target: u64,
        /// The window less the reserve.
        usable: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_refuses_contradictions_naming_both_values() {
        assert_eq!(CompactConfig::builder().budget(0).build(), Err(ConfigError::ZeroBudget));
        let err = CompactConfig::builder().window(20_000, 30_000, 0.5).build().unwrap_err();
        assert_eq!(err, ConfigError::ReserveNotBelowWindow { reserve: 30_000, window: 20_000 });
        assert!(err.to_string().contains("30000") && err.to_string().contains("20000"), "{err}");
        assert_eq!(CompactConfig::builder().window(0, 0, 0.5).build(), Err(ConfigError::ZeroWindow));
        assert_eq!(
            CompactConfig::builder().budget(4_000).min_tail_tokens(5_000).build(),
            Err(ConfigError::TailOverTarget { tail: 5_000, target: 4_000 })
        );
        assert!(CompactConfig::builder().budget(4_000).keep_tail_tokens(5_000).build().is_ok(), "an upper bound only");
        assert_eq!(
            CompactConfig::builder().budget(4_000).limit(3_500).build(),
            Err(ConfigError::LimitBelowTarget { limit: 3_500, target: 4_000 })
        );
        assert!(matches!(
            CompactConfig::builder().window(1_000, 10, 1.5).build(),
            Err(ConfigError::Fraction { name: "target", .. })
        ));
        assert!(matches!(CompactConfig::builder().shrink(0.0).build(), Err(ConfigError::Fraction { .. })));
        assert_eq!(CompactConfig::builder().summary_tokens(0).build(), Err(ConfigError::ZeroSummary));
    }

    #[test]
    fn the_builder_builds_what_it_was_told() {
        let config = CompactConfig::builder()
            .budget(8_000)
            .strategy(Strategy::Evict)
            .keep_tail_tokens(2_000)
            .summary_tokens(1_000)
            .recall_tool("context_recall")
            .build()
            .unwrap();
        assert_eq!(config.target, Target::Budget(8_000));
        assert_eq!(config.strategy, Strategy::Evict);
        assert_eq!(config.plan.max_tail_tokens, Some(2_000));
        assert_eq!(config.summary_tokens, 1_000);
        assert_eq!(config.evict.recall_tool.as_deref(), Some("context_recall"));
        assert_eq!(CompactConfig::builder().build().unwrap(), CompactConfig::default());
    }

    #[test]
    fn strategies_parse_with_a_typed_error() {
        assert_eq!("summarize".parse::<Strategy>(), Ok(Strategy::Summarize));
        let err = "fold".parse::<Strategy>().unwrap_err();
        assert_eq!(err, UnknownStrategy("fold".into()));
        assert!(err.to_string().contains("expected auto, evict or summarize"));
    }
}
