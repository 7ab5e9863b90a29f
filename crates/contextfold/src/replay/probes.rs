//! Recall at each compaction: the probes of the history messages a request no longer carries
//! unchanged, looked for in the request's text.
//!
//! Two tallies: the headline from the independent probes (`core::probe::raw`, read from the
//! raw blocks once per history message), and `extract_recall` from the facts `extract` finds
//! in the folded messages. The normalized text of every message is kept by fingerprint, so a
//! request's text is built from texts already made.

use super::request::Request;
use contextfold_core::check::normalize;
use contextfold_core::extract::extract;
use contextfold_core::hash::message_fingerprint;
use contextfold_core::probe::{
    folded_probes, is_recalled, join_texts, message_text, probes, MessageProbes, Probe, ProbeReader,
};
use contextfold_core::summary::SUMMARY_PREFIX;
use contextfold_core::tools::Preset;
use contextfold_core::{Conversation, Message};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Probes checked and recalled, in all and by kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tally {
    pub(crate) checked: usize,
    pub(crate) recalled: usize,
    pub(crate) by_kind: BTreeMap<String, (usize, usize)>,
}

impl Tally {
    fn add(&mut self, text: &str, probes: &[Probe]) {
        for probe in probes {
            let hit = is_recalled(text, probe);
            self.checked += 1;
            self.recalled += usize::from(hit);
            let entry = self.by_kind.entry(probe.kind.name().to_string()).or_default();
            entry.0 += 1;
            entry.1 += usize::from(hit);
        }
    }
}

/// What a compaction's check found.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// Whether the request holds more than one summary header.
    pub(crate) nested_summary: bool,
}

/// The recorded history, read once for every strategy.
pub(crate) struct History<'a> {
    messages: &'a [Message],
    prints: Vec<u64>,
    probes: Vec<MessageProbes>,
    system: Option<String>,
    texts: HashMap<u64, String>,
    summary_header: String,
}

impl<'a> History<'a> {
    pub(crate) fn new(conversation: &'a Conversation) -> History<'a> {
        let mut reader = ProbeReader::default();
        History {
            messages: &conversation.messages,
            prints: conversation.messages.iter().map(message_fingerprint).collect(),
            probes: conversation.messages.iter().map(|message| reader.read(message)).collect(),
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

    /// Checks the probes of the messages before `call` that `request` no longer carries.
    pub(crate) fn check(
        &mut self,
        call: usize,
        request: &Request,
        independent: &mut Tally,
        extracted: &mut Tally,
    ) -> Checked {
        let kept: HashSet<u64> = request.prints.iter().copied().collect();
        let folded: Vec<bool> = self.prints[..call].iter().map(|print| !kept.contains(print)).collect();
        if !folded.contains(&true) {
            return Checked::default();
        }
        let text = self.request_text(request);
        let checked = Checked { nested_summary: text.matches(&self.summary_header).count() > 1 };
        let independent_probes = folded_probes(self.probes.iter().zip(folded.iter().copied()));
        independent.add(&text, &independent_probes);
        let folded_messages: Vec<Message> = (self.messages.iter().zip(&folded))
            .filter(|(_, folded)| **folded)
            .map(|(message, _)| message.clone())
            .collect();
        let first_is_start = folded.first() == Some(&true);
        extracted.add(&text, &probes(&extract(&folded_messages, Preset::Auto), first_is_start));
        checked
    }
}
