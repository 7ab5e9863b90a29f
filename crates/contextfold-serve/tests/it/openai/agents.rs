//! Agents that talk to the proxy as OpenAI clients do, in a tool loop, and the scripts a mock
//! upstream answers them with: Chat Completions with two parallel calls a turn, and the
//! Responses API as Codex CLI speaks it (stateless `input`, reasoning items, `exec_command`).
#![allow(dead_code)]

use super::canned;
use crate::common::tool_output;
use crate::mock::{Recorded, Reply};
use serde_json::{json, Value};

/// A fake OpenAI key.
pub const FAKE_OPENAI_KEY: &str =
    "sk-proj-Zq8vN2xK7pL4mR9tW1yB6cF3hJ5dG0sA8eU2iO7kM4nQ1rT6vX9zC3bV5wY8uI0pE2aS4dF6gH8jK1lZ3xC5vB7n";

/// The agent name in a conversation's first user entry (`[name] task`).
pub fn agent_name(list: &[Value]) -> String {
    let text = list
        .iter()
        .find(|entry| entry["role"] == "user")
        .map(|entry| {
            let content = &entry["content"];
            content
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| content[0]["text"].as_str().unwrap_or_default().into())
        })
        .unwrap_or_default();
    text.trim_start_matches('[').split(']').next().unwrap_or_default().to_string()
}

/// The turn a call id of the scripts names (`call_007_…` → 7).
fn turn_of(id: &str) -> Option<usize> {
    id.split('_').nth(1)?.parse().ok()
}

/// A Chat Completions agent.
pub struct ChatAgent {
    /// Its name, in its first message.
    pub name: String,
    /// The history, in Chat shape.
    pub messages: Vec<Value>,
    /// Whether it streams (with usage chunks).
    pub stream: bool,
    /// The `prompt_cache_key` it sends, if any.
    pub cache_key: Option<String>,
    /// Characters of each tool output.
    pub output_chars: usize,
    /// The body of its last request.
    pub last_body: String,
}

impl ChatAgent {
    /// An agent named `name` asking for `task`, with a system and a developer message.
    pub fn new(name: &str, task: &str) -> ChatAgent {
        ChatAgent {
            name: name.to_string(),
            messages: vec![
                json!({"role": "system", "content": "You are a careful coding agent."}),
                json!({"role": "developer", "content": [{"type": "text", "text": format!("You work for {name}. Run the tests.")}]}),
                json!({"role": "user", "content": format!("[{name}] {task}")}),
            ],
            stream: false,
            cache_key: Some(format!("pck-{name}")),
            output_chars: 3_000,
            last_body: String::new(),
        }
    }

    /// The body of the next request.
    pub fn body(&self) -> String {
        let mut body = json!({
            "model": "gpt-4.1",
            "messages": self.messages,
            "tools": [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "response_format": {"type": "text"},
            "reasoning_effort": "low",
            "temperature": 0.2,
            "x_vendor_extension": {"kept": [1, 2.50, "é"]},
            "stream": self.stream,
        });
        if self.stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        if let Some(key) = &self.cache_key {
            body["prompt_cache_key"] = json!(key);
        }
        body.to_string()
    }

    /// Sends the next request through `proxy` and appends the answer and its tool results.
    /// Returns the assistant message.
    pub async fn step(&mut self, client: &reqwest::Client, proxy: &str) -> Value {
        self.last_body = self.body();
        let response = client
            .post(format!("{proxy}/v1/chat/completions"))
            .bearer_auth(FAKE_OPENAI_KEY)
            .header("content-type", "application/json")
            .body(self.last_body.clone())
            .send()
            .await
            .expect("the proxy answers");
        let status = response.status();
        let text = response.text().await.expect("a body");
        assert_eq!(status, 200, "{}: {text}", self.name);
        let message = if self.stream {
            assemble_chat_stream(&text)
        } else {
            serde_json::from_str::<Value>(&text).expect("JSON")["choices"][0]["message"].clone()
        };
        self.push(message.clone());
        message
    }

    /// Appends an assistant message and a tool message for each of its calls.
    pub fn push(&mut self, message: Value) {
        let calls: Vec<Value> = message["tool_calls"].as_array().cloned().unwrap_or_default();
        self.messages.push(message);
        for call in calls {
            let id = call["id"].as_str().unwrap_or_default();
            self.messages.push(
                json!({"role": "tool", "tool_call_id": id, "content": tool_output(&self.name, id, self.output_chars)}),
            );
        }
    }
}

/// The assistant message a Chat Completions stream spells: its text and its tool calls,
/// their `arguments` joined from the fragments. Panics unless the stream ends in `[DONE]`.
pub fn assemble_chat_stream(text: &str) -> Value {
    let mut content = String::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut done = false;
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(data).expect("each chunk is whole JSON");
        let Some(delta) = chunk["choices"].get(0).map(|choice| &choice["delta"]) else { continue };
        if let Some(piece) = delta["content"].as_str() {
            content.push_str(piece);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().expect("an index") as usize;
            if calls.len() <= index {
                calls.resize(index + 1, json!({"type": "function", "function": {"arguments": ""}}));
            }
            if let Some(id) = call.get("id") {
                calls[index]["id"] = id.clone();
                calls[index]["function"]["name"] = call["function"]["name"].clone();
            }
            let piece = call["function"]["arguments"].as_str().unwrap_or_default();
            let joined = format!("{}{piece}", calls[index]["function"]["arguments"].as_str().unwrap_or_default());
            calls[index]["function"]["arguments"] = json!(joined);
        }
    }
    assert!(done, "the stream ends with [DONE]");
    let mut message =
        json!({"role": "assistant", "content": if content.is_empty() { Value::Null } else { json!(content) }});
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    message
}

/// A script for Chat agents: two parallel `read_file` calls a turn until `turns`, then a text
/// answer naming the agent; streamed when the request asks. Its usage counts a token per
/// three bytes of the request.
pub fn chat_script(turns: usize) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |request| {
        let body = request.json();
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let name = agent_name(&messages);
        let turn = messages
            .iter()
            .rev()
            .find_map(|message| turn_of(message["tool_calls"][0]["id"].as_str()?))
            .map_or(0, |turn| turn + 1);
        let prompt_tokens = request.body.len() as u64 / 3;
        let stream = body["stream"] == true;
        let include_usage = body["stream_options"]["include_usage"] == true;
        if turn >= turns {
            let text = format!("[{name}] done after {turn} turns");
            return if stream {
                canned::sse(canned::chat::text_stream(&text, include_usage))
            } else {
                canned::chat::completion(
                    json!({"role": "assistant", "content": text, "refusal": null}),
                    "stop",
                    prompt_tokens,
                )
            };
        }
        let calls: Vec<Value> = (0..2)
            .map(|k| {
                canned::chat::call(
                    &format!("call_{turn:03}_{k}_{name}"),
                    "read_file",
                    &json!({"path": format!("/src/{name}/file_{turn}_{k}.rs")}),
                )
            })
            .collect();
        if stream {
            canned::sse(canned::chat::tool_calls_stream(&calls, include_usage, prompt_tokens))
        } else {
            canned::chat::completion(
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
                "tool_calls",
                prompt_tokens,
            )
        }
    }
}

/// A Responses API agent, stateless as Codex CLI is: the whole history in `input`.
pub struct ResponsesAgent {
    /// Its name, in its first user message.
    pub name: String,
    /// The input items.
    pub input: Vec<Value>,
    /// Whether it streams.
    pub stream: bool,
    /// Characters of each tool output.
    pub output_chars: usize,
    /// The body of its last request.
    pub last_body: String,
}

impl ResponsesAgent {
    /// An agent named `name` asking for `task`, after a developer message.
    pub fn new(name: &str, task: &str) -> ResponsesAgent {
        ResponsesAgent {
            name: name.to_string(),
            input: vec![
                json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": format!("<permissions instructions>\nYou work for {name}; commands run without approval.\n</permissions instructions>")}]}),
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": format!("[{name}] {task}")}]}),
            ],
            stream: true,
            output_chars: 3_000,
            last_body: String::new(),
        }
    }

    /// The body of the next request.
    pub fn body(&self) -> String {
        json!({
            "model": "gpt-5-codex",
            "instructions": "You are a coding agent running in a terminal.",
            "input": self.input,
            "tools": [{"type": "function", "name": "exec_command", "description": "Runs a command.", "strict": false,
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}],
            "tool_choice": "auto",
            "parallel_tool_calls": false,
            "reasoning": {"effort": "medium", "summary": "auto"},
            "store": false,
            "stream": self.stream,
            "include": ["reasoning.encrypted_content"],
            "prompt_cache_key": format!("thread-{}", self.name),
            "client_metadata": {"turn": self.input.len()},
        })
        .to_string()
    }

    /// Sends the next request and appends the output items, and an output for each call.
    /// Returns the output items.
    pub async fn step(&mut self, client: &reqwest::Client, proxy: &str) -> Vec<Value> {
        self.last_body = self.body();
        let response = client
            .post(format!("{proxy}/v1/responses"))
            .bearer_auth(FAKE_OPENAI_KEY)
            .header("content-type", "application/json")
            .body(self.last_body.clone())
            .send()
            .await
            .expect("the proxy answers");
        let status = response.status();
        let text = response.text().await.expect("a body");
        assert_eq!(status, 200, "{}: {text}", self.name);
        let output = if self.stream {
            completed_output(&text)
        } else {
            serde_json::from_str::<Value>(&text).expect("JSON")["output"].as_array().cloned().unwrap_or_default()
        };
        self.push(&output);
        output
    }

    /// Appends output items and a `function_call_output` for each call.
    pub fn push(&mut self, output: &[Value]) {
        for item in output {
            self.input.push(item.clone());
            if item["type"] == "function_call" {
                let id = item["call_id"].as_str().unwrap_or_default();
                self.input.push(json!({"type": "function_call_output", "call_id": id, "output": tool_output(&self.name, id, self.output_chars)}));
            }
        }
    }
}

/// The output items of a Responses stream, from its `response.output_item.done` events
/// (checked against `response.completed`). Panics unless the stream completed.
pub fn completed_output(text: &str) -> Vec<Value> {
    let mut done = Vec::new();
    let mut completed = None;
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        let event: Value = serde_json::from_str(data).expect("each event is whole JSON");
        match event["type"].as_str() {
            Some("response.output_item.done") => done.push(event["item"].clone()),
            Some("response.completed") => completed = Some(event["response"]["output"].clone()),
            _ => {}
        }
    }
    assert_eq!(completed.as_ref(), Some(&json!(done)), "the stream completed, with the items it streamed");
    done
}

/// A script for Responses agents: a reasoning item and one `exec_command` call a turn until
/// `turns`, then a message naming the agent; streamed when the request asks. Its usage counts
/// a token per three bytes of the request.
pub fn responses_script(turns: usize) -> impl Fn(&Recorded) -> Reply + Send + Sync + 'static {
    move |request| {
        let body = request.json();
        let input = body["input"].as_array().cloned().unwrap_or_default();
        let name = agent_name(&input);
        let turn = input
            .iter()
            .rev()
            .filter(|item| item["type"] == "function_call")
            .find_map(|item| turn_of(item["call_id"].as_str()?))
            .map_or(0, |turn| turn + 1);
        let input_tokens = request.body.len() as u64 / 3;
        let output = if turn >= turns {
            vec![canned::responses::message(&format!("msg_{turn}"), &format!("[{name}] done after {turn} turns"))]
        } else {
            vec![
                canned::responses::reasoning(&format!("rs_{turn:03}"), &format!("Reading file {turn} next.")),
                canned::responses::function_call(
                    &format!("fc_{turn:03}"),
                    &format!("call_{turn:03}_{name}"),
                    "exec_command",
                    &json!({"cmd": format!("sed -n '1,80p' src/{name}/file_{turn}.rs")}),
                ),
            ]
        };
        if body["stream"] == true {
            canned::sse(canned::responses::stream(&output, input_tokens))
        } else {
            canned::responses::whole(&output, input_tokens)
        }
    }
}

/// The raw text of each entry of a body's list (`messages` or `input`).
pub fn raw_list(body: &[u8], list: &str) -> Vec<String> {
    let fields = crate::common::fields(body);
    let entries: Vec<&serde_json::value::RawValue> = serde_json::from_str(fields[list].get()).expect("an array");
    entries.iter().map(|raw| raw.get().to_string()).collect()
}

/// Whether `next` repeats every entry of `previous`, byte for byte, and adds some.
pub fn extends(previous: &[String], next: &[String]) -> bool {
    next.len() > previous.len() && previous.iter().zip(next).all(|(before, after)| before == after)
}
