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
}
