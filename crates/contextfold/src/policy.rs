//! Policies: whether to compact before this call. They decide; the middleware acts.
//!
//! A decision is a pure function of what the policy sees ([`PolicyInput`]), so
//! [`Policy::decide`] is synchronous. Policies compose with [`All`]: compact only when every
//! policy agrees. [`CostAware`] compacts when it pays under prompt caching, [`Threshold`]
//! when the next request is big enough, [`RateLimit`] keeps compactions apart and stops
//! loops, [`Off`] is a real off switch (its [`Decision::Never`] sends even an overflowing
//! request as it is). Asking someone is not a decision of this kind: [`Confirm`] is the
//! middleware's async hook, asked after the policy said [`Decision::Compact`].

use crate::summarize::BoxFuture;
use std::sync::Arc;

/// What a policy sees before a call.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PolicyInput {
    /// Estimated tokens of the next request (history, pending input), calibrated.
    pub request_tokens: u64,
    /// The window less the output reserve.
    pub usable_window: u64,
    /// User turns since the last compaction.
    pub turns_since: usize,
    /// Tokens the history grew by since the last compaction.
    pub tokens_since: u64,
    /// Compactions on consecutive calls, just before this one.
    pub consecutive: usize,
    /// Calls prepared so far (this one included).
    pub calls: usize,
    /// The tokens a compaction would bring the history down to.
    pub target_tokens: u64,
    /// The tokens of the system prompt and tools: the start of every request, which a
    /// compaction leaves as it is, so the provider's cache still holds it.
    pub fixed_tokens: u64,
}

/// A policy's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Compact.
    Compact,
    /// Not now, and why; a request that would overflow the window is compacted anyway.
    Skip(String),
    /// Not at all, and why: the request is sent as it is even when it overflows.
    Never(String),
}

/// Decides whether to compact before a call.
pub trait Policy: Send + Sync {
    /// The decision for `input`.
    fn decide(&self, input: &PolicyInput) -> Decision;
}

/// When the next request is big enough to compact. All forms are relative to the usable
/// window (the window less the output reserve).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// Never by size (overflow still compacts).
    Off,
    /// At this many tokens.
    Absolute(u64),
    /// At this fraction of the usable window (0.0–1.0).
    Fraction(f64),
    /// When at most this many usable tokens remain.
    Remaining(u64),
}

impl Threshold {
    /// Whether `input` crosses the threshold.
    pub fn crossed(&self, input: &PolicyInput) -> bool {
        match *self {
            Threshold::Off => false,
            Threshold::Absolute(tokens) => input.request_tokens >= tokens,
            Threshold::Fraction(fraction) => input.request_tokens as f64 >= fraction * input.usable_window as f64,
            Threshold::Remaining(tokens) => input.usable_window.saturating_sub(input.request_tokens) <= tokens,
        }
    }
}

impl Policy for Threshold {
    fn decide(&self, input: &PolicyInput) -> Decision {
        if self.crossed(input) {
            Decision::Compact
        } else {
            Decision::Skip(format!("{} tokens are under the threshold ({self:?})", input.request_tokens))
        }
    }
}

/// Keeps compactions apart: at least `min_turns` user turns or `min_tokens` of growth
/// between two, and at most `max_consecutive` on consecutive calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// User turns required since the last compaction.
    pub min_turns: usize,
    /// Or tokens of growth required since the last compaction.
    pub min_tokens: u64,
    /// Compactions allowed on consecutive calls.
    pub max_consecutive: usize,
}

impl Default for RateLimit {
    /// One turn or 2,000 tokens between compactions, two in a row at most.
    fn default() -> Self {
        RateLimit { min_turns: 1, min_tokens: 2_000, max_consecutive: 2 }
    }
}

impl Policy for RateLimit {
    fn decide(&self, input: &PolicyInput) -> Decision {
        if input.consecutive >= self.max_consecutive {
            Decision::Skip(format!(
                "{} compactions in a row; waiting for the conversation to move on",
                input.consecutive
            ))
        } else if input.turns_since < self.min_turns && input.tokens_since < self.min_tokens {
            Decision::Skip(format!(
                "only {} turn(s) and {} tokens since the last compaction",
                input.turns_since, input.tokens_since
            ))
        } else {
            Decision::Compact
        }
    }
}

/// An async callback that may veto a compaction: `true` to go ahead.
pub type ConfirmFn = Arc<dyn Fn(PolicyInput) -> BoxFuture<'static, bool> + Send + Sync>;

/// Asks the caller (e.g. the user) before a compaction the policy decided on
/// ([`CompactionMiddleware::with_confirmation`](crate::middleware::CompactionMiddleware::with_confirmation)).
/// A compaction that an overflow forces is not asked about: the request would fail.
#[derive(Clone)]
pub struct Confirm(pub ConfirmFn);

impl Confirm {
    /// A hook asking `ask`.
    pub fn new<F, Fut>(ask: F) -> Confirm
    where
        F: Fn(PolicyInput) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = bool> + Send + 'static,
    {
        Confirm(Arc::new(move |input| Box::pin(ask(input))))
    }

    /// Whether the caller agrees to compact for `input`.
    pub async fn ask(&self, input: PolicyInput) -> bool {
        (self.0)(input).await
    }
}

impl std::fmt::Debug for Confirm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Confirm(..)")
    }
}

/// Never compacts, not even on overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Off;

impl Policy for Off {
    fn decide(&self, _input: &PolicyInput) -> Decision {
        Decision::Never("compaction is off".into())
    }
}

/// Compacts only when every policy agrees. A [`Decision::Never`] of any policy wins; else
/// the first that declines gives the reason.
#[derive(Clone)]
pub struct All(pub Vec<Arc<dyn Policy>>);

impl std::fmt::Debug for All {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "All({} policies)", self.0.len())
    }
}

impl Policy for All {
    fn decide(&self, input: &PolicyInput) -> Decision {
        let mut decision = Decision::Compact;
        for policy in &self.0 {
            match policy.decide(input) {
                never @ Decision::Never(_) => return never,
                Decision::Compact => {}
                declined => {
                    if decision == Decision::Compact {
                        decision = declined;
                    }
                }
            }
        }
        decision
    }
}

/// How many more calls [`CostAware`] expects a session to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Horizon {
    /// As many as it has made so far (a session that ran long tends to run on).
    SoFar,
    /// A fixed number.
    Calls(usize),
}

/// Compacts when it pays under prompt caching: the cache reads saved on the calls still to
/// come must exceed the one-time cost of rewriting the cache after the first changed block,
/// and always before the window would overflow.
///
/// Per later call, a compaction from `request` to `target` tokens saves
/// `(request − target) × 0.1` input-price units of cache reads; once, it costs
/// `(target − fixed) × (1.25 − 0.1)` for writing the compacted messages instead of reading
/// them (the system prompt and tools before them stay cached).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostAware {
    /// The calls still expected.
    pub horizon: Horizon,
    /// Never compact below this share of the usable window (0.0–1.0): small contexts are
    /// cheap to keep and their content is the most useful.
    pub floor: f64,
}

impl Default for CostAware {
    /// Horizon [`Horizon::SoFar`], floor 0.4 (replayed over the corpus, cheaper than 0.5 at
    /// every window with the same recall).
    fn default() -> Self {
        CostAware { horizon: Horizon::SoFar, floor: 0.4 }
    }
}

impl CostAware {
    /// Whether compacting now pays for itself over the horizon.
    pub fn pays(&self, input: &PolicyInput) -> bool {
        let calls = match self.horizon {
            Horizon::SoFar => input.calls.max(1),
            Horizon::Calls(calls) => calls,
        } as f64;
        let saved = input.request_tokens.saturating_sub(input.target_tokens) as f64 * 0.1 * calls;
        let rewrite = input.target_tokens.saturating_sub(input.fixed_tokens) as f64 * (1.25 - 0.1);
        saved > rewrite
    }
}

impl Policy for CostAware {
    fn decide(&self, input: &PolicyInput) -> Decision {
        if input.request_tokens > input.usable_window {
            Decision::Compact
        } else if (input.request_tokens as f64) < self.floor * input.usable_window as f64 {
            Decision::Skip(format!("{} tokens are under the floor of the cost-aware policy", input.request_tokens))
        } else if self.pays(input) {
            Decision::Compact
        } else {
            Decision::Skip("compacting now would cost more in cache writes than it saves".into())
        }
    }
}

/// The default policy: [`CostAware`], rate-limited. Replay over our corpus found it cheaper
/// than a fixed threshold at every window tried (16k, 32k, 64k).
pub fn default_policy() -> All {
    All(vec![Arc::new(CostAware::default()), Arc::new(RateLimit::default())])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(request_tokens: u64) -> PolicyInput {
        PolicyInput {
            request_tokens,
            usable_window: 1_000,
            turns_since: 5,
            tokens_since: 5_000,
            consecutive: 0,
            calls: 10,
            target_tokens: 300,
            fixed_tokens: 0,
        }
    }

    fn decide(policy: &dyn Policy, input: PolicyInput) -> Decision {
        policy.decide(&input)
    }

    #[test]
    fn thresholds() {
        assert!(Threshold::Absolute(500).crossed(&input(500)));
        assert!(!Threshold::Absolute(500).crossed(&input(499)));
        assert!(Threshold::Fraction(0.8).crossed(&input(800)));
        assert!(!Threshold::Fraction(0.8).crossed(&input(799)));
        assert!(Threshold::Remaining(100).crossed(&input(900)));
        assert!(!Threshold::Remaining(100).crossed(&input(899)));
        assert!(!Threshold::Off.crossed(&input(10_000)));
    }

    #[test]
    fn rate_limit_and_composition() {
        let limit = RateLimit::default();
        assert_eq!(decide(&limit, input(900)), Decision::Compact);
        let looping = PolicyInput { consecutive: 2, ..input(900) };
        assert!(matches!(decide(&limit, looping), Decision::Skip(_)));
        let too_soon = PolicyInput { turns_since: 0, tokens_since: 10, ..input(900) };
        assert!(matches!(decide(&limit, too_soon), Decision::Skip(_)));

        let policy = All(vec![Arc::new(Threshold::Fraction(0.8)), Arc::new(RateLimit::default())]);
        assert_eq!(decide(&policy, input(900)), Decision::Compact);
        assert!(matches!(decide(&policy, input(100)), Decision::Skip(_)));
        // Off wins over an earlier policy that only declines: nothing compacts, overflow included.
        let off = All(vec![Arc::new(Threshold::Fraction(0.99)), Arc::new(Off)]);
        assert_eq!(decide(&off, input(900)), Decision::Never("compaction is off".into()));
        assert!(matches!(decide(&default_policy(), input(900)), Decision::Compact | Decision::Skip(_)));
    }

    #[test]
    fn confirmation_is_an_async_hook() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let asked = Confirm::new(|input: PolicyInput| async move { input.request_tokens > 500 });
        assert!(runtime.block_on(asked.ask(input(900))));
        assert!(!runtime.block_on(asked.ask(input(100))));
    }

    #[test]
    fn cost_aware_compacts_when_it_pays() {
        let policy = CostAware::default();
        // 900 → 300 saves 60 per call; rewriting 300 costs 345: pays after 6 calls.
        assert_eq!(decide(&policy, PolicyInput { calls: 10, ..input(900) }), Decision::Compact);
        assert!(matches!(decide(&policy, PolicyInput { calls: 5, ..input(900) }), Decision::Skip(_)));
        assert!(
            matches!(decide(&policy, PolicyInput { calls: 1000, ..input(399) }), Decision::Skip(_)),
            "under the floor"
        );
        assert_eq!(decide(&policy, PolicyInput { calls: 1, ..input(1_001) }), Decision::Compact, "overflow");
        let fixed = CostAware { horizon: Horizon::Calls(100), floor: 0.0 };
        assert_eq!(decide(&fixed, PolicyInput { calls: 1, ..input(400) }), Decision::Compact);
    }

    #[test]
    fn the_system_prompt_and_tools_stay_cached_so_only_the_messages_are_rewritten() {
        // 900 → 600 saves 30 a call; rewriting all 600 costs 690, the 100 tokens of
        // messages after a 500-token preamble 115.
        let policy = CostAware { horizon: Horizon::Calls(10), floor: 0.0 };
        let input = PolicyInput { target_tokens: 600, ..input(900) };
        assert!(matches!(decide(&policy, input), Decision::Skip(_)));
        assert_eq!(decide(&policy, PolicyInput { fixed_tokens: 500, ..input }), Decision::Compact);
    }
}
