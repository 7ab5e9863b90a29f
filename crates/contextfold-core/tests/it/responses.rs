//! The Responses format: fixtures and generated item lists read and write back byte for
//! byte, and conversions between the formats keep every call paired with its result.

use crate::compaction::conversation_strategy;
use contextfold_core::format::{self, responses, Format, Layout};
use contextfold_core::{validate, Block, Conversation, Problem};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::path::Path;

const OWN_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

/// The repo's Responses fixtures, as (file name, text).
fn fixtures() -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = std::fs::read_dir(OWN_FIXTURES)
        .expect("the fixtures directory is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.contains("responses")))
        .map(|path| (file_name(&path), std::fs::read_to_string(&path).expect("a readable fixture")))
        .collect();
    found.sort();
    assert!(found.len() >= 2, "expected the Responses fixtures in {OWN_FIXTURES}, found {}", found.len());
    found
}

fn file_name(path: &Path) -> String {
    path.file_name().and_then(|name| name.to_str()).unwrap_or_default().to_string()
}

fn problems(conversation: &Conversation) -> Vec<String> {
    validate(conversation).iter().map(Problem::to_string).collect()
}

/// Every tool call and result in order, with the message it is in.
fn pairing(conversation: &Conversation) -> Vec<(usize, String, String)> {
    let mut found = Vec::new();
    for (index, message) in conversation.messages.iter().enumerate() {
        for block in &message.content {
            match block {
                Block::ToolUse(call) => {
                    found.push((index, format!("use {} {}", call.id, call.name), call.input.to_string()))
                }
                Block::ToolResult(result) => {
                    found.push((index, format!("result {}", result.tool_use_id), String::new()))
                }
                _ => {}
            }
        }
    }
    found
}

#[test]
fn fixtures_are_detected_and_written_back_byte_for_byte() {
    for (name, text) in fixtures() {
        assert_eq!(format::detect(&text), Ok(Format::Responses), "{name}");
        let parsed = format::parse(&text, None).unwrap_or_else(|err| panic!("{name}: {err}"));
        let written = format::write(&parsed.conversation, Format::Responses, parsed.layout).expect("writable");
        assert_eq!(written.trim_end(), text.trim_end(), "{name}: the round trip changed the file");
        let found: Vec<String> = responses::check(&parsed.conversation).iter().map(ToString::to_string).collect();
        assert!(found.is_empty(), "{name}: {found:#?}");
        assert!(!pairing(&parsed.conversation).is_empty(), "{name} has tool calls");
    }
}

#[test]
fn the_codex_fixture_reads_as_a_coding_session() {
    let text = std::fs::read_to_string(Path::new(OWN_FIXTURES).join("codex-responses.json")).expect("fixture");
    let conversation = format::parse(&text, None).expect("reads").conversation;
    let system = conversation.system.as_ref().map(|system| system.text()).unwrap_or_default();
    assert!(system.starts_with("You are Codex") && system.contains("<permissions instructions>"), "{system}");
    let shapes: Vec<String> = conversation
        .messages
        .iter()
        .map(|message| {
            let kinds: Vec<&str> = message.content.iter().map(Block::kind).collect();
            format!("{}: {}", message.role.as_str(), kinds.join(" "))
        })
        .collect();
    assert_eq!(
        shapes,
        [
            "user: text text text",
            "assistant: thinking tool_use",
            "user: tool_result",
            "assistant: tool_use",
            "user: tool_result",
            "assistant: thinking tool_use",
            "user: tool_result",
            "assistant: tool_use",
            "user: tool_result",
            "assistant: text",
            "user: text",
            "assistant: thinking tool_use tool_use",
            "user: tool_result tool_result",
        ]
    );
    let names: Vec<String> = pairing(&conversation)
        .into_iter()
        .filter(|(_, what, _)| what.starts_with("use"))
        .map(|(_, what, _)| what.rsplit(' ').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(names, ["shell", "shell", "apply_patch", "local_shell", "shell", "shell"]);
    // The tool presets see what each call does.
    let patch = conversation.messages[5].content.iter().find_map(|block| match block {
        Block::ToolUse(call) => Some(call),
        _ => None,
    });
    let action = contextfold_core::tools::classify(
        contextfold_core::tools::Preset::Codex,
        "apply_patch",
        &patch.expect("a call").input,
    );
    assert_eq!(action.target.as_deref(), Some("src/main.rs"));
}

#[test]
fn corpus_sessions_survive_a_trip_through_responses() {
    let Some(dir) = crate::common::corpus_dir() else { return };
    let (mut checked, mut valid) = (0, 0);
    for entry in std::fs::read_dir(dir).expect("a readable corpus") {
        let path = entry.expect("an entry").path();
        let name = file_name(&path);
        if !name.ends_with(".json") || name == "manifest.json" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a readable session");
        let anthropic = format::parse(&text, Some(Format::Anthropic)).expect("an Anthropic session").conversation;
        let written = format::write(&anthropic, Format::Responses, Layout::Object).expect("writable");
        assert_eq!(format::detect(&written), Ok(Format::Responses), "{name}");
        let back = format::parse(&written, None).unwrap_or_else(|err| panic!("{name}: {err}")).conversation;
        // An assistant message of nothing but (foreign) thinking is not sent to OpenAI, so
        // message indices may shift; the calls, their order and their pairing may not.
        let traffic = |conversation: &Conversation| -> Vec<(String, String)> {
            pairing(conversation).into_iter().map(|(_, what, input)| (what, input)).collect()
        };
        assert_eq!(traffic(&back), traffic(&anthropic), "{name}: tool traffic");
        if problems(&anthropic).is_empty() {
            assert_eq!(problems(&back), Vec::<String>::new(), "{name}: the Responses form is invalid");
            valid += 1;
        }
        checked += 1;
    }
    println!("checked {checked} corpus sessions through Responses and back ({valid} valid before and after)");
}

/// An object with `fields` in the given order.
fn object(fields: Vec<(String, Value)>) -> Value {
    Value::Object(fields.into_iter().collect::<Map<String, Value>>())
}

/// `fields` plus some unknown ones, in a shuffled order.
fn shuffled(fields: Vec<(&'static str, Value)>) -> impl Strategy<Value = Value> {
    let unknown = prop::collection::vec((0u8..4, any::<u8>()), 0..3);
    (Just(fields), unknown)
        .prop_flat_map(|(fields, unknown)| {
            let mut all: Vec<(String, Value)> =
                fields.into_iter().map(|(key, value)| (key.to_string(), value)).collect();
            for (key, value) in unknown {
                let key = format!("x_unknown_{key}");
                if !all.iter().any(|(existing, _)| *existing == key) {
                    all.push((key, json!({"n": value})));
                }
            }
            Just(all).prop_shuffle()
        })
        .prop_map(object)
}

fn text_strategy() -> impl Strategy<Value = String> {
    "[a-z ]{1,12}[a-z]".prop_map(String::from)
}

fn message_item(role: &'static str) -> impl Strategy<Value = Value> {
    let part = if role == "assistant" { "output_text" } else { "input_text" };
    let parts = prop::collection::vec(text_strategy(), 1..3).prop_flat_map(move |texts| {
        texts.into_iter().map(|text| shuffled(vec![("type", json!(part)), ("text", json!(text))])).collect::<Vec<_>>()
    });
    let content = prop_oneof![text_strategy().prop_map(Value::String), parts.prop_map(Value::Array)];
    content.prop_flat_map(move |content| {
        shuffled(vec![("type", json!("message")), ("role", json!(role)), ("content", content)])
    })
}

/// One call with its output (same `call_id`), of a random kind.
fn call_pair(id: String) -> impl Strategy<Value = (Value, Value)> {
    let function = (Just(id.clone()), any::<u8>(), any::<bool>()).prop_flat_map(|(id, n, spaced)| {
        let arguments = if spaced { format!("{{\"path\": \"f{n}.rs\"}}") } else { format!("{{\"path\":\"f{n}.rs\"}}") };
        (
            shuffled(vec![
                ("type", json!("function_call")),
                ("call_id", json!(id)),
                ("name", json!("read_file")),
                ("arguments", json!(arguments)),
            ]),
            shuffled(vec![
                ("type", json!("function_call_output")),
                ("call_id", json!(id)),
                ("output", json!(format!("text {n}"))),
            ]),
        )
    });
    let custom = Just(id.clone()).prop_flat_map(|id| {
        (
            shuffled(vec![
                ("type", json!("custom_tool_call")),
                ("call_id", json!(id)),
                ("name", json!("apply_patch")),
                ("input", json!("*** Begin Patch\n*** End Patch")),
            ]),
            shuffled(vec![
                ("type", json!("custom_tool_call_output")),
                ("call_id", json!(id)),
                ("output", json!([{"type": "input_text", "text": "Done."}])),
            ]),
        )
    });
    let shell = Just(id).prop_flat_map(|id| {
        (
            shuffled(vec![
                ("type", json!("local_shell_call")),
                ("call_id", json!(id)),
                ("status", json!("completed")),
                ("action", json!({"type": "exec", "command": ["ls"], "env": {}})),
            ]),
            shuffled(vec![
                ("type", json!("local_shell_call_output")),
                ("call_id", json!(id)),
                ("output", json!("a\nb")),
            ]),
        )
    });
    prop_oneof![3 => function, 1 => custom, 1 => shell]
}

/// A well-formed Responses item list: turns of a user message, then tool cycles (reasoning,
/// parallel calls, their outputs), then an assistant message; unknown items here and there.
fn items_strategy() -> impl Strategy<Value = Vec<Value>> {
    let cycle = (any::<bool>(), 1usize..4, any::<bool>());
    let turn = (prop::collection::vec(cycle, 0..4), any::<bool>(), prop::bool::weighted(0.2));
    (prop::bool::weighted(0.3), prop::collection::vec(turn, 1..4)).prop_flat_map(|(compaction, turns)| {
        let mut parts: Vec<BoxedStrategy<Vec<Value>>> = Vec::new();
        if compaction {
            parts.push(Just(vec![json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "ENC"})]).boxed());
        }
        let mut next = 0;
        for (cycles, final_text, unknown) in turns {
            parts.push(message_item("user").prop_map(|item| vec![item]).boxed());
            for (reasoning, calls, reversed) in cycles {
                let ids: Vec<String> = (0..calls).map(|_| {
                    next += 1;
                    format!("call_{next}")
                }).collect();
                let pairs: Vec<_> = ids.into_iter().map(call_pair).collect();
                parts.push(
                    pairs
                        .prop_map(move |pairs| {
                            let mut items = Vec::new();
                            if reasoning {
                                items.push(json!({"type": "reasoning", "id": "rs_x", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "gAAAA"}));
                            }
                            let (calls, mut outputs): (Vec<Value>, Vec<Value>) = pairs.into_iter().unzip();
                            if reversed {
                                outputs.reverse();
                            }
                            items.extend(calls);
                            items.extend(outputs);
                            items
                        })
                        .boxed(),
                );
            }
            if unknown {
                parts.push(Just(vec![json!({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}})]).boxed());
            }
            if final_text {
                parts.push(message_item("assistant").prop_map(|item| vec![item]).boxed());
            }
        }
        parts.prop_map(|parts| parts.into_iter().flatten().collect())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn generated_items_round_trip_byte_for_byte(items in items_strategy()) {
        let request = json!({"model": "gpt-5", "instructions": "be careful", "input": items, "store": false});
        let text = serde_json::to_string(&request).unwrap();
        prop_assert_eq!(format::detect(&text), Ok(Format::Responses));
        let parsed = format::parse(&text, None).unwrap();
        let written = format::to_value(&parsed.conversation, Format::Responses, parsed.layout).unwrap();
        prop_assert_eq!(serde_json::to_string(&written).unwrap(), text);
        let found: Vec<String> = responses::check(&parsed.conversation).iter().map(ToString::to_string).collect();
        prop_assert!(found.is_empty(), "{:#?}", found);
    }

    #[test]
    fn conversions_keep_every_pair(conversation in conversation_strategy()) {
        let before = pairing(&conversation);
        let problems_before = problems(&conversation);
        for target in [Format::OpenAi, Format::Responses] {
            let written = format::write(&conversation, target, Layout::Object).unwrap();
            let back = format::parse(&written, Some(target)).unwrap().conversation;
            prop_assert_eq!(&pairing(&back), &before, "{} changed the tool traffic", target);
            prop_assert_eq!(&problems(&back), &problems_before, "{} changed the validation", target);
            // And the way back to Anthropic keeps them too.
            let anthropic = format::write(&back, Format::Anthropic, Layout::Object).unwrap();
            let again = format::parse(&anthropic, Some(Format::Anthropic)).unwrap().conversation;
            prop_assert_eq!(&pairing(&again), &before, "{} -> anthropic changed the tool traffic", target);
        }
    }
}

/// JSON shaped like Responses items, often broken: an item `type` (and `role`), content
/// parts, and any of the fields the reader looks at, each with a value of any kind.
fn arbitrary_item() -> impl Strategy<Value = Value> {
    const KEYS: &[&str] = &[
        "call_id",
        "id",
        "name",
        "arguments",
        "input",
        "output",
        "text",
        "summary",
        "encrypted_content",
        "action",
        "operation",
        "image_url",
        "file_id",
        "file_data",
        "file_url",
        "status",
        "content",
        "role",
        "type",
    ];
    const TYPES: &[&str] = &[
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "apply_patch_call_output",
        "computer_call",
        "reasoning",
        "compaction",
        "web_search_call",
        "mystery",
    ];
    const WORDS: &[&str] = &[
        "user",
        "assistant",
        "developer",
        "system",
        "input_text",
        "output_text",
        "input_image",
        "input_file",
        "refusal",
        "summary_text",
        "c1",
        "c2",
        "{\"a\":1}",
        "",
        "data:image/png;base64,AA",
        "https://e.x/a.png",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i8>().prop_map(|n| json!(n)),
        prop::sample::select(WORDS).prop_map(|word| json!(word)),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..4)
                .prop_map(|fields| object(fields.into_iter().map(|(key, value)| (key.to_string(), value)).collect())),
        ]
    });
    let part = (prop::sample::select(WORDS), prop::collection::vec((prop::sample::select(KEYS), value.clone()), 0..3))
        .prop_map(|(kind, fields)| {
            let mut all = vec![("type".to_string(), json!(kind)), ("text".to_string(), json!("t"))];
            all.extend(fields.into_iter().map(|(key, value)| (key.to_string(), value)));
            object(all)
        });
    let content =
        prop_oneof![Just(json!("hi")), prop::collection::vec(part, 0..3).prop_map(Value::Array), value.clone()];
    (
        prop::sample::select(TYPES),
        prop::sample::select(&["user", "assistant", "developer", "critic"][..]),
        content,
        prop::collection::vec((prop::sample::select(KEYS), value), 0..5),
    )
        .prop_flat_map(|(kind, role, content, fields)| {
            let mut all = vec![
                ("type", json!(kind)),
                ("role", json!(role)),
                ("content", content),
                ("call_id", json!("c1")),
                ("name", json!("f")),
            ];
            all.extend(fields);
            shuffled(all)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever the reader accepts, it writes back unchanged; the rest is an error, never a panic.
    #[test]
    fn any_input_is_read_losslessly_or_refused(items in prop::collection::vec(arbitrary_item(), 0..8), wrap in any::<bool>()) {
        let value = if wrap { json!({"model": "m", "input": items}) } else { Value::Array(items) };
        if let Ok(conversation) = responses::from_value(value.clone()) {
            let layout = if wrap { Layout::Object } else { Layout::Array };
            let written = format::to_value(&conversation, Format::Responses, layout).unwrap();
            prop_assert_eq!(serde_json::to_string(&written).unwrap(), serde_json::to_string(&value).unwrap());
            let _ = responses::check(&conversation);
            // Each message is written as the very items it was read from.
            let (_, spans) = responses::from_value_spanned(value.clone()).unwrap();
            let list = if wrap { value["input"].as_array().unwrap().clone() } else { value.as_array().unwrap().clone() };
            prop_assert_eq!(spans.messages.len(), conversation.messages.len());
            let mut next = spans.system;
            for (message, span) in conversation.messages.iter().zip(&spans.messages) {
                prop_assert_eq!(span.start, next);
                next = span.end;
                let alone = Conversation { messages: vec![message.clone()], ..Conversation::default() };
                prop_assert_eq!(&responses::items(&alone)[..], &list[span.clone()]);
            }
            prop_assert_eq!(next, list.len());
            // Another format can always be written.
            format::to_value(&conversation, Format::Anthropic, Layout::Object).unwrap();
            format::to_value(&conversation, Format::OpenAi, Layout::Object).unwrap();
        }
    }
}
