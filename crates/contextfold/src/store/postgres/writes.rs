//! The writes that transactions are made of: appending messages (with their search index),
//! payloads, summaries, reports and calls, each on a transaction the caller holds.

use super::{search, Failure};
use crate::store::{
    aligned_prefix, encode_json, log_gap, message_hash, message_text, now_secs, searchable_text, shape_name, Appended,
    At, Payload, StoreError, Summary,
};
use contextfold_core::Message;
use deadpool_postgres::Transaction;
use serde_json::Value;

/// Locks the session's row until the transaction ends, so that writes to one session take
/// turns; fails when there is no such session.
pub(super) async fn lock_session(transaction: &Transaction<'_>, session: &str) -> Result<(), Failure> {
    let statement =
        transaction.prepare_cached("SELECT 1 FROM contextfold.sessions WHERE id = $1 FOR NO KEY UPDATE").await?;
    match transaction.query_opt(&statement, &[&session]).await? {
        Some(_) => Ok(()),
        None => Err(Failure::Store(StoreError::UnknownSession(session.to_string()))),
    }
}

/// Adds the texts of messages or payloads (each with its key) to the search index, in chunks.
async fn index(
    transaction: &Transaction<'_>,
    session: &str,
    kind: &str,
    entries: &[(String, String)],
) -> Result<(), Failure> {
    let (mut keys, mut bodies, mut vectors) = (Vec::new(), Vec::new(), Vec::new());
    for (key, text) in entries {
        let text = search::indexable(text);
        for chunk in search::chunks(&text) {
            keys.push(key.as_str());
            vectors.push(search::tsvector(chunk));
            bodies.push(chunk.to_string());
        }
    }
    let statement = transaction
        .prepare_cached(
            "INSERT INTO contextfold.search (session, kind, key, body, tsv) \
             SELECT $1, $2, key, body, vector::tsvector FROM unnest($3::text[], $4::text[], $5::text[]) \
             AS entry (key, body, vector)",
        )
        .await?;
    transaction.execute(&statement, &[&session, &kind, &keys, &bodies, &vectors]).await?;
    Ok(())
}

pub(super) async fn append_in(
    transaction: &Transaction<'_>,
    session: &str,
    messages: &[Message],
    at: At,
) -> Result<Appended, Failure> {
    lock_session(transaction, session).await?;
    let incoming: Vec<String> = messages.iter().map(message_hash).collect();
    let next = async || -> Result<usize, Failure> {
        let statement = transaction
            .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM contextfold.messages WHERE session = $1")
            .await?;
        let next: i32 = transaction.query_one(&statement, &[&session]).await?.get(0);
        Ok(usize::try_from(next).unwrap_or(0))
    };
    // Aligning reads the stored hashes; a plain push needs only the next sequence number.
    let (skipped, first) = match at {
        _ if messages.is_empty() => (0, next().await?),
        At::Aligned => {
            let statement = transaction
                .prepare_cached("SELECT hash FROM contextfold.messages WHERE session = $1 ORDER BY seq")
                .await?;
            let stored: Vec<String> =
                transaction.query(&statement, &[&session]).await?.iter().map(|row| row.get(0)).collect();
            (aligned_prefix(&stored, &incoming), stored.len())
        }
        At::End => (0, next().await?),
        At::Position(from) => {
            let end = next().await?;
            if from > end {
                return Err(Failure::Store(log_gap(session, from, end)));
            }
            if from < end {
                let from = i32::try_from(from).unwrap_or(i32::MAX);
                let statement = transaction
                    .prepare_cached(
                        "DELETE FROM contextfold.search WHERE session = $1 AND kind = 'message' \
                         AND key::integer >= $2",
                    )
                    .await?;
                transaction.execute(&statement, &[&session, &from]).await?;
                let statement = transaction
                    .prepare_cached("DELETE FROM contextfold.messages WHERE session = $1 AND seq >= $2")
                    .await?;
                transaction.execute(&statement, &[&session, &from]).await?;
            }
            (0, from)
        }
    };
    let new = &messages[skipped..];
    let sequences: Vec<i32> = (first..first + new.len()).map(|seq| i32::try_from(seq).unwrap_or(i32::MAX)).collect();
    let hashes = &incoming[skipped..];
    let shapes: Vec<&str> = new.iter().map(shape_name).collect();
    let jsons: Vec<String> = new.iter().map(|message| encode_json(&message.to_value())).collect();
    let statement = transaction
        .prepare_cached(
            "INSERT INTO contextfold.messages (session, seq, hash, shape, json) \
             SELECT $1, seq, hash, shape, json FROM unnest($2::int[], $3::text[], $4::text[], $5::text[]) \
             AS message (seq, hash, shape, json)",
        )
        .await?;
    transaction.execute(&statement, &[&session, &sequences, &hashes, &shapes, &jsons]).await?;
    let texts: Vec<(String, String)> =
        new.iter().zip(&sequences).map(|(message, seq)| (seq.to_string(), message_text(message))).collect();
    index(transaction, session, "message", &texts).await?;
    if !new.is_empty() {
        touch(transaction, session).await?;
    }
    Ok(Appended { stored: new.len(), skipped, total: first + new.len() })
}

/// Marks `session` as written now, for pruning by last activity.
pub(super) async fn touch(transaction: &Transaction<'_>, session: &str) -> Result<(), Failure> {
    let statement = transaction.prepare_cached("UPDATE contextfold.sessions SET updated = $2 WHERE id = $1").await?;
    transaction.execute(&statement, &[&session, &to_i64(now_secs())]).await?;
    Ok(())
}

pub(super) async fn put_payload_in(transaction: &Transaction<'_>, payload: &Payload) -> Result<bool, Failure> {
    lock_session(transaction, &payload.session).await?;
    let statement = transaction
        .prepare_cached(
            "INSERT INTO contextfold.payloads (session, ref, tool, kind, target, tokens, message, block, payload) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (session, ref) DO NOTHING",
        )
        .await?;
    let inserted = transaction
        .execute(
            &statement,
            &[
                &payload.session,
                &payload.reference,
                &payload.tool,
                &payload.kind,
                &payload.target,
                &to_i64(payload.tokens),
                &to_i64(payload.message as u64),
                &to_i64(payload.block as u64),
                &encode_json(&payload.payload),
            ],
        )
        .await?;
    if inserted > 0 {
        let text = searchable_text(&payload.payload);
        index(transaction, &payload.session, "payload", &[(payload.reference.clone(), text)]).await?;
    }
    Ok(inserted > 0)
}

pub(super) async fn put_summary_in(
    transaction: &Transaction<'_>,
    session: &str,
    summary: &Summary,
) -> Result<(), Failure> {
    lock_session(transaction, session).await?;
    // A replaced summary moves to the end, as a new one would.
    let statement = transaction
        .prepare_cached(
            "INSERT INTO contextfold.summaries \
             (session, head_hash, summarizer, text_json, input_tokens, output_tokens, created) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (session, head_hash, summarizer) DO UPDATE SET text_json = excluded.text_json, \
             input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, \
             created = excluded.created, ord = DEFAULT",
        )
        .await?;
    let text = encode_json(&Value::String(summary.text.clone()));
    let (input, output) = (to_i64(summary.usage.input_tokens), to_i64(summary.usage.output_tokens));
    transaction
        .execute(
            &statement,
            &[&session, &summary.head_hash, &summary.summarizer, &text, &input, &output, &to_i64(now_secs())],
        )
        .await?;
    Ok(())
}

pub(super) async fn put_report_in(transaction: &Transaction<'_>, session: &str, report: &Value) -> Result<(), Failure> {
    lock_session(transaction, session).await?;
    let statement = transaction
        .prepare_cached("INSERT INTO contextfold.reports (session, json, created) VALUES ($1, $2, $3)")
        .await?;
    transaction.execute(&statement, &[&session, &encode_json(report), &to_i64(now_secs())]).await?;
    Ok(())
}

pub(super) async fn put_call_in(transaction: &Transaction<'_>, session: &str, call: &Value) -> Result<(), Failure> {
    lock_session(transaction, session).await?;
    let statement = transaction
        .prepare_cached("INSERT INTO contextfold.calls (session, json, created) VALUES ($1, $2, $3)")
        .await?;
    transaction.execute(&statement, &[&session, &encode_json(call), &to_i64(now_secs())]).await?;
    touch(transaction, session).await
}

pub(super) async fn session_exists(client: &deadpool_postgres::Client, session: &str) -> Result<bool, Failure> {
    let statement = client.prepare_cached("SELECT 1 FROM contextfold.sessions WHERE id = $1").await?;
    Ok(client.query_opt(&statement, &[&session]).await?.is_some())
}

pub(super) fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(super) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
