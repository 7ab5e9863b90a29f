//! The OpenAI reader and writer, case by case.

use super::*;
use crate::conversation::{Block, Role, System};
use crate::format::lost::LossKind;
use crate::validate::validate;

fn reads(value: Value) -> Conversation {
    from_value(value).expect("reads")
}

#[test]
fn leading_system_messages_join_and_later_ones_become_user_text() {
    let conversation = reads(json!([
        {"role": "system", "content": "one"},
        {"role": "developer", "content": [{"type": "text", "text": "two"}]},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "mode changed"},
        {"role": "user", "content": "go on"}
    ]));
    assert_eq!(conversation.system, Some(System::Text("one\n\ntwo".into())));
    assert_eq!(conversation.messages.len(), 3);
    let texts: Vec<_> = conversation.messages[2].content.iter().filter_map(Block::as_text).collect();
    assert_eq!(texts, ["mode changed", "go on"]);
    assert!(validate(&conversation).is_empty());
}

#[test]
fn a_later_system_message_where_anthropic_allows_one_stays_a_system_message() {
    let (conversation, lost) = read(json!([
        {"role": "user", "content": "hi"},
        {"role": "developer", "content": "mode changed", "name": "harness"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "go on"},
        {"role": "system", "content": "between two user messages"},
        {"role": "user", "content": "more"}
    ]))
    .expect("reads");
    assert_eq!(conversation.messages.len(), 4);
    assert_eq!(conversation.messages[1].role, Role::System);
    assert_eq!(conversation.messages[1].extra.get("name"), Some(&json!("harness")));
    let texts: Vec<_> = conversation.messages[3].content.iter().filter_map(Block::as_text).collect();
    assert_eq!(texts, ["go on", "between two user messages", "more"]);
    assert!(validate(&conversation).is_empty(), "{:?}", validate(&conversation));
    let kinds: Vec<_> = lost.iter().map(|loss| (loss.kind, loss.count)).collect();
    assert_eq!(kinds, [(LossKind::DeveloperRole, 1), (LossKind::SystemAsUser, 1)]);
    // Written back, the system message is where it was.
    let written = to_value(&conversation);
    assert_eq!(written["messages"][1], json!({"role": "system", "content": "mode changed", "name": "harness"}));
}

#[test]
fn what_openai_cannot_carry_is_counted() {
    let conversation = Conversation::from_value(json!({
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Read", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t1", "signature": "s1"},
                {"type": "thinking", "thinking": "t2", "signature": "s2"},
                {"type": "redacted_thinking", "data": "x"},
                {"type": "tool_use", "id": "c1", "name": "Read", "input": {}, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "after the call"}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "c1", "is_error": true, "content": [
                    {"type": "text", "text": "1"}, {"type": "text", "text": "2"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
                ]},
                {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"}}
            ]}
        ]
    }))
    .unwrap();
    let (_, lost) = write(&conversation);
    let kinds: Vec<_> = lost.iter().map(|loss| (loss.kind, loss.count)).collect();
    assert_eq!(
        kinds,
        [
            (LossKind::ThinkingSignature, 2),
            (LossKind::RedactedThinking, 1),
            (LossKind::ErrorFlag, 1),
            (LossKind::BlockFields, 1),
            (LossKind::ToolCallOrder, 1),
            (LossKind::ThinkingJoined, 1),
            (LossKind::SystemBlocks, 2),
            (LossKind::ResultBlocksJoined, 1),
            (LossKind::ResultMediaMoved, 1),
            (LossKind::ToolDefinitionFields, 1),
            (LossKind::PassedThrough, 1),
        ]
    );
    let sentence = lost.iter().find(|loss| loss.kind == LossKind::SystemBlocks).map(ToString::to_string);
    assert_eq!(sentence.as_deref(), Some("the block structure of the system prompt (2 blocks joined into one text)"));
    // An Anthropic request read from what OpenAI wrote loses nothing more on the way back.
    let (_, lost) = read(to_value(&conversation)).expect("reads");
    assert!(lost.is_empty(), "{lost:?}");
}

#[test]
fn an_empty_user_message_that_is_not_written_is_counted() {
    let conversation = Conversation::from_value(json!([
        {"role": "user", "content": []}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}
    ]))
    .unwrap();
    let (written, lost) = write(&conversation);
    assert_eq!(written["messages"].as_array().map(Vec::len), Some(2));
    let kinds: Vec<_> = lost.iter().map(|loss| (loss.kind, loss.count)).collect();
    assert_eq!(kinds, [(LossKind::EmptyUserMessage, 1)]);
}

#[test]
fn tool_messages_and_following_user_message_merge_results_first() {
    let conversation = reads(json!([
        {"role": "user", "content": "read a and b"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "read", "arguments": ""}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "B"}]},
        {"role": "user", "content": "thanks"}
    ]));
    assert_eq!(conversation.messages.len(), 3);
    let kinds: Vec<_> = conversation.messages[2].content.iter().map(Block::kind).collect();
    assert_eq!(kinds, ["tool_result", "tool_result", "text"]);
    let Block::ToolUse(second) = &conversation.messages[1].content[1] else {
        panic!("expected a tool_use");
    };
    assert_eq!(second.input, json!({}), "empty arguments read as an empty object");
    assert!(validate(&conversation).is_empty());
}

#[test]
fn arguments_that_are_not_json_are_kept_as_a_string_and_written_back_verbatim() {
    let conversation = reads(json!([
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "sh", "arguments": "{not json"}}
        ]}
    ]));
    let Block::ToolUse(call) = &conversation.messages[1].content[0] else {
        panic!("expected a tool_use first (empty content is no block)");
    };
    assert_eq!(call.input, json!("{not json"));
    let written = to_value(&conversation);
    assert_eq!(written["messages"][1]["tool_calls"][0]["function"]["arguments"], json!("{not json"));
    assert_eq!(written["messages"][1]["content"], Value::Null);
}

#[test]
fn reasoning_content_becomes_leading_unsigned_thinking() {
    let conversation = reads(json!([
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "answer", "reasoning_content": "because"}
    ]));
    let content = &conversation.messages[1].content;
    assert!(matches!(&content[0], Block::Thinking(t) if t.thinking == "because" && t.signature.is_none()));
    assert_eq!(content[1].as_text(), Some("answer"));
}

#[test]
fn image_urls_map_to_sources_and_back() {
    let conversation = reads(json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    ]}]));
    let sources: Vec<_> = conversation.messages[0]
        .content
        .iter()
        .map(|block| match block {
            Block::Image(media) => media.source.clone(),
            other => panic!("expected an image, found {other:?}"),
        })
        .collect();
    assert_eq!(
        sources,
        [
            json!({"type": "base64", "media_type": "image/png", "data": "AAAA"}),
            json!({"type": "url", "url": "https://example.com/a.png"}),
        ]
    );
    let written = to_value(&conversation);
    assert_eq!(
        written["messages"][0]["content"][0],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
    );
    assert_eq!(written["messages"][0]["content"][1]["image_url"]["url"], json!("https://example.com/a.png"));
}

#[test]
fn tool_results_become_tool_messages_before_the_rest_and_images_follow() {
    let conversation = Conversation::from_value(json!({"system": [{"type": "text", "text": "sys"}], "messages": [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "text", "text": "shooting"},
            {"type": "tool_use", "id": "t1", "name": "shot", "input": {"a": 1}}
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": true, "content": [
                {"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QQ=="}}
            ]},
            {"type": "text", "text": "and?"}
        ]}
    ]}))
    .unwrap();
    let written = to_value(&conversation);
    assert_eq!(
        written["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": "shooting", "reasoning_content": "hm", "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "shot", "arguments": "{\"a\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "t1", "content": "line 1\nline 2"},
            {"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QQ=="}},
                {"type": "text", "text": "and?"}
            ]}
        ])
    );
    let back = from_value(written).unwrap();
    assert_eq!(back.messages.len(), 3);
    let kinds: Vec<_> = back.messages[2].content.iter().map(Block::kind).collect();
    assert_eq!(kinds, ["tool_result", "image", "text"]);
    assert!(validate(&back).is_empty());
}

#[test]
fn tools_convert_both_ways() {
    let openai = json!([
        {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object"}, "strict": true}},
        {"type": "function", "function": {"name": "now"}}
    ]);
    let conversation = reads(json!({"model": "m", "tool_choice": "auto", "messages": [], "tools": openai}));
    assert_eq!(
        conversation.tools,
        Some(vec![
            json!({"name": "read", "description": "Read a file", "input_schema": {"type": "object"}, "strict": true}),
            json!({"name": "now", "input_schema": {"type": "object", "properties": {}}}),
        ])
    );
    assert_eq!(conversation.extra.get("tool_choice"), Some(&json!("auto")));
    let written = to_value(&conversation);
    assert_eq!(written["tools"][0], openai[0]);
    assert_eq!(written["tools"][1]["function"]["parameters"], json!({"type": "object", "properties": {}}));
    assert_eq!(written["model"], json!("m"));
}

#[test]
fn legacy_function_calls_pair_with_function_messages() {
    let conversation = reads(json!({"functions": [{"name": "f", "parameters": {"type": "object"}}], "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": null, "function_call": {"name": "f", "arguments": "{}"}},
        {"role": "function", "name": "f", "content": "done"}
    ]}));
    assert!(validate(&conversation).is_empty());
    assert_eq!(conversation.messages[1].tool_use_ids().collect::<Vec<_>>(), ["call_legacy_1"]);
    assert_eq!(conversation.tools.as_ref().map(Vec::len), Some(1));
    let err = from_value(json!([{"role": "user", "content": "x"}, {"role": "function", "name": "f", "content": "y"}]))
        .unwrap_err();
    assert_eq!(err.to_string(), "message 1: a legacy `function` message answers no earlier `function_call`");
}

#[test]
fn errors_name_the_message() {
    let err = from_value(json!([{"role": "user", "content": "x"}, {"role": "critic", "content": "y"}])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "message 1: unknown role `critic` (expected system, developer, user, assistant or tool)"
    );
    let err = from_value(json!([{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}])).unwrap_err();
    assert_eq!(err.to_string(), "message 1: the tool message has no `tool_call_id`");
    let err = from_value(json!([{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {}}]}])).unwrap_err();
    assert_eq!(err.to_string(), "message 0, block 0: tool call 0 needs a string `name`");
    let err = from_value(json!([{"role": "user", "content": [{"type": "image_url"}]}])).unwrap_err();
    assert_eq!(err.to_string(), "message 0, block 0: an image_url part needs `image_url.url`");
    assert!(from_value(json!("text")).is_err());
}
