//! The dashboard's JSON API: what the store holds, shaped for the page and nothing more.
//!
//! Every answer is built from [`SessionStore`] calls alone (sessions, reports, summaries,
//! calls, recall, search), so the dashboard shows what `contextfold sessions`, `recall` and
//! `search` show. Stored text goes out as JSON strings, never as markup: the page writes it
//! as text content. The calls here are synchronous; [`super`] runs them on the blocking pool.

use contextfold::store::{HitLocation, SessionInfo, SessionStore, StoreError};
use serde_json::{json, Map, Value};

/// The most search hits one answer holds.
pub(super) const MAX_HITS: usize = 50;

/// Why an API call has no answer, each with one sentence for the page.
#[derive(Debug)]
pub(super) enum ApiError {
    /// 400: the request lacks what the call needs.
    BadRequest(String),
    /// 404: no such session or ref.
    NotFound(String),
    /// 500: the store failed.
    Store(String),
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> ApiError {
        match err {
            StoreError::UnknownSession(id) => ApiError::NotFound(format!("no session `{id}` in the store")),
            err => ApiError::Store(format!("the store failed: {err}")),
        }
    }
}

/// Every session with its totals, the most recently active first.
pub(super) fn sessions(store: &dyn SessionStore) -> Result<Value, ApiError> {
    let mut listed = Vec::new();
    for info in store.sessions()? {
        let reports = store.reports(&info.id)?;
        let calls = store.calls(&info.id)?;
        listed.push(totals(&info, reports.len(), &calls));
    }
    listed.sort_by_key(|session| std::cmp::Reverse(session["last_activity"].as_u64().unwrap_or(0)));
    Ok(json!({ "sessions": listed }))
}

/// One session: its totals and metadata, its calls as stored, and its compactions, each a
/// stored report with the summary it wrote.
pub(super) fn session(store: &dyn SessionStore, id: &str) -> Result<Value, ApiError> {
    let Some(info) = store.sessions()?.into_iter().find(|info| info.id == id) else {
        return Err(ApiError::NotFound(format!("no session `{id}` in the store")));
    };
    let reports = store.reports(id)?;
    let calls = store.calls(id)?;
    let summaries = store.summaries(id)?;
    let meta = store.session_meta(id)?.unwrap_or(Value::Null);
    // A report does not name its summary: the compactions that summarized wrote the
    // summaries in the same order, one each.
    let mut texts = summaries.into_iter();
    let compactions: Vec<Value> = reports
        .into_iter()
        .enumerate()
        .map(|(index, mut report)| {
            let summarized = report["summary_tokens"].as_u64().unwrap_or(0) > 0;
            let summary = if summarized { texts.next() } else { None };
            if let Value::Object(fields) = &mut report {
                fields.insert("index".into(), json!(index));
                fields.insert("summary".into(), summary.as_ref().map_or(Value::Null, |s| json!(s.text)));
                fields.insert("summary_by".into(), summary.as_ref().map_or(Value::Null, |s| json!(s.summarizer)));
            }
            report
        })
        .collect();
    let window = calls.iter().rev().find_map(|call| call["window"].as_u64());
    Ok(json!({
        "session": totals(&info, compactions.len(), &calls),
        "meta": meta,
        "window": window,
        "calls": calls,
        "compactions": compactions,
    }))
}

/// A payload by its ref: `text` is what `contextfold recall` prints (a string payload as it
/// is, any other as its JSON), `payload` the stored value.
pub(super) fn payload(store: &dyn SessionStore, reference: &str) -> Result<Value, ApiError> {
    if reference.is_empty() {
        return Err(ApiError::BadRequest("give the payload's ref as `?ref=cf-…`".into()));
    }
    let Some(payload) = store.recall(reference)? else {
        return Err(ApiError::NotFound(format!("no payload `{reference}` in the store")));
    };
    let text = match &payload {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    Ok(json!({ "ref": reference, "text": text, "payload": payload }))
}

/// The hits of `query` (words that must all occur) in one session or all, at most
/// [`MAX_HITS`].
pub(super) fn search(store: &dyn SessionStore, query: &str, session: Option<&str>) -> Result<Value, ApiError> {
    if query.trim().is_empty() {
        return Err(ApiError::BadRequest("give words to search for as `?q=…`".into()));
    }
    let found = store.search(session, query, MAX_HITS)?;
    let names: std::collections::HashMap<String, String> = if found.is_empty() {
        Default::default()
    } else {
        store.sessions()?.into_iter().map(|s| (s.id, s.name)).collect()
    };
    let hits: Vec<Value> = found
        .into_iter()
        .map(|hit| {
            let mut fields = Map::new();
            fields.insert("name".into(), json!(names.get(&hit.session)));
            fields.insert("session".into(), json!(hit.session));
            match hit.location {
                HitLocation::Message(sequence) => fields.insert("message".into(), json!(sequence)),
                HitLocation::Payload(reference) => fields.insert("ref".into(), json!(reference)),
            };
            fields.insert("snippet".into(), json!(hit.snippet));
            Value::Object(fields)
        })
        .collect();
    Ok(json!({ "query": query, "hits": hits }))
}

/// A session's totals: what the store lists, its compactions, and, when its calls were
/// recorded, the tokens and estimated cost of the calls that succeeded, received from the
/// client and sent upstream (as `contextfold report` counts them).
fn totals(info: &SessionInfo, compactions: usize, calls: &[Value]) -> Value {
    let answered: Vec<&Value> =
        calls.iter().filter(|call| call["status"].as_u64().is_none_or(|status| (200..300).contains(&status))).collect();
    let tokens = |field: &str| answered.iter().filter_map(|call| call[field].as_u64()).sum::<u64>();
    let dollars = |field: &str| {
        let costs: Vec<f64> = answered.iter().filter_map(|call| call[field].as_f64()).collect();
        (!costs.is_empty()).then(|| costs.iter().sum::<f64>())
    };
    let last_call = calls.iter().filter_map(|call| call["at"].as_u64()).max();
    let recorded = !calls.is_empty();
    json!({
        "id": info.id,
        "name": info.name,
        "created": info.created,
        "last_activity": last_call.unwrap_or(info.created).max(info.created),
        "messages": info.messages,
        "payloads": info.payloads,
        "compactions": compactions,
        "calls": calls.len(),
        "tokens_received": recorded.then(|| tokens("tokens_received")),
        "tokens_sent": recorded.then(|| tokens("tokens_sent")),
        "cost_without": dollars("cost_without"),
        "cost_with": dollars("cost_with"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextfold::store::MemoryStore;

    #[test]
    fn a_missing_session_or_ref_is_not_found_with_a_reason() {
        let store = MemoryStore::default();
        let Err(ApiError::NotFound(why)) = session(&store, "nope") else { panic!("a missing session is a 404") };
        assert!(why.contains("nope"), "{why}");
        let Err(ApiError::NotFound(why)) = payload(&store, "cf-0000000000aa") else { panic!("a missing ref is a 404") };
        assert!(why.contains("cf-0000000000aa"), "{why}");
        assert!(matches!(payload(&store, ""), Err(ApiError::BadRequest(_))));
        assert!(matches!(search(&store, "  ", None), Err(ApiError::BadRequest(_))));
    }

    #[test]
    fn totals_add_up_the_calls_and_leave_savings_out_without_them() {
        let info = SessionInfo { id: "s".into(), name: "n".into(), messages: 3, payloads: 1, created: 10 };
        let calls = [
            json!({"at": 20, "status": 200, "tokens_received": 100, "tokens_sent": 60, "cost_without": 0.5, "cost_with": 0.25}),
            json!({"at": 30, "status": 200, "tokens_received": 200, "tokens_sent": 80}),
            json!({"at": 40, "status": 502, "tokens_received": 900, "tokens_sent": 900}),
        ];
        let shown = totals(&info, 2, &calls);
        assert_eq!((shown["tokens_received"].as_u64(), shown["tokens_sent"].as_u64()), (Some(300), Some(140)));
        assert_eq!((shown["cost_without"].as_f64(), shown["cost_with"].as_f64()), (Some(0.5), Some(0.25)));
        assert_eq!((shown["calls"].as_u64(), shown["last_activity"].as_u64()), (Some(3), Some(40)));
        let none = totals(&info, 0, &[]);
        assert!(none["tokens_received"].is_null() && none["tokens_sent"].is_null() && none["cost_with"].is_null());
        assert_eq!(none["last_activity"], 10);
    }
}
