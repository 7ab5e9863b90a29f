//! The writes that transactions are made of: appending messages (with their search index),
//! payloads, summaries and reports, each on a transaction the caller holds.

use super::{fts_string, to_usize, SqliteStore};
use crate::store::{
    aligned_prefix, encode_json, log_gap, message_hash, message_text, now_secs, searchable_text, shape_name, Appended,
    At, Payload, StoreError, Summary,
};
use contextfold_core::Message;
use rusqlite::{params, OptionalExtension, Transaction};
use serde_json::Value;

impl SqliteStore {
    pub(super) fn check_session(&self, transaction: &Transaction<'_>, session: &str) -> Result<(), StoreError> {
        let found = transaction
            .query_row("SELECT 1 FROM sessions WHERE id = ?1", [session], |_| Ok(()))
            .optional()
            .map_err(|err| self.sql(err))?;
        found.ok_or_else(|| StoreError::UnknownSession(session.to_string()))
    }

    pub(super) fn append_in(
        &self,
        transaction: &Transaction<'_>,
        session: &str,
        messages: &[Message],
        at: At,
    ) -> Result<Appended, StoreError> {
        self.check_session(transaction, session)?;
        let sql = |err| self.sql(err);
        let next = || -> Result<usize, StoreError> {
            transaction
                .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE session = ?1")
                .and_then(|mut statement| statement.query_row([session], |row| row.get::<_, i64>(0)))
                .map(to_usize)
                .map_err(sql)
        };
        let incoming: Vec<String> = messages.iter().map(message_hash).collect();
        // Aligning reads the stored hashes; a plain push needs only the next sequence number,
        // so appending one message at a time does not cost the whole history each time.
        let (skipped, mut sequence) = match at {
            _ if messages.is_empty() => (0, next()?),
            At::Aligned => {
                let mut statement = transaction
                    .prepare_cached("SELECT hash FROM messages WHERE session = ?1 ORDER BY seq")
                    .map_err(sql)?;
                let rows = statement.query_map([session], |row| row.get(0)).map_err(sql)?;
                let stored: Vec<String> = rows.collect::<Result<_, _>>().map_err(sql)?;
                (aligned_prefix(&stored, &incoming), stored.len())
            }
            At::End => (0, next()?),
            At::Position(from) => {
                let end = next()?;
                if from > end {
                    return Err(log_gap(session, from, end));
                }
                if from < end {
                    transaction
                        .execute(
                            "DELETE FROM search WHERE search MATCH ?1 AND session = ?2 AND kind = 'message' \
                             AND CAST(key AS INTEGER) >= ?3",
                            params![format!("session : {}", fts_string(session)), session, from as i64],
                        )
                        .map_err(sql)?;
                    transaction
                        .execute("DELETE FROM messages WHERE session = ?1 AND seq >= ?2", params![session, from as i64])
                        .map_err(sql)?;
                }
                (0, from)
            }
        };
        for (message, hash) in messages.iter().zip(&incoming).skip(skipped) {
            let json = encode_json(&message.to_value());
            transaction
                .prepare_cached("INSERT INTO messages (session, seq, hash, shape, json) VALUES (?1, ?2, ?3, ?4, ?5)")
                .and_then(|mut statement| {
                    statement.execute(params![session, sequence as i64, hash, shape_name(message), json])
                })
                .map_err(sql)?;
            index(transaction, session, "message", &sequence.to_string(), &message_text(message)).map_err(sql)?;
            sequence += 1;
        }
        if messages.len() > skipped {
            touch(transaction, session).map_err(sql)?;
        }
        Ok(Appended { stored: messages.len() - skipped, skipped, total: sequence })
    }

    pub(super) fn put_payload_in(&self, transaction: &Transaction<'_>, payload: &Payload) -> Result<bool, StoreError> {
        self.check_session(transaction, &payload.session)?;
        let sql = |err| self.sql(err);
        let json = encode_json(&payload.payload);
        let inserted = transaction
            .prepare_cached(
                "INSERT OR IGNORE INTO payloads (session, ref, tool, kind, target, tokens, message, block, payload) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .and_then(|mut statement| {
                statement.execute(params![
                    payload.session,
                    payload.reference,
                    payload.tool,
                    payload.kind,
                    payload.target,
                    payload.tokens as i64,
                    payload.message as i64,
                    payload.block as i64,
                    json
                ])
            })
            .map_err(sql)?;
        if inserted > 0 {
            index(transaction, &payload.session, "payload", &payload.reference, &searchable_text(&payload.payload))
                .map_err(sql)?;
        }
        Ok(inserted > 0)
    }

    pub(super) fn put_summary_in(
        &self,
        transaction: &Transaction<'_>,
        session: &str,
        summary: &Summary,
    ) -> Result<(), StoreError> {
        self.check_session(transaction, session)?;
        transaction
            .execute(
                "INSERT OR REPLACE INTO summaries \
                 (session, head_hash, summarizer, text, input_tokens, output_tokens, created) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    session,
                    summary.head_hash,
                    summary.summarizer,
                    summary.text,
                    summary.usage.input_tokens as i64,
                    summary.usage.output_tokens as i64,
                    now_secs() as i64
                ],
            )
            .map_err(|err| self.sql(err))?;
        Ok(())
    }

    pub(super) fn put_report_in(
        &self,
        transaction: &Transaction<'_>,
        session: &str,
        report: &Value,
    ) -> Result<(), StoreError> {
        self.check_session(transaction, session)?;
        transaction
            .execute(
                "INSERT INTO reports (session, json, created) VALUES (?1, ?2, ?3)",
                params![session, encode_json(report), now_secs() as i64],
            )
            .map_err(|err| self.sql(err))?;
        Ok(())
    }
}

/// Marks `session` as written now, for pruning by last activity.
pub(super) fn touch(transaction: &Transaction<'_>, session: &str) -> rusqlite::Result<()> {
    transaction
        .prepare_cached("UPDATE sessions SET updated = ?2 WHERE id = ?1")?
        .execute(params![session, now_secs() as i64])
        .map(drop)
}

/// Adds `body` to the full-text index.
fn index(transaction: &Transaction<'_>, session: &str, kind: &str, key: &str, body: &str) -> rusqlite::Result<()> {
    transaction
        .prepare_cached("INSERT INTO search (session, kind, key, body) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![session, kind, key, body])
        .map(drop)
}
