//! Where the payloads a compaction removed are in the caller's history.
//!
//! The compactor names each removed payload by its place in the conversation it worked on:
//! an evicted one in the working copy it was given, a clipped one in the copy it made. The
//! middleware's caller holds the history (and the store keeps it as the session's log), so
//! the report, its event and the stored payloads name the place there instead: the message
//! of the history that holds the block, and the block's index in that message as the caller
//! sent it. Blocks are found by their tool call id, so a message that lost blocks in the
//! working copy (folded reminders) or moved (a summary before it) is still found.

use super::state::State;
use super::{History, HistoryError};
use crate::compactor::CompactionReport;
use contextfold_core::{Block, Message};
use std::collections::{HashMap, HashSet};

/// A block that holds a removable payload: a tool call (its input) or a tool result, by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    Use(&'a str),
    Result(&'a str),
}

fn key_of(block: &Block) -> Option<Key<'_>> {
    match block {
        Block::ToolUse(call) => Some(Key::Use(&call.id)),
        Block::ToolResult(result) => Some(Key::Result(&result.tool_use_id)),
        _ => None,
    }
}

/// The key of block `block` of message `message` of `messages`.
fn key_at(messages: &[Message], message: usize, block: usize) -> Option<Key<'_>> {
    messages.get(message).and_then(|found| found.content.get(block)).and_then(key_of)
}

/// The index of the block of `message` that `key` names.
fn block_of(message: &Message, key: Key<'_>) -> Option<usize> {
    message.content.iter().position(|block| key_of(block) == Some(key))
}

/// Rewrites the `message` and `block` of each payload in `report` from the compactor's
/// places (`input` is the working copy it was given, `output` the one it made) to the
/// caller's `history`. A payload whose block cannot be found keeps its place, with a warning.
pub(super) fn locate_removed(
    state: &State,
    input: &[Message],
    output: &[Message],
    report: &mut CompactionReport,
    history: &dyn History,
) -> Result<(), HistoryError> {
    let places = {
        let keys: Vec<Option<Key<'_>>> = (report.items.iter())
            .map(|item| key_of(&item.replacement).or_else(|| key_at(input, item.message, item.block)))
            .chain(report.clipped.iter().map(|item| key_at(output, item.message, item.block)))
            .collect();
        places_of(state, input, history, &keys)?
    };
    let items = (report.items.iter_mut().map(|item| (&mut item.message, &mut item.block)))
        .chain(report.clipped.iter_mut().map(|item| (&mut item.message, &mut item.block)));
    for ((message, block), place) in items.zip(places) {
        match place {
            Some((position, index)) => (*message, *block) = (position, index),
            None => tracing::warn!(
                message = *message,
                block = *block,
                "contextfold could not find a removed payload's block in the caller's history"
            ),
        }
    }
    Ok(())
}

/// The place in `history` (message, block) of each of `keys`, blocks of the working copy
/// `input`.
fn places_of(
    state: &State,
    input: &[Message],
    history: &dyn History,
    keys: &[Option<Key<'_>>],
) -> Result<Vec<Option<(usize, usize)>>, HistoryError> {
    let in_input: HashMap<Key<'_>, usize> = (input.iter().enumerate())
        .flat_map(|(index, message)| message.content.iter().filter_map(key_of).map(move |key| (key, index)))
        .collect();
    // The ingested rest of the working copy is the history from `compacted_source` on; what
    // a compaction made comes before it, and is looked for back from there.
    let mut places = Vec::with_capacity(keys.len());
    for key in keys {
        let guess = key.and_then(|key| {
            let index = *in_input.get(&key)?;
            let position = state.compacted_source + index.checked_sub(state.compacted)?;
            (position < history.len()).then_some((key, position))
        });
        places.push(match guess {
            Some((key, position)) => block_of(history.message(position)?.as_ref(), key).map(|block| (position, block)),
            None => None,
        });
    }
    let unplaced: HashSet<Key<'_>> =
        keys.iter().zip(&places).filter(|(_, place)| place.is_none()).filter_map(|(key, _)| *key).collect();
    let found = search_back(history, state.compacted_source.min(history.len()), &unplaced)?;
    for (key, place) in keys.iter().zip(places.iter_mut()) {
        if place.is_none() {
            *place = key.and_then(|key| found.get(&key).copied());
        }
    }
    Ok(places)
}

/// The places of `keys` in the messages of `history` before `end`, read from the newest back
/// until each is found (the messages a compaction kept are the newest before it, so this
/// reads about as far back as the working copy reaches).
fn search_back<'k>(
    history: &dyn History,
    end: usize,
    keys: &HashSet<Key<'k>>,
) -> Result<HashMap<Key<'k>, (usize, usize)>, HistoryError> {
    let mut found = HashMap::new();
    if keys.is_empty() {
        return Ok(found);
    }
    for index in (0..end).rev() {
        let message = history.message(index)?;
        for key in keys {
            if !found.contains_key(key) {
                if let Some(block) = block_of(&message, *key) {
                    found.insert(*key, (index, block));
                }
            }
        }
        if found.len() == keys.len() {
            break;
        }
    }
    Ok(found)
}
