//! A session store in memory: for tests, and for users who want no file.

use super::{
    aligned_prefix, compaction_writes, log_gap, message_hash, message_text, new_session_id, now_secs, searchable_text,
    Appended, CompactionWrite, Hit, HitLocation, Payload, SessionId, SessionInfo, SessionStore, StoreError, Summary,
};
use contextfold_core::Message;
use serde_json::Value;
use std::sync::{Mutex, MutexGuard};

#[derive(Debug, Default)]
struct Session {
    id: SessionId,
    name: String,
    created: u64,
    /// When it was last written, in seconds since the Unix epoch.
    updated: u64,
    /// The history with each message's hash; the position is the sequence number.
    messages: Vec<(Message, String)>,
    payloads: Vec<Payload>,
    summaries: Vec<Summary>,
    reports: Vec<Value>,
    calls: Vec<Value>,
    meta: Option<Value>,
}

/// A [`SessionStore`] in memory. Search is a case-insensitive substring scan.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<Vec<Session>>,
    /// Conversation state by key (see [`super::StateStore`]).
    pub(super) states: Mutex<std::collections::HashMap<String, super::StoredState>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Session>> {
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn find<'a>(sessions: &'a mut [Session], id: &str) -> Result<&'a mut Session, StoreError> {
    sessions.iter_mut().find(|session| session.id == id).ok_or_else(|| StoreError::UnknownSession(id.to_string()))
}

fn append(session: &mut Session, messages: &[Message], align: bool) -> Appended {
    let incoming: Vec<String> = messages.iter().map(message_hash).collect();
    let skipped = if align {
        let stored: Vec<String> = session.messages.iter().map(|(_, hash)| hash.clone()).collect();
        aligned_prefix(&stored, &incoming)
    } else {
        0
    };
    for (message, hash) in messages.iter().zip(incoming).skip(skipped) {
        session.messages.push((message.clone(), hash));
    }
    if messages.len() > skipped {
        session.updated = now_secs();
    }
    Appended { stored: messages.len() - skipped, skipped, total: session.messages.len() }
}

fn put_payload(session: &mut Session, payload: &Payload) -> bool {
    if session.payloads.iter().any(|stored| stored.reference == payload.reference) {
        return false;
    }
    session.payloads.push(payload.clone());
    true
}

fn put_summary(session: &mut Session, summary: &Summary) {
    session
        .summaries
        .retain(|stored| !(stored.head_hash == summary.head_hash && stored.summarizer == summary.summarizer));
    session.summaries.push(summary.clone());
}

/// A snippet of `text` around the first match of `needle` (lowercase), the match in `[`…`]`.
fn snippet(text: &str, needle: &str) -> Option<String> {
    let lower = text.to_lowercase();
    // Lowercasing can change byte lengths; only use the position when it maps back.
    let start = lower.find(needle)?;
    let end = start + needle.len();
    if lower.len() != text.len() || !text.is_char_boundary(start) || !text.is_char_boundary(end) {
        return Some(text.chars().take(80).collect());
    }
    let mut from = start.saturating_sub(60);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = (end + 60).min(text.len());
    while !text.is_char_boundary(to) {
        to += 1;
    }
    let prefix = if from > 0 { "…" } else { "" };
    let suffix = if to < text.len() { "…" } else { "" };
    Some(format!("{prefix}{}[{}]{}{suffix}", &text[from..start], &text[start..end], &text[end..to]))
}

/// Whether every word of `words` is in `text`, and the snippet around the first.
fn matches(text: &str, words: &[String]) -> Option<String> {
    let lower = text.to_lowercase();
    if words.is_empty() || !words.iter().all(|word| lower.contains(word.as_str())) {
        return None;
    }
    snippet(text, &words[0])
}

impl SessionStore for MemoryStore {
    fn create_session(&self, name: &str) -> Result<SessionId, StoreError> {
        let id = new_session_id();
        self.lock().push(Session { id: id.clone(), name: name.to_string(), created: now_secs(), ..Session::default() });
        Ok(id)
    }

    fn append_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError> {
        Ok(append(find(&mut self.lock(), session)?, messages, true))
    }

    fn push_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError> {
        Ok(append(find(&mut self.lock(), session)?, messages, false))
    }

    fn log_messages(&self, session: &str, from: usize, messages: &[Message]) -> Result<Appended, StoreError> {
        let mut sessions = self.lock();
        let stored = find(&mut sessions, session)?;
        if from > stored.messages.len() {
            return Err(log_gap(session, from, stored.messages.len()));
        }
        stored.messages.truncate(from);
        Ok(append(stored, messages, false))
    }

    fn prune(&self, before: u64) -> Result<Vec<SessionId>, StoreError> {
        let mut sessions = self.lock();
        let (stale, kept): (Vec<Session>, Vec<Session>) = std::mem::take(&mut *sessions)
            .into_iter()
            .partition(|session| session.updated.max(session.created) < before);
        // Conversation states in memory last as long as the process.
        *sessions = kept;
        Ok(stale.into_iter().map(|session| session.id).collect())
    }

    fn put_payload(&self, payload: &Payload) -> Result<bool, StoreError> {
        Ok(put_payload(find(&mut self.lock(), &payload.session)?, payload))
    }

    fn recall(&self, reference: &str) -> Result<Option<Value>, StoreError> {
        Ok(self
            .lock()
            .iter()
            .flat_map(|session| &session.payloads)
            .find(|payload| payload.reference == reference)
            .map(|payload| payload.payload.clone()))
    }

    fn put_summary(&self, session: &str, summary: &Summary) -> Result<(), StoreError> {
        put_summary(find(&mut self.lock(), session)?, summary);
        Ok(())
    }

    fn summaries(&self, session: &str) -> Result<Vec<Summary>, StoreError> {
        Ok(find(&mut self.lock(), session)?.summaries.clone())
    }

    fn put_report(&self, session: &str, report: &Value) -> Result<(), StoreError> {
        find(&mut self.lock(), session)?.reports.push(report.clone());
        Ok(())
    }

    fn reports(&self, session: &str) -> Result<Vec<Value>, StoreError> {
        Ok(find(&mut self.lock(), session)?.reports.clone())
    }

    fn put_call(&self, session: &str, call: &Value) -> Result<(), StoreError> {
        let mut sessions = self.lock();
        let stored = find(&mut sessions, session)?;
        stored.calls.push(call.clone());
        stored.updated = now_secs();
        Ok(())
    }

    fn calls(&self, session: &str) -> Result<Vec<Value>, StoreError> {
        Ok(find(&mut self.lock(), session)?.calls.clone())
    }

    fn persist_compaction(
        &self,
        session: &str,
        messages: &[Message],
        payloads: &[Payload],
        summary: Option<&Summary>,
        report: &Value,
    ) -> Result<Appended, StoreError> {
        let mut sessions = self.lock();
        let writes = compaction_writes(session, messages, payloads, summary, report)?;
        let stored = find(&mut sessions, session)?;
        let mut appended = Appended::default();
        for write in writes {
            match write {
                CompactionWrite::History(messages) => appended = append(stored, messages, true),
                CompactionWrite::Payload(payload) => {
                    put_payload(stored, payload);
                }
                CompactionWrite::Summary(summary) => put_summary(stored, summary),
                CompactionWrite::Report(report) => stored.reports.push(report.clone()),
                CompactionWrite::Touch => stored.updated = now_secs(),
            }
        }
        Ok(appended)
    }

    fn set_session_meta(&self, session: &str, meta: &Value) -> Result<(), StoreError> {
        find(&mut self.lock(), session)?.meta = Some(meta.clone());
        Ok(())
    }

    fn session_meta(&self, session: &str) -> Result<Option<Value>, StoreError> {
        Ok(find(&mut self.lock(), session)?.meta.clone())
    }

    fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        Ok(self
            .lock()
            .iter()
            .map(|session| SessionInfo {
                id: session.id.clone(),
                name: session.name.clone(),
                messages: session.messages.len(),
                payloads: session.payloads.len(),
                created: session.created,
            })
            .collect())
    }

    fn export(&self, session: &str) -> Result<Vec<Message>, StoreError> {
        Ok(find(&mut self.lock(), session)?.messages.iter().map(|(message, _)| message.clone()).collect())
    }

    fn delete_session(&self, session: &str) -> Result<bool, StoreError> {
        let mut sessions = self.lock();
        let before = sessions.len();
        sessions.retain(|stored| stored.id != session);
        Ok(sessions.len() != before)
    }

    fn message_json(&self, session: &str, position: usize) -> Result<Option<Value>, StoreError> {
        Ok(find(&mut self.lock(), session)?.messages.get(position).map(|(message, _)| message.to_value()))
    }

    fn search(&self, session: Option<&str>, query: &str, limit: usize) -> Result<Vec<Hit>, StoreError> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let mut hits = Vec::new();
        for stored in self.lock().iter().filter(|stored| session.is_none_or(|id| id == stored.id)) {
            for (position, (message, _)) in stored.messages.iter().enumerate() {
                if let Some(snippet) = matches(&message_text(message), &words) {
                    hits.push(Hit { session: stored.id.clone(), location: HitLocation::Message(position), snippet });
                }
            }
            for payload in &stored.payloads {
                if let Some(snippet) = matches(&searchable_text(&payload.payload), &words) {
                    hits.push(Hit {
                        session: stored.id.clone(),
                        location: HitLocation::Payload(payload.reference.clone()),
                        snippet,
                    });
                }
            }
        }
        super::hits::search(self, limit, |count| Ok(hits.iter().take(count).cloned().collect()))
    }
}
