//! The path every request that carries a conversation takes, whatever its API: the checks
//! that send it as it came, then its conversation's state, its compaction, and the bytes that
//! go upstream (the client's, or its body with only the list replaced), each step noted in
//! the request's log line. An API's module only reads its body into an [`Incoming`] and an
//! [`Identity`].

use crate::app::App;
use crate::body::{BodyError, RequestBody, Unchecked};
use crate::branches::{Branch, Branches};
use crate::calls::Recorder;
use crate::compaction::{self, Incoming, Outcome, Place};
use crate::headers::compaction_off;
use crate::log::{Action, RequestLog};
use crate::received::Received;
use crate::session::Identity;
use crate::usage::{Observer, OnUsage};
use axum::http::header;
use axum::http::request::Parts;
use bytes::Bytes;
use contextfold::store::Put;

/// The body to send, and what to learn from its answer.
pub type Outbound = (Bytes, Option<Observer>);

/// A body opened for its conversation.
pub enum Opened<'b> {
    /// Read, for the API's module to go on; its entries are checked by the module.
    Read(Unchecked<'b>),
    /// To be sent as it came (compressed, or compaction turned off).
    Send(Outbound),
}

/// Reads the client's body for its conversation (`list` is `messages` or `input`); an error
/// when it is not a JSON object with that list.
pub fn open<'b>(
    app: &App,
    parts: &Parts,
    received: &'b Received,
    log: &mut RequestLog,
    list: &'static str,
) -> Result<Opened<'b>, BodyError> {
    if parts.headers.get_all(header::CONTENT_ENCODING).iter().any(|encoding| !is_identity(encoding.as_bytes())) {
        return Ok(Opened::Send(untouched(app, log, "the body is compressed", received.bytes().clone())));
    }
    let text = received.text().map_err(BodyError::NotUtf8)?;
    let body = Unchecked::read_text(text, list, |first| app.known.find(first))?;
    log.stream = body.streams();
    log.model = body.value("model").and_then(|model| model.as_str().map(str::to_string));
    if compaction_off(&parts.headers) {
        body.checked_from(0)?;
        return Ok(Opened::Send(untouched(app, log, "x-contextfold: off", received.bytes().clone())));
    }
    Ok(Opened::Read(body))
}

/// Whether a `Content-Encoding` value says the body is as it is (`identity`, any case, alone
/// or listed).
fn is_identity(encoding: &[u8]) -> bool {
    encoding.split(|&byte| byte == b',').all(|coding| coding.trim_ascii().eq_ignore_ascii_case(b"identity"))
}

/// Runs the compaction of `identity`'s conversation for `request` and returns the bytes to
/// send: `bytes` as they came, or `parsed` with its list replaced.
pub async fn compact(
    app: &App,
    identity: Identity,
    request: Incoming<'_>,
    parsed: &RequestBody<'_>,
    bytes: Bytes,
    log: &mut RequestLog,
) -> Outbound {
    if let (Some(first), Some(list)) = (parsed.raw_messages().first(), parsed.known_list()) {
        app.known.keep(first, list);
    }
    let dialect = request.wire.dialect();
    log.session = Some(identity.session.clone());
    log.conversation = Some(identity.short_conversation());
    let slot = app.conversations.slot(identity.conversation);
    app.stats.set_conversations(app.conversations.len());
    let name = format!("serve {} {}", identity.session, identity.short_conversation());
    let key = crate::state::key(identity.conversation);
    let place = Place { settings: &app.settings, store: app.store.as_ref(), name: &name, key: &key };
    let (outcome, call) = {
        let mut branches = slot.lock().await;
        let branches = branches.get_or_insert_with(Branches::default);
        let (outcome, call) = compaction::prepare(branches, place, &request).await;
        log.preamble = branches.get_mut(call.branch).map(|state| state.fixed_tokens());
        if let (Some(store), Some(state)) = (&app.store, branches.get_mut(call.branch)) {
            log.recorder = state.session().map(|session| Recorder {
                store: store.clone(),
                session: session.clone(),
                window: state.window(),
                background: app.background.clone(),
            });
        }
        (outcome, call)
    };
    let store = app.store.clone();
    let background = app.background.clone();
    let report: OnUsage = Box::new(move |tokens| {
        background.spawn(async move {
            let mut guard = slot.lock().await;
            let Some(branches) = guard.as_mut() else { return };
            let expected = branches.version;
            let Some(state) = branches.get_mut(call.branch) else { return };
            // The calibration reaches the store too, unless another replica went on first.
            if state.observe_usage(call.call, tokens) {
                if let Some(store) = &store {
                    if let Ok(Put::Written(version)) = state.save(store, &key, expected, None).await {
                        branches.version = version;
                    }
                }
            }
        });
    });
    let body = match outcome {
        Outcome::Unchanged { tokens, skipped } => {
            log.tokens_in = Some(tokens);
            log.tokens_out = Some(tokens);
            log.action = Action::Unchanged;
            log.note = skipped;
            app.stats.count(Action::Unchanged);
            bytes
        }
        Outcome::Rewritten { messages, tokens_before, tokens_after, compaction } => {
            log.tokens_in = Some(tokens_before);
            log.tokens_out = Some(tokens_after);
            log.action = if compaction.is_some() { Action::Compacted } else { Action::Resent };
            app.stats.count(log.action);
            log.note = compaction;
            Bytes::from(parsed.splice(&messages))
        }
        Outcome::Refused { why } => {
            let note = format!("the compacted request would break a rule: {why}");
            return untouched(app, log, &note, bytes);
        }
        Outcome::Unread { why } => return untouched(app, log, &why, bytes),
    };
    (body, Some(Observer { dialect, report }))
}

/// Records that `bytes` go out as they came, and why; nothing is learnt from the answer.
pub fn untouched(app: &App, log: &mut RequestLog, why: &str, bytes: Bytes) -> Outbound {
    app.stats.count(Action::Untouched);
    log.action = Action::Untouched;
    log.note = Some(why.to_string());
    (bytes, None)
}
