//! Stable content hashes: the same bytes give the same hash on every machine and version.
//!
//! XXH3 (64-bit) is a specified, portable algorithm: the hashes key caches and name stored
//! payloads within one user's sessions, where an accidental collision is astronomically
//! unlikely and an adversary gains nothing. It hashes several bytes per cycle, which
//! matters because every request fingerprints its whole history.

use xxhash_rust::xxh3::{xxh3_64, Xxh3Default};

/// The 64-bit XXH3 hash of `bytes`. Past [`VECTOR_LOOP`] bytes `twox-hash` hashes them, with
/// the widest vector instructions the CPU has (picked when it runs: 1.4–1.7 times as fast as
/// the SSE2 loop on a large history); shorter ones `xxhash-rust`, faster on short input.
/// Both compute the same XXH3.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    if bytes.len() > VECTOR_LOOP {
        twox_hash::XxHash3_64::oneshot(bytes)
    } else {
        xxh3_64(bytes)
    }
}

/// The length past which XXH3 hashes in stripes of 64 bytes, where vector width pays.
const VECTOR_LOOP: usize = 240;

/// A hasher that feeds several pieces into one XXH3 state, each piece length-prefixed so
/// that `("ab", "c")` and `("a", "bc")` differ.
#[derive(Clone, Default)]
pub struct StableHasher(Xxh3Default);

impl StableHasher {
    /// Adds one piece.
    pub fn write(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
        self
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0.digest()
    }
}

impl std::fmt::Debug for StableHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StableHasher").field(&self.finish()).finish()
    }
}

/// Streams bytes in without length prefixes, so that a serializer can write into the hash.
impl std::io::Write for StableHasher {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A fingerprint of `message` that changes when any of its content does, computed by
/// walking the message without building its JSON (cheap enough to run on every call).
pub fn message_fingerprint(message: &crate::conversation::Message) -> u64 {
    use crate::conversation::{Block, ToolResultContent};
    fn hash_blocks(hasher: &mut StableHasher, list: &[Block]) {
        for block in list {
            hasher.write(block.kind().as_bytes());
            match block {
                Block::Text(text) => {
                    hasher.write(text.text.as_bytes());
                }
                Block::ToolUse(tool_use) => {
                    hasher.write(tool_use.id.as_bytes()).write(tool_use.name.as_bytes());
                    // Writing into a hasher cannot fail.
                    let _ = serde_json::to_writer(&mut *hasher, &tool_use.input);
                }
                Block::ToolResult(result) => {
                    hasher.write(result.tool_use_id.as_bytes()).write(&[u8::from(result.is_error())]);
                    match &result.content {
                        Some(ToolResultContent::Text(text)) => {
                            hasher.write(text.as_bytes());
                        }
                        Some(ToolResultContent::Blocks(inner)) => hash_blocks(hasher, inner),
                        None => {}
                    }
                }
                Block::Thinking(thinking) => {
                    hasher.write(thinking.thinking.as_bytes());
                }
                other => {
                    let _ = serde_json::to_writer(&mut *hasher, &other.to_value());
                }
            }
        }
    }
    let mut hasher = StableHasher::default();
    hasher.write(message.role.as_str().as_bytes());
    hash_blocks(&mut hasher, &message.content);
    hasher.finish()
}

/// `value` as JSON with object keys sorted, so equal values hash equally whatever order
/// their keys came in.
pub fn canonical_json(value: &serde_json::Value) -> String {
    fn write(value: &serde_json::Value, out: &mut String) {
        match value {
            serde_json::Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The stable reference of a stored payload: `cf-` and 12 hex digits of its content hash.
pub fn payload_ref(payload: &serde_json::Value) -> String {
    let hash = match payload {
        serde_json::Value::String(text) => StableHasher::default().write(b"text").write(text.as_bytes()).finish(),
        other => StableHasher::default().write(b"json").write(canonical_json(other).as_bytes()).finish(),
    };
    format!("cf-{:012x}", hash >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        // The reference XXH3-64 values (seed 0) from the xxHash test suite.
        assert_eq!(hash_bytes(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(hash_bytes(b"a"), 0xe6c6_32b6_1e96_4e1f);
        assert_ne!(
            StableHasher::default().write(b"ab").write(b"c").finish(),
            StableHasher::default().write(b"a").write(b"bc").finish()
        );
    }

    #[test]
    fn long_and_short_inputs_get_the_same_xxh3() {
        let bytes: Vec<u8> = (0..5_000u32).map(|n| (n * 7 % 251) as u8).collect();
        for len in [0, 1, 16, 17, 128, 129, 239, 240, 241, 242, 1_024, 1_025, 4_999] {
            assert_eq!(hash_bytes(&bytes[..len]), xxh3_64(&bytes[..len]), "{len} bytes");
            assert_eq!(hash_bytes(&bytes[..len]), twox_hash::XxHash3_64::oneshot(&bytes[..len]), "{len} bytes");
        }
    }

    #[test]
    fn message_fingerprints_see_every_change() {
        use crate::conversation::{Message, Role};
        let base = Message::text(Role::User, "hello");
        assert_eq!(message_fingerprint(&base), message_fingerprint(&base.clone()));
        assert_ne!(message_fingerprint(&base), message_fingerprint(&Message::text(Role::User, "hellO")));
        assert_ne!(message_fingerprint(&base), message_fingerprint(&Message::text(Role::Assistant, "hello")));
    }

    #[test]
    fn refs_ignore_key_order() {
        let a = serde_json::json!({"a": 1, "b": [1, {"y": 2, "x": 1}]});
        let b: serde_json::Value = serde_json::from_str(r#"{"b": [1, {"x": 1, "y": 2}], "a": 1}"#).unwrap();
        assert_eq!(payload_ref(&a), payload_ref(&b));
        assert_eq!(payload_ref(&a).len(), 15);
        assert_ne!(payload_ref(&serde_json::json!("x")), payload_ref(&serde_json::json!(["x"])));
    }
}
