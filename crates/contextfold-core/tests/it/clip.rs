//! Clipping: properties over random texts, multi-megabyte fixtures generated here, and every
//! session of the shared corpus.
//!
//! Tests that read `../shared/corpus` print a notice and return when it is absent, so a
//! fresh clone still passes.

// The core's clippy.toml forbids file I/O; reading the corpus is what these tests are for.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use contextfold_core::clip::{clip, clip_text, ClipConfig, CLIP_PREFIX, MIN_CLIP_TOKENS};
use contextfold_core::hash::payload_ref;
use contextfold_core::tokens::{count_block, Chars4, Estimate, TokenCounter, BLOCK_OVERHEAD};
use contextfold_core::tools::ActionKind;
use contextfold_core::{format, validate, Block, Conversation, ToolResultContent};
use proptest::prelude::*;
use serde_json::{json, Value};

const REFERENCE: &str = "cf-0123456789ab";

fn counters() -> [&'static dyn TokenCounter; 2] {
    [&Chars4, &Estimate]
}

/// The parts of a clipped output: the kept head (with the newline before the marker, which
/// clipping adds when the head does not end a line), the marker, and the kept tail.
fn parts<'a>(out: &'a str, reference: &str) -> (&'a str, &'a str, &'a str) {
    let start = out.find(CLIP_PREFIX).expect("a marker");
    let close = format!("; ref {reference}]");
    let end = start + out[start..].find(&close).expect("the marker names the ref") + close.len();
    let head = &out[..start];
    let tail = out[end..].strip_prefix('\n').unwrap_or(&out[end..]);
    (head, &out[start..end], tail)
}

/// `text` pretty-printed when it is one-line JSON (clipping shows it so).
fn pretty(text: &str) -> Option<String> {
    let one_line = !text.trim().contains('\n') && text.trim_start().starts_with(['{', '[']);
    let value = serde_json::from_str::<Value>(text).ok().filter(|_| one_line)?;
    Some(serde_json::to_string_pretty(&value).unwrap())
}

/// Checks one clip of `text` against its contract and returns the output.
fn check(text: &str, config: &ClipConfig, counter: &dyn TokenCounter) -> Option<String> {
    check_against(text, pretty(text).as_deref().unwrap_or(text), config, counter)
}

/// [`check`], with `whole` the form of `text` whose ends are kept.
fn check_against(text: &str, whole: &str, config: &ClipConfig, counter: &dyn TokenCounter) -> Option<String> {
    let max = config.max_tokens.max(MIN_CLIP_TOKENS);
    let out = clip_text(text, config, ActionKind::Shell, REFERENCE, counter);
    let Some(out) = out else {
        assert!(counter.count_text(text) <= max, "not clipped, yet over {max}");
        return None;
    };
    let name = counter.name();
    assert!(counter.count_text(text) > max, "{name}: clipped, yet within {max}");
    assert!(counter.count_text(&out) <= max, "{name}: {} tokens over the limit of {max}", counter.count_text(&out));
    assert_eq!(clip_text(&out, config, ActionKind::Shell, REFERENCE, counter), None, "{name}: clipping is idempotent");
    assert_eq!(clip_text(text, config, ActionKind::Shell, REFERENCE, counter).as_deref(), Some(out.as_str()));
    let (head, marker, tail) = parts(&out, REFERENCE);
    assert!(marker.contains("from the middle of this output"), "{marker}");
    let cut_head = head.strip_suffix('\n').unwrap_or(head);
    assert!(
        whole.starts_with(head) || (!cut_head.ends_with('\n') && whole.starts_with(cut_head)),
        "{name}: the head is not a prefix: {head:?}"
    );
    assert!(whole.ends_with(tail), "{name}: the tail is not a suffix: {tail:?}");
    Some(out)
}

/// Pieces random texts are made of: words, multi-byte characters, long lines, CRLF, empty
/// lines, and binary-looking runs (bytes mapped to characters, control characters and
/// U+FFFD included).
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{1,12}( [a-zA-Z0-9_./-]{1,10}){0,8}\n",
        2 => "[éßЖ中文字😀🦀\u{301}a ]{1,40}\n",
        1 => ("[a-z😀中 ]{1,3}", 100usize..4_000).prop_map(|(unit, times)| unit.repeat(times)),
        1 => Just("\r\n".to_string()),
        1 => Just("\n\n\n".to_string()),
        1 => prop::collection::vec(any::<u8>(), 1..400).prop_map(|bytes| {
            bytes
                .into_iter()
                .map(|byte| match byte {
                    0..=0x7f => char::from(byte),
                    0x80..=0xbf => '\u{fffd}',
                    _ => char::from(byte - 0x40),
                })
                .collect()
        }),
    ]
}

/// Random texts: pieces repeated up to ~60 kB, or one-line JSON of such pieces.
fn text() -> impl Strategy<Value = String> {
    let pieces = || prop::collection::vec(piece(), 1..40);
    prop_oneof![
        3 => (pieces(), 1usize..30).prop_map(|(pieces, times)| pieces.concat().repeat(times)),
        1 => (pieces(), 1usize..40).prop_map(|(pieces, times)| {
            let items: Vec<Value> = (0..times)
                .flat_map(|round| pieces.iter().map(move |piece| json!({"n": round, "text": piece, "ok": [true, null]})))
                .collect();
            serde_json::to_string(&items).unwrap()
        }),
    ]
}

fn conversation_with(outputs: &[String]) -> Conversation {
    let mut messages = vec![json!({"role": "user", "content": "go"})];
    for (index, output) in outputs.iter().enumerate() {
        let id = format!("t{index}");
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "make"}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": output}
        ]}));
    }
    Conversation::from_value(Value::Array(messages)).expect("a conversation")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn clipping_stays_within_its_limit_and_is_idempotent(
        text in text(),
        max in MIN_CLIP_TOKENS..3_000,
        head_ratio in 0.0f64..=1.0,
    ) {
        let config = ClipConfig { head_ratio, ..ClipConfig::new(max) };
        for counter in counters() {
            check(&text, &config, counter);
        }
    }

    #[test]
    fn clipping_a_clipped_conversation_changes_nothing(
        outputs in prop::collection::vec(text(), 1..4),
        max in MIN_CLIP_TOKENS..3_000,
    ) {
        let config = ClipConfig::new(max);
        for counter in counters() {
            let mut conversation = conversation_with(&outputs);
            let clipped = clip(&mut conversation, &config, counter);
            prop_assert!(validate(&conversation).is_empty());
            for item in &clipped {
                let block = &conversation.messages[item.message].content[item.block];
                prop_assert_eq!(count_block(counter, block), item.tokens_after);
                prop_assert!(item.tokens_after <= max + BLOCK_OVERHEAD);
                prop_assert!(item.tokens_before > item.tokens_after);
            }
            let once = conversation.clone();
            prop_assert_eq!(clip(&mut conversation, &config, counter), vec![]);
            prop_assert_eq!(&conversation, &once);
        }
    }
}

/// A deterministic stream of pseudo-random bytes (xorshift).
fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        })
        .collect()
}

/// Many lines of build log, about `size` bytes.
fn log_output(size: usize) -> String {
    let mut text = String::with_capacity(size + 200);
    let mut line = 0;
    while text.len() < size {
        text.push_str(&format!(
            "[{line:07}] INFO compiling crate_{line} (/src/crates/crate_{line}/src/lib.rs) in {}ms\n",
            line * 37 % 1000
        ));
        line += 1;
    }
    text
}

/// One line of minified JSON: an array of objects, about `size` bytes.
fn minified_json(size: usize) -> String {
    let mut text = String::from("[");
    let mut id = 0;
    while text.len() < size {
        if id > 0 {
            text.push(',');
        }
        text.push_str(&json!({"id": id, "name": format!("item \"{id}\""), "tags": ["x", "é"], "n": null}).to_string());
        id += 1;
    }
    text.push(']');
    text
}

/// Random bytes decoded lossily: control characters, U+FFFD, stray newlines.
fn binary_output(size: usize) -> String {
    String::from_utf8_lossy(&random_bytes(size, 0x9e37_79b9_7f4a_7c15)).into_owned()
}

/// One line of words, no newline at all.
fn giant_line(size: usize) -> String {
    let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"];
    let mut text = String::with_capacity(size + 16);
    let mut index = 0;
    while text.len() < size {
        text.push_str(words[index % words.len()]);
        text.push(' ');
        index += 7;
    }
    text
}

/// Lines of CJK and emoji.
fn multibyte_output(size: usize) -> String {
    let mut text = String::with_capacity(size + 200);
    let mut line = 0;
    while text.len() < size {
        text.push_str(&format!("第{line}行：中文字符与表情😀🦀🎉 — ログ出力テスト 한국어 텍스트\n"));
        line += 1;
    }
    text
}

/// Clips a multi-megabyte `text` with both counters at two limits and checks the contract;
/// `first` and `last` are what the kept ends must start and end with.
fn check_fixture(name: &str, text: &str, first: &str, last: &str) {
    assert!(text.len() >= 1_000_000, "{name}: a fixture of at least 1 MB");
    let pretty = pretty(text);
    let whole = pretty.as_deref().unwrap_or(text);
    for counter in counters() {
        for max in [500, 2_000] {
            let config = ClipConfig::new(max);
            let out = check_against(text, whole, &config, counter).unwrap_or_else(|| panic!("{name}: clipped"));
            let (head, marker, tail) = parts(&out, REFERENCE);
            assert!(head.starts_with(first), "{name}/{}/{max}: head {head:?}", counter.name());
            assert!(tail.ends_with(last), "{name}/{}/{max}: tail {tail:?}", counter.name());
            assert!(marker.contains("MB") || marker.contains("kB"), "{name}: the marker sizes the cut: {marker}");
            assert!(marker.contains("tokens"), "{name}: {marker}");
            assert!(marker.contains("re-run the command"), "{name}: {marker}");
            assert_eq!(clip_text(text, &config, ActionKind::Shell, REFERENCE, counter).as_deref(), Some(out.as_str()));
        }
    }
}

#[test]
fn a_many_line_log_keeps_whole_first_and_last_lines() {
    let text = log_output(5_000_000);
    let out = check(&text, &ClipConfig::new(2_000), &Estimate).unwrap();
    let (head, marker, tail) = parts(&out, REFERENCE);
    assert!(head.ends_with('\n') && head.lines().count() > 10, "whole lines: {head:?}");
    assert!(tail.starts_with('['), "whole lines: {tail:?}");
    assert!(marker.contains(" lines (~"), "{marker}");
    let cut: usize = marker[CLIP_PREFIX.len()..].split(' ').next().unwrap().parse().unwrap();
    assert_eq!(cut + head.lines().count() + tail.lines().count(), text.lines().count(), "{marker}");
    let last = format!("{}\n", text.lines().last().unwrap());
    check_fixture("log", &text, "[0000000] INFO compiling crate_0 ", &last);
}

#[test]
fn a_single_line_of_minified_json_keeps_its_structure() {
    let text = minified_json(5_000_000);
    let out = clip_text(&text, &ClipConfig::new(2_000), ActionKind::Shell, REFERENCE, &Estimate).unwrap();
    let (head, marker, tail) = parts(&out, REFERENCE);
    assert!(head.starts_with("[\n  {\n    \"id\": 0,\n    \"name\": \"item \\\"0\\\"\",\n    \"tags\": [\n"), "{head}");
    assert!(tail.ends_with("    \"n\": null\n  }\n]"), "{tail}");
    assert!(marker.contains("(JSON, shown pretty-printed)"), "{marker}");
    check_fixture("json", &text, "[\n  {", "}\n]");
}

#[test]
fn binary_looking_output_is_clipped_to_valid_utf8() {
    let text = binary_output(2_000_000);
    let first_line = text.split_inclusive('\n').next().unwrap();
    let last_line = text.rsplit('\n').next().unwrap();
    let out = check(&text, &ClipConfig::new(500), &Chars4).unwrap();
    assert!(std::str::from_utf8(out.as_bytes()).is_ok());
    // Lines here are a few hundred bytes: the head and tail are whole lines or parts of one.
    let (head, _, tail) = parts(&out, REFERENCE);
    let head = head.strip_suffix('\n').unwrap_or(head);
    assert!(first_line.starts_with(head) || head.starts_with(first_line));
    assert!(last_line.ends_with(tail) || tail.ends_with(last_line));
    let first: String = text.chars().take(4).collect();
    let last: String = text.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
    check_fixture("binary", &text, &first, &last);
}

#[test]
fn a_giant_line_without_newlines_is_cut_at_character_boundaries() {
    let text = giant_line(3_000_000);
    let out = check(&text, &ClipConfig::new(500), &Estimate).unwrap();
    let (head, marker, tail) = parts(&out, REFERENCE);
    assert!(!head.is_empty() && !tail.is_empty());
    assert!(marker.contains("1 line ("), "part of one line: {marker}");
    check_fixture("giant line", &text, "alpha theta", "");
}

#[test]
fn multibyte_text_is_never_split_inside_a_character() {
    let text = multibyte_output(4_000_000);
    let last = text.lines().last().unwrap().to_string() + "\n";
    check_fixture("multibyte", &text, "第0行：中文字符与表情😀🦀🎉", &last);
    // A single line of emoji: every cut falls between characters.
    let emoji = "😀🦀🎉中".repeat(300_000);
    for counter in counters() {
        let out = check(&emoji, &ClipConfig::new(300), counter).unwrap();
        let (head, _, tail) = parts(&out, REFERENCE);
        assert!(head.starts_with('😀') && tail.ends_with('中'));
    }
}

#[test]
fn images_in_an_oversized_result_become_placeholders_with_its_ref() {
    let image =
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}});
    let mut conversation = Conversation::from_value(json!([
        {"role": "user", "content": "screenshot please"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "s", "name": "Read", "input": {"file_path": "/tmp/a.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "s", "content": [
            {"type": "text", "text": log_output(200_000)}, image
        ]}]}
    ]))
    .unwrap();
    let Block::ToolResult(result) = &conversation.messages[2].content[0] else { panic!() };
    let original = match &result.content {
        Some(ToolResultContent::Blocks(blocks)) => Value::Array(blocks.iter().map(Block::to_value).collect()),
        other => panic!("{other:?}"),
    };
    let clipped = clip(&mut conversation, &ClipConfig::new(1_000), &Estimate);
    assert_eq!(clipped.len(), 1);
    assert_eq!(clipped[0].reference, payload_ref(&original));
    assert_eq!(clipped[0].payload, original);
    assert_eq!(clipped[0].tool, "Read");
    let Block::ToolResult(result) = &conversation.messages[2].content[0] else { panic!() };
    let text = result.text();
    assert!(text.contains(&format!("[image removed from this output; ref {}]", clipped[0].reference)), "{text}");
    assert!(text.contains("re-read the file"), "{text}");
    assert!(validate(&conversation).is_empty());
}

#[test]
fn the_recall_hint_replaces_the_restore_hint_when_configured() {
    for tool in ["context_recall", "mcp__contextfold__context_recall"] {
        let config = ClipConfig { recall_tool: Some(tool.into()), ..ClipConfig::new(300) };
        let out = clip_text(&log_output(100_000), &config, ActionKind::FileRead, REFERENCE, &Estimate).unwrap();
        assert!(out.contains(&format!("call {tool} with this ref for the full output; ref {REFERENCE}]")), "{out}");
        assert!(!out.contains("re-read the file"));
    }
}

/// Every corpus session as (file name, conversation), or `None` (with a notice).
fn corpus() -> Option<Vec<(String, Conversation)>> {
    let dir = crate::common::corpus_dir()?;
    let mut paths: Vec<_> =
        std::fs::read_dir(&dir).expect("a readable corpus").map(|entry| entry.expect("an entry").path()).collect();
    paths.sort();
    let sessions: Vec<_> = paths
        .into_iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "json") && !path.ends_with("manifest.json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable session");
            let parsed = format::parse(&text, None).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            (path.file_name().unwrap().to_string_lossy().into_owned(), parsed.conversation)
        })
        .collect();
    assert!(!sessions.is_empty(), "the corpus directory {} holds no sessions", dir.display());
    Some(sessions)
}

#[test]
fn corpus_sessions_clip_within_the_limit_and_stay_valid() {
    let Some(sessions) = corpus() else { return };
    let config = ClipConfig::new(500);
    let (mut results, mut sessions_clipped) = (0, 0);
    for (name, original) in &sessions {
        for counter in counters() {
            let mut conversation = original.clone();
            let clipped = clip(&mut conversation, &config, counter);
            assert_eq!(validate(&conversation), validate(original), "{name}: clipping changed validity");
            for item in &clipped {
                let block = &conversation.messages[item.message].content[item.block];
                assert!(
                    count_block(counter, block) <= 500 + BLOCK_OVERHEAD,
                    "{name}: block {}/{} holds {} tokens",
                    item.message,
                    item.block,
                    count_block(counter, block)
                );
                let Block::ToolResult(before) = &original.messages[item.message].content[item.block] else {
                    panic!("{name}: only tool results are clipped")
                };
                let payload = match &before.content {
                    Some(ToolResultContent::Text(text)) => Value::String(text.clone()),
                    Some(ToolResultContent::Blocks(blocks)) => {
                        Value::Array(blocks.iter().map(Block::to_value).collect())
                    }
                    None => panic!("{name}: an empty result was clipped"),
                };
                assert_eq!(item.reference, payload_ref(&payload), "{name}");
                assert_eq!(item.payload, payload, "{name}");
                assert!(item.tokens_before > 500 + BLOCK_OVERHEAD);
            }
            let once = conversation.clone();
            assert!(clip(&mut conversation, &config, counter).is_empty(), "{name}: clipping twice reports nothing");
            assert_eq!(conversation, once, "{name}: clipping twice changes nothing");
            if counter.name() == "estimate" {
                results += clipped.len();
                sessions_clipped += usize::from(!clipped.is_empty());
            }
        }
    }
    println!("clipped {results} results in {sessions_clipped} of {} corpus sessions (estimate, 500)", sessions.len());
    assert!(results > 0, "the corpus has tool results over 500 tokens");
}

#[test]
fn the_recall_tools_own_answers_are_never_clipped() {
    let mut conversation = conversation_with(&[log_output(100_000), log_output(100_000)]);
    if let Block::ToolUse(call) = &mut conversation.messages[3].content[0] {
        call.name = "mcp__contextfold__context_recall".into();
    }
    let config = ClipConfig { recall_tool: Some("mcp__contextfold__context_recall".into()), ..ClipConfig::new(300) };
    let clipped = clip(&mut conversation, &config, &Estimate);
    assert_eq!(clipped.iter().map(|item| item.message).collect::<Vec<_>>(), [2], "the Bash output only");
    let Block::ToolResult(answer) = &conversation.messages[4].content[0] else { panic!("a result") };
    assert_eq!(answer.text(), log_output(100_000), "the recall's answer as it came");
}
