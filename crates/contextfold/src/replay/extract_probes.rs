//! The `extract_recall` probes of the folded messages, kept up to date as messages are
//! folded, equal to [`probes`](contextfold_core::probe::probes) of
//! [`extract`](contextfold_core::extract::extract) over the folded messages.
//!
//! What `extract` finds in one message alone (the user's asks, files changed, a next step)
//! is read once per message, with `extract` itself. Whether an error is still open depends
//! on what else is folded: each tool result is paired with its call once, as an event (a
//! failure with its telling line, or a success) of its step's key; an error counts while
//! its call and result are folded and no folded success of the same key comes after it.
//! Pairing a result with its call once is only exact when every call id is used once;
//! [`ExtractFacts::exact`] says so, and a session where one repeats is checked from scratch.

use super::probe_set::{Interner, ProbeSet};
use contextfold_core::extract::{error_key, extract};
use contextfold_core::probe::{probe_text, ProbeKind};
use contextfold_core::text::{error_line, outcome, Outcome};
use contextfold_core::tools::{classify, Preset};
use contextfold_core::{Block, Message};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// A probe text's id, `None` when it is too short to be a probe (under 3 bytes).
type Text = Option<u32>;

/// A tool result paired with its call.
#[derive(Debug)]
struct Event {
    call: u32,
    result: u32,
    key: u32,
    /// The failure's telling line; `None` for a success.
    failure: Option<Text>,
}

/// What `extract` finds in each message of a session, read once.
#[derive(Debug, Default)]
pub(crate) struct ExtractFacts {
    /// Per message, its asks' probe texts in order.
    asks: Vec<Vec<Text>>,
    /// Per message, the probe texts of the files it changed.
    files: Vec<Vec<u32>>,
    /// Per message, its last next step, if it states one.
    next_step: Vec<Option<Text>>,
    /// Every outcome, in the order `extract` reads them.
    events: Vec<Event>,
    /// Per message, the events whose call or result it holds.
    touching: Vec<Vec<u32>>,
    /// Whether every tool call id is used once.
    pub(crate) exact: bool,
}

impl ExtractFacts {
    pub(crate) fn new(messages: &[Message], texts: &mut Interner) -> ExtractFacts {
        let mut facts = ExtractFacts { exact: true, touching: vec![Vec::new(); messages.len()], ..Default::default() };
        let text = |raw: &str, texts: &mut Interner| {
            let probe = probe_text(raw);
            (probe.len() >= 3).then(|| texts.id(probe))
        };
        let mut keys: HashMap<(String, Option<String>), u32> = HashMap::new();
        let mut calls: HashMap<&str, (u32, u32)> = HashMap::new();
        let mut ids = HashSet::new();
        for (index, message) in messages.iter().enumerate() {
            let alone = extract(std::slice::from_ref(message), Preset::Auto);
            facts.asks.push(alone.user_asks.iter().map(|ask| text(&ask.text, texts)).collect());
            facts.files.push(alone.files_changed.iter().filter_map(|change| text(&change.path, texts)).collect());
            facts.next_step.push(alone.next_step.as_deref().map(|step| text(step, texts)));
            let index = index as u32;
            for block in &message.content {
                match block {
                    Block::ToolUse(tool_use) => {
                        facts.exact &= ids.insert(tool_use.id.as_str());
                        let action = classify(Preset::Auto, &tool_use.name, &tool_use.input);
                        let next = keys.len() as u32;
                        let key = *keys.entry((tool_use.name.clone(), error_key(&action))).or_insert(next);
                        calls.insert(&tool_use.id, (index, key));
                    }
                    Block::ToolResult(result) => {
                        let Some(&(call, key)) = calls.get(result.tool_use_id.as_str()) else { continue };
                        let failure = match outcome(result) {
                            Outcome::Failed(_) => Some(text(&error_line(&result.text()), texts)),
                            Outcome::Ok => None,
                            Outcome::Unknown => continue,
                        };
                        let event = facts.events.len() as u32;
                        facts.events.push(Event { call, result: index, key, failure });
                        facts.touching[call as usize].push(event);
                        if call != index {
                            facts.touching[index as usize].push(event);
                        }
                    }
                    _ => {}
                }
            }
        }
        facts
    }
}

/// The folded successes and failures of one step key.
#[derive(Debug, Default)]
struct KeyState {
    successes: BTreeSet<u32>,
    failures: BTreeMap<u32, Text>,
}

impl KeyState {
    fn last_success(&self) -> Option<u32> {
        self.successes.last().copied()
    }
}

/// One strategy's `extract` probes of its folded messages.
#[derive(Debug, Default)]
pub(crate) struct ExtractProbes {
    set: ProbeSet,
    with_asks: BTreeSet<u32>,
    with_next_step: BTreeSet<u32>,
    event_folded: Vec<bool>,
    keys: HashMap<u32, KeyState>,
}

const ASKS: u8 = 0;
const FILES: u8 = 1;
const ERRORS: u8 = 2;

impl ExtractProbes {
    /// Message `index` was folded (`folded`) or is carried again; `is_folded` says which
    /// messages are folded now.
    pub(crate) fn change(&mut self, facts: &ExtractFacts, index: u32, folded: bool, is_folded: &[bool]) {
        if self.event_folded.len() < facts.events.len() {
            self.event_folded.resize(facts.events.len(), false);
        }
        let at = index as usize;
        for (position, ask) in facts.asks[at].iter().enumerate() {
            if let Some(text) = ask {
                self.toggle(*text, (ASKS, index, position as u32), ProbeKind::UserAsk, folded);
            }
        }
        if !facts.asks[at].is_empty() {
            toggle_member(&mut self.with_asks, index, folded);
        }
        for (position, file) in facts.files[at].iter().enumerate() {
            self.toggle(*file, (FILES, index, position as u32), ProbeKind::FileChanged, folded);
        }
        if facts.next_step[at].is_some() {
            toggle_member(&mut self.with_next_step, index, folded);
        }
        for &event_id in &facts.touching[at] {
            let event = &facts.events[event_id as usize];
            let folded_at = |index: u32| is_folded.get(index as usize) == Some(&true);
            let now = folded_at(event.call) && folded_at(event.result);
            if std::mem::replace(&mut self.event_folded[event_id as usize], now) != now {
                self.event_changed(event_id, event, now);
            }
        }
    }

    /// Keeps the open failures of the event's key in the set as the event enters or leaves.
    fn event_changed(&mut self, id: u32, event: &Event, folded: bool) {
        let state = self.keys.entry(event.key).or_default();
        let mut open: Vec<(u32, u32)> = Vec::new();
        let mut fixed: Vec<(u32, u32)> = Vec::new();
        match event.failure {
            Some(text) => {
                let is_open = state.last_success().is_none_or(|last| id > last);
                if folded {
                    state.failures.insert(id, text);
                } else {
                    state.failures.remove(&id);
                }
                if let (Some(text), true) = (text, is_open) {
                    if folded {
                        open.push((id, text));
                    } else {
                        fixed.push((id, text));
                    }
                }
            }
            None => {
                let before = state.last_success();
                if folded {
                    state.successes.insert(id);
                } else {
                    state.successes.remove(&id);
                }
                let after = state.last_success();
                // Failures between the old and the new last success open or close.
                let (low, high) = (before.min(after), before.max(after));
                if before != after {
                    let range = state.failures.range(low.map_or(0, |low| low + 1)..=high.unwrap_or(u32::MAX));
                    let flipped = range.filter_map(|(id, text)| text.map(|text| (*id, text)));
                    if after > before {
                        fixed.extend(flipped);
                    } else {
                        open.extend(flipped);
                    }
                }
            }
        }
        for (id, text) in open {
            self.set.insert(text, (ERRORS, id, 0), ProbeKind::UnresolvedError);
        }
        for (id, text) in fixed {
            self.set.remove(text, (ERRORS, id, 0), ProbeKind::UnresolvedError);
        }
    }

    fn toggle(&mut self, text: u32, order: (u8, u32, u32), kind: ProbeKind, folded: bool) {
        if folded {
            self.set.insert(text, order, kind);
        } else {
            self.set.remove(text, order, kind);
        }
    }

    /// The probes now: the set, the text of the first ask when the conversation's first
    /// message is folded (it counts as the first request), and the last next step when no
    /// other probe has its text.
    pub(crate) fn probes(&self, facts: &ExtractFacts, first_is_folded: bool) -> Probes<'_> {
        let first_request = self
            .with_asks
            .first()
            .and_then(|index| facts.asks[*index as usize].first().copied().flatten())
            .filter(|_| first_is_folded);
        let next_step = self
            .with_next_step
            .last()
            .and_then(|index| facts.next_step[*index as usize].flatten())
            .filter(|text| self.set.kind(*text).is_none());
        Probes {
            set: &self.set,
            renamed: first_request.map(|text| (text, ProbeKind::UserAsk, ProbeKind::FirstRequest)),
            extra: next_step.map(|text| (text, ProbeKind::NextStep)),
        }
    }
}

fn toggle_member(set: &mut BTreeSet<u32>, index: u32, member: bool) {
    if member {
        set.insert(index);
    } else {
        set.remove(&index);
    }
}

/// A check's probes: a [`ProbeSet`], one text of which may count as another kind, and one
/// more text outside it.
pub(crate) struct Probes<'a> {
    pub(crate) set: &'a ProbeSet,
    /// (text, its kind in the set, the kind it counts as).
    pub(crate) renamed: Option<(u32, ProbeKind, ProbeKind)>,
    /// (text, kind) of a probe not in the set.
    pub(crate) extra: Option<(u32, ProbeKind)>,
}

impl Probes<'_> {
    /// The kind `text` counts as, `None` when it is not a probe.
    pub(crate) fn kind(&self, text: u32) -> Option<ProbeKind> {
        match (self.renamed, self.extra) {
            (Some((renamed, _, kind)), _) if renamed == text => Some(kind),
            (_, Some((extra, kind))) if extra == text => Some(kind),
            _ => self.set.kind(text),
        }
    }

    /// How many probes there are, by kind.
    pub(crate) fn by_kind(&self) -> BTreeMap<ProbeKind, usize> {
        let mut counts: BTreeMap<ProbeKind, usize> = self.set.by_kind().collect();
        if let Some((_, from, to)) = self.renamed {
            if let Some(count) = counts.get_mut(&from) {
                *count -= 1;
            }
            *counts.entry(to).or_default() += 1;
        }
        if let Some((_, kind)) = self.extra {
            *counts.entry(kind).or_default() += 1;
        }
        counts.retain(|_, count| *count > 0);
        counts
    }
}
