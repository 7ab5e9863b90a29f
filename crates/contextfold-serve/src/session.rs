//! Which conversation a request belongs to.
//!
//! The session comes from the client when it says: `X-Claude-Code-Session-Id`, then
//! `x-contextfold-session`, then the session part of `metadata.user_id` (Claude Code's
//! `…_session_<id>`, or a JSON string with a `session_id`). Otherwise it is a hash of the
//! system prompt, less a block that changes on every request (Claude Code's
//! `x-anthropic-billing-header` line), the first message and the client's credential (a hash
//! of its `x-api-key` or `Authorization`, never the value: two users of one proxy never
//! share a conversation, even when their histories agree). One session may hold several
//! conversations at once (an agent and its sub-agents), so the state is keyed by the
//! session and the conversation's first message.
//!
//! An OpenAI request names its session with `x-contextfold-session`, then the body's
//! `prompt_cache_key` (Codex CLI's conversation id), then `user` or `safety_identifier`;
//! otherwise it is the same hash of the system/developer prompt and the first message.

use crate::headers::SESSION_HEADER;
use axum::http::HeaderMap;
use contextfold_core::hash::{message_fingerprint, StableHasher};
use contextfold_core::{Block, Message, System};
use serde_json::Value;

/// The header Claude Code names its session with.
pub const CLAUDE_CODE_SESSION_HEADER: &str = "x-claude-code-session-id";

/// The start of the system block Claude Code changes on every request.
const BILLING_HEADER: &str = "x-anthropic-billing-header";

/// The longest session id kept from a client; longer ones are hashed.
const MAX_SESSION_LEN: usize = 64;

/// The session of a request, and the key of its conversation's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The session id, as the client gave it (when short and plain) or a hash.
    pub session: String,
    /// The conversation within the session.
    pub conversation: u64,
}

impl Identity {
    /// The conversation key, shortened for log lines.
    pub fn short_conversation(&self) -> String {
        format!("{:08x}", self.conversation >> 32)
    }
}

/// The identity of a request with these headers, `metadata`, system prompt and messages.
pub fn identify(
    headers: &HeaderMap,
    metadata: Option<&Value>,
    system: Option<&System>,
    messages: &[Message],
) -> Identity {
    let named = [CLAUDE_CODE_SESSION_HEADER, SESSION_HEADER]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|value| value.to_str().ok()))
        .map(str::trim)
        .filter(|id| !id.is_empty())
        .map(str::to_string)
        .or_else(|| metadata.and_then(metadata_session));
    keyed(named, headers, system, messages)
}

/// The identity of an OpenAI request with these headers, body fields (`prompt_cache_key`,
/// `user`, `safety_identifier`, in that order), system prompt and messages.
pub fn identify_openai(
    headers: &HeaderMap,
    named_by_body: &[Option<Value>],
    system: Option<&System>,
    messages: &[Message],
) -> Identity {
    let from_header = headers.get(SESSION_HEADER).and_then(|value| value.to_str().ok()).map(str::to_string);
    let from_body = named_by_body.iter().flatten().filter_map(|value| value.as_str().map(str::to_string));
    let named = from_header.into_iter().chain(from_body).map(|id| id.trim().to_string()).find(|id| !id.is_empty());
    keyed(named, headers, system, messages)
}

/// The identity of the conversation starting with `messages` in the session `named`, or in a
/// session named by the hash of the system prompt, the first message and the credential in
/// `headers`.
fn keyed(named: Option<String>, headers: &HeaderMap, system: Option<&System>, messages: &[Message]) -> Identity {
    let first = messages.first().map_or(0, message_fingerprint);
    let session = match named {
        Some(id) => printable(&id),
        None => {
            let mut hasher = StableHasher::default();
            hasher.write(stable_system_text(system).as_bytes()).write(&first.to_le_bytes());
            hasher.write(&credential(headers).to_le_bytes());
            format!("h{:016x}", hasher.finish())
        }
    };
    let conversation = StableHasher::default().write(session.as_bytes()).write(&first.to_le_bytes()).finish();
    Identity { session, conversation }
}

/// A hash of the client's credential (`x-api-key`, else `Authorization`), 0 without one.
fn credential(headers: &HeaderMap) -> u64 {
    let value = headers.get("x-api-key").or_else(|| headers.get(axum::http::header::AUTHORIZATION));
    value.map_or(0, |value| StableHasher::default().write(b"credential").write(value.as_bytes()).finish())
}

/// The session part of `metadata.user_id`, when it has one.
fn metadata_session(metadata: &Value) -> Option<String> {
    let user_id = metadata.get("user_id")?.as_str()?;
    if let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(user_id) {
        return fields.get("session_id").and_then(Value::as_str).map(str::to_string);
    }
    let (_, session) = user_id.rsplit_once("_session_")?;
    (!session.is_empty()).then(|| session.to_string())
}

/// `id` if it is short and plain (safe in a log line), else a hash of it.
fn printable(id: &str) -> String {
    let plain = id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
    if plain && id.len() <= MAX_SESSION_LEN {
        id.to_string()
    } else {
        format!("h{:016x}", StableHasher::default().write(id.as_bytes()).finish())
    }
}

/// The system prompt's text without the blocks that change on every request.
fn stable_system_text(system: Option<&System>) -> String {
    match system {
        None => String::new(),
        Some(System::Text(text)) => match text.split_once('\n') {
            Some((first, rest)) if first.starts_with(BILLING_HEADER) => rest.to_string(),
            _ if text.starts_with(BILLING_HEADER) => String::new(),
            _ => text.clone(),
        },
        Some(System::Blocks(blocks)) => blocks
            .iter()
            .filter_map(Block::as_text)
            .filter(|text| !text.starts_with(BILLING_HEADER))
            .collect::<Vec<_>>()
            .join("\n\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use contextfold_core::Role;
    use serde_json::json;

    fn with_header(name: &'static str, value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn sessions_come_from_headers_then_metadata_then_a_hash() {
        let first = [Message::text(Role::User, "fix the bug")];
        let metadata = json!({"user_id": "user_abc_account_def_session_9f1c-22"});
        let both = {
            let mut headers = with_header(CLAUDE_CODE_SESSION_HEADER, "cc-1");
            headers.insert(SESSION_HEADER, HeaderValue::from_static("mine"));
            headers
        };
        assert_eq!(identify(&both, Some(&metadata), None, &first).session, "cc-1");
        assert_eq!(identify(&with_header(SESSION_HEADER, "mine"), Some(&metadata), None, &first).session, "mine");
        assert_eq!(identify(&HeaderMap::new(), Some(&metadata), None, &first).session, "9f1c-22");
        let json_id = json!({"user_id": r#"{"device_id":"d","account_uuid":"a","session_id":"s-77"}"#});
        assert_eq!(identify(&HeaderMap::new(), Some(&json_id), None, &first).session, "s-77");
        let plain = json!({"user_id": "user-123"});
        assert!(identify(&HeaderMap::new(), Some(&plain), None, &first).session.starts_with('h'));
    }

    #[test]
    fn the_hash_ignores_the_billing_block_and_sees_the_first_message() {
        let system = |billing: &str| {
            System::Blocks(vec![
                Block::text(format!("x-anthropic-billing-header: cc_version=2.1; cch={billing};")),
                Block::text("You are Claude Code."),
            ])
        };
        let first = [Message::text(Role::User, "fix the bug")];
        let a = identify(&HeaderMap::new(), None, Some(&system("1")), &first);
        let b = identify(&HeaderMap::new(), None, Some(&system("2")), &first);
        assert_eq!(a, b);
        let other = identify(&HeaderMap::new(), None, Some(&system("1")), &[Message::text(Role::User, "other")]);
        assert_ne!(a.session, other.session);
    }

    #[test]
    fn without_a_session_id_two_credentials_are_two_conversations() {
        let first = [Message::text(Role::User, "fix the bug")];
        let alice = identify(&with_header("x-api-key", "sk-ant-alice"), None, None, &first);
        let bob = identify(&with_header("x-api-key", "sk-ant-bob"), None, None, &first);
        let bearer = identify(&with_header("authorization", "Bearer sk-ant-alice"), None, None, &first);
        assert_ne!(alice, bob);
        assert_ne!(alice, bearer);
        assert_eq!(alice, identify(&with_header("x-api-key", "sk-ant-alice"), None, None, &first));
        assert!(!alice.session.contains("alice"), "the credential is hashed: {}", alice.session);
        let openai = |key| identify_openai(&with_header("authorization", key), &[], None, &first);
        assert_ne!(openai("Bearer sk-proj-a"), openai("Bearer sk-proj-b"));
        // A session id the client names is the same whoever sends it.
        let named = |key| {
            let mut headers = with_header("x-api-key", key);
            headers.insert(SESSION_HEADER, HeaderValue::from_static("s-1"));
            identify(&headers, None, None, &first)
        };
        assert_eq!(named("sk-ant-alice"), named("sk-ant-bob"));
    }

    #[test]
    fn sub_agents_of_one_session_are_separate_conversations() {
        let headers = with_header(CLAUDE_CODE_SESSION_HEADER, "cc-1");
        let main = identify(&headers, None, None, &[Message::text(Role::User, "build it")]);
        let sub = identify(&headers, None, None, &[Message::text(Role::User, "search the repo")]);
        assert_eq!(main.session, sub.session);
        assert_ne!(main.conversation, sub.conversation);
    }

    #[test]
    fn openai_sessions_come_from_the_header_then_the_body_then_a_hash() {
        let first = [Message::text(Role::User, "fix the bug")];
        let body = [Some(json!("pck-1")), Some(json!("user-9")), None];
        let header = with_header(SESSION_HEADER, "mine");
        assert_eq!(identify_openai(&header, &body, None, &first).session, "mine");
        assert_eq!(identify_openai(&HeaderMap::new(), &body, None, &first).session, "pck-1");
        let later = [None, Some(json!("")), Some(json!("safety-3"))];
        assert_eq!(identify_openai(&HeaderMap::new(), &later, None, &first).session, "safety-3");
        let system = System::Text("You are Codex.".into());
        let hashed = identify_openai(&HeaderMap::new(), &[None, Some(json!(7))], Some(&system), &first);
        assert!(hashed.session.starts_with('h'));
        assert_eq!(hashed, identify_openai(&HeaderMap::new(), &[], Some(&system), &first));
        let other = identify_openai(&HeaderMap::new(), &[], Some(&System::Text("Else.".into())), &first);
        assert_ne!(hashed.session, other.session);
    }

    #[test]
    fn odd_session_ids_are_hashed() {
        let long = "x".repeat(65);
        assert!(printable(&long).starts_with('h'));
        assert!(printable("a b").starts_with('h'));
        assert_eq!(printable("abc-1"), "abc-1");
    }
}
