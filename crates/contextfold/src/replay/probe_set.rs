//! The probes of the folded messages as a set kept up to date: messages enter and leave the
//! folded set one at a time, so a compaction's check costs what changed, not the history.
//!
//! Each probe text can occur several times (in several messages, or as a file path and a
//! user's words); the set holds every occurrence with an order key, and a text counts once,
//! of the kind of its first occurrence by key, as the probes of a from-scratch check are
//! deduplicated in order. Texts are known by id ([`Interner`]).

use contextfold_core::probe::ProbeKind;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Probe texts by id.
#[derive(Debug, Default)]
pub(crate) struct Interner {
    ids: HashMap<String, u32>,
    texts: Vec<String>,
}

impl Interner {
    /// The id of `text`, new or not.
    pub(crate) fn id(&mut self, text: String) -> u32 {
        let next = self.texts.len() as u32;
        *self.ids.entry(text.clone()).or_insert_with(|| {
            self.texts.push(text);
            next
        })
    }

    /// Every text, by id.
    pub(crate) fn texts(&self) -> &[String] {
        &self.texts
    }
}

/// Where an occurrence sits in the order a from-scratch check reads the probes in:
/// (section, message or event index, position within it).
pub(crate) type Order = (u8, u32, u32);

/// Probe texts (by id) with their occurrences in the folded messages.
#[derive(Debug, Default)]
pub(crate) struct ProbeSet {
    occurrences: HashMap<u32, BTreeSet<(Order, ProbeKind)>>,
    /// Distinct texts by the kind they count as.
    by_kind: BTreeMap<ProbeKind, usize>,
}

impl ProbeSet {
    /// Adds an occurrence of `text`.
    pub(crate) fn insert(&mut self, text: u32, order: Order, kind: ProbeKind) {
        let before = self.kind(text);
        self.occurrences.entry(text).or_default().insert((order, kind));
        self.recount(before, self.kind(text));
    }

    /// Removes an occurrence of `text` added by [`ProbeSet::insert`].
    pub(crate) fn remove(&mut self, text: u32, order: Order, kind: ProbeKind) {
        let before = self.kind(text);
        if let Some(set) = self.occurrences.get_mut(&text) {
            set.remove(&(order, kind));
            if set.is_empty() {
                self.occurrences.remove(&text);
            }
        }
        self.recount(before, self.kind(text));
    }

    /// The kind `text` counts as, `None` when no folded message has it.
    pub(crate) fn kind(&self, text: u32) -> Option<ProbeKind> {
        self.occurrences.get(&text).and_then(|set| set.first()).map(|(_, kind)| *kind)
    }

    /// Distinct texts by the kind they count as.
    pub(crate) fn by_kind(&self) -> impl Iterator<Item = (ProbeKind, usize)> + '_ {
        self.by_kind.iter().filter(|(_, count)| **count > 0).map(|(kind, count)| (*kind, *count))
    }

    fn recount(&mut self, before: Option<ProbeKind>, after: Option<ProbeKind>) {
        if before == after {
            return;
        }
        if let Some(kind) = before {
            *self.by_kind.entry(kind).or_default() -= 1;
        }
        if let Some(kind) = after {
            *self.by_kind.entry(kind).or_default() += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_counts_once_as_its_first_occurrence() {
        let mut set = ProbeSet::default();
        set.insert(7, (1, 5, 0), ProbeKind::FileChanged);
        set.insert(7, (0, 9, 0), ProbeKind::UserAsk);
        set.insert(8, (1, 2, 0), ProbeKind::FileChanged);
        assert_eq!(set.kind(7), Some(ProbeKind::UserAsk));
        assert_eq!(set.by_kind().collect::<Vec<_>>(), [(ProbeKind::UserAsk, 1), (ProbeKind::FileChanged, 1)]);
        set.remove(7, (0, 9, 0), ProbeKind::UserAsk);
        assert_eq!(set.kind(7), Some(ProbeKind::FileChanged));
        set.remove(7, (1, 5, 0), ProbeKind::FileChanged);
        assert_eq!(set.kind(7), None);
        assert_eq!(set.by_kind().collect::<Vec<_>>(), [(ProbeKind::FileChanged, 1)]);
    }
}
