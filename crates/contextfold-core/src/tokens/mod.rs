//! Token counting: the [`TokenCounter`] seam, the named [`Tokenizer`]s, and the pricing of
//! whole blocks, messages and conversations.
//!
//! Design choice: a counter only ever counts *text*. The structure of a conversation
//! (message framing, tool calls, images, documents) is priced once, in [`count_block`] and
//! friends, with documented constants, so that every counter prices structure the same way
//! and counters differ only in how they count text. Three counters ship:
//!
//! - [`Tokenizer::O200k`] and [`Tokenizer::Cl100k`]: exact BPE counts (feature `bpe`);
//! - [`Tokenizer::Estimate`]: a calibrated, vocabulary-free estimate of the o200k count;
//! - [`Tokenizer::Chars4`]: UTF-8 bytes / 4, the classic baseline.
//!
//! [`TokenLedger`] memoises per-message counts so that a conversation that grew by one
//! message costs one message to recount.
//!
//! ```
//! use contextfold_core::tokens::{count_conversation, Tokenizer};
//! use contextfold_core::{Conversation, Message, Role};
//!
//! let conversation = Conversation {
//!     messages: vec![Message::text(Role::User, "How many tokens is this?")],
//!     ..Conversation::default()
//! };
//! let counter = "estimate".parse::<Tokenizer>().unwrap().counter();
//! assert!(count_conversation(counter, &conversation) > 4);
//! ```

#[cfg(feature = "bpe")]
mod bpe;
mod count;
mod estimate;
mod ledger;
mod media;
mod memo;
#[cfg(feature = "bpe")]
mod merge;
mod pieces;
#[cfg(feature = "bpe")]
mod split;
#[cfg(feature = "bpe")]
mod vocabulary;

#[cfg(feature = "bpe")]
pub use bpe::{Cl100k, O200k};
pub use count::{
    count_block, count_conversation, count_message, count_messages, count_system, count_tools, BLOCK_OVERHEAD,
    MESSAGE_OVERHEAD, REDACTED_THINKING_BYTES_PER_TOKEN, SYSTEM_OVERHEAD, TOOL_DEFINITION_OVERHEAD,
};
pub use estimate::{Chars4, Estimate};
pub use ledger::TokenLedger;
pub use media::{
    document_tokens, image_dimensions, image_tokens, image_tokens_for_size, DOCUMENT_FALLBACK_TOKENS,
    IMAGE_FALLBACK_TOKENS, IMAGE_MAX_LONG_EDGE, IMAGE_MAX_PIXELS, IMAGE_PIXELS_PER_TOKEN, PDF_BYTES_PER_PAGE,
    PDF_TOKENS_PER_PAGE,
};
pub use memo::Memoized;

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};

/// Something that counts the tokens of a text.
///
/// Implementations must be pure (the same text always gives the same count) and cheap to
/// share between threads. Structure (messages, blocks, images) is priced by the free
/// functions of this module, not by the counter.
pub trait TokenCounter: Send + Sync {
    /// A short name for reports, such as `"o200k"`.
    fn name(&self) -> &'static str;

    /// The number of tokens in `text`.
    fn count_text(&self, text: &str) -> u64;
}

/// The token counters that ship with contextfold, by name.
///
/// The names (`o200k`, `cl100k`, `estimate`, `chars4`) are what [`FromStr`] accepts and
/// [`fmt::Display`] writes. The BPE variants exist only with the `bpe` feature (on by
/// default); without it, parsing their names fails with [`TokenizerError::FeatureDisabled`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Tokenizer {
    /// Exact counts with OpenAI's `o200k_base` vocabulary (GPT-4o and later).
    #[cfg(feature = "bpe")]
    O200k,
    /// Exact counts with OpenAI's `cl100k_base` vocabulary (GPT-4, GPT-3.5).
    #[cfg(feature = "bpe")]
    Cl100k,
    /// A fast estimate of the `o200k` count that needs no vocabulary ([`Estimate`]).
    Estimate,
    /// UTF-8 bytes divided by four, rounded up ([`Chars4`]).
    Chars4,
}

impl Tokenizer {
    /// Every tokenizer compiled into this build.
    pub const ALL: &'static [Tokenizer] = &[
        #[cfg(feature = "bpe")]
        Tokenizer::O200k,
        #[cfg(feature = "bpe")]
        Tokenizer::Cl100k,
        Tokenizer::Estimate,
        Tokenizer::Chars4,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "bpe")]
            Tokenizer::O200k => "o200k",
            #[cfg(feature = "bpe")]
            Tokenizer::Cl100k => "cl100k",
            Tokenizer::Estimate => "estimate",
            Tokenizer::Chars4 => "chars4",
        }
    }

    /// Whether this tokenizer counts exactly with a BPE vocabulary: its counts cost an
    /// encoding (and a load of the vocabulary), where the others' cost a pass over the text.
    pub fn is_exact(self) -> bool {
        match self {
            #[cfg(feature = "bpe")]
            Tokenizer::O200k | Tokenizer::Cl100k => true,
            Tokenizer::Estimate | Tokenizer::Chars4 => false,
        }
    }

    /// The counter, shared for the life of the program.
    ///
    /// A BPE vocabulary is built on first use (tens of milliseconds) and then reused.
    pub fn counter(self) -> &'static dyn TokenCounter {
        match self {
            #[cfg(feature = "bpe")]
            Tokenizer::O200k => &O200k,
            #[cfg(feature = "bpe")]
            Tokenizer::Cl100k => &Cl100k,
            Tokenizer::Estimate => &Estimate,
            Tokenizer::Chars4 => &Chars4,
        }
    }

    /// [`counter`](Tokenizer::counter) as a shared handle, for the runtime's compactor and
    /// middleware (which also take counters of the caller's own).
    pub fn shared(self) -> Arc<dyn TokenCounter> {
        Arc::new(self.counter())
    }

    /// The counter behind a [`Memoized`] cache shared for the life of the program, for
    /// callers that count the same texts many times (replay, a long-running proxy). Counts
    /// are the same as [`counter`](Tokenizer::counter)'s. Chars4 is returned bare: it is
    /// cheaper than a hash.
    pub fn memoized(self) -> &'static dyn TokenCounter {
        #[cfg(feature = "bpe")]
        static O200K: LazyLock<Memoized<O200k>> = LazyLock::new(|| Memoized::new(O200k));
        #[cfg(feature = "bpe")]
        static CL100K: LazyLock<Memoized<Cl100k>> = LazyLock::new(|| Memoized::new(Cl100k));
        static ESTIMATE: LazyLock<Memoized<Estimate>> = LazyLock::new(|| Memoized::new(Estimate));
        match self {
            #[cfg(feature = "bpe")]
            Tokenizer::O200k => &*O200K,
            #[cfg(feature = "bpe")]
            Tokenizer::Cl100k => &*CL100K,
            Tokenizer::Estimate => &*ESTIMATE,
            Tokenizer::Chars4 => &Chars4,
        }
    }
}

/// A token count written with thousands separators (`12,345`), as every figure a person
/// reads is written (reports, notes, errors); machine output keeps plain digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thousands(pub u64);

impl fmt::Display for Thousands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.0.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, digit) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(digit);
        }
        f.pad(&out)
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tokenizer {
    type Err = TokenizerError;

    fn from_str(name: &str) -> Result<Tokenizer, TokenizerError> {
        match name {
            #[cfg(feature = "bpe")]
            "o200k" => Ok(Tokenizer::O200k),
            #[cfg(feature = "bpe")]
            "cl100k" => Ok(Tokenizer::Cl100k),
            #[cfg(not(feature = "bpe"))]
            "o200k" => Err(TokenizerError::FeatureDisabled("o200k")),
            #[cfg(not(feature = "bpe"))]
            "cl100k" => Err(TokenizerError::FeatureDisabled("cl100k")),
            "estimate" => Ok(Tokenizer::Estimate),
            "chars4" => Ok(Tokenizer::Chars4),
            other => Err(TokenizerError::Unknown(other.to_owned())),
        }
    }
}

/// A tokenizer name that does not name a tokenizer of this build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// The name is not one we know.
    #[error("unknown tokenizer `{0}` (expected o200k, cl100k, estimate or chars4)")]
    Unknown(String),
    /// The name is a BPE tokenizer, but this build has no `bpe` feature.
    #[error(
        "tokenizer `{0}` needs the `bpe` feature of contextfold-core, which is off in this build \
         (use `estimate` or `chars4`, or rebuild with the feature)"
    )]
    FeatureDisabled(&'static str),
}

/// Counts the compact JSON of `value` (`{"a":1}`), the form tool arguments travel in.
fn count_json(counter: &dyn TokenCounter, value: &serde_json::Value) -> u64 {
    // Serialising a `Value` cannot fail: its map keys are strings.
    counter.count_text(&value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &tokenizer in Tokenizer::ALL {
            assert_eq!(tokenizer.name().parse::<Tokenizer>(), Ok(tokenizer));
            assert_eq!(tokenizer.to_string(), tokenizer.name());
            assert_eq!(tokenizer.counter().name(), tokenizer.name());
            assert_eq!(tokenizer.shared().name(), tokenizer.name());
            assert_eq!(tokenizer.shared().count_text("two words"), tokenizer.counter().count_text("two words"));
            assert_eq!(tokenizer.is_exact(), matches!(tokenizer.name(), "o200k" | "cl100k"));
        }
        assert_eq!("gpt2".parse::<Tokenizer>(), Err(TokenizerError::Unknown("gpt2".into())));
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(Thousands(0).to_string(), "0");
        assert_eq!(Thousands(999).to_string(), "999");
        assert_eq!(Thousands(1_000).to_string(), "1,000");
        assert_eq!(Thousands(1_234_567).to_string(), "1,234,567");
        assert_eq!(Thousands(u64::MAX).to_string(), "18,446,744,073,709,551,615");
        assert_eq!(format!("{:>7}", Thousands(1_000)), "  1,000");
    }

    #[cfg(not(feature = "bpe"))]
    #[test]
    fn bpe_names_say_the_feature_is_off() {
        let err = "o200k".parse::<Tokenizer>().unwrap_err();
        assert_eq!(err, TokenizerError::FeatureDisabled("o200k"));
        assert!(err.to_string().contains("`bpe` feature"));
    }
}
