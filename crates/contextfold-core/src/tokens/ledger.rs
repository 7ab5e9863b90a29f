//! Memoised counting: a [`TokenLedger`] remembers each message's count so that a
//! conversation that grew by one message costs that one message to recount.
//!
//! Design choice: the ledger assumes the history is append-only between calls and checks
//! only the *last* message it already knows, by a fingerprint of its content
//! ([`crate::hash::message_fingerprint`]). When that message changed, or the history got shorter, it recounts everything,
//! reusing the count of every message whose fingerprint it still knows. An edit to an
//! *earlier* message that leaves the last known one intact is not seen by [`sync`]; after
//! editing history in place, call [`resync`] (or [`clear`]).
//!
//! [`sync`]: TokenLedger::sync
//! [`resync`]: TokenLedger::resync
//! [`clear`]: TokenLedger::clear

use super::count::{count_block, count_system, count_tools, MESSAGE_OVERHEAD};
use super::TokenCounter;
use crate::conversation::{Conversation, Message, System};
use crate::hash::{message_fingerprint, StableHasher};
use std::collections::HashMap;
use std::sync::Arc;

/// Per-message token counts of one conversation, kept up to date incrementally.
///
/// ```
/// use contextfold_core::tokens::{count_messages, TokenLedger, Tokenizer};
/// use contextfold_core::{Message, Role};
///
/// let counter = Tokenizer::Estimate.counter();
/// let mut ledger = TokenLedger::new(counter);
/// let mut history = vec![Message::text(Role::User, "list the files")];
/// ledger.sync(&history);
/// history.push(Message::text(Role::Assistant, "Cargo.toml, src/"));
/// // Only the new message is counted.
/// assert_eq!(ledger.sync(&history), count_messages(counter, &history));
/// ```
#[derive(Clone)]
pub struct TokenLedger<'a> {
    counter: Counter<'a>,
    entries: Vec<Entry>,
    total: u64,
    preamble: Option<Entry>,
}

/// The ledger's counter: borrowed for a ledger that lives inside one computation, shared for
/// one that a long-lived owner keeps (a middleware between calls).
#[derive(Clone)]
enum Counter<'a> {
    Borrowed(&'a dyn TokenCounter),
    Shared(Arc<dyn TokenCounter>),
}

impl Counter<'_> {
    fn get(&self) -> &dyn TokenCounter {
        match self {
            Counter::Borrowed(counter) => *counter,
            Counter::Shared(counter) => counter.as_ref(),
        }
    }
}

/// What the ledger knows of one message (or of the system prompt and tools together).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    fingerprint: u64,
    tokens: u64,
    /// Each block's count (empty for the preamble), so that eviction need not recount.
    blocks: Box<[u64]>,
}

impl TokenLedger<'static> {
    /// An empty ledger that owns a share of `counter`, for an owner that keeps the ledger
    /// beyond any one borrow.
    pub fn shared(counter: Arc<dyn TokenCounter>) -> TokenLedger<'static> {
        TokenLedger { counter: Counter::Shared(counter), entries: Vec::new(), total: 0, preamble: None }
    }
}

impl<'a> TokenLedger<'a> {
    /// An empty ledger counting with `counter`.
    pub fn new(counter: &'a dyn TokenCounter) -> TokenLedger<'a> {
        TokenLedger { counter: Counter::Borrowed(counter), entries: Vec::new(), total: 0, preamble: None }
    }

    /// The counter this ledger counts with.
    pub fn counter(&self) -> &dyn TokenCounter {
        self.counter.get()
    }

    /// How many messages the ledger knows.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the ledger knows no message.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The total of the messages as of the last sync.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The system prompt and tool definitions as of the last
    /// [`sync_conversation`](TokenLedger::sync_conversation) or
    /// [`resync_conversation`](TokenLedger::resync_conversation) (zero before either).
    pub fn preamble_tokens(&self) -> u64 {
        self.preamble.as_ref().map_or(0, |entry| entry.tokens)
    }

    /// The count of message `index` as of the last sync.
    pub fn message_tokens(&self, index: usize) -> Option<u64> {
        self.entries.get(index).map(|entry| entry.tokens)
    }

    /// The count of each block of message `index` as of the last sync; they add up to
    /// [`message_tokens`](TokenLedger::message_tokens) less
    /// [`MESSAGE_OVERHEAD`](super::MESSAGE_OVERHEAD).
    pub fn block_tokens(&self, index: usize) -> Option<&[u64]> {
        self.entries.get(index).map(|entry| &*entry.blocks)
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.total = 0;
        self.preamble = None;
    }

    /// Brings the ledger up to `messages` and returns their total, as
    /// [`count_messages`](super::count_messages) would.
    ///
    /// Costs the new messages plus one fingerprint of the last known message when the
    /// history only grew (see the module docs for the assumption); otherwise it behaves
    /// like [`resync`](TokenLedger::resync).
    pub fn sync(&mut self, messages: &[Message]) -> u64 {
        let known = self.entries.len();
        let unchanged = known <= messages.len()
            && match known.checked_sub(1) {
                None => true,
                Some(last) => self.entries[last].fingerprint == message_fingerprint(&messages[last]),
            };
        if !unchanged {
            return self.resync(messages);
        }
        for message in &messages[known..] {
            self.push(message, None);
        }
        self.total
    }

    /// Fingerprints every message and recounts those it does not know, reusing the counts
    /// of messages it has seen before (wherever they now are). Returns the total.
    ///
    /// The entries are held anew, sized to `messages`: after a compaction, the room of the
    /// history it shrank would otherwise be held for as long as the ledger.
    pub fn resync(&mut self, messages: &[Message]) -> u64 {
        let before = std::mem::replace(&mut self.entries, Vec::with_capacity(messages.len()));
        let known: HashMap<u64, Entry> = before.into_iter().map(|entry| (entry.fingerprint, entry)).collect();
        self.total = 0;
        for message in messages {
            let print = message_fingerprint(message);
            self.push(message, Some((print, known.get(&print).cloned())));
        }
        self.total
    }

    /// The total of a whole conversation, as
    /// [`count_conversation`](super::count_conversation) would: the system prompt and tool
    /// definitions (memoised together by one fingerprint) plus [`sync`](TokenLedger::sync)
    /// of the messages.
    pub fn sync_conversation(&mut self, conversation: &Conversation) -> u64 {
        self.sync_preamble(conversation) + self.sync(&conversation.messages)
    }

    /// [`sync_conversation`](TokenLedger::sync_conversation) after an edit anywhere in the
    /// history (eviction, clipping): every message is fingerprinted and only those not
    /// seen before are counted.
    pub fn resync_conversation(&mut self, conversation: &Conversation) -> u64 {
        self.sync_preamble(conversation) + self.resync(&conversation.messages)
    }

    /// The system prompt and tool definitions, memoised together by one fingerprint.
    fn sync_preamble(&mut self, conversation: &Conversation) -> u64 {
        // Writing into a hasher cannot fail.
        let mut hasher = StableHasher::default();
        match &conversation.system {
            None => hasher.write(b"none"),
            Some(System::Text(text)) => hasher.write(b"text").write(text.as_bytes()),
            Some(System::Blocks(blocks)) => {
                for block in blocks {
                    let _ = serde_json::to_writer(&mut hasher, &block.to_value());
                }
                hasher.write(b"blocks")
            }
        };
        match &conversation.tools {
            None => hasher.write(b"none"),
            Some(tools) => {
                let _ = serde_json::to_writer(&mut hasher, tools);
                hasher.write(b"tools")
            }
        };
        let print = hasher.finish();
        match self.preamble {
            Some(ref entry) if entry.fingerprint == print => entry.tokens,
            _ => {
                let tokens = conversation.system.as_ref().map_or(0, |system| count_system(self.counter.get(), system))
                    + conversation.tools.as_deref().map_or(0, |tools| count_tools(self.counter.get(), tools));
                self.preamble = Some(Entry { fingerprint: print, tokens, blocks: Box::default() });
                tokens
            }
        }
    }

    fn push(&mut self, message: &Message, known: Option<(u64, Option<Entry>)>) {
        let entry = match known {
            Some((_, Some(entry))) => entry,
            Some((print, None)) => self.count(print, message),
            None => self.count(message_fingerprint(message), message),
        };
        self.total += entry.tokens;
        self.entries.push(entry);
    }

    fn count(&self, fingerprint: u64, message: &Message) -> Entry {
        let blocks: Box<[u64]> = message.content.iter().map(|block| count_block(self.counter.get(), block)).collect();
        Entry { fingerprint, tokens: MESSAGE_OVERHEAD + blocks.iter().sum::<u64>(), blocks }
    }
}

impl std::fmt::Debug for TokenLedger<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenLedger")
            .field("counter", &self.counter.get().name())
            .field("messages", &self.entries.len())
            .field("total", &self.total)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::{Block, Role};
    use crate::tokens::{count_conversation, count_messages, Chars4, Estimate};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Counts like [`Chars4`] and records how many bytes it was asked to count.
    #[derive(Default)]
    struct Metered(AtomicU64);

    impl TokenCounter for Metered {
        fn name(&self) -> &'static str {
            "metered"
        }
        fn count_text(&self, text: &str) -> u64 {
            self.0.fetch_add(text.len() as u64, Ordering::Relaxed);
            Chars4.count_text(text)
        }
    }

    fn history(n: usize) -> Vec<Message> {
        (0..n)
            .map(|i| {
                let role = if i % 2 == 0 { Role::User } else { Role::Assistant };
                Message::text(role, format!("message number {i}: {}", "word ".repeat(i % 7)))
            })
            .collect()
    }

    #[test]
    fn a_shared_ledger_counts_like_a_borrowed_one() {
        let messages = vec![Message::text(Role::User, "read src/lib.rs"), Message::text(Role::Assistant, "done")];
        let mut shared = TokenLedger::shared(Arc::new(Estimate));
        assert_eq!(shared.sync(&messages), TokenLedger::new(&Estimate).sync(&messages));
        assert_eq!(shared.counter().name(), "estimate");
    }

    #[test]
    fn appends_cost_only_the_new_message() {
        let meter = Metered::default();
        let mut ledger = TokenLedger::new(&meter);
        let mut messages = history(50);
        assert_eq!(ledger.sync(&messages), count_messages(&Chars4, &messages));
        let before = meter.0.load(Ordering::Relaxed);
        messages.push(Message::text(Role::User, "abcdefgh"));
        assert_eq!(ledger.sync(&messages), count_messages(&Chars4, &messages));
        assert_eq!(meter.0.load(Ordering::Relaxed) - before, 8);
        // Nothing new: nothing counted.
        assert_eq!(ledger.sync(&messages), count_messages(&Chars4, &messages));
        assert_eq!(meter.0.load(Ordering::Relaxed) - before, 8);
    }

    #[test]
    fn edits_and_truncations_recount() {
        let counter = &Estimate;
        let mut ledger = TokenLedger::new(counter);
        let mut messages = history(30);
        ledger.sync(&messages);
        // Edit the last message in place (a streaming reply grows).
        if let Some(Block::Text(text)) = messages[29].content.get_mut(0) {
            text.text.push_str(" and a much longer ending than before");
        }
        assert_eq!(ledger.sync(&messages), count_messages(counter, &messages));
        // Truncate, then append different messages.
        messages.truncate(10);
        assert_eq!(ledger.sync(&messages), count_messages(counter, &messages));
        assert_eq!(ledger.len(), 10);
        messages.extend(history(5));
        assert_eq!(ledger.sync(&messages), count_messages(counter, &messages));
        // Drop the first messages (a compaction): everything shifts.
        messages.drain(..4);
        assert_eq!(ledger.sync(&messages), count_messages(counter, &messages));
        messages.clear();
        assert_eq!(ledger.sync(&messages), 0);
        assert!(ledger.is_empty());
    }

    #[test]
    fn earlier_edits_need_resync() {
        let counter = &Chars4;
        let mut ledger = TokenLedger::new(counter);
        let mut messages = history(6);
        ledger.sync(&messages);
        messages[0] = Message::text(Role::User, "x".repeat(400));
        // The documented blind spot: `sync` trusts the prefix when the last message matches.
        assert_ne!(ledger.sync(&messages), count_messages(counter, &messages));
        assert_eq!(ledger.resync(&messages), count_messages(counter, &messages));
    }

    #[test]
    fn resync_reuses_known_counts() {
        let meter = Metered::default();
        let mut ledger = TokenLedger::new(&meter);
        let messages = history(20);
        ledger.sync(&messages);
        let before = meter.0.load(Ordering::Relaxed);
        let shifted: Vec<Message> = messages[5..].to_vec();
        assert_eq!(ledger.sync(&shifted), count_messages(&Chars4, &shifted));
        assert_eq!(meter.0.load(Ordering::Relaxed), before);
    }

    /// A ledger resynced to a compacted history holds room for that history, not for the
    /// long one it counted before: a middleware keeps its ledger between calls for hours.
    #[test]
    fn resync_to_a_shorter_history_gives_back_the_room_of_the_longer() {
        let mut ledger = TokenLedger::new(&Chars4);
        let long = history(3_000);
        ledger.sync(&long);
        let compacted: Vec<Message> = long[2_960..].to_vec();
        assert_eq!(ledger.resync(&compacted), count_messages(&Chars4, &compacted));
        assert!(ledger.entries.capacity() <= 2 * compacted.len(), "room for {}", ledger.entries.capacity());
    }

    #[test]
    fn whole_conversations() {
        let counter = &Estimate;
        let mut ledger = TokenLedger::new(counter);
        let mut conversation = Conversation {
            system: Some(crate::conversation::System::Text("You are terse.".into())),
            tools: Some(vec![serde_json::json!({"name": "Read", "input_schema": {}})]),
            messages: history(8),
            ..Conversation::default()
        };
        assert_eq!(ledger.sync_conversation(&conversation), count_conversation(counter, &conversation));
        conversation.system = Some(crate::conversation::System::Text("You are verbose.".into()));
        conversation.messages.push(Message::text(Role::Assistant, "ok"));
        let total = ledger.sync_conversation(&conversation);
        assert_eq!(total, count_conversation(counter, &conversation));
        assert_eq!(ledger.preamble_tokens() + ledger.total(), total, "the preamble and the messages add up");
        let bare = Conversation { messages: conversation.messages.clone(), ..Conversation::default() };
        assert_eq!(ledger.resync_conversation(&bare), ledger.total());
        assert_eq!(ledger.preamble_tokens(), 0);
    }
}
