//! One hit per stored text. A tool output removed from the conversation is kept twice: in the
//! session's log, inside the message it came from, and as the payload its ref recalls. A
//! search finds it in both; the payload's hit stands for the two, since its ref is what the
//! model's pointer names and what `recall` returns whole.
//!
//! The two are merged when the search reads both; a payload ranked far below the message that
//! held it (past the matches read for the limit) leaves that message a hit of its own.

use super::{Hit, HitLocation, SessionStore, StoreError};
use serde_json::Value;

/// The best `limit` hits, each stored text once, from `fetch(n)`: the index's best `n`
/// matches, best first. Twice `limit` are read, as each payload's hit can stand for a
/// message's; when merging still leaves fewer (one text in many messages), twice as many
/// again, until `limit` are left or every match was read.
pub(crate) fn search(
    store: &dyn SessionStore,
    limit: usize,
    mut fetch: impl FnMut(usize) -> Result<Vec<Hit>, StoreError>,
) -> Result<Vec<Hit>, StoreError> {
    let mut count = limit.saturating_mul(2);
    loop {
        let found = fetch(count)?;
        let every_match = found.len() < count;
        let hits = one_per_text(store, found, limit)?;
        if every_match || hits.len() == limit || count == usize::MAX {
            return Ok(hits);
        }
        count = count.saturating_mul(2);
    }
}

/// `hits` (best first) with each message hit that holds the text of a payload hit of the same
/// session merged into it: the payload's hit is kept, at the better rank of the two. At most
/// `limit`.
fn one_per_text(store: &dyn SessionStore, hits: Vec<Hit>, limit: usize) -> Result<Vec<Hit>, StoreError> {
    let mut payloads: Vec<(usize, Value)> = Vec::new();
    for (rank, hit) in hits.iter().enumerate() {
        if let HitLocation::Payload(reference) = &hit.location {
            if let Some(payload) = store.recall(reference)? {
                payloads.push((rank, payload));
            }
        }
    }
    let mut ranked: Vec<Option<Hit>> = hits.into_iter().map(Some).collect();
    if !payloads.is_empty() {
        for rank in 0..ranked.len() {
            let Some(Hit { session, location: HitLocation::Message(position), .. }) = &ranked[rank] else { continue };
            let in_session = |other: usize| ranked[other].as_ref().is_some_and(|hit| hit.session == *session);
            if !payloads.iter().any(|(other, _)| in_session(*other)) {
                continue;
            }
            let Some(message) = store.message_json(session, *position)? else { continue };
            let same = payloads.iter_mut().find(|(other, payload)| in_session(*other) && holds(&message, payload));
            if let Some((other, _)) = same {
                // The payload's hit takes the better rank (and stands for every message that
                // holds its text); the message's is dropped.
                if *other > rank {
                    ranked[rank] = ranked[*other].take();
                    *other = rank;
                } else {
                    ranked[rank] = None;
                }
            }
        }
    }
    Ok(ranked.into_iter().flatten().take(limit).collect())
}

/// Whether stored `message` holds `payload`: as a block's content, or as a block.
fn holds(message: &Value, payload: &Value) -> bool {
    message["content"]
        .as_array()
        .is_some_and(|blocks| blocks.iter().any(|block| block.get("content") == Some(payload) || block == payload))
}
