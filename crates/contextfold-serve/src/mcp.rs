//! The cold layer as MCP tools: `context_recall` (a removed output by its ref, whole or by
//! lines) and `context_search` (snippets of every stored session, newest first), answered
//! from a store with the runtime's recall code ([`contextfold::store::recall_lines`],
//! [`contextfold::store::search_answer`]).
//!
//! [`RecallServer`] is the MCP server, independent of its transport: `contextfold mcp` runs it
//! over stdio ([`RecallServer::serve_stdio`]), the proxy over MCP's streamable HTTP at `/mcp`
//! ([`RecallServer::http_service`]). It lives here rather than in the runtime so the runtime
//! stays free of a protocol SDK, and here both the CLI and the proxy reach it. Every failure
//! (bad arguments, an unknown ref, a store that cannot be opened or read) is a tool error
//! with a one-sentence reason; none stops the server.

use crate::error::ProxyError;
use crate::log::{Action, RequestLog};
use crate::route::Api;
use axum::http::StatusCode;
use axum::response::Response;
use contextfold::store::{
    off_runtime, recall_lines, search_answer, Lines, RecallOutput, SessionStore, StoreError, StoreLocation,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// The recall tool's name, as the server offers it (a client may prefix it: Claude Code and
/// Codex call it `mcp__<server>__context_recall`).
pub const RECALL_TOOL: &str = "context_recall";

/// What the server tells the client it is for; a client may show the model these words.
const INSTRUCTIONS: &str = "contextfold keeps what it removes from this conversation. When a pointer or clip marker \
                            says `ref cf-…`, call context_recall with that ref to get the output back exactly; call \
                            context_search to find earlier content by its words.";

/// How many of a conversation's first messages are read for a deferred namespace.
pub const DEFERRED_MESSAGES: usize = 10;

/// The search tool's name, as the server offers it.
pub const SEARCH_TOOL: &str = "context_search";

/// Search hits one call returns unless it asks for fewer or more.
const DEFAULT_HITS: usize = 10;

/// The most search hits one call returns.
const MAX_HITS: usize = 50;

const RECALL_DESCRIPTION: &str = "Get back an output that contextfold removed from this conversation to save \
context. A removed output is replaced by a pointer such as `[contextfold: offloaded … ref cf-…]` or \
`[contextfold: clipped … ref cf-…]`, and the summary of earlier turns names refs too: when you need what such an \
output said, call this with its `ref` (cf-…) instead of re-running the command or re-reading the file (a re-run \
may be slow, may not give the same output, and may be clipped again). It returns the output exactly as it was. A \
long output comes in parts of whole lines: the answer then starts with a line giving the lines shown, the total \
and the `offset` to pass for the next part; `offset` (the first line, from 0) and `limit` (how many lines) read \
any part.";

const SEARCH_DESCRIPTION: &str = "Search the full earlier conversation that contextfold keeps, including the \
turns folded into a summary and the outputs removed from it, when you need something no longer in view and have \
no ref for it. Pass words that must all appear as `query`. The answer lists snippets, newest first, each with \
where it is: a message's position in its session, or the ref of a removed output (pass that ref to \
context_recall for all of it). `session` searches one session only; `limit` caps the hits (default 10, at most \
50).";

/// Where the server reads: a store already open, or one opened read-only at the first call
/// (so a store that does not exist yet, or a database that is down, is a tool error then,
/// and works once it is there).
#[derive(Clone)]
pub struct RecallServer {
    store: Arc<Mutex<Option<Arc<dyn SessionStore>>>>,
    location: Option<StoreLocation>,
}

impl std::fmt::Debug for RecallServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallServer").field("location", &self.location.as_ref().map(ToString::to_string)).finish()
    }
}

impl RecallServer {
    /// A server answering from `store`.
    pub fn new(store: Arc<dyn SessionStore>) -> RecallServer {
        RecallServer { store: Arc::new(Mutex::new(Some(store))), location: None }
    }

    /// A server answering from the store at `location`, opened read-only when first needed.
    pub fn at(location: StoreLocation) -> RecallServer {
        RecallServer { store: Arc::new(Mutex::new(None)), location: Some(location) }
    }

    /// Serves MCP over standard input and output until the client closes them.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        let running = self.serve(rmcp::transport::stdio()).await.map_err(|err| McpError(err.to_string()))?;
        running.waiting().await.map_err(|err| McpError(err.to_string()))?;
        Ok(())
    }

    /// The server as a tower service speaking MCP's streamable HTTP transport, stateless
    /// (any replica answers any call) with JSON answers. `any_host`: accept any `Host`
    /// header (a proxy that listens beyond loopback, behind its token); otherwise only
    /// loopback names, against DNS rebinding.
    pub fn http_service(self, any_host: bool) -> StreamableHttpService<RecallServer, LocalSessionManager> {
        let mut config = StreamableHttpServerConfig::default().with_legacy_session_mode(false).with_json_response(true);
        if any_host {
            config = config.disable_allowed_hosts();
        }
        StreamableHttpService::new(move || Ok(self.clone()), Arc::default(), config)
    }

    /// The store, opened now if it was not.
    fn store(&self) -> Result<Arc<dyn SessionStore>, String> {
        let mut held = self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(store) = held.as_ref() {
            return Ok(store.clone());
        }
        let Some(location) = &self.location else { return Err("no store is configured".into()) };
        let store = location.open_read_only().map_err(|err| cannot_open(location, &err))?;
        *held = Some(store.clone());
        Ok(store)
    }

    /// Answers a call of the tool `name` with `arguments`.
    async fn call(&self, name: &str, arguments: JsonObject) -> RecallOutput {
        let call = match Call::parse(name, &arguments) {
            Ok(call) => call,
            Err(why) => return failed(name, &why),
        };
        let server = self.clone();
        let answered = off_runtime(move || {
            let store = server.store().map_err(StoreError::Invalid)?;
            Ok(call.answer(store.as_ref()))
        })
        .await;
        match answered {
            Ok(output) => output,
            Err(StoreError::Invalid(why)) => failed(name, &why),
            Err(err) => failed(name, &err.to_string()),
        }
    }
}

/// Why the MCP server could not run.
#[derive(Debug, thiserror::Error)]
#[error("the MCP server stopped: {0}")]
pub struct McpError(String);

/// A store that cannot be opened, as the tool error says it.
fn cannot_open(location: &StoreLocation, err: &StoreError) -> String {
    format!("the store {location} cannot be opened ({err}); it is created when the proxy or `compact --store` first writes to it")
}

/// A tool error answer.
fn failed(tool: &str, why: &str) -> RecallOutput {
    RecallOutput { content: format!("{tool} failed: {why}"), is_error: true }
}

/// A call of one of the tools, its arguments read.
enum Call {
    Recall { reference: String, lines: Lines },
    Search { query: String, session: Option<String>, limit: usize },
}

impl Call {
    /// Reads a call; the error is one sentence for the model.
    fn parse(name: &str, arguments: &JsonObject) -> Result<Call, String> {
        match name {
            RECALL_TOOL => {
                let reference = text(arguments, "ref")?.ok_or("give `ref`, the cf-… ref a pointer shows")?;
                let offset = number(arguments, "offset", 0)?.unwrap_or(0);
                let limit = number(arguments, "limit", 1)?;
                Ok(Call::Recall { reference, lines: Lines { offset, limit } })
            }
            SEARCH_TOOL => {
                let query = text(arguments, "query")?.ok_or("give `query`, the words to search for")?;
                let session = text(arguments, "session")?;
                let limit = number(arguments, "limit", 1)?.unwrap_or(DEFAULT_HITS);
                if limit > MAX_HITS {
                    return Err(format!("`limit` is at most {MAX_HITS}, not {limit}"));
                }
                Ok(Call::Search { query, session, limit })
            }
            other => Err(format!("there is no tool `{other}`; the tools are {RECALL_TOOL} and {SEARCH_TOOL}")),
        }
    }

    fn answer(&self, store: &dyn SessionStore) -> RecallOutput {
        match self {
            Call::Recall { reference, lines } => recall_lines(store, reference, *lines),
            Call::Search { query, session, limit } => {
                let hint = format!("call {RECALL_TOOL} with this ref for all of it");
                search_answer(store, session.as_deref(), query, *limit, &hint)
            }
        }
    }
}

/// The string argument `key`, trimmed; `None` when absent or null.
fn text(arguments: &JsonObject, key: &str) -> Result<Option<String>, String> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.trim().is_empty() => Err(format!("`{key}` is empty")),
        Some(Value::String(text)) => Ok(Some(text.trim().to_string())),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}

/// The whole-number argument `key`, at least `min`; `None` when absent or null. A number
/// written as a string is taken too: some models send one.
fn number(arguments: &JsonObject, key: &str, min: usize) -> Result<Option<usize>, String> {
    let value = match arguments.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => value,
    };
    let number = match value {
        Value::Number(number) => number.as_u64(),
        Value::String(text) => text.trim().parse::<u64>().ok(),
        _ => None,
    };
    match number.and_then(|number| usize::try_from(number).ok()) {
        Some(number) if number >= min => Ok(Some(number)),
        _ => Err(format!("`{key}` must be a whole number from {min}, not {value}")),
    }
}

/// The two tools, as `tools/list` offers them.
pub fn tools() -> Vec<Tool> {
    let schema = |value: Value| match value {
        Value::Object(schema) => Arc::new(schema),
        _ => Arc::default(),
    };
    let recall = schema(json!({
        "type": "object",
        "properties": {
            "ref": {"type": "string", "description": "The ref of a removed output, exactly as its pointer shows it (cf-…)."},
            "offset": {"type": "integer", "minimum": 0, "description": "The first line to return, counting from 0 (default 0)."},
            "limit": {"type": "integer", "minimum": 1, "description": "The most lines to return (default: as many as one answer holds)."}
        },
        "required": ["ref"]
    }));
    let search = schema(json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words that must all appear (any case)."},
            "session": {"type": "string", "description": "Search this session only (as a hit names it)."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS, "description": "The most hits (default 10)."}
        },
        "required": ["query"]
    }));
    let read_only = || ToolAnnotations::new().read_only(true).destructive(false);
    vec![
        Tool::new(RECALL_TOOL, RECALL_DESCRIPTION, recall).with_annotations(read_only()),
        Tool::new(SEARCH_TOOL, SEARCH_DESCRIPTION, search).with_annotations(read_only()),
    ]
}

impl ServerHandler for RecallServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("contextfold", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let output = self.call(&request.name, request.arguments.unwrap_or_default()).await;
        let content = vec![ContentBlock::text(output.content)];
        let result = if output.is_error { CallToolResult::error(content) } else { CallToolResult::success(content) };
        Ok(result.into())
    }
}

/// The proxy's `/mcp`: the tools over streamable HTTP, answered by the proxy from its own
/// store (never forwarded), behind its token like every request.
pub(crate) struct Endpoint {
    service: Option<StreamableHttpService<RecallServer, LocalSessionManager>>,
}

impl Endpoint {
    /// The endpoint of a proxy with `store` (none with `--no-store`); `any_host` as in
    /// [`RecallServer::http_service`].
    pub(crate) fn new(store: Option<&crate::store::ProxyStore>, any_host: bool) -> Endpoint {
        Endpoint { service: store.map(|store| RecallServer::new(store.sessions()).http_service(any_host)) }
    }

    /// Whether a request to `path` is the endpoint's.
    pub(crate) fn serves(path: &str) -> bool {
        matches!(path, "/mcp" | "/mcp/")
    }

    /// Answers `request`, and writes its log line.
    pub(crate) async fn answer(&self, request: axum::extract::Request, mut log: RequestLog) -> Response {
        log.action = Action::Mcp;
        let Some(service) = &self.service else {
            let refused = ProxyError {
                status: StatusCode::NOT_FOUND,
                kind: "not_found_error",
                code: "no_store",
                message: "contextfold serve runs without a store (--no-store), so /mcp has nothing to recall".into(),
            };
            log.status = refused.status.as_u16();
            log.note = Some(refused.message.clone());
            log.emit("complete");
            return refused.response_for(Api::Anthropic);
        };
        let response = service.handle(request).await;
        log.status = response.status().as_u16();
        log.emit("complete");
        response.map(axum::body::Body::new)
    }
}

/// The name under which the model has the recall tool among `tools` (a request's tool
/// definitions, in any API's shape), if it has it: `context_recall` itself, or an MCP
/// client's name for it, `<prefix>__context_recall` (Claude Code and Codex:
/// `mcp__<server>__context_recall`). A Responses API namespace of tools (`{"type":
/// "namespace", "name": "mcp__cf", "tools": [...]}`) shows its tools to the model as
/// `<namespace>__<tool>`.
pub fn recall_tool_name(tools: &[Value]) -> Option<String> {
    let is_recall =
        |name: &str| name == RECALL_TOOL || name.strip_suffix(RECALL_TOOL).is_some_and(|rest| rest.ends_with("__"));
    tools.iter().find_map(|tool| {
        let name = tool.get("name").or_else(|| tool.pointer("/function/name")).and_then(Value::as_str)?;
        if tool.get("type").and_then(Value::as_str) == Some("namespace") {
            let inner = recall_tool_name(tool.get("tools")?.as_array()?)?;
            return Some(format!("{name}__{inner}"));
        }
        is_recall(name).then(|| name.to_string())
    })
}

/// The recall tool's name when the client offers this server's tools as a deferred namespace
/// (Codex: a developer message listing `- mcp__<server>: <the server's instructions>`, whose
/// tools the model calls as `mcp__<server>__<tool>`). Only the first messages are read, where
/// a client puts its instructions.
pub fn deferred_recall_tool(messages: &dyn contextfold::middleware::History) -> Option<String> {
    let first_words = &INSTRUCTIONS[..INSTRUCTIONS.find('.').unwrap_or(INSTRUCTIONS.len())];
    let named = |text: &str| {
        text.lines().find_map(|line| {
            let (namespace, description) = line.trim_start().strip_prefix("- ")?.split_once(": ")?;
            let name = !namespace.is_empty() && namespace.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            (name && description.starts_with(first_words)).then(|| format!("{namespace}__{RECALL_TOOL}"))
        })
    };
    (0..messages.len().min(DEFERRED_MESSAGES))
        .map_while(|index| messages.message(index).ok())
        .find_map(|message| message.content.iter().filter_map(contextfold_core::Block::as_text).find_map(named))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deferred_namespace_of_this_server_names_the_recall_tool() {
        let developer = |text: &str| contextfold_core::Message::text(contextfold_core::Role::System, text);
        let deferred_recall_tool = |messages: &[contextfold_core::Message]| {
            let chain = contextfold_core::HistoryChain::of(messages);
            super::deferred_recall_tool(&contextfold::middleware::Whole::new(messages, &chain))
        };
        let listed = format!("<tools>\nDeferred tool namespaces:\n- mcp__cf: {INSTRUCTIONS}\n</tools>");
        assert_eq!(
            deferred_recall_tool(&[developer("be brief"), developer(&listed)]).as_deref(),
            Some("mcp__cf__context_recall")
        );
        assert_eq!(deferred_recall_tool(&[developer("- mcp__other: a server of another kind")]), None);
        assert_eq!(deferred_recall_tool(&[developer(&format!("- two words: {INSTRUCTIONS}"))]), None);
    }

    #[test]
    fn the_recall_tool_is_found_in_every_api_shape() {
        let found = |tools: Value| recall_tool_name(tools.as_array().unwrap());
        let bash = json!({"name": "Bash", "input_schema": {}});
        assert_eq!(
            found(json!([bash, {"name": "mcp__cf__context_recall"}])).as_deref(),
            Some("mcp__cf__context_recall")
        );
        assert_eq!(found(json!([{"name": "context_recall"}])).as_deref(), Some("context_recall"));
        assert_eq!(
            found(json!([{"type": "function", "function": {"name": "mcp__contextfold__context_recall"}}])).as_deref(),
            Some("mcp__contextfold__context_recall")
        );
        assert_eq!(
            found(json!([{"type": "function", "name": "exec_command"}, {"type": "function", "name": "mcp__x__context_recall"}]))
                .as_deref(),
            Some("mcp__x__context_recall")
        );
        let namespace = json!([{"type": "namespace", "name": "mcp__cf", "tools": [{"type": "function", "name": "context_recall"}]}]);
        assert_eq!(found(namespace).as_deref(), Some("mcp__cf__context_recall"));
        for none in [
            json!([]),
            json!([bash]),
            json!([{"name": "my_context_recall"}]),
            json!([{"name": "context_recall_v2"}]),
            json!([{"name": 7}]),
        ] {
            assert_eq!(found(none.clone()), None, "{none}");
        }
    }

    #[test]
    fn arguments_are_read_or_refused_in_one_sentence() {
        let parse = |name: &str, arguments: Value| match arguments {
            Value::Object(arguments) => Call::parse(name, &arguments),
            _ => unreachable!(),
        };
        assert!(matches!(
            parse(RECALL_TOOL, json!({"ref": " cf-1 ", "offset": "3", "limit": 2})),
            Ok(Call::Recall { reference, lines: Lines { offset: 3, limit: Some(2) } }) if reference == "cf-1"
        ));
        assert!(matches!(
            parse(SEARCH_TOOL, json!({"query": "panic"})),
            Ok(Call::Search { limit: DEFAULT_HITS, session: None, .. })
        ));
        for (name, bad, why) in [
            (RECALL_TOOL, json!({}), "give `ref`, the cf-… ref a pointer shows"),
            (RECALL_TOOL, json!({"ref": 7}), "`ref` must be a string, not 7"),
            (RECALL_TOOL, json!({"ref": "  "}), "`ref` is empty"),
            (RECALL_TOOL, json!({"ref": "cf-1", "offset": -1}), "`offset` must be a whole number from 0, not -1"),
            (RECALL_TOOL, json!({"ref": "cf-1", "limit": 0}), "`limit` must be a whole number from 1, not 0"),
            (RECALL_TOOL, json!({"ref": "cf-1", "limit": 1.5}), "`limit` must be a whole number from 1, not 1.5"),
            (SEARCH_TOOL, json!({"query": "x", "limit": 51}), "`limit` is at most 50, not 51"),
            (SEARCH_TOOL, json!({"session": "s"}), "give `query`, the words to search for"),
            ("recall", json!({}), "there is no tool `recall`; the tools are context_recall and context_search"),
        ] {
            assert_eq!(parse(name, bad.clone()).err().as_deref(), Some(why), "{bad}");
        }
    }
}
