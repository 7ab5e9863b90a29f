//! The branches of one conversation: the states of histories that start alike (one session,
//! one first message) but went their own ways.
//!
//! A request continues a branch only when every message the branch covers is in the request
//! as the branch was given it (their [`HistoryChain`] links agree). Anything else (another run
//! of the same task, a rewound or edited history) is a new branch with a fresh state, never
//! a resend of another's: so no conversation's content reaches another's request. Several
//! branches are held at once, so that runs which alternate do not start each other over.

use contextfold::store::SessionId;
use contextfold_core::HistoryChain;

/// What the branches need of one branch's state.
pub trait Branch {
    /// What tells it from the conversation's other branches.
    fn id(&self) -> u64;
    /// Whether a history with `chain` continues it.
    fn continued_by(&self, chain: &HistoryChain) -> bool;
    /// How many messages of the history it covers.
    fn covered(&self) -> usize;
    /// The store session its compactions go to, if any.
    fn session(&self) -> Option<&SessionId>;
}

/// How many branches of one conversation are held; the least recently used goes first.
pub const MAX_BRANCHES: usize = 4;

/// The branches held of one conversation, most recently used first, and the version of its
/// stored record this process last read or wrote.
pub struct Branches<S> {
    held: Vec<S>,
    /// The version of the conversation's stored record last seen (0: none).
    pub version: u64,
}

impl<S> Default for Branches<S> {
    fn default() -> Self {
        Branches { held: Vec::new(), version: 0 }
    }
}

impl<S: Branch> Branches<S> {
    /// The branch `chain` continues furthest, taken out; `None` when it continues none.
    pub fn take_continued(&mut self, chain: &HistoryChain) -> Option<S> {
        let index = (self.held.iter().enumerate())
            .filter(|(_, state)| state.continued_by(chain))
            .max_by_key(|(index, state)| (state.covered(), std::cmp::Reverse(*index)))
            .map(|(index, _)| index)?;
        Some(self.held.remove(index))
    }

    /// Holds `state` as the most recently used branch (dropping the least recently used past
    /// [`MAX_BRANCHES`]), and returns it.
    pub fn put(&mut self, state: S) -> &mut S {
        self.held.insert(0, state);
        self.held.truncate(MAX_BRANCHES);
        &mut self.held[0]
    }

    /// Holds `state`, read from the store, in place of the branch it continues (the one that
    /// keeps its compactions in the same store session).
    pub fn adopt(&mut self, state: S) {
        if let Some(session) = state.session() {
            self.held.retain(|held| held.session() != Some(session));
        }
        self.put(state);
    }

    /// The branch `id`, if it is still held.
    pub fn get_mut(&mut self, id: u64) -> Option<&mut S> {
        self.held.iter_mut().find(|state| state.id() == id)
    }

    /// Lets every branch go (another process went on with the conversation).
    pub fn clear(&mut self) {
        self.held.clear();
        self.version = 0;
    }
}
