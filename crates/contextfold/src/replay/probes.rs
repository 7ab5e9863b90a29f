//! Recall at each compaction: the probes of the history messages a request no longer carries
//! unchanged, looked for in the request's text.
//!
//! Two tallies: the headline from the independent probes (`core::probe::raw`, read from the
//! raw blocks once per history message), and `extract_recall` from the facts `extract` finds
//! in the folded messages ([`extract_probes`](super::extract_probes)). The headline's probes
//! read failures with rules of their own on purpose, not through `core::text::error_line`
//! and `outcome` as the summary's facts do: they are an independent judge of what a
//! compaction kept.
//!
//! A check costs what changed, not the session's length. Each strategy keeps which history
//! messages are folded ([`Folding`]); a check compares the request's fingerprints with the
//! previous check's and folds or unfolds only the messages whose fingerprint came or went,
//! and those newly in the history, updating the probe sets as it goes. Every probe text of
//! the session is known up front, so one Aho–Corasick pass over the request's text finds
//! which of them it holds, however many there are; the normalized text of every message is
//! kept by fingerprint, so the request's text is built from texts already made.

use super::extract_probes::{ExtractFacts, ExtractProbes, Probes};
use super::probe_set::{Interner, ProbeSet};
use super::request::Request;
use aho_corasick::AhoCorasick;
use contextfold_core::check::normalize;
use contextfold_core::extract::extract;
use contextfold_core::hash::message_fingerprint;
use contextfold_core::probe::{is_recalled, join_texts, message_text, probes, Probe, ProbeKind, ProbeReader};
use contextfold_core::summary::SUMMARY_PREFIX;
use contextfold_core::tools::Preset;
use contextfold_core::{Conversation, Message};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Probes checked and recalled, in all and by kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tally {
    pub(crate) checked: usize,
    pub(crate) recalled: usize,
    pub(crate) by_kind: BTreeMap<String, (usize, usize)>,
}

impl Tally {
    /// Adds probes checked one by one against `text`.
    fn add(&mut self, text: &str, probes: &[Probe]) {
        for probe in probes {
            self.count(probe.kind, 1, usize::from(is_recalled(text, probe)));
        }
    }

    /// Adds `probes`, of which the texts in `found` are recalled.
    fn add_found(&mut self, probes: &Probes, found: &[u32]) {
        let mut recalled: BTreeMap<ProbeKind, usize> = BTreeMap::new();
        for kind in found.iter().filter_map(|text| probes.kind(*text)) {
            *recalled.entry(kind).or_default() += 1;
        }
        for (kind, checked) in probes.by_kind() {
            self.count(kind, checked, recalled.get(&kind).copied().unwrap_or(0));
        }
    }

    fn count(&mut self, kind: ProbeKind, checked: usize, recalled: usize) {
        self.checked += checked;
        self.recalled += recalled;
        let entry = self.by_kind.entry(kind.name().to_string()).or_default();
        entry.0 += checked;
        entry.1 += recalled;
    }
}

/// What a compaction's check found.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Whether the request holds more than one summary header.
    pub(crate) nested_summary: bool,
}

/// The probes of one history message, as text ids.
#[derive(Debug, Default)]
struct MessageProbes {
    probes: Vec<(u32, ProbeKind)>,
    /// The opening of its last assistant text; `None` inside when too short to be a probe.
    assistant_opening: Option<Option<u32>>,
}

/// The recorded history, read once for every strategy.
pub(crate) struct History<'a> {
    messages: &'a [Message],
    prints: Vec<u64>,
    /// History messages by fingerprint (identical messages share one).
    by_print: HashMap<u64, Vec<u32>>,
    probes: Vec<MessageProbes>,
    extract: ExtractFacts,
    /// Finds every probe text of the session in a request's text, built at the first check
    /// (`None` inside if the texts are too many for one automaton: then each is searched).
    finder: Option<Option<AhoCorasick>>,
    interner: Interner,
    system: Option<String>,
    texts: HashMap<u64, String>,
    summary_header: String,
}

impl<'a> History<'a> {
    pub(crate) fn new(conversation: &'a Conversation) -> History<'a> {
        let messages = &conversation.messages;
        let mut interner = Interner::default();
        let mut reader = ProbeReader::default();
        let probes = messages
            .iter()
            .map(|message| {
                let read = reader.read(message);
                MessageProbes {
                    probes: read.probes.into_iter().map(|probe| (interner.id(probe.text), probe.kind)).collect(),
                    assistant_opening: read
                        .assistant_opening
                        .map(|text| (text.chars().count() >= 3).then(|| interner.id(text))),
                }
            })
            .collect();
        let extract = ExtractFacts::new(messages, &mut interner);
        let prints: Vec<u64> = messages.iter().map(message_fingerprint).collect();
        let mut by_print: HashMap<u64, Vec<u32>> = HashMap::new();
        for (index, print) in prints.iter().enumerate() {
            by_print.entry(*print).or_default().push(index as u32);
        }
        History {
            messages,
            prints,
            by_print,
            probes,
            extract,
            finder: None,
            interner,
            system: conversation.system.as_ref().map(|system| normalize(&system.text())),
            texts: HashMap::new(),
            summary_header: normalize(SUMMARY_PREFIX),
        }
    }

    /// The normalized text of `request`, as [`contextfold_core::probe::request_text`] gives it.
    fn request_text(&mut self, request: &Request) -> String {
        for (message, print) in request.messages.iter().zip(&request.prints) {
            self.texts.entry(*print).or_insert_with(|| message_text(message));
        }
        let parts = request.prints.iter().map(|print| self.texts[print].as_str());
        join_texts(self.system.as_deref().into_iter().chain(parts))
    }

    /// The ids of the probe texts `text` holds, each once.
    fn found(&mut self, text: &str) -> Vec<u32> {
        let texts = self.interner.texts();
        let mut found: Vec<u32> = match self.finder.get_or_insert_with(|| AhoCorasick::new(texts).ok()) {
            Some(finder) => finder.find_overlapping_iter(text).map(|hit| hit.pattern().as_u32()).collect(),
            None => (0..texts.len() as u32).filter(|id| text.contains(texts[*id as usize].as_str())).collect(),
        };
        found.sort_unstable();
        found.dedup();
        found
    }

    /// Checks the probes of the messages before `call` that `request` no longer carries.
    pub(crate) fn check(
        &mut self,
        folding: &mut Folding,
        call: usize,
        request: &Request,
        independent: &mut Tally,
        extracted: &mut Tally,
    ) -> Checked {
        folding.update(self, call, request);
        if folding.folded == 0 {
            return Checked::default();
        }
        let text = self.request_text(request);
        let checked = Checked { nested_summary: text.matches(&self.summary_header).count() > 1 };
        let found = self.found(&text);
        let last_opening = folding.openings.last().and_then(|index| self.probes[*index as usize].assistant_opening);
        let last_opening = last_opening.flatten().filter(|text| folding.independent.kind(*text).is_none());
        let extra = last_opening.map(|text| (text, ProbeKind::LastAssistant));
        independent.add_found(&Probes { set: &folding.independent, renamed: None, extra }, &found);
        let first_is_folded = folding.is_folded.first() == Some(&true);
        if self.extract.exact {
            extracted.add_found(&folding.extract.probes(&self.extract, first_is_folded), &found);
        } else {
            let folded: Vec<Message> = (self.messages.iter().zip(&folding.is_folded))
                .filter(|(_, folded)| **folded)
                .map(|(message, _)| message.clone())
                .collect();
            extracted.add(&text, &probes(&extract(&folded, Preset::Auto), first_is_folded));
        }
        checked
    }
}

/// One strategy's folded history messages and their probes, as of its last check.
#[derive(Debug, Default)]
pub(crate) struct Folding {
    /// Per history message before the last check's call, whether it is folded.
    is_folded: Vec<bool>,
    /// How many are.
    folded: usize,
    /// The last check's request, as a count of messages per fingerprint.
    carried: HashMap<u64, usize>,
    /// The independent probes of the folded messages.
    independent: ProbeSet,
    /// The folded messages with an assistant opening.
    openings: BTreeSet<u32>,
    /// The `extract` probes of the folded messages.
    extract: ExtractProbes,
}

impl Folding {
    /// Folds what `request`, sent for `call`, no longer carries, and unfolds what it carries
    /// again: only the messages new to the history or whose fingerprint came or went.
    fn update(&mut self, history: &History, call: usize, request: &Request) {
        let mut carried: HashMap<u64, usize> = HashMap::with_capacity(request.prints.len());
        for print in &request.prints {
            *carried.entry(*print).or_default() += 1;
        }
        let came_or_went = (carried.keys().filter(|print| !self.carried.contains_key(print)))
            .chain(self.carried.keys().filter(|print| !carried.contains_key(print)));
        let mut changed: Vec<u32> = came_or_went
            .filter_map(|print| history.by_print.get(print))
            .flatten()
            .copied()
            .filter(|index| (*index as usize) < self.is_folded.len())
            .collect();
        let seen = self.is_folded.len();
        changed.extend(seen as u32..call.max(seen) as u32);
        self.is_folded.resize(call.max(seen), false);
        self.carried = carried;
        for index in changed {
            let folded = !self.carried.contains_key(&history.prints[index as usize]);
            if std::mem::replace(&mut self.is_folded[index as usize], folded) != folded {
                self.change(history, index, folded);
            }
        }
    }

    fn change(&mut self, history: &History, index: u32, folded: bool) {
        if folded {
            self.folded += 1;
        } else {
            self.folded -= 1;
        }
        let message = &history.probes[index as usize];
        for (position, (text, kind)) in message.probes.iter().enumerate() {
            let order = (0, index, position as u32);
            if folded {
                self.independent.insert(*text, order, *kind);
            } else {
                self.independent.remove(*text, order, *kind);
            }
        }
        if message.assistant_opening.is_some() {
            if folded {
                self.openings.insert(index);
            } else {
                self.openings.remove(&index);
            }
        }
        if history.extract.exact {
            self.extract.change(&history.extract, index, folded, &self.is_folded);
        }
    }
}
