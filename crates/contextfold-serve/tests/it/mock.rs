//! A scripted upstream on 127.0.0.1: records every request it receives and answers from a
//! script with canned JSON or SSE streams, with pauses and gates between frames.
//!
//! A script picks its reply from the request, usually from the number of assistant messages
//! already in it ([`assistant_turns`]), so a client that retries gets the same reply again
//! instead of shifting the script. Streams record whether they completed, were cut on
//! purpose, or were cancelled by the other side (the connection closed under them).
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use contextfold_core::{validate, Conversation};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// How a stream ended, from the mock's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The reply is being sent.
    Sending,
    /// Every frame was sent.
    Completed,
    /// The script cut the stream.
    Cut,
    /// The other side went away first.
    Cancelled,
}

/// One request as the mock received it.
#[derive(Debug)]
pub struct Recorded {
    /// The method.
    pub method: Method,
    /// The path and query.
    pub uri: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The body's bytes.
    pub body: Bytes,
    /// For Messages, Chat Completions and Responses requests: the problems validation finds
    /// (`None` when the body is not a conversation at all, or the path is another). Found
    /// when first asked, after the reply: checking a large body in a debug build takes
    /// milliseconds, which a real upstream does not spend before it answers.
    problems: OnceLock<Option<Vec<String>>>,
    outcome: Mutex<Outcome>,
}

impl Recorded {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// What validation finds in it (see the field).
    pub fn problems(&self) -> Option<&[String]> {
        self.problems.get_or_init(|| problems(&self.uri, &self.body)).as_deref()
    }

    /// How its reply ended.
    pub fn outcome(&self) -> Outcome {
        *self.outcome.lock().unwrap()
    }

    fn set(&self, outcome: Outcome) {
        let mut current = self.outcome.lock().unwrap();
        if *current == Outcome::Sending {
            *current = outcome;
        }
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// A piece of a streamed reply.
#[derive(Debug, Clone)]
pub enum Frame {
    /// Bytes to send.
    Data(String),
    /// Wait this long.
    Pause(Duration),
    /// Wait until the gate is opened ([`Notify::notify_one`]).
    Gate(Arc<Notify>),
}

/// How a streamed reply ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Normally.
    Complete,
    /// With a broken connection, after the frames.
    Cut,
}

/// A reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A whole body at once.
    Json {
        /// The status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: String,
    },
    /// A body sent frame by frame.
    Stream {
        /// The status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// The frames.
        frames: Vec<Frame>,
        /// How it ends.
        end: End,
    },
    /// Never answer.
    Hang,
}

impl Reply {
    /// A 200 JSON reply.
    pub fn json(body: Value) -> Reply {
        Reply::Json { status: 200, headers: vec![("request-id".into(), "req_mock".into())], body: body.to_string() }
    }

    /// A JSON error reply in the API's shape.
    pub fn error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::Json {
            status,
            headers: vec![],
            body: json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        }
    }

    /// A 200 SSE reply of `frames`.
    pub fn sse(frames: Vec<Frame>) -> Reply {
        Reply::Stream {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream; charset=utf-8".into()),
                ("cache-control".into(), "no-cache".into()),
                ("request-id".into(), "req_mock_stream".into()),
            ],
            frames,
            end: End::Complete,
        }
    }

    /// The same stream, cut after its frames.
    pub fn cut(self) -> Reply {
        match self {
            Reply::Stream { status, headers, frames, .. } => Reply::Stream { status, headers, frames, end: End::Cut },
            other => other,
        }
    }

    /// The bytes a client should receive (for a stream, every frame's data).
    pub fn bytes(&self) -> String {
        match self {
            Reply::Json { body, .. } => body.clone(),
            Reply::Stream { frames, .. } => frames
                .iter()
                .filter_map(|frame| match frame {
                    Frame::Data(data) => Some(data.as_str()),
                    _ => None,
                })
                .collect(),
            Reply::Hang => String::new(),
        }
    }
}

/// Picks the reply to a request.
pub type Script = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

struct Inner {
    script: Script,
    recorded: Mutex<Vec<Arc<Recorded>>>,
}

/// The running mock; stops when dropped.
pub struct Mock {
    /// Its address.
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    stop: Option<oneshot::Sender<()>>,
}

impl Mock {
    /// Starts a mock answering with `script`.
    pub async fn start(script: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Mock {
        let inner = Arc::new(Inner { script: Arc::new(script), recorded: Mutex::new(Vec::new()) });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("the mock binds");
        let addr = listener.local_addr().expect("an address");
        let router = axum::Router::new().fallback(handle).with_state(inner.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            // Answer like a real server: no Nagle delay (with the client's delayed ACKs, 40 ms
            // a call) on a reply's last small write.
            use axum::serve::ListenerExt;
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Mock { addr, inner, stop: Some(stop) }
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Arc<Recorded>> {
        self.inner.recorded.lock().unwrap().clone()
    }

    /// The Messages requests received so far.
    pub fn messages_requests(&self) -> Vec<Arc<Recorded>> {
        self.requests().into_iter().filter(|request| request.uri.starts_with("/v1/messages")).collect()
    }

    /// The requests received so far at `path` (query aside).
    pub fn requests_at(&self, path: &str) -> Vec<Arc<Recorded>> {
        self.requests().into_iter().filter(|request| request.uri.split('?').next() == Some(path)).collect()
    }

    /// Lets go of the body of the last request received (validated first, its findings kept),
    /// so that a long run holds only what it asserts on.
    pub fn forget_last_body(&self) {
        let mut recorded = self.inner.recorded.lock().unwrap();
        if let Some(last) = recorded.last_mut() {
            let forgotten = Recorded {
                method: last.method.clone(),
                uri: last.uri.clone(),
                headers: last.headers.clone(),
                body: Bytes::new(),
                problems: OnceLock::from(last.problems().map(<[String]>::to_vec)),
                outcome: Mutex::new(last.outcome()),
            };
            *last = Arc::new(forgotten);
        }
    }

    /// Asserts that every Messages request received passes `validate`; returns how many.
    pub fn assert_all_valid(&self) -> usize {
        Mock::assert_valid(self.messages_requests())
    }

    /// Asserts that every request received at `path` (Chat Completions or Responses) is a
    /// conversation that passes its format's validation; returns how many.
    pub fn assert_all_valid_at(&self, path: &str) -> usize {
        Mock::assert_valid(self.requests_at(path))
    }

    fn assert_valid(requests: Vec<Arc<Recorded>>) -> usize {
        for (index, request) in requests.iter().enumerate() {
            match request.problems() {
                Some(problems) => assert!(problems.is_empty(), "request {index} is invalid: {problems:?}"),
                None => panic!("request {index} is not a conversation"),
            }
        }
        requests.len()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Sets the outcome of a reply when it is dropped before it ended.
struct Watch(Arc<Recorded>);

impl Drop for Watch {
    fn drop(&mut self) {
        self.0.set(Outcome::Cancelled);
    }
}

/// `headers` in allocations of their own. The server's values are slices of its read buffer,
/// which holds the first hundreds of KB of a large body: kept for every request of a long
/// run, they would keep all of those buffers.
fn owned(headers: HeaderMap) -> HeaderMap {
    let mut copied = HeaderMap::with_capacity(headers.len());
    for (name, value) in &headers {
        let mut copy = HeaderValue::from_bytes(value.as_bytes()).expect("a header value is still one");
        copy.set_sensitive(value.is_sensitive());
        let name = HeaderName::from_bytes(name.as_str().as_bytes()).expect("a header name is still one");
        copied.append(name, copy);
    }
    copied
}

async fn handle(
    axum::extract::State(inner): axum::extract::State<Arc<Inner>>,
    request: axum::extract::Request,
) -> Response {
    use http_body_util::BodyExt;
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|collected| collected.to_bytes()).unwrap_or_default();
    let uri = parts.uri.path_and_query().map_or("/", |path| path.as_str()).to_string();
    let recorded = Arc::new(Recorded {
        method: parts.method,
        uri,
        headers: owned(parts.headers),
        body,
        problems: OnceLock::new(),
        outcome: Mutex::new(Outcome::Sending),
    });
    inner.recorded.lock().unwrap().push(recorded.clone());
    let reply = (inner.script)(&recorded);
    match reply {
        Reply::Json { status, headers, body } => {
            recorded.set(Outcome::Completed);
            let mut response = Response::new(Body::from(body));
            *response.status_mut() = StatusCode::from_u16(status).expect("a status");
            set_headers(&mut response, &[("content-type".into(), "application/json".into())]);
            set_headers(&mut response, &headers);
            response
        }
        Reply::Stream { status, headers, frames, end } => {
            let watch = Watch(recorded.clone());
            let stream = futures_util::stream::unfold(
                (frames.into_iter(), Some(watch)),
                move |(mut frames, watch)| async move {
                    let watch = watch?;
                    loop {
                        match frames.next() {
                            Some(Frame::Data(data)) => return Some((Ok(Bytes::from(data)), (frames, Some(watch)))),
                            Some(Frame::Pause(duration)) => tokio::time::sleep(duration).await,
                            Some(Frame::Gate(gate)) => gate.notified().await,
                            None => {
                                return match end {
                                    End::Complete => {
                                        watch.0.set(Outcome::Completed);
                                        None
                                    }
                                    End::Cut => {
                                        watch.0.set(Outcome::Cut);
                                        Some((Err(std::io::Error::other("cut by the script")), (frames, None)))
                                    }
                                };
                            }
                        }
                    }
                },
            );
            let mut response = Response::new(Body::from_stream(stream));
            *response.status_mut() = StatusCode::from_u16(status).expect("a status");
            set_headers(&mut response, &headers);
            response
        }
        Reply::Hang => {
            let _watch = Watch(recorded);
            std::future::pending::<()>().await;
            unreachable!()
        }
    }
}

fn set_headers(response: &mut Response, headers: &[(String, String)]) {
    for (name, value) in headers {
        response.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).expect("a header name"),
            HeaderValue::from_str(value).expect("a header value"),
        );
    }
}

/// What `validate` finds in a Messages body, and in a Chat Completions or Responses body (as
/// read by that format; the Responses API's own rules too), by the request's path.
fn problems(uri: &str, body: &[u8]) -> Option<Vec<String>> {
    use contextfold_core::format::{self, responses, Format};
    let path = uri.split('?').next().unwrap_or_default();
    let format = match path {
        "/v1/messages" | "/v1/messages/count_tokens" => Format::Anthropic,
        "/v1/chat/completions" => Format::OpenAi,
        "/v1/responses" => Format::Responses,
        _ => return None,
    };
    let text = std::str::from_utf8(body).ok()?;
    let conversation = match format {
        Format::Anthropic => Conversation::from_value(serde_json::from_str(text).ok()?).ok()?,
        _ => format::parse(text, Some(format)).ok()?.conversation,
    };
    let found = if format == Format::Responses { responses::check(&conversation) } else { validate(&conversation) };
    Some(found.iter().map(ToString::to_string).collect())
}

/// How many assistant messages a Messages request holds (what a script picks its reply by).
pub fn assistant_turns(request: &Recorded) -> usize {
    request.json()["messages"]
        .as_array()
        .map_or(0, |messages| messages.iter().filter(|message| message["role"] == "assistant").count())
}

/// The turn a request is at, read from the script's own previous reply: one more than the
/// number at the end of the newest tool call's id (`toolu_…_007` → 8), or the number of
/// assistant messages when no call has one. Unlike [`assistant_turns`] alone, this survives
/// a proxy that folds old assistant messages away, and a retried request still gets the
/// same reply.
pub fn script_turn(request: &Recorded) -> usize {
    let body = request.json();
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let numbered = messages.iter().rev().filter(|message| message["role"] == "assistant").find_map(|message| {
        message["content"].as_array()?.iter().rev().find_map(|block| {
            let id = block["id"].as_str().filter(|_| block["type"] == "tool_use")?;
            id.rsplit('_').next()?.parse::<usize>().ok()
        })
    });
    numbered.map_or_else(|| assistant_turns(request), |turn| turn + 1)
}

/// Canned Messages API replies and SSE streams.
pub mod canned {
    use super::{Frame, Reply};
    use serde_json::{json, Value};

    /// One SSE event.
    pub fn event(name: &str, data: &Value) -> Frame {
        Frame::Data(format!("event: {name}\ndata: {data}\n\n"))
    }

    fn message_start(id: &str) -> Frame {
        message_start_counting(id, 1200)
    }

    fn message_start_counting(id: &str, input_tokens: u64) -> Frame {
        event(
            "message_start",
            &json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1}}}),
        )
    }

    fn message_end(stop_reason: &str) -> Vec<Frame> {
        vec![
            event(
                "message_delta",
                &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                    "usage": {"output_tokens": 42}}),
            ),
            event("message_stop", &json!({"type": "message_stop"})),
        ]
    }

    fn block(index: usize, start: Value, deltas: Vec<Value>) -> Vec<Frame> {
        let mut frames = vec![event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        )];
        for delta in deltas {
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(event("content_block_stop", &json!({"type": "content_block_stop", "index": index})));
        frames
    }

    /// `text` split into deltas of a few words.
    fn text_deltas(text: &str) -> Vec<Value> {
        let words: Vec<&str> = text.split_inclusive(' ').collect();
        words.chunks(3).map(|chunk| json!({"type": "text_delta", "text": chunk.concat()})).collect()
    }

    /// `json` split into `input_json_delta`s of at most 7 bytes (on char boundaries).
    fn json_deltas(json: &str) -> Vec<Value> {
        let mut deltas = Vec::new();
        let mut piece = String::new();
        for c in json.chars() {
            piece.push(c);
            if piece.len() >= 7 {
                deltas.push(json!({"type": "input_json_delta", "partial_json": std::mem::take(&mut piece)}));
            }
        }
        if !piece.is_empty() {
            deltas.push(json!({"type": "input_json_delta", "partial_json": piece}));
        }
        deltas
    }

    /// A streamed text answer, with a ping.
    pub fn text_stream(text: &str) -> Vec<Frame> {
        let mut frames = vec![message_start("msg_text"), event("ping", &json!({"type": "ping"}))];
        frames.extend(block(0, json!({"type": "text", "text": ""}), text_deltas(text)));
        frames.extend(message_end("end_turn"));
        frames
    }

    /// A streamed answer with signed thinking, a short text and a tool call whose input
    /// arrives as `input_json_delta`s.
    pub fn tool_stream(id: &str, name: &str, input: &Value) -> Vec<Frame> {
        let mut frames = vec![message_start("msg_tool"), event("ping", &json!({"type": "ping"}))];
        frames.extend(block(
            0,
            json!({"type": "thinking", "thinking": ""}),
            vec![
                json!({"type": "thinking_delta", "thinking": "I should look at the file first."}),
                json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}),
            ],
        ));
        frames.extend(block(1, json!({"type": "text", "text": ""}), text_deltas("Let me check. ")));
        frames.extend(block(
            2,
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            json_deltas(&input.to_string()),
        ));
        frames.extend(message_end("tool_use"));
        frames
    }

    /// The stream of a message `id` with `content` (text, signed thinking, tool calls; any
    /// other block whole in its start event), as the API streams it: a ping, each block's
    /// start, deltas and stop, and a `message_start` whose usage says `input_tokens`.
    pub fn message_stream(id: &str, content: &Value, stop_reason: &str, input_tokens: u64) -> Vec<Frame> {
        let mut frames = vec![message_start_counting(id, input_tokens), event("ping", &json!({"type": "ping"}))];
        for (index, whole) in content.as_array().into_iter().flatten().enumerate() {
            let (start, deltas) = match whole["type"].as_str() {
                Some("text") => {
                    (json!({"type": "text", "text": ""}), text_deltas(whole["text"].as_str().unwrap_or_default()))
                }
                Some("thinking") => (
                    json!({"type": "thinking", "thinking": ""}),
                    vec![
                        json!({"type": "thinking_delta", "thinking": whole["thinking"]}),
                        json!({"type": "signature_delta", "signature": whole["signature"]}),
                    ],
                ),
                Some("tool_use") => (
                    json!({"type": "tool_use", "id": whole["id"], "name": whole["name"], "input": {}}),
                    json_deltas(&whole["input"].to_string()),
                ),
                _ => (whole.clone(), vec![]),
            };
            frames.extend(block(index, start, deltas));
        }
        frames.extend(message_end(stop_reason));
        frames
    }

    /// A streamed answer with a server tool call (`server_tool_use` with its input as
    /// deltas), its result, and text.
    pub fn server_tool_stream() -> Vec<Frame> {
        let mut frames = vec![message_start("msg_server_tool")];
        frames.extend(block(
            0,
            json!({"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}}),
            json_deltas(r#"{"query": "rust axum streaming — ünïcode"}"#),
        ));
        frames.extend(block(
            1,
            json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
                "content": [{"type": "web_search_result", "url": "https://example.invalid", "title": "t", "encrypted_content": "abc"}]}),
            vec![],
        ));
        frames.extend(block(2, json!({"type": "text", "text": ""}), text_deltas("Found it.")));
        frames.extend(message_end("end_turn"));
        frames
    }

    /// A streamed server-side compaction block, then text.
    pub fn compaction_stream() -> Vec<Frame> {
        let mut frames = vec![message_start("msg_compaction")];
        frames.extend(block(
            0,
            json!({"type": "compaction", "content": ""}),
            vec![json!({"type": "compaction_delta", "content": "Summary of the earlier turns."})],
        ));
        frames.extend(block(1, json!({"type": "text", "text": ""}), text_deltas("Continuing.")));
        frames.extend(message_end("end_turn"));
        frames
    }

    /// A stream that fails with an `overloaded_error` event after its first text delta.
    pub fn error_mid_stream() -> Vec<Frame> {
        let mut frames = vec![message_start("msg_error"), event("ping", &json!({"type": "ping"}))];
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        frames.push(event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Par"}}),
        ));
        frames.push(event(
            "error",
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ));
        frames
    }

    /// A whole (non-streamed) message with `content`.
    pub fn message(content: Value, stop_reason: &str) -> Reply {
        message_with_usage(content, stop_reason, 1200)
    }

    /// A whole message whose `usage` says the request had `input_tokens`.
    pub fn message_with_usage(content: Value, stop_reason: &str, input_tokens: u64) -> Reply {
        Reply::json(json!({"id": "msg_mock", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content, "stop_reason": stop_reason, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 42}}))
    }
}
