//! Canned OpenAI answers, shaped as the API sends them: Chat Completions objects and
//! `data:` chunk streams ending in `[DONE]`, Responses objects and their typed event streams.
#![allow(dead_code)]

use crate::mock::{Frame, Reply};
use serde_json::{json, Value};

/// One `data:` line of a Chat Completions stream.
fn chunk(data: &Value) -> Frame {
    Frame::Data(format!("data: {data}\n\n"))
}

/// `text` in pieces of at most `size` bytes, on char boundaries.
pub fn pieces(text: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut piece = String::new();
    for c in text.chars() {
        piece.push(c);
        if piece.len() >= size {
            out.push(std::mem::take(&mut piece));
        }
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

/// A streaming SSE reply of `frames`, as OpenAI sends it.
pub fn sse(frames: Vec<Frame>) -> Reply {
    Reply::Stream {
        status: 200,
        headers: vec![
            ("content-type".into(), "text/event-stream; charset=utf-8".into()),
            ("x-request-id".into(), "req_openai_stream".into()),
            ("openai-processing-ms".into(), "12".into()),
        ],
        frames,
        end: crate::mock::End::Complete,
    }
}

/// An error in OpenAI's shape.
pub fn error(status: u16, kind: &str, code: Option<&str>, message: &str) -> Reply {
    Reply::Json {
        status,
        headers: vec![("x-request-id".into(), "req_openai_error".into())],
        body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string(),
    }
}

/// Chat Completions answers.
pub mod chat {
    use super::*;

    /// A tool call of an assistant message.
    pub fn call(id: &str, name: &str, arguments: &Value) -> Value {
        json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments.to_string()}})
    }

    /// A whole completion whose message is `message`, whose usage counts `prompt_tokens`.
    pub fn completion(message: Value, finish_reason: &str, prompt_tokens: u64) -> Reply {
        Reply::Json {
            status: 200,
            headers: vec![("x-request-id".into(), "req_openai".into())],
            body: json!({
                "id": "chatcmpl-mock", "object": "chat.completion", "created": 1_767_225_600, "model": "gpt-4.1",
                "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 42, "total_tokens": prompt_tokens + 42},
                "system_fingerprint": "fp_mock"
            })
            .to_string(),
        }
    }

    fn delta(delta: Value, finish_reason: Option<&str>, include_usage: bool) -> Frame {
        let mut data = json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1_767_225_600,
            "model": "gpt-4.1", "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]});
        if include_usage {
            data["usage"] = Value::Null;
        }
        chunk(&data)
    }

    fn end(finish_reason: &str, include_usage: bool, prompt_tokens: u64) -> Vec<Frame> {
        let mut frames = vec![delta(json!({}), Some(finish_reason), include_usage)];
        if include_usage {
            frames.push(chunk(&json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk",
                "created": 1_767_225_600, "model": "gpt-4.1", "choices": [],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 42, "total_tokens": prompt_tokens + 42,
                    "prompt_tokens_details": {"cached_tokens": 0}}})));
        }
        frames.push(Frame::Data("data: [DONE]\n\n".into()));
        frames
    }

    /// A streamed text answer.
    pub fn text_stream(text: &str, include_usage: bool) -> Vec<Frame> {
        let mut frames = vec![delta(json!({"role": "assistant", "content": "", "refusal": null}), None, include_usage)];
        for piece in pieces(text, 6) {
            frames.push(delta(json!({"content": piece}), None, include_usage));
        }
        frames.extend(end("stop", include_usage, 1_200));
        frames
    }

    /// A streamed answer with parallel tool calls, each call's `arguments` arriving in
    /// fragments of a few bytes, the calls' fragments interleaved.
    pub fn tool_calls_stream(calls: &[Value], include_usage: bool, prompt_tokens: u64) -> Vec<Frame> {
        let mut frames = vec![delta(json!({"role": "assistant", "content": null}), None, include_usage)];
        let mut fragments: Vec<Vec<String>> = Vec::new();
        for (index, call) in calls.iter().enumerate() {
            let head = json!({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}]});
            frames.push(delta(head, None, include_usage));
            fragments.push(pieces(call["function"]["arguments"].as_str().unwrap_or_default(), 5));
        }
        let longest = fragments.iter().map(Vec::len).max().unwrap_or(0);
        for step in 0..longest {
            for (index, pieces) in fragments.iter().enumerate() {
                if let Some(piece) = pieces.get(step) {
                    let piece = json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
                    frames.push(delta(piece, None, include_usage));
                }
            }
        }
        frames.extend(end("tool_calls", include_usage, prompt_tokens));
        frames
    }

    /// A stream that fails with an error chunk after its first words.
    pub fn error_mid_stream() -> Vec<Frame> {
        vec![
            delta(json!({"role": "assistant", "content": ""}), None, false),
            delta(json!({"content": "Par"}), None, false),
            chunk(&json!({"error": {"message": "The server had an error while processing your request.",
                "type": "server_error", "param": null, "code": null}})),
        ]
    }
}

/// Responses API answers.
pub mod responses {
    use super::*;

    /// One typed event.
    fn event(sequence: &mut u64, data: Value) -> Frame {
        let mut data = data;
        data["sequence_number"] = json!(*sequence);
        *sequence += 1;
        Frame::Data(format!("event: {}\ndata: {data}\n\n", data["type"].as_str().unwrap_or_default()))
    }

    fn usage(input_tokens: u64) -> Value {
        json!({"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 42,
            "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": input_tokens + 42})
    }

    /// The response object.
    pub fn response(id: &str, status: &str, output: &[Value], input_tokens: Option<u64>) -> Value {
        json!({"id": id, "object": "response", "created_at": 1_767_225_600, "status": status, "error": null,
            "incomplete_details": null, "instructions": null, "max_output_tokens": null, "model": "gpt-5",
            "output": output, "parallel_tool_calls": true, "previous_response_id": null,
            "reasoning": {"effort": "medium", "summary": "auto"}, "store": false, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
            "truncation": "disabled", "usage": input_tokens.map(usage), "metadata": {}})
    }

    /// A reasoning item with an encrypted content.
    pub fn reasoning(id: &str, summary: &str) -> Value {
        json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": format!("gAAAAB{}", id.repeat(3))})
    }

    /// A function call item.
    pub fn function_call(id: &str, call_id: &str, name: &str, arguments: &Value) -> Value {
        json!({"type": "function_call", "id": id, "status": "completed", "call_id": call_id, "name": name,
            "arguments": arguments.to_string()})
    }

    /// An assistant message item.
    pub fn message(id: &str, text: &str) -> Value {
        json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
    }

    /// A whole answer with `output`.
    pub fn whole(output: &[Value], input_tokens: u64) -> Reply {
        Reply::Json {
            status: 200,
            headers: vec![("x-request-id".into(), "req_openai".into())],
            body: response("resp_mock", "completed", output, Some(input_tokens)).to_string(),
        }
    }

    /// The events of `output` streamed as the API sends them: each item added, its deltas
    /// (reasoning summary, text, function arguments), done; then `response.completed`.
    pub fn stream(output: &[Value], input_tokens: u64) -> Vec<Frame> {
        let mut n = 0;
        let mut frames = vec![
            event(
                &mut n,
                json!({"type": "response.created", "response": response("resp_mock", "in_progress", &[], None)}),
            ),
            event(
                &mut n,
                json!({"type": "response.in_progress", "response": response("resp_mock", "in_progress", &[], None)}),
            ),
        ];
        for (index, item) in output.iter().enumerate() {
            let id = item["id"].clone();
            match item["type"].as_str() {
                Some("reasoning") => {
                    let mut empty = item.clone();
                    empty["summary"] = json!([]);
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.output_item.added", "output_index": index, "item": empty}),
                    ));
                    let text = item["summary"][0]["text"].as_str().unwrap_or_default();
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.reasoning_summary_part.added", "item_id": id,
                        "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                    ));
                    for piece in pieces(text, 8) {
                        frames.push(event(
                            &mut n,
                            json!({"type": "response.reasoning_summary_text.delta", "item_id": id,
                            "output_index": index, "summary_index": 0, "delta": piece}),
                        ));
                    }
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.reasoning_summary_text.done", "item_id": id,
                        "output_index": index, "summary_index": 0, "text": text}),
                    ));
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.reasoning_summary_part.done", "item_id": id,
                        "output_index": index, "summary_index": 0, "part": {"type": "summary_text", "text": text}}),
                    ));
                }
                Some("function_call") => {
                    let mut empty = item.clone();
                    empty["arguments"] = json!("");
                    empty["status"] = json!("in_progress");
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.output_item.added", "output_index": index, "item": empty}),
                    ));
                    let arguments = item["arguments"].as_str().unwrap_or_default();
                    for piece in pieces(arguments, 5) {
                        frames.push(event(
                            &mut n,
                            json!({"type": "response.function_call_arguments.delta", "item_id": id,
                            "output_index": index, "delta": piece}),
                        ));
                    }
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.function_call_arguments.done", "item_id": id,
                        "output_index": index, "arguments": arguments}),
                    ));
                }
                _ => {
                    let mut empty = item.clone();
                    empty["content"] = json!([]);
                    empty["status"] = json!("in_progress");
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.output_item.added", "output_index": index, "item": empty}),
                    ));
                    let text = item["content"][0]["text"].as_str().unwrap_or_default();
                    let part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.content_part.added", "item_id": id,
                        "output_index": index, "content_index": 0, "part": part}),
                    ));
                    for piece in pieces(text, 6) {
                        frames.push(event(
                            &mut n,
                            json!({"type": "response.output_text.delta", "item_id": id,
                            "output_index": index, "content_index": 0, "delta": piece, "logprobs": []}),
                        ));
                    }
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.output_text.done", "item_id": id,
                        "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                    ));
                    frames.push(event(
                        &mut n,
                        json!({"type": "response.content_part.done", "item_id": id,
                        "output_index": index, "content_index": 0, "part": item["content"][0]}),
                    ));
                }
            }
            frames
                .push(event(&mut n, json!({"type": "response.output_item.done", "output_index": index, "item": item})));
        }
        frames.push(event(
            &mut n,
            json!({"type": "response.completed", "response": response("resp_mock", "completed", output, Some(input_tokens))}),
        ));
        frames
    }

    /// A stream that fails after its first words: an `error` event, then `response.failed`.
    pub fn failed_mid_stream() -> Vec<Frame> {
        let mut frames = stream(&[message("msg_1", "Partial answer")], 100);
        frames.truncate(5);
        let mut n = 5;
        frames.push(event(
            &mut n,
            json!({"type": "error", "code": "server_error",
            "message": "The server had an error while processing your request.", "param": null}),
        ));
        let mut failed = response("resp_mock", "failed", &[], None);
        failed["error"] = json!({"code": "server_error", "message": "The server had an error."});
        frames.push(event(&mut n, json!({"type": "response.failed", "response": failed})));
        frames
    }
}
