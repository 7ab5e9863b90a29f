//! Conversation state: versioned values by key, written by compare-and-swap; no update is
//! lost by writers on other connections; a store that locks serialises one key's holders
//! and never makes another key's wait.

use super::Backend;
use contextfold::store::Put;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Versions count writes; a write over a version another writer moved is refused with the
/// version found; values come back byte for byte.
pub fn state_round_trip(backend: &Backend) {
    let states = backend.open_states();
    let key = "conversation 0f3a";
    assert_eq!(states.state_version(key).unwrap(), 0);
    assert_eq!(states.state(key).unwrap(), None);
    let first: Vec<u8> = (0..=255u8).chain([0, 0, 0xff]).collect();
    assert_eq!(states.put_state(key, 0, &first).unwrap(), Put::Written(1));
    assert_eq!(states.put_state(key, 0, b"late").unwrap(), Put::Moved(1), "a second first write is refused");
    let stored = states.state(key).unwrap().expect("stored");
    assert_eq!((stored.version, stored.bytes), (1, first));
    let big = vec![b'x'; 1 << 20];
    assert_eq!(states.put_state(key, 1, &big).unwrap(), Put::Written(2));
    assert_eq!(states.put_state(key, 1, b"stale").unwrap(), Put::Moved(2));
    assert_eq!(states.put_state(key, 3, b"ahead").unwrap(), Put::Moved(2), "a version never written is refused");
    assert_eq!(states.state_version(key).unwrap(), 2);
    assert_eq!(states.state(key).unwrap().expect("stored").bytes, big);
    assert_eq!(states.put_state(key, 2, b"").unwrap(), Put::Written(3), "an empty value is a value");
    assert_eq!(states.state(key).unwrap().expect("stored").bytes, b"");
    assert_eq!(states.state_version("conversation other").unwrap(), 0, "keys are apart");
    assert!(states.delete_state(key).unwrap());
    assert!(!states.delete_state(key).unwrap());
    assert_eq!(states.put_state(key, 3, b"after").unwrap(), Put::Moved(0), "a deleted state is not written over");
    assert_eq!(states.put_state(key, 0, b"again").unwrap(), Put::Written(1));
    let reopened = backend.open_states();
    assert_eq!(reopened.state(key).unwrap().expect("kept").bytes, b"again", "another connection reads it");
}

/// Writers on connections of their own each add to one counter, reading it again whenever
/// another moved it first: no update is lost.
pub fn state_writers_lose_nothing(backend: &Backend) {
    const WRITERS: u64 = 4;
    const EACH: u64 = 25;
    let key = "conversation shared";
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| {
            let states = backend.open_states();
            std::thread::spawn(move || {
                let mut conflicts = 0;
                for _ in 0..EACH {
                    loop {
                        let (version, count) = match states.state(key).unwrap() {
                            Some(state) => (state.version, u64::from_be_bytes(state.bytes.try_into().unwrap())),
                            None => (0, 0),
                        };
                        match states.put_state(key, version, &(count + 1).to_be_bytes()).unwrap() {
                            Put::Written(next) => {
                                assert_eq!(next, version + 1);
                                break;
                            }
                            Put::Moved(found) => {
                                assert!(found > version, "a version only grows");
                                conflicts += 1;
                            }
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: u64 = writers.into_iter().map(|writer| writer.join().expect("a writer")).sum();
    let state = backend.open_states().state(key).unwrap().expect("written");
    assert_eq!(u64::from_be_bytes(state.bytes.try_into().unwrap()), WRITERS * EACH, "every update counted");
    assert_eq!(state.version, WRITERS * EACH);
    println!("{} writes by {WRITERS} writers, {conflicts} refused and retried", WRITERS * EACH);
}

/// A store that locks lets one holder of a key's lock in at a time, on any connection; the
/// lock of another key is taken while the first is held.
pub fn state_locks(backend: &Backend) {
    let (first, second) = (backend.open_states(), backend.open_states());
    let held = first.lock_state("conversation a").unwrap();
    let (got, other) = mpsc::channel();
    let states = second.clone();
    let elsewhere = std::thread::spawn(move || {
        let lock = states.lock_state("conversation b").unwrap();
        got.send(()).unwrap();
        drop(lock);
    });
    other.recv_timeout(Duration::from_secs(10)).expect("another conversation's lock is not held up");
    elsewhere.join().unwrap();
    if !held.holds() {
        println!("this store serialises writers by its compare-and-swap alone");
        return;
    }
    let released = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (released, states) = (released.clone(), second.clone());
        std::thread::spawn(move || {
            let _lock = states.lock_state("conversation a").unwrap();
            assert!(released.load(Ordering::SeqCst), "the lock was taken while another held it");
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    released.store(true, Ordering::SeqCst);
    drop(held);
    waiter.join().expect("the second holder gets the lock once it is released");
    // Released locks go back to the pool free: taking them again many times does not wait.
    for _ in 0..40 {
        drop(first.lock_state("conversation a").unwrap());
        drop(second.lock_state("conversation a").unwrap());
    }
}
