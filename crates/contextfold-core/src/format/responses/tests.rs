//! Tests of the Responses reader, writer and checks on small hand-made requests.

use super::*;
use crate::conversation::{Message, Role, ToolResult, ToolUse};
use crate::format::{self, Format, Layout as Shape};
use serde_json::json;

fn read(value: Value) -> Conversation {
    from_value(value).expect("reads")
}

/// Reads `value` and writes it back: the same JSON, key order included.
fn round_trip(value: Value) -> Conversation {
    let conversation = read(value.clone());
    let shape = if value.is_array() { Shape::Array } else { Shape::Object };
    let written = format::to_value(&conversation, Format::Responses, shape).unwrap();
    assert_eq!(
        serde_json::to_string(&written).unwrap(),
        serde_json::to_string(&value).unwrap(),
        "the round trip changed the request"
    );
    conversation
}

fn kinds(message: &Message) -> Vec<&str> {
    message.content.iter().map(Block::kind).collect()
}

#[test]
fn items_become_alternating_messages_and_pairs() {
    let conversation = round_trip(json!({
        "model": "gpt-5",
        "instructions": "be brief",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev rules"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}], "encrypted_content": "ENC"},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"command\": [\"ls\"]}"},
            {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": ""},
            {"type": "function_call_output", "call_id": "c1", "output": "a.rs"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "b.rs"}]},
            {"role": "assistant", "content": "two files"}
        ],
        "store": false
    }));
    let Some(System::Blocks(system)) = &conversation.system else { panic!("system blocks expected") };
    assert_eq!(system.iter().filter_map(Block::as_text).collect::<Vec<_>>(), ["be brief", "dev rules"]);
    assert_eq!(conversation.messages.len(), 4);
    assert_eq!(kinds(&conversation.messages[1]), ["thinking", "tool_use", "tool_use"]);
    assert_eq!(kinds(&conversation.messages[2]), ["tool_result", "tool_result"]);
    let Block::ToolUse(call) = &conversation.messages[1].content[1] else { panic!() };
    assert_eq!((call.id.as_str(), call.name.as_str(), &call.input), ("c1", "shell", &json!({"command": ["ls"]})));
    let Block::Thinking(thinking) = &conversation.messages[1].content[0] else { panic!() };
    assert_eq!((thinking.thinking.as_str(), thinking.signature.as_deref()), ("think", Some("ENC")));
    assert!(check(&conversation).is_empty(), "{:?}", check(&conversation));
}

#[test]
fn edited_blocks_keep_their_item_shape() {
    let mut conversation = read(json!({"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"arguments": "{\"path\": \"a\"}", "call_id": "c1", "name": "read", "type": "function_call", "id": "fc_1"},
        {"call_id": "c1", "output": "long output", "type": "function_call_output", "id": null},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "ok"}
    ]}));
    let Block::ToolResult(result) = &mut conversation.messages[2].content[0] else { panic!() };
    result.content = Some(ToolResultContent::Text("[offloaded]".into()));
    let Block::ToolUse(call) = &mut conversation.messages[1].content[0] else { panic!() };
    call.input = json!({"path": "b"});
    let Block::ToolUse(custom) = &conversation.messages[3].content[0] else { panic!() };
    assert_eq!(custom.input, json!({"input": "*** Begin Patch"}));
    let written = to_value(&conversation);
    assert_eq!(
        written["input"][1],
        json!({"arguments": "{\"path\":\"b\"}", "call_id": "c1", "name": "read", "type": "function_call", "id": "fc_1"})
    );
    assert_eq!(
        written["input"][2],
        json!({"call_id": "c1", "output": "[offloaded]", "type": "function_call_output", "id": null})
    );
    assert_eq!(written["input"][3]["input"], json!("*** Begin Patch"));
}

#[test]
fn blocks_without_a_skeleton_get_the_default_shapes() {
    let mut conversation = read(json!({"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
    ]}));
    conversation.messages[0].content.insert(0, Block::text("[summary]"));
    conversation.messages[1].content.push(Block::ToolUse(ToolUse {
        id: "t1".into(),
        name: "read".into(),
        input: json!({"a": 1}),
        extra: Default::default(),
    }));
    conversation.messages.push(Message::new(
        Role::User,
        vec![Block::ToolResult(ToolResult {
            tool_use_id: "t1".into(),
            content: Some(ToolResultContent::Text("x".into())),
            is_error: Some(true),
            extra: Default::default(),
        })],
    ));
    assert_eq!(
        items(&conversation),
        [
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[summary]"}]}),
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}),
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}),
            json!({"type": "function_call", "call_id": "t1", "name": "read", "arguments": "{\"a\":1}"}),
            json!({"type": "function_call_output", "call_id": "t1", "output": "x"}),
        ]
    );
}

#[test]
fn multi_part_messages_stay_one_item() {
    let conversation = round_trip(json!([
        {"type": "message", "role": "user", "id": "m1", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "detail": "high", "image_url": "data:image/png;base64,AAAA"},
            {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
            {"type": "input_file", "file_url": "https://example.com/a.pdf"}
        ]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and this"}]}
    ]));
    assert_eq!(kinds(&conversation.messages[0]), ["text", "image", "input_audio", "document", "text"]);
    let Block::Image(image) = &conversation.messages[0].content[1] else { panic!() };
    assert_eq!(image.source, json!({"type": "base64", "media_type": "image/png", "data": "AAAA"}));
}

#[test]
fn string_input_and_string_content_keep_their_shape() {
    round_trip(json!({"model": "m", "input": "hello"}));
    round_trip(json!({"input": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}));
    let conversation = read(json!({"input": "hello"}));
    let value = format::to_value(&conversation, Format::Responses, Shape::Array).unwrap();
    assert_eq!(value, json!("hello"));
}

#[test]
fn unknown_items_and_fields_survive_and_pair_nothing() {
    let conversation = round_trip(json!({"input": [
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "E"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q", "x": 1}], "extra": true},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
        {"type": "mystery", "data": [1]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a", "annotations": []}]},
        {"type": "local_shell_call", "id": "ls_1", "status": "completed", "action": {"type": "exec", "command": ["ls"]}},
        {"type": "local_shell_call_output", "id": "ls_1", "output": "a"}
    ], "unknown_top": {"k": "v"}}));
    assert_eq!(kinds(&conversation.messages[0]), ["compaction", "text"]);
    assert_eq!(kinds(&conversation.messages[1]), ["web_search_call", "mystery", "text", "tool_use"]);
    assert!(check(&conversation).is_empty(), "{:?}", check(&conversation));
}

#[test]
fn check_names_the_item_and_the_responses_rules() {
    let conversation = read(json!({"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c9", "output": "x"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "E"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hm"}]},
        {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"}
    ]}));
    let problems: Vec<String> = check(&conversation).iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        [
            "message 1, block 0: tool_use `c1` (shell) has no tool_result in message 2 (input item 1) [dangling-use]",
            "message 2, block 0: tool_result for `c9` answers no tool_use in the preceding assistant message (input item 2) [orphan-result]",
            "message 5, block 0: call `c2` (shell) has no output; the Responses API needs one for every call, the last included (input item 6) [dangling-use]",
            "message 3, block 0: a reasoning item must be followed by the message or call it produced (input item 4) [lone-reasoning]",
        ]
    );
}

#[test]
fn errors_name_the_item() {
    let err = |value: Value| from_value(value).unwrap_err().to_string();
    assert_eq!(err(json!({"model": "m"})), "top level: the object has no `input` array");
    assert_eq!(err(json!({"input": 3})), "top level: `input` must be an array or a string, found a number");
    assert_eq!(
        err(json!([{"role": "user", "content": "a"}, "x"])),
        "input item 1: an input item must be an object, found a string"
    );
    assert_eq!(
        err(json!([{"type": "function_call", "name": "f", "arguments": "{}"}])),
        "input item 0: the function_call item has no `call_id`"
    );
    assert_eq!(
        err(json!([{"type": "function_call", "call_id": 4, "name": "f"}])),
        "input item 0: function_call `call_id` must be a string, found a number"
    );
    assert_eq!(
        err(json!([{"type": "function_call", "call_id": "c"}])),
        "input item 0: the function_call item needs a string `name`"
    );
    assert_eq!(
        err(json!([{"type": "message", "role": "critic", "content": "x"}])),
        "input item 0: unknown role `critic` (expected user, assistant, system or developer)"
    );
    assert_eq!(err(json!([{"type": "message", "role": "user"}])), "input item 0: the message has no `content`");
    assert_eq!(
        err(json!([{"role": "user", "content": 1}])),
        "input item 0: `content` must be a string or an array of parts, found a number"
    );
    assert_eq!(
        err(json!([{"role": "user", "content": ["x"]}])),
        "input item 0: content part 0 must be an object, found a string"
    );
    assert_eq!(err(json!([{"id": "x"}])), "input item 0: the item has no `type`");
    assert_eq!(err(json!({"input": [], "tools": {}})), "top level: `tools` must be an array, found an object");
}

#[test]
fn detection_is_decisive() {
    assert!(looks_like_responses(&json!({"model": "m", "input": "hi"})));
    assert!(looks_like_responses(&json!([{"type": "function_call_output", "call_id": "c", "output": "x"}])));
    assert!(looks_like_responses(&json!([{"role": "user", "content": [{"type": "input_text", "text": "x"}]}])));
    assert!(!looks_like_responses(&json!({"messages": [], "input": "x"})));
    assert!(!looks_like_responses(&json!([{"role": "user", "content": [{"type": "text", "text": "x"}]}])));
    assert!(!looks_like_responses(&json!([{"role": "user", "content": "x"}])));
    assert_eq!(format::detect(r#"{"input": [], "model": "m"}"#), Ok(Format::Responses));
}

#[test]
fn portable_conversations_convert_to_the_other_formats() {
    let conversation = read(json!({
        "instructions": "sys",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hm"}], "encrypted_content": "E"},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.rs"}
        ],
        "tools": [{"type": "function", "name": "shell", "description": "run", "parameters": {"type": "object"}}]
    }));
    let anthropic = format::to_value(&conversation, Format::Anthropic, Shape::Object).unwrap();
    assert_eq!(
        anthropic,
        json!({
            "system": "sys",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "go"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm"},
                    {"type": "tool_use", "id": "c1", "name": "shell", "input": {"command": ["ls"]}}
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "a.rs"}]}
            ],
            "tools": [{"name": "shell", "description": "run", "input_schema": {"type": "object"}}]
        })
    );
    let chat = format::to_value(&conversation, Format::OpenAi, Shape::Object).unwrap();
    assert_eq!(chat["tools"][0]["function"]["parameters"], json!({"type": "object"}));
    assert_eq!(chat["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "a.rs"}));
    // And an Anthropic conversation written as Responses, then read back.
    let from_anthropic = Conversation::from_value(anthropic).unwrap();
    let responses = to_value(&from_anthropic);
    assert_eq!(responses["instructions"], json!("sys"));
    assert_eq!(
        responses["tools"][0],
        json!({"type": "function", "name": "shell", "description": "run", "parameters": {"type": "object"}})
    );
    let back = read(responses);
    assert_eq!(back.messages.len(), 3);
    assert_eq!(kinds(&back.messages[1]), ["tool_use"], "foreign thinking is not sent to OpenAI");
}
