//! Token counting against references: exact BPE counts against tiktoken's, and the
//! estimator's error over the shared corpus of agent sessions.

// Tests and benches read fixtures from disk; the library itself stays free of I/O.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
// Without `bpe` there is no exact reference to compare with; the helpers then go unused.
#![cfg_attr(not(feature = "bpe"), allow(dead_code, unused_imports))]

use contextfold_core::tokens::{count_conversation, image_dimensions, image_tokens, Chars4, Estimate, TokenCounter};
use contextfold_core::{Block, Conversation, ToolResultContent};
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;

/// A sample of the reference counts, carried by the repository.
const SAMPLE: &str = include_str!("../../../../tests/fixtures/bpe_counts_sample.jsonl");

/// Checks every line of a `bpe_counts.jsonl` file; returns how many lines it checked.
#[cfg(feature = "bpe")]
fn check_reference(text: &str) -> usize {
    use contextfold_core::tokens::{Cl100k, O200k};
    let mut failures = Vec::new();
    let mut lines = 0;
    for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
        lines += 1;
        let row: Value = serde_json::from_str(line).expect("each line is JSON");
        let text = row["text"].as_str().expect("`text` is a string");
        for (counter, key) in [(&O200k as &dyn TokenCounter, "o200k_base"), (&Cl100k, "cl100k_base")] {
            let expected = row[key].as_u64().expect("counts are integers");
            let got = counter.count_text(text);
            if got != expected {
                failures.push(format!(
                    "line {}: {key} expected {expected}, got {got}: {:?}",
                    number + 1,
                    text.chars().take(60).collect::<String>()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
    lines
}

#[cfg(feature = "bpe")]
#[test]
fn bpe_counts_match_the_reference_sample() {
    let lines = check_reference(SAMPLE);
    assert!(lines >= 60, "the sample has {lines} lines");
    assert!(SAMPLE.contains("\"kind\": \"edge\""), "the sample keeps the edge cases");
}

#[cfg(feature = "bpe")]
#[test]
fn bpe_counts_match_every_reference_line() {
    let Some(path) = crate::common::shared("fixtures/bpe_counts.jsonl") else { return };
    let text = std::fs::read_to_string(&path).expect("the full BPE reference reads");
    let lines = check_reference(&text);
    assert_eq!(lines, 1517, "the README promises 1,517 lines");
}

fn corpus() -> Option<Vec<(String, Conversation)>> {
    let dir = crate::common::corpus_dir()?;
    let entries = std::fs::read_dir(&dir).expect("the corpus lists");
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let mut sessions = Vec::new();
    for path in paths {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = if name.ends_with(".json.gz") {
            let file = std::fs::File::open(&path).expect("corpus file opens");
            let mut text = String::new();
            flate2::read::GzDecoder::new(file).read_to_string(&mut text).expect("corpus file decompresses");
            text
        } else if name.ends_with(".json") && name != "manifest.json" {
            std::fs::read_to_string(&path).expect("corpus file reads")
        } else {
            continue;
        };
        let value: Value = serde_json::from_str(&text).expect("corpus file is JSON");
        let conversation = Conversation::from_value(value).expect("corpus file is a conversation");
        sessions.push((name, conversation));
    }
    Some(sessions)
}

/// The `p`-quantile of sorted values, interpolating between neighbours.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let position = p * (sorted.len() - 1) as f64;
    let (low, high) = (position.floor() as usize, position.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

/// Median and 90th percentile of `|counter - exact| / exact` over the sessions.
fn errors(sessions: &[(String, Conversation)], exact: &[u64], counter: &dyn TokenCounter) -> (f64, f64) {
    let mut errors: Vec<f64> = sessions
        .iter()
        .zip(exact)
        .map(|((_, conversation), &exact)| {
            let got = count_conversation(counter, conversation) as f64;
            (got - exact as f64).abs() / exact as f64
        })
        .collect();
    errors.sort_by(f64::total_cmp);
    (quantile(&errors, 0.5), quantile(&errors, 0.9))
}

#[cfg(feature = "bpe")]
#[test]
fn estimate_is_within_two_percent_of_o200k_over_the_corpus() {
    use contextfold_core::tokens::O200k;
    let Some(sessions) = corpus() else { return };
    assert_eq!(sessions.len(), 61, "the corpus README promises 61 sessions");
    let exact: Vec<u64> = sessions.iter().map(|(_, c)| count_conversation(&O200k, c)).collect();
    let (median, p90) = errors(&sessions, &exact, &Estimate);
    let (chars4_median, chars4_p90) = errors(&sessions, &exact, &Chars4);
    eprintln!(
        "relative error vs o200k over {} sessions: estimate median {:.2}% p90 {:.2}%; \
         chars4 median {:.2}% p90 {:.2}%",
        sessions.len(),
        median * 100.0,
        p90 * 100.0,
        chars4_median * 100.0,
        chars4_p90 * 100.0
    );
    assert!(median <= 0.02, "estimate median error {median:.4} > 2%");
    assert!(p90 <= 0.05, "estimate p90 error {p90:.4} > 5%");
    // The estimator earns its keep only if it beats the baseline clearly.
    assert!(median * 2.0 < chars4_median && p90 * 2.0 < chars4_p90);
}

#[test]
fn corpus_images_have_readable_sizes() {
    let Some(sessions) = corpus() else { return };
    fn images<'a>(blocks: &'a [Block], out: &mut Vec<&'a Value>) {
        for block in blocks {
            match block {
                Block::Image(media) => out.push(&media.source),
                Block::ToolResult(result) => {
                    if let Some(ToolResultContent::Blocks(inner)) = &result.content {
                        images(inner, out);
                    }
                }
                _ => {}
            }
        }
    }
    let mut sources = Vec::new();
    for (_, conversation) in &sessions {
        for message in &conversation.messages {
            images(&message.content, &mut sources);
        }
    }
    assert!(!sources.is_empty(), "the corpus README lists sessions with images");
    for source in sources {
        let data = source["data"].as_str().expect("corpus images are base64");
        let (width, height) =
            image_dimensions(data).unwrap_or_else(|| panic!("unreadable {} header", source["media_type"]));
        let tokens = image_tokens(source);
        eprintln!("corpus image {}: {width}x{height} -> {tokens} tokens", source["media_type"]);
        assert!((1..=1600).contains(&tokens));
    }
}

/// Text drawn from the pieces that make pre-tokenizers differ: letters of several scripts
/// and cases, digits, contractions, punctuation, combining marks, emoji and every kind of
/// white space, in runs.
#[cfg(feature = "bpe")]
fn tricky_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        "[a-zA-Z]{1,12}",
        "[0-9]{1,7}",
        Just("'s".to_string()),
        Just("'LL".to_string()),
        Just("<|endoftext|>".to_string()),
        "[ \t\r\n]{1,6}",
        Just("\u{a0}\u{2003}\u{3000}".to_string()),
        "[.,;:!?(){}\\[\\]<>/\\\\\"'`~@#$%^&*_+=|-]{1,4}",
        "[\u{e0}-\u{ff}\u{100}-\u{17f}]{1,5}",
        "[\u{391}-\u{3c9}\u{410}-\u{44f}]{1,6}",
        "[\u{4e00}-\u{4e40}\u{3041}-\u{3096}\u{ac00}-\u{ac40}]{1,4}",
        "[\u{300}-\u{36f}]{1,3}",
        "[\u{1f600}-\u{1f64f}\u{1f3fb}\u{200d}\u{fe0f}]{1,3}",
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat())
}

#[cfg(feature = "bpe")]
proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(768))]

    /// The exact counters count as tiktoken's `encode_ordinary` does, on any text.
    #[test]
    fn bpe_counts_match_tiktoken_on_random_text(text in tricky_text()) {
        use contextfold_core::tokens::{Cl100k, O200k};
        use std::sync::LazyLock;
        static REFERENCE: LazyLock<(tiktoken_rs::CoreBPE, tiktoken_rs::CoreBPE)> = LazyLock::new(|| {
            (tiktoken_rs::o200k_base().expect("o200k loads"), tiktoken_rs::cl100k_base().expect("cl100k loads"))
        });
        let (o200k, cl100k) = &*REFERENCE;
        proptest::prop_assert_eq!(O200k.count_text(&text), o200k.encode_ordinary(&text).len() as u64, "o200k");
        proptest::prop_assert_eq!(Cl100k.count_text(&text), cl100k.encode_ordinary(&text).len() as u64, "cl100k");
    }
}

/// Every string of `value`, keys included.
#[cfg(feature = "bpe")]
fn strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => out.push(text),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(fields) => fields.iter().for_each(|(key, item)| {
            out.push(key);
            strings(item, out);
        }),
        _ => {}
    }
}

/// Our encoders count every text of every corpus session as bpe-openai does (whose counts
/// are tiktoken's on the reference fixtures), and so does each session's whole JSON.
#[cfg(feature = "bpe")]
#[test]
fn bpe_counts_every_corpus_text_as_the_reference() {
    use contextfold_core::tokens::{Cl100k, O200k};
    let Some(dir) = crate::common::corpus_dir() else { return };
    let counters = [(&O200k as &dyn TokenCounter, bpe_openai::o200k_base()), (&Cl100k, bpe_openai::cl100k_base())];
    let (mut texts, mut tokens, mut failures) = (0, 0, Vec::new());
    let mut paths: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("the corpus lists").map(|e| e.expect("entry").path()).collect();
    paths.sort();
    for path in paths.iter().filter(|path| path.extension().is_some_and(|ext| ext == "json")) {
        let json = std::fs::read_to_string(path).expect("corpus file reads");
        let value: Value = serde_json::from_str(&json).expect("corpus file is JSON");
        let mut all = vec![json.as_str()];
        strings(&value, &mut all);
        texts += all.len();
        for text in all {
            for (counter, reference) in &counters {
                let (got, expected) = (counter.count_text(text), reference.count(text) as u64);
                tokens += expected;
                if got != expected {
                    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
                    let start: String = text.chars().take(60).collect();
                    failures.push(format!("{name}: {} expected {expected}, got {got}: {start:?}", counter.name()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
    assert!(texts > 10_000 && tokens > 1_000_000, "{texts} texts, {tokens} tokens: the corpus is all there");
    eprintln!("{texts} corpus texts, {tokens} tokens in all, counted as the reference does");
}
