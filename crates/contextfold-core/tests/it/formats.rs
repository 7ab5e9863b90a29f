//! The format readers and writers against real sessions and the repo's own small fixtures.
//!
//! Tests that read `../shared` (the corpus and third-party Claude Code logs) print a notice
//! and return when it is absent, so a fresh clone still passes; the fixtures under the repo's
//! `tests/fixtures/` are always tested.

// The core's clippy.toml forbids file I/O; reading fixtures is what these tests are for.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use contextfold_core::format::{self, openai, Format, Layout};
use contextfold_core::{validate, Block, Conversation, Problem, System};
use serde_json::{json, Value};
use std::io::Read;
use std::path::Path;

const OWN_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

/// The converted form of `mclaude-95f81cf4.jsonl` in the corpus.
const MCLAUDE_CONVERTED: &str = "claudecode-mclaude__95f81cf4-2300-4739-9018-2d0ff510912a.json";
/// The converted form of `general-tool-calls.jsonl` in the corpus.
const GENERAL_CONVERTED: &str = "claudecode-sessionshare__general-tool-calls.json";

/// Every corpus session as (file name, JSON text), or `None` (with a notice) when the corpus
/// is absent.
fn corpus() -> Option<Vec<(String, String)>> {
    let dir = crate::common::corpus_dir()?;
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("the corpus directory is readable")
        .map(|entry| entry.expect("a readable directory entry").path())
        .collect();
    paths.sort();
    let mut sessions = Vec::new();
    for path in paths {
        let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default().to_string();
        // manifest.json describes the sessions; it is not one.
        if name == "manifest.json" {
            continue;
        }
        let text = if name.ends_with(".json.gz") {
            let file = std::fs::File::open(&path).expect("a readable corpus file");
            let mut text = String::new();
            flate2::read::GzDecoder::new(file).read_to_string(&mut text).expect("a gzip-compressed UTF-8 session");
            text
        } else if name.ends_with(".json") {
            std::fs::read_to_string(&path).expect("a readable UTF-8 session")
        } else {
            continue;
        };
        sessions.push((name, text));
    }
    assert!(!sessions.is_empty(), "the corpus directory {} holds no sessions", dir.display());
    Some(sessions)
}

fn corpus_session(name: &str) -> Option<Value> {
    let path = crate::common::corpus_dir()?.join(name);
    assert!(path.is_file(), "the corpus has no session {}", path.display());
    let text = std::fs::read_to_string(path).expect("a readable session");
    Some(serde_json::from_str(&text).expect("a JSON session"))
}

fn claude_code_log(name: &str) -> Option<String> {
    let path = crate::common::shared(&format!("fixtures/claude-code/{name}"))?;
    Some(std::fs::read_to_string(path).expect("a readable UTF-8 log"))
}

fn own_fixture(name: &str) -> String {
    let path = Path::new(OWN_FIXTURES).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The tool traffic of one message, in order.
#[derive(Debug, PartialEq)]
enum Call<'a> {
    Use { id: &'a str, name: &'a str, input: &'a Value },
    Result { id: &'a str },
}

fn calls(conversation: &Conversation) -> Vec<Vec<Call<'_>>> {
    conversation
        .messages
        .iter()
        .map(|message| {
            message
                .content
                .iter()
                .filter_map(|block| match block {
                    Block::ToolUse(tool_use) => {
                        Some(Call::Use { id: &tool_use.id, name: &tool_use.name, input: &tool_use.input })
                    }
                    Block::ToolResult(result) => Some(Call::Result { id: &result.tool_use_id }),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Every tool call as (id, name), in conversation order.
fn tool_calls(conversation: &Conversation) -> Vec<(String, String)> {
    conversation
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolUse(tool_use) => Some((tool_use.id.clone(), tool_use.name.clone())),
            _ => None,
        })
        .collect()
}

fn shapes(conversation: &Conversation) -> Vec<String> {
    conversation
        .messages
        .iter()
        .map(|message| {
            let kinds: Vec<&str> = message.content.iter().map(Block::kind).collect();
            format!("{}: {}", message.role.as_str(), kinds.join(" "))
        })
        .collect()
}

fn problems(conversation: &Conversation) -> Vec<String> {
    validate(conversation).iter().map(Problem::to_string).collect()
}

#[test]
fn corpus_sessions_read_as_anthropic_and_write_back_unchanged() {
    let Some(sessions) = corpus() else { return };
    for (name, text) in &sessions {
        assert_eq!(format::detect(text), Ok(Format::Anthropic), "{name}");
        let parsed = format::parse(text, None).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(parsed.format, Format::Anthropic, "{name}");
        assert!(parsed.notes.is_empty(), "{name}: {:?}", parsed.notes);
        let input: Value = serde_json::from_str(text).expect("JSON");
        for key in ["source", "agent", "meta"] {
            assert!(parsed.conversation.extra.contains_key(key), "{name}: `{key}` is kept");
        }
        let written = format::to_value(&parsed.conversation, Format::Anthropic, parsed.layout).expect("writable");
        assert!(written == input, "{name}: the Anthropic round trip changed the session");
    }
    println!("checked {} corpus sessions: Anthropic read/write is lossless", sessions.len());
}

#[test]
fn corpus_sessions_survive_a_trip_through_openai() {
    let Some(sessions) = corpus() else { return };
    let mut with_problems = 0;
    for (name, text) in &sessions {
        let anthropic =
            format::parse(text, Some(Format::Anthropic)).unwrap_or_else(|err| panic!("{name}: {err}")).conversation;
        let written = format::write(&anthropic, Format::OpenAi, Layout::Object).expect("writable");
        assert_eq!(format::detect(&written), Ok(Format::OpenAi), "{name}: a system message marks it OpenAI");
        let back = format::parse(&written, Some(Format::OpenAi))
            .unwrap_or_else(|err| panic!("{name}: the OpenAI form does not read back: {err}"))
            .conversation;
        assert_eq!(back.messages.len(), anthropic.messages.len(), "{name}: message count");
        for (index, (before, after)) in calls(&anthropic).iter().zip(calls(&back).iter()).enumerate() {
            assert_eq!(before, after, "{name}: tool traffic of message {index}");
        }
        let roles_before: Vec<_> = anthropic.messages.iter().map(|message| message.role).collect();
        let roles_after: Vec<_> = back.messages.iter().map(|message| message.role).collect();
        assert_eq!(roles_before, roles_after, "{name}: roles");
        let system_before = anthropic.system.as_ref().map(System::text);
        assert_eq!(back.system.as_ref().map(System::text), system_before, "{name}: system prompt");
        // One session reuses tool ids across turns (validate reports duplicate ids for it), so
        // the round trip must keep the problems, not clear them.
        let problems_before = problems(&anthropic);
        assert_eq!(problems(&back), problems_before, "{name}: validation changed");
        if !problems_before.is_empty() {
            with_problems += 1;
        }
    }
    println!(
        "checked {} corpus sessions through OpenAI and back ({with_problems} with the same validation problems before and after)",
        sessions.len()
    );
}

#[test]
fn claude_code_fixtures_import_valid_conversations() {
    for name in ["general-tool-calls.jsonl", "images-in-tool-results.jsonl", "mclaude-95f81cf4.jsonl"] {
        let Some(log) = claude_code_log(name) else {
            return;
        };
        assert_eq!(format::detect(&log), Ok(Format::ClaudeCode), "{name}");
        let parsed = format::parse(&log, None).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(parsed.format, Format::ClaudeCode);
        assert!(
            validate(&parsed.conversation).is_empty(),
            "{name}: {:#?}\nnotes: {:#?}",
            problems(&parsed.conversation),
            parsed.notes
        );
        assert!(parsed.conversation.messages.iter().all(|message| message.extra.is_empty()));
        // An importable request: it writes as Anthropic and as OpenAI.
        format::write(&parsed.conversation, Format::Anthropic, Layout::Object).expect("writable");
        format::write(&parsed.conversation, Format::OpenAi, Layout::Object).expect("writable");
    }
}

#[test]
fn mclaude_import_reports_lost_lines_and_keeps_the_converted_sessions_tool_calls() {
    let Some(log) = claude_code_log("mclaude-95f81cf4.jsonl") else {
        return;
    };
    let (conversation, notes) = format::claude_code::parse(&log).expect("imports");
    let invalid: Vec<&String> = notes.iter().filter(|note| note.contains("skipped: invalid JSON")).collect();
    assert!(
        invalid.first().is_some_and(|note| note.starts_with("line 26: skipped: invalid JSON at column ")),
        "{notes:#?}"
    );
    assert!(
        notes.iter().any(|note| note.contains("2 `system`") && note.contains("8 `file-history-snapshot`")),
        "{notes:#?}"
    );
    let Some(converted) = corpus_session(MCLAUDE_CONVERTED) else {
        return;
    };
    // The separate converter counted the same unreadable lines.
    assert_eq!(Some(invalid.len() as u64), converted["meta"]["notes"]["unparseable_lines_skipped"].as_u64());
    let converted = Conversation::from_value(converted).expect("an Anthropic session");
    assert_eq!(tool_calls(&conversation), tool_calls(&converted));
    assert!(!tool_calls(&conversation).is_empty());
}

#[test]
fn general_tool_calls_import_has_every_tool_call() {
    let Some(log) = claude_code_log("general-tool-calls.jsonl") else {
        return;
    };
    let parsed = format::parse(&log, None).expect("imports");
    let imported = tool_calls(&parsed.conversation);
    // The log holds 110 tool_use blocks but 65 distinct ids: from line 355 a resumed session
    // re-logs the first part under new uuids (with the original timestamps). 65 is also the
    // `n_tool_calls` of the corpus's converted form.
    assert_eq!(imported.len(), 65);
    let Some(converted) = corpus_session(GENERAL_CONVERTED) else {
        return;
    };
    assert_eq!(converted["meta"]["n_tool_calls"], json!(65));
    let converted = Conversation::from_value(converted).expect("an Anthropic session");
    assert_eq!(imported, tool_calls(&converted));
}

#[test]
fn an_image_inside_a_tool_result_survives_the_import() {
    let Some(log) = claude_code_log("images-in-tool-results.jsonl") else {
        return;
    };
    let parsed = format::parse(&log, None).expect("imports");
    let images_in_results = parsed
        .conversation
        .messages
        .iter()
        .flat_map(|message| &message.content)
        .filter_map(|block| match block {
            Block::ToolResult(result) => match &result.content {
                Some(contextfold_core::ToolResultContent::Blocks(blocks)) => {
                    Some(blocks.iter().filter(|block| matches!(block, Block::Image(_))).count())
                }
                _ => None,
            },
            _ => None,
        })
        .sum::<usize>();
    assert_eq!(images_in_results, 1);
    // The log starts with the assistant; repair says what it put first.
    assert!(!parsed.notes.is_empty(), "repair's fix is reported");
}

#[test]
fn small_claude_code_log_imports_exactly() {
    let log = own_fixture("claude-code-small.jsonl");
    assert_eq!(format::detect(&log), Ok(Format::ClaudeCode));
    let parsed = format::parse(&log, None).expect("imports");
    let conversation = &parsed.conversation;
    assert_eq!(
        shapes(conversation),
        [
            "user: text",
            "assistant: thinking text tool_use tool_use",
            "user: tool_result tool_result",
            "assistant: text",
            "user: text",
            "assistant: text",
        ]
    );
    assert_eq!(
        tool_calls(conversation),
        [("toolu_01".to_string(), "Bash".to_string()), ("toolu_02".to_string(), "Read".to_string())]
    );
    // Results stay in log order (toolu_02 was logged first); the API does not need call order.
    assert_eq!(calls(conversation)[2], [Call::Result { id: "toolu_02" }, Call::Result { id: "toolu_01" }]);
    assert_eq!(conversation.messages[5].content[0].as_text(), Some("API Error: Request was aborted."));
    assert!(conversation.system.is_none() && conversation.tools.is_none() && conversation.extra.is_empty());
    assert!(validate(conversation).is_empty(), "{:#?}", problems(conversation));
    assert_eq!(
        parsed.notes,
        [
            "line 11: skipped: invalid JSON at column 266: the text ends inside a string (a `\"` is never closed; is the file cut short?)",
            "skipped records that are not messages: 1 `file-history-snapshot`, 1 `summary`",
            "skipped 1 duplicate records (a `uuid` seen before)",
            "skipped 1 re-logged records (blocks logged before with the same timestamp: a resumed session \
         repeats its history)",
            "skipped 1 sidechain (subagent) records",
        ]
    );
}

#[test]
fn small_openai_request_reads_and_writes_back_unchanged() {
    let text = own_fixture("openai-small.json");
    let input: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(format::detect(&text), Ok(Format::OpenAi));
    let parsed = format::parse(&text, None).expect("reads");
    let conversation = &parsed.conversation;
    assert_eq!(conversation.system, Some(System::Text("You are a coding agent working in /home/dev/demo.".into())));
    assert_eq!(
        shapes(conversation),
        [
            "user: text image",
            "assistant: thinking tool_use tool_use",
            "user: tool_result tool_result",
            "assistant: text",
            "user: text",
        ]
    );
    assert_eq!(
        calls(conversation)[1],
        [
            Call::Use { id: "call_ls", name: "run_shell", input: &json!({"command": "ls src"}) },
            Call::Use { id: "call_readme", name: "read_file", input: &json!({"path": "README.md"}) },
        ]
    );
    let Block::Image(image) = &conversation.messages[0].content[1] else {
        panic!("expected an image block");
    };
    assert_eq!(image.source["type"], json!("base64"));
    assert_eq!(image.source["media_type"], json!("image/png"));
    assert_eq!(
        conversation.tools.as_ref().map(|tools| tools[0]["input_schema"]["required"].clone()),
        Some(json!(["command"]))
    );
    assert_eq!(conversation.extra.get("parallel_tool_calls"), Some(&json!(true)));
    assert!(validate(conversation).is_empty(), "{:#?}", problems(conversation));
    // The fixture is in the writer's canonical form, so the round trip is exact.
    assert_eq!(openai::to_value(conversation), input);
    // And as Anthropic it reads back to the same conversation.
    let anthropic = format::write(conversation, Format::Anthropic, Layout::Object).expect("writable");
    let again = format::parse(&anthropic, None).expect("reads");
    assert_eq!(again.format, Format::Anthropic);
    assert_eq!(calls(&again.conversation), calls(conversation));
}

/// Hardening 20: detection decides from decisive markers before role names. An Anthropic
/// body with a top-level `system`, typed blocks and a mid-conversation system message was
/// read as OpenAI (system 0 tokens, 3 of 5 messages). Every fixture and corpus file must be
/// detected as what it is, with and without a system message inserted mid-way.
#[test]
fn hardening_20_detection_names_every_fixture_and_corpus_file() {
    let mut files: Vec<(String, String, Format)> = Vec::new();
    let own = |name: &str, format| (name.to_string(), own_fixture(name), format);
    files.push(own("openai-small.json", Format::OpenAi));
    files.push(own("claude-code-small.jsonl", Format::ClaudeCode));
    files.push(own("swe-style.json", Format::Anthropic));
    for rule in [
        "alternation",
        "dangling-use",
        "duplicate-id",
        "empty-text",
        "first-not-user",
        "orphan-result",
        "result-not-first",
    ] {
        files.push(own(&format!("invalid/{rule}.json"), Format::Anthropic));
    }
    for name in ["missing-id.json", "no-messages.json", "unknown-role.json"] {
        files.push(own(&format!("malformed/{name}"), Format::Anthropic));
    }
    let example = Path::new(OWN_FIXTURES).join("../../examples/session.json");
    files.push((
        "examples/session.json".into(),
        std::fs::read_to_string(example).expect("the example"),
        Format::Anthropic,
    ));
    for name in ["general-tool-calls.jsonl", "images-in-tool-results.jsonl", "mclaude-95f81cf4.jsonl"] {
        if let Some(log) = claude_code_log(name) {
            files.push((name.into(), log, Format::ClaudeCode));
        }
    }
    if let Some(sessions) = corpus() {
        files.extend(sessions.into_iter().map(|(name, text)| (name, text, Format::Anthropic)));
    }
    let mut with_system = 0;
    for (name, text, format) in &files {
        assert_eq!(format::detect(text), Ok(*format), "{name}");
        // A mid-conversation system message after the first user message changes nothing.
        let Ok(mut value) = serde_json::from_str::<Value>(text) else { continue };
        let messages = match &mut value {
            Value::Array(messages) => messages,
            Value::Object(map) => match map.get_mut("messages").and_then(Value::as_array_mut) {
                Some(messages) => messages,
                None => continue,
            },
            _ => continue,
        };
        if messages.len() < 2 || messages[0]["role"] != "user" {
            continue;
        }
        messages.insert(1, json!({"role": "system", "content": "From now on, answer briefly."}));
        assert_eq!(format::detect(&value.to_string()), Ok(*format), "{name} with a system message");
        with_system += 1;
    }
    // The body of the report: top-level system blocks, tool blocks, one system message.
    let body = json!({
        "model": "claude-opus-4-8", "max_tokens": 32000,
        "system": [{"type": "text", "text": "x-anthropic-billing-header: cc"}, {"type": "text", "text": "You are Claude Code."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}]},
            {"role": "system", "content": "Plan mode is active."},
            {"role": "assistant", "content": [{"type": "text", "text": "Two files."}]}
        ]
    });
    let parsed = format::parse(&body.to_string(), None).expect("reads");
    assert_eq!(parsed.format, Format::Anthropic);
    assert_eq!(parsed.conversation.messages.len(), 5);
    assert!(matches!(&parsed.conversation.system, Some(System::Blocks(blocks)) if blocks.len() == 2));
    assert!(validate(&parsed.conversation).is_empty(), "{:?}", problems(&parsed.conversation));
    println!("detected {} files ({with_system} also with a system message inserted)", files.len());
}

/// Hardening 11: a lone surrogate escape (Node writes them into Claude Code logs) made the
/// whole file fail with "unexpected end of hex escape", and dropped the record in a log.
#[test]
fn hardening_11_lone_surrogates_read_as_replacement_characters_with_a_note() {
    let text = r#"{"messages": [{"role": "user", "content": "a \ud83d b"}]}"#;
    let parsed = format::parse(text, None).expect("reads");
    assert_eq!(parsed.conversation.messages[0].content[0].as_text(), Some("a \u{fffd} b"));
    assert_eq!(parsed.notes.len(), 1, "{:?}", parsed.notes);
    assert!(parsed.notes[0].contains("1 lone UTF-16 surrogate"), "{:?}", parsed.notes);
    let log = [
        json!({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "go"}}).to_string(),
        r#"{"type": "assistant", "uuid": "a1", "message": {"role": "assistant", "id": "m1", "content": [{"type": "text", "text": "cut \udc00 here"}]}}"#.to_string(),
    ]
    .join("\n");
    let parsed = format::parse(&log, None).expect("reads");
    assert_eq!(parsed.format, Format::ClaudeCode);
    assert_eq!(parsed.conversation.messages.len(), 2, "the record is kept: {:?}", parsed.notes);
    assert_eq!(parsed.conversation.messages[1].content[0].as_text(), Some("cut \u{fffd} here"));
    // A file that must be rejected says what is wrong in words, with its place.
    let err = format::parse("{\"messages\": [{\"role\": \"user\", \"content\": \"x \\u12\"}]}", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid JSON at line 1, column 51: a string holds a backslash escape JSON does not have \
         (a \\u escape takes four hex digits; a backslash itself is \\\\)"
    );
    let err = format::parse("{\"messages\": [\n", None).unwrap_err();
    assert!(
        err.to_string().ends_with("the text ends inside a list (a `[` is never closed; is the file cut short?)"),
        "{err}"
    );
}

/// A later system or developer item of a Responses request is a mid-conversation system
/// message where the rules allow one, user text elsewhere; either way it is written back
/// byte for byte.
#[test]
fn responses_system_items_are_system_messages_where_allowed() {
    let message = |role: &str, text: &str| json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]});
    let request = json!({"model": "gpt-5", "input": [
        message("user", "go"),
        message("developer", "plan mode"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        message("user", "more"),
        message("system", "between two user messages"),
        message("user", "and more")
    ]});
    let text = serde_json::to_string(&request).unwrap();
    let parsed = format::parse(&text, None).expect("reads");
    assert_eq!(parsed.format, Format::Responses);
    let roles: Vec<&str> = parsed.conversation.messages.iter().map(|message| message.role.as_str()).collect();
    assert_eq!(roles, ["user", "system", "assistant", "user"]);
    assert!(validate(&parsed.conversation).is_empty(), "{:?}", problems(&parsed.conversation));
    let written = format::to_value(&parsed.conversation, Format::Responses, parsed.layout).unwrap();
    assert_eq!(serde_json::to_string(&written).unwrap(), text);
}
