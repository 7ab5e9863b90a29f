//! The middleware's configuration: the window, the reserve, how to compact, the system
//! prompt and tools it counts, and its builder, which refuses settings that contradict each
//! other.

use crate::compactor::{CompactConfig, ConfigError, Target, Undersized};
use contextfold_core::evict::EvictConfig;
use contextfold_core::System;
use serde_json::Value;

/// The share of the usable window the middleware compacts to by default.
pub const DEFAULT_TARGET: f64 = 0.2;

/// Where the middleware works.
#[derive(Debug, Clone, PartialEq)]
pub struct MiddlewareConfig {
    /// The model's context window.
    pub window: u64,
    /// Tokens kept free for the answer.
    pub output_reserve: u64,
    /// How to compact when the policy says so (its target defaults to [`DEFAULT_TARGET`] of
    /// the usable window).
    pub compact: CompactConfig,
    /// The system prompt sent with every request (counted, never changed).
    pub system: Option<System>,
    /// The tool definitions sent with every request (counted, never changed).
    pub tools: Option<Vec<Value>>,
    /// Clip tool outputs over this many tokens as they enter the history, so a huge output
    /// never enters it whole. Off by default.
    pub clip_on_ingest: Option<u64>,
}

impl MiddlewareConfig {
    /// A window of `window` tokens with `output_reserve` kept free; compaction aims at
    /// [`DEFAULT_TARGET`] of the usable window (tuned by replay over our corpus: a smaller
    /// context after a compaction is cheaper to re-read on every later call). Not checked: see
    /// [`MiddlewareConfig::builder`] for a configuration that refuses what cannot work.
    pub fn new(window: u64, output_reserve: u64) -> MiddlewareConfig {
        let defaults = CompactConfig::default();
        let usable = window.saturating_sub(output_reserve);
        MiddlewareConfig {
            window,
            output_reserve,
            compact: CompactConfig {
                target: Target::Window { window, reserve: output_reserve, fraction: DEFAULT_TARGET },
                // Each cache rewrite an eviction causes must free a tenth of the window.
                evict: EvictConfig { clear_at_least: Some(usable / 10), ..defaults.evict.clone() },
                // A request must go out: below what a summary needs, compact to what works.
                undersized: Undersized::Raise,
                ..defaults
            },
            system: None,
            tools: None,
            clip_on_ingest: None,
        }
    }

    /// A builder for a window of `window` tokens with `output_reserve` kept free, starting
    /// from [`MiddlewareConfig::new`].
    pub fn builder(window: u64, output_reserve: u64) -> MiddlewareConfigBuilder {
        MiddlewareConfigBuilder { config: MiddlewareConfig::new(window, output_reserve) }
    }

    /// The window less the output reserve.
    pub fn usable_window(&self) -> u64 {
        self.window.saturating_sub(self.output_reserve)
    }

    /// Checks that the settings can work together: a window above zero, a reserve below
    /// it, a compaction config that holds, with a target under the usable window.
    pub fn check(&self) -> Result<(), ConfigError> {
        Target::Window { window: self.window, reserve: self.output_reserve, fraction: 1.0 }.check()?;
        self.compact.check()?;
        let usable = self.usable_window();
        match self.compact.target.fixed_tokens() {
            Some(target) if target >= usable => Err(ConfigError::TargetOverWindow { target, usable }),
            _ => Ok(()),
        }
    }
}

/// Builds a [`MiddlewareConfig`]; [`build`](MiddlewareConfigBuilder::build) refuses settings
/// that contradict each other.
#[derive(Debug, Clone)]
pub struct MiddlewareConfigBuilder {
    config: MiddlewareConfig,
}

impl MiddlewareConfigBuilder {
    /// Compact to `fraction` of the usable window (default [`DEFAULT_TARGET`]).
    pub fn target(mut self, fraction: f64) -> Self {
        let (window, reserve) = (self.config.window, self.config.output_reserve);
        self.config.compact.target = Target::Window { window, reserve, fraction };
        self
    }

    /// How to compact (default: [`MiddlewareConfig::new`]'s); its target replaces the one
    /// set by [`target`](MiddlewareConfigBuilder::target).
    pub fn compact(mut self, compact: CompactConfig) -> Self {
        self.config.compact = compact;
        self
    }

    /// The conversation's system prompt (default none): counted, never changed.
    pub fn system(mut self, system: System) -> Self {
        self.config.system = Some(system);
        self
    }

    /// The conversation's tool definitions (default none): counted, never changed.
    pub fn tools(mut self, tools: Vec<Value>) -> Self {
        self.config.tools = Some(tools);
        self
    }

    /// Clip tool outputs over `tokens` as they enter the history (default off).
    pub fn clip_on_ingest(mut self, tokens: u64) -> Self {
        self.config.clip_on_ingest = Some(tokens);
        self
    }

    /// The configuration, or the first pair of settings that contradict each other.
    pub fn build(self) -> Result<MiddlewareConfig, ConfigError> {
        self.config.check()?;
        Ok(self.config)
    }
}
