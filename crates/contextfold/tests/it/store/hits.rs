//! Search gives each stored text one hit, whatever the sessions hold: a property over
//! histories of tool outputs drawn from a few texts, some of them also stored as payloads.

use super::backend::Backend;
use contextfold::core::Conversation;
use contextfold::store::{HitLocation, Payload, SessionStore};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashSet;

/// The texts outputs are drawn from; each holds the word searched for.
const TEXTS: [&str; 4] =
    ["wombat build failed", "wombat tests passed", "wombat lint warned twice", "wombat deploy skipped"];

/// A session: the texts of its outputs in order, and which texts are also its payloads.
type Session = (Vec<usize>, Vec<bool>);

fn session() -> impl Strategy<Value = Session> {
    (prop::collection::vec(0..TEXTS.len(), 1..8), prop::collection::vec(any::<bool>(), TEXTS.len()))
}

/// A history whose tool results hold `outputs`' texts.
fn history(outputs: &[usize]) -> Conversation {
    let mut messages = vec![json!({"role": "user", "content": "start"})];
    for (call, text) in outputs.iter().enumerate() {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{call}"), "name": "Bash", "input": {"command": "make"}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{call}"), "content": TEXTS[*text]}]}));
    }
    Conversation::from_value(Value::Array(messages)).expect("a conversation")
}

/// Fills `store` with `sessions`; returns their ids.
fn fill(store: &dyn SessionStore, sessions: &[Session]) -> Vec<String> {
    let mut ids = Vec::new();
    for (index, (outputs, payloads)) in sessions.iter().enumerate() {
        let id = store.create_session(&format!("s{index}")).expect("create");
        store.append_messages(&id, &history(outputs).messages).expect("append");
        for (text, _) in payloads.iter().enumerate().filter(|(_, stored)| **stored) {
            let payload = Payload {
                reference: format!("cf-{index}-{text}"),
                session: id.clone(),
                tool: "Bash".into(),
                kind: "shell".into(),
                target: None,
                tokens: 4,
                message: 0,
                block: 0,
                payload: json!(TEXTS[text]),
            };
            store.put_payload(&payload).expect("put");
        }
        ids.push(id);
    }
    ids
}

/// Checks the hits of every limit against what `sessions` hold.
fn check(store: &dyn SessionStore, sessions: &[Session]) -> Result<(), TestCaseError> {
    let ids = fill(store, sessions);
    // What there is to find: per session, each payload, and each output whose text is not one.
    let distinct: usize = sessions
        .iter()
        .map(|(outputs, payloads)| {
            let stored = payloads.iter().filter(|stored| **stored).count();
            stored + outputs.iter().filter(|text| !payloads[**text]).count()
        })
        .sum();
    let matches: usize = sessions
        .iter()
        .map(|(outputs, payloads)| outputs.len() + payloads.iter().filter(|stored| **stored).count())
        .sum();
    for limit in 1..=matches + 1 {
        let hits = store.search(None, "wombat", limit).expect("search");
        prop_assert!(hits.len() <= limit);
        let places: HashSet<(&String, &HitLocation)> = hits.iter().map(|hit| (&hit.session, &hit.location)).collect();
        prop_assert_eq!(places.len(), hits.len(), "a place twice: {:?}", hits);
        for hit in &hits {
            let HitLocation::Message(position) = hit.location else { continue };
            let session = ids.iter().position(|id| *id == hit.session).expect("a session of ours");
            let (outputs, _) = &sessions[session];
            let text = outputs[(position - 2) / 2];
            let payload = HitLocation::Payload(format!("cf-{session}-{text}"));
            prop_assert!(
                !hits.iter().any(|other| other.session == hit.session && other.location == payload),
                "message {} and the payload of its text both hit: {:?}",
                position,
                hits
            );
        }
        // Never fewer than there are texts; exactly as many once every match is read (a
        // message whose payload ranks past what was read can still be a hit of its own).
        prop_assert!(hits.len() >= limit.min(distinct), "{} hits for {} texts: {:?}", hits.len(), distinct, hits);
        if limit >= matches {
            prop_assert_eq!(hits.len(), distinct, "every stored text once: {:?}", hits);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn memory_search_gives_each_stored_text_once(sessions in prop::collection::vec(session(), 1..3)) {
        check(&*Backend::memory().open(), &sessions)?;
    }

    #[test]
    #[cfg(feature = "sqlite")]
    fn sqlite_search_gives_each_stored_text_once(sessions in prop::collection::vec(session(), 1..3)) {
        let backend = Backend::sqlite("hits");
        check(&*backend.open(), &sessions)?;
    }
}
