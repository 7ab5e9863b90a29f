//! The corpus split in two by a fixed hash of each session's file name: a tuning part (about
//! two thirds) that changes are tuned on, and a checking part (about a third) that only
//! checks them. A change that helps the tuning part but not the checking part has been
//! fitted to the sessions it was tuned on, and is not kept.
//!
//! The split is the file name's 64-bit XXH3 hash ([`hash_bytes`]) modulo 3: 0 is checking.
//! It depends on nothing but the name, so a session keeps its part however the corpus grows,
//! on every machine and in every version.

use contextfold_core::hash::hash_bytes;
use std::path::Path;

/// A part of the corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// What changes are tuned on (about two thirds).
    Tuning,
    /// What only checks them (about a third).
    Checking,
}

impl Part {
    /// The part of the session in `file` (by its file name).
    pub fn of(file: &Path) -> Part {
        let name = file.file_name().unwrap_or(file.as_os_str());
        match hash_bytes(name.as_encoded_bytes()) % 3 {
            0 => Part::Checking,
            _ => Part::Tuning,
        }
    }

    /// Its name: `tuning` or `checking`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Tuning => "tuning",
            Part::Checking => "checking",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checking part of the corpus, as kept in the repository.
    const CHECKING: &str = include_str!("../../../../tests/fixtures/corpus-checking.txt");

    #[test]
    fn the_split_kept_in_the_repository_follows_the_rule() {
        let listed: Vec<&str> = CHECKING.lines().filter(|line| !line.starts_with('#') && !line.is_empty()).collect();
        assert_eq!(listed.len(), 24);
        for name in &listed {
            assert_eq!(Part::of(Path::new(name)), Part::Checking, "{name}");
            assert_eq!(Part::of(&Path::new("/any/where").join(name)), Part::Checking, "{name}");
        }
        for name in [
            "claudecode-mclaude__21037e11-89de-484d-abba-8705254aa991.json",
            "claudecode-mclaude__3af9b1a7-6512-4883-ad18-320658ced099.json",
        ] {
            assert_eq!(Part::of(Path::new(name)), Part::Tuning, "{name}");
        }
    }

    #[test]
    fn about_a_third_is_checking() {
        let parts: Vec<Part> = (0..300).map(|index| Part::of(Path::new(&format!("session-{index}.json")))).collect();
        let checking = parts.iter().filter(|part| **part == Part::Checking).count();
        assert!((80..=120).contains(&checking), "about a third: {checking} of 300");
    }
}
