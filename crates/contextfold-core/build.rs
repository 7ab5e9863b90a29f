//! Lays out, at compile time, what the exact counters read in place at run time, so that a
//! process pays nothing to load a vocabulary:
//!
//! - per vocabulary, `NAME.offsets`, `NAME.bytes` and `NAME.slots`: the token bytes in rank
//!   order (bpe-openai's token ids are tiktoken's ranks), where each token starts in them,
//!   and an open-addressing hash table from token bytes to rank: slots of two little-endian
//!   `u32`s, the rank and the high half of the bytes' XXH3 hash (whose low bits pick the
//!   first slot), so that a probe of another token is told apart without reading its bytes;
//! - `classes.rs`: the Unicode classes the pre-tokenizer tells apart, as sorted ranges, and
//!   the characters that match an ASCII letter case-insensitively, from regex-syntax's
//!   tables (the ones the reference regex is built from).
//!
//! The output depends only on the inputs' versions, so it is the same on every build.

// The crate is pure at run time; its build script reads the environment and writes files.
#![allow(clippy::disallowed_methods)]

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    #[cfg(feature = "bpe")]
    bpe::write_all();
}

#[cfg(feature = "bpe")]
mod bpe {
    use regex_syntax::hir::{Class, HirKind};
    use std::path::{Path, PathBuf};

    /// Marks a free slot of a hash table.
    const EMPTY: u32 = u32::MAX;

    pub fn write_all() {
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        write_vocabulary(&out, "o200k_base", &bpe_openai::o200k_base().bpe);
        write_vocabulary(&out, "cl100k_base", &bpe_openai::cl100k_base().bpe);
        write_classes(&out.join("classes.rs"));
    }

    fn write_vocabulary(out: &Path, name: &str, bpe: &bpe_openai::byte_pair_encoding::BytePairEncoding) {
        let tokens = u32::try_from(bpe.num_tokens()).expect("a vocabulary has fewer than 2^32 tokens");
        // At most half full, so that a miss (most lookups of a merge) ends after two slots or so.
        let slots = (tokens as usize * 2).next_power_of_two();
        let (mut offsets, mut bytes, mut table) = (vec![0u32], Vec::new(), vec![EMPTY; 2 * slots]);
        for rank in 0..tokens {
            let token = bpe.token_bytes(rank);
            bytes.extend_from_slice(token);
            offsets.push(u32::try_from(bytes.len()).expect("a vocabulary has fewer than 4 GB of bytes"));
            let hash = xxhash_rust::xxh3::xxh3_64(token);
            let mut slot = hash as usize & (slots - 1);
            while table[2 * slot] != EMPTY {
                slot = (slot + 1) & (slots - 1);
            }
            table[2 * slot] = rank;
            table[2 * slot + 1] = (hash >> 32) as u32;
        }
        let words = |words: &[u32]| words.iter().flat_map(|word| word.to_le_bytes()).collect::<Vec<u8>>();
        write(&out.join(format!("{name}.offsets")), &words(&offsets));
        write(&out.join(format!("{name}.slots")), &words(&table));
        write(&out.join(format!("{name}.bytes")), &bytes);
    }

    /// The classes of all characters but `Other`, as `(first, last, Class)` ranges in order,
    /// and the non-ASCII characters that match an ASCII letter case-insensitively.
    fn write_classes(path: &Path) {
        let classes = [
            ("Upper", r"[\p{Lu}\p{Lt}]"),
            ("Lower", r"\p{Ll}"),
            ("Caseless", r"[\p{Lm}\p{Lo}]"),
            ("Mark", r"\p{M}"),
            ("Number", r"\p{N}"),
            ("Space", r"\s"),
        ];
        let mut ranges: Vec<(u32, u32, &str)> = classes
            .iter()
            .flat_map(|&(class, pattern)| unicode_ranges(pattern).into_iter().map(move |(a, b)| (a, b, class)))
            .collect();
        ranges.sort();
        assert!(ranges.windows(2).all(|pair| pair[0].1 < pair[1].0), "the classes are disjoint");
        let mut code = String::from("/// Characters by class, in order; the rest are `Other`.\n");
        code += &format!("pub(super) static RANGES: [(u32, u32, Class); {}] = [\n", ranges.len());
        for (first, last, class) in &ranges {
            code += &format!("    ({first:#x}, {last:#x}, Class::{class}),\n");
        }
        code += "];\n\n/// The non-ASCII characters that `(?i)` matches with an ASCII letter.\n";
        let folds: Vec<(u32, char)> = ('a'..='z')
            .flat_map(|letter| unicode_ranges(&format!("(?i){letter}")).into_iter().map(move |range| (range, letter)))
            .flat_map(|((first, last), letter)| (first.max(0x80)..=last).map(move |c| (c, letter)))
            .collect();
        code += &format!("pub(super) static FOLDS_TO_ASCII: [(char, u8); {}] = [\n", folds.len());
        for (c, letter) in folds {
            code += &format!("    ('\\u{{{c:x}}}', b'{letter}'),\n");
        }
        code += "];\n";
        write(path, code.as_bytes());
    }

    fn unicode_ranges(pattern: &str) -> Vec<(u32, u32)> {
        let hir = regex_syntax::Parser::new().parse(pattern).expect("the class parses");
        match hir.kind() {
            HirKind::Class(Class::Unicode(class)) => {
                class.ranges().iter().map(|range| (u32::from(range.start()), u32::from(range.end()))).collect()
            }
            HirKind::Literal(literal) => {
                let c = std::str::from_utf8(&literal.0).ok().and_then(|s| s.chars().next()).expect("one char");
                vec![(u32::from(c), u32::from(c))]
            }
            other => panic!("{pattern} is not a class: {other:?}"),
        }
    }

    /// Writes `bytes` unless the file already holds them, so an unchanged table keeps its
    /// modification time and nothing that includes it is rebuilt.
    fn write(path: &Path, bytes: &[u8]) {
        if std::fs::read(path).is_ok_and(|old| old == bytes) {
            return;
        }
        std::fs::write(path, bytes).unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    }
}
