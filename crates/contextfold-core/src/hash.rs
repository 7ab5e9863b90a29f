//! Stable content hashes: the same bytes give the same hash on every machine and version.
//!
//! FNV-1a (64-bit) is enough here: the hashes key caches and name stored payloads within
//! one user's sessions, where an accidental collision is astronomically unlikely and an
//! adversary gains nothing. It keeps the core free of a hashing dependency.

/// The 64-bit FNV-1a hash of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// A hasher that feeds several pieces into one FNV-1a state, each piece length-prefixed so
/// that `("ab", "c")` and `("a", "bc")` differ.
#[derive(Debug, Clone)]
pub struct StableHasher(u64);

impl Default for StableHasher {
    fn default() -> Self {
        StableHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl StableHasher {
    /// Adds one piece.
    pub fn write(&mut self, bytes: &[u8]) -> &mut Self {
        for &byte in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl std::io::Write for StableHasher {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
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
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(
            StableHasher::default().write(b"ab").write(b"c").finish(),
            StableHasher::default().write(b"a").write(b"bc").finish()
        );
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
