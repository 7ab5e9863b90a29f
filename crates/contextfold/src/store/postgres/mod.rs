//! A session store in PostgreSQL, for several processes or machines sharing one store: the
//! same semantics as the SQLite store (append-only history with sequence numbers and hashes,
//! payloads by ref, summaries, reports, transactional compactions, full-text search).
//!
//! The driver is `tokio-postgres` behind a bounded `deadpool-postgres` pool, on a runtime
//! the store owns ([`blocking`]), so its synchronous methods work from any thread, inside
//! async code too. Writes to one session wait for each other (a row lock on the session);
//! writes to different sessions never do. A transaction that PostgreSQL aborts as a
//! deadlock or serialization failure is retried.

mod blocking;
mod pool;
mod schema;
mod search;
mod url;
mod writes;

pub use schema::POSTGRES_SCHEMA_VERSION;
pub use url::PostgresUrl;

pub(in crate::store) use pool::describe;
pub(in crate::store) use pool::Failure;

use super::{
    compaction_writes, decode_json, encode_json, hits, message_from_stored, new_session_id, now_secs, Appended, At,
    CompactionWrite, Hit, HitLocation, Payload, SessionId, SessionInfo, SessionStore, StoreError, Summary,
};
use crate::summarize::Usage;
use blocking::Driver;
use contextfold_core::Message;
use deadpool_postgres::Pool;
use pool::Mode;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;
use writes::{
    append_in, lock_session, put_call_in, put_payload_in, put_report_in, put_summary_in, session_exists, to_i64,
    to_u64, touch,
};

/// The connection pool's bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    max_connections: usize,
    wait: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions { max_connections: 8, wait: Duration::from_secs(30) }
    }
}

impl PostgresOptions {
    /// The most connections open at once (default 8); callers beyond wait for one.
    pub fn max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// How long a call waits for a free connection before failing (default 30 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
}

/// A [`SessionStore`] in a PostgreSQL database, in its schema `contextfold`.
#[derive(Debug)]
pub struct PostgresStore {
    url: PostgresUrl,
    options: PostgresOptions,
    // Dropped before the runtime its connections run on.
    pool: Pool,
    /// Connections that hold a conversation's advisory lock (`store::state`), apart from
    /// `pool`, so that lock holders never wait for connections other lock holders hold.
    pub(in crate::store) locks: Pool,
    pub(in crate::store) driver: Driver,
}

impl PostgresStore {
    /// Connects to the database at `url`, creating the store's schema when missing and
    /// bringing it up to date.
    pub fn open(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::open_url(&PostgresUrl::parse(url)?, PostgresOptions::default())
    }

    /// Connects only if the database holds a contextfold store: readers create nothing.
    pub fn open_existing(url: &str) -> Result<PostgresStore, StoreError> {
        PostgresStore::open_existing_url(&PostgresUrl::parse(url)?, PostgresOptions::default())
    }

    /// [`PostgresStore::open`] with a parsed URL and the pool's bounds.
    pub fn open_url(url: &PostgresUrl, options: PostgresOptions) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect(url, options, Mode::Create)
    }

    /// [`PostgresStore::open_existing`] with a parsed URL and the pool's bounds.
    pub fn open_existing_url(url: &PostgresUrl, options: PostgresOptions) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect(url, options, Mode::Existing)
    }

    /// Connects to an existing store for reading only: it is never migrated (an older
    /// schema is [`StoreError::OlderSchema`]) and every transaction is read-only, so a
    /// reader changes nothing and needs no more than `SELECT` rights.
    pub fn open_read_only_url(url: &PostgresUrl, options: PostgresOptions) -> Result<PostgresStore, StoreError> {
        PostgresStore::connect(url, options, Mode::ReadOnly)
    }

    /// The store's URL without its password.
    pub fn url(&self) -> &PostgresUrl {
        &self.url
    }
}

impl SessionStore for PostgresStore {
    fn create_session(&self, name: &str) -> Result<SessionId, StoreError> {
        let id = new_session_id();
        self.write(async |transaction| {
            let statement = transaction
                .prepare_cached("INSERT INTO contextfold.sessions (id, name, created) VALUES ($1, $2, $3)")
                .await?;
            transaction.execute(&statement, &[&id, &name, &to_i64(now_secs())]).await?;
            Ok(())
        })?;
        Ok(id)
    }

    fn append_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError> {
        self.write(async |transaction| append_in(transaction, session, messages, At::Aligned).await)
    }

    fn push_messages(&self, session: &str, messages: &[Message]) -> Result<Appended, StoreError> {
        self.write(async |transaction| append_in(transaction, session, messages, At::End).await)
    }

    fn log_messages(&self, session: &str, from: usize, messages: &[Message]) -> Result<Appended, StoreError> {
        self.write(async |transaction| append_in(transaction, session, messages, At::Position(from)).await)
    }

    fn prune(&self, before: u64) -> Result<Vec<SessionId>, StoreError> {
        // The other tables follow by ON DELETE CASCADE.
        self.write(async |transaction| {
            let before = to_i64(before);
            let statement = transaction
                .prepare_cached(
                    "DELETE FROM contextfold.sessions WHERE COALESCE(updated, created) < $1 RETURNING id, created, ord",
                )
                .await?;
            let mut rows: Vec<(i64, i64, String)> = (transaction.query(&statement, &[&before]).await?.iter())
                .map(|row| (row.get(1), row.get(2), row.get(0)))
                .collect();
            rows.sort();
            let statement = transaction.prepare_cached("DELETE FROM contextfold.states WHERE updated < $1").await?;
            transaction.execute(&statement, &[&before]).await?;
            Ok(rows.into_iter().map(|(_, _, id)| id).collect())
        })
    }

    fn put_payload(&self, payload: &Payload) -> Result<bool, StoreError> {
        self.write(async |transaction| put_payload_in(transaction, payload).await)
    }

    fn recall(&self, reference: &str) -> Result<Option<Value>, StoreError> {
        let json: Option<String> = self.read(async |client| {
            let statement =
                client.prepare_cached("SELECT payload FROM contextfold.payloads WHERE ref = $1 LIMIT 1").await?;
            Ok(client.query_opt(&statement, &[&reference]).await?.map(|row| row.get(0)))
        })?;
        json.map(|json| decode_json(&json, &format!("payload {reference}"))).transpose()
    }

    fn put_summary(&self, session: &str, summary: &Summary) -> Result<(), StoreError> {
        self.write(async |transaction| put_summary_in(transaction, session, summary).await)
    }

    fn summaries(&self, session: &str) -> Result<Vec<Summary>, StoreError> {
        let rows = self.read(async |client| {
            let statement = client
                .prepare_cached(
                    "SELECT head_hash, summarizer, text_json, input_tokens, output_tokens FROM contextfold.summaries \
                     WHERE session = $1 ORDER BY created, ord",
                )
                .await?;
            Ok(client.query(&statement, &[&session]).await?)
        })?;
        rows.iter()
            .map(|row| {
                let text = match decode_json(row.get(2), "summary")? {
                    Value::String(text) => text,
                    _ => return Err(StoreError::Corrupt("summary: not a string".into())),
                };
                Ok(Summary {
                    head_hash: row.get(0),
                    summarizer: row.get(1),
                    text,
                    usage: Usage { input_tokens: to_u64(row.get(3)), output_tokens: to_u64(row.get(4)) },
                })
            })
            .collect()
    }

    fn put_report(&self, session: &str, report: &Value) -> Result<(), StoreError> {
        self.write(async |transaction| put_report_in(transaction, session, report).await)
    }

    fn reports(&self, session: &str) -> Result<Vec<Value>, StoreError> {
        let rows = self.read(async |client| {
            let statement =
                client.prepare_cached("SELECT json FROM contextfold.reports WHERE session = $1 ORDER BY id").await?;
            Ok(client.query(&statement, &[&session]).await?)
        })?;
        rows.iter().map(|row| decode_json(row.get(0), "report")).collect()
    }

    fn put_call(&self, session: &str, call: &Value) -> Result<(), StoreError> {
        self.write(async |transaction| put_call_in(transaction, session, call).await)
    }

    fn calls(&self, session: &str) -> Result<Vec<Value>, StoreError> {
        let rows = self.read(async |client| {
            let statement =
                client.prepare_cached("SELECT json FROM contextfold.calls WHERE session = $1 ORDER BY id").await?;
            Ok(client.query(&statement, &[&session]).await?)
        })?;
        rows.iter().map(|row| decode_json(row.get(0), "call")).collect()
    }

    fn persist_compaction(
        &self,
        session: &str,
        messages: &[Message],
        payloads: &[Payload],
        summary: Option<&Summary>,
        report: &Value,
    ) -> Result<Appended, StoreError> {
        let writes = compaction_writes(session, messages, payloads, summary, report)?;
        self.write(async |transaction| {
            let mut appended = Appended::default();
            for write in &writes {
                match *write {
                    CompactionWrite::History(messages) => {
                        appended = append_in(transaction, session, messages, At::Aligned).await?
                    }
                    CompactionWrite::Payload(payload) => {
                        put_payload_in(transaction, payload).await?;
                    }
                    CompactionWrite::Summary(summary) => put_summary_in(transaction, session, summary).await?,
                    CompactionWrite::Report(report) => put_report_in(transaction, session, report).await?,
                    CompactionWrite::Touch => touch(transaction, session).await?,
                }
            }
            Ok(appended)
        })
    }

    fn set_session_meta(&self, session: &str, meta: &Value) -> Result<(), StoreError> {
        self.write(async |transaction| {
            lock_session(transaction, session).await?;
            let statement =
                transaction.prepare_cached("UPDATE contextfold.sessions SET meta = $2 WHERE id = $1").await?;
            transaction.execute(&statement, &[&session, &encode_json(meta)]).await?;
            Ok(())
        })
    }

    fn session_meta(&self, session: &str) -> Result<Option<Value>, StoreError> {
        let meta: Option<Option<String>> = self.read(async |client| {
            let statement = client.prepare_cached("SELECT meta FROM contextfold.sessions WHERE id = $1").await?;
            Ok(client.query_opt(&statement, &[&session]).await?.map(|row| row.get(0)))
        })?;
        match meta {
            None => Err(StoreError::UnknownSession(session.to_string())),
            Some(meta) => meta.map(|json| decode_json(&json, &format!("session {session}"))).transpose(),
        }
    }

    fn sessions(&self) -> Result<Vec<SessionInfo>, StoreError> {
        let rows = self.read(async |client| {
            let statement = client
                .prepare_cached(
                    "SELECT id, name, created, \
                     (SELECT COUNT(*) FROM contextfold.messages WHERE session = sessions.id), \
                     (SELECT COUNT(*) FROM contextfold.payloads WHERE session = sessions.id) \
                     FROM contextfold.sessions ORDER BY created, ord",
                )
                .await?;
            Ok(client.query(&statement, &[]).await?)
        })?;
        Ok(rows
            .iter()
            .map(|row| SessionInfo {
                id: row.get(0),
                name: row.get(1),
                created: to_u64(row.get(2)),
                messages: to_u64(row.get(3)) as usize,
                payloads: to_u64(row.get(4)) as usize,
            })
            .collect())
    }

    fn export(&self, session: &str) -> Result<Vec<Message>, StoreError> {
        let rows = self.read(async |client| {
            if !session_exists(client, session).await? {
                return Err(Failure::Store(StoreError::UnknownSession(session.to_string())));
            }
            let statement = client
                .prepare_cached("SELECT seq, shape, json FROM contextfold.messages WHERE session = $1 ORDER BY seq")
                .await?;
            Ok(client.query(&statement, &[&session]).await?)
        })?;
        rows.iter()
            .map(|row| {
                let sequence: i32 = row.get(0);
                message_from_stored(row.get(2), row.get(1), usize::try_from(sequence).unwrap_or(0))
            })
            .collect()
    }

    fn delete_session(&self, session: &str) -> Result<bool, StoreError> {
        // The other tables follow by ON DELETE CASCADE.
        self.write(async |transaction| {
            let statement = transaction.prepare_cached("DELETE FROM contextfold.sessions WHERE id = $1").await?;
            Ok(transaction.execute(&statement, &[&session]).await? > 0)
        })
    }

    fn message_json(&self, session: &str, position: usize) -> Result<Option<Value>, StoreError> {
        let Ok(position) = i32::try_from(position) else { return Ok(None) };
        let json: Option<String> = self.read(async |client| {
            let statement =
                client.prepare_cached("SELECT json FROM contextfold.messages WHERE session = $1 AND seq = $2").await?;
            Ok(client.query_opt(&statement, &[&session, &position]).await?.map(|row| row.get(0)))
        })?;
        json.map(|json| decode_json(&json, &format!("message {position}"))).transpose()
    }

    fn search(&self, session: Option<&str>, query: &str, limit: usize) -> Result<Vec<Hit>, StoreError> {
        let Some(query) = search::websearch_query(query).filter(|_| limit > 0) else {
            return Ok(Vec::new());
        };
        // Ranked and merged first, so that headlines are made only for the hits returned.
        let mut ids: HashMap<(String, HitLocation), i64> = HashMap::new();
        let hits = hits::search(self, limit, |count| {
            let candidates = self.search_candidates(session, &query, count)?;
            ids.extend(candidates.iter().map(|(id, hit)| ((hit.session.clone(), hit.location.clone()), *id)));
            Ok(candidates.into_iter().map(|(_, hit)| hit).collect())
        })?;
        let chosen: Vec<Option<i64>> =
            hits.iter().map(|hit| ids.get(&(hit.session.clone(), hit.location.clone())).copied()).collect();
        let mut headlines = self.headlines(&query, &chosen.iter().flatten().copied().collect::<Vec<_>>())?;
        Ok(hits
            .into_iter()
            .zip(chosen)
            .map(|(hit, id)| Hit { snippet: id.and_then(|id| headlines.remove(&id)).unwrap_or_default(), ..hit })
            .collect())
    }
}

impl PostgresStore {
    /// The index's best `limit` matches of web-search query `query`, each with the id of its
    /// best chunk and no snippet yet.
    fn search_candidates(
        &self,
        session: Option<&str>,
        query: &str,
        limit: usize,
    ) -> Result<Vec<(i64, Hit)>, StoreError> {
        let limit = to_i64(limit as u64);
        // The best chunk of each message or payload, the best first. A statement of its own
        // for one session, so its plan can use the session's index.
        let within = if session.is_some() { "session = $2" } else { "$2::text IS NULL" };
        let rows = self.read(async |client| {
            let statement = client
                .prepare_cached(&format!(
                    "WITH query AS (SELECT websearch_to_tsquery('simple', $1) AS words), \
                         best AS ( \
                           SELECT DISTINCT ON (session, kind, key) id, session, kind, key, \
                           ts_rank(tsv, words) AS rank \
                           FROM contextfold.search, query \
                           WHERE tsv @@ words AND {within} \
                           ORDER BY session, kind, key, rank DESC, id) \
                     SELECT id, session, kind, key FROM best ORDER BY rank DESC, id LIMIT $3"
                ))
                .await?;
            Ok(client.query(&statement, &[&query, &session, &limit]).await?)
        })?;
        Ok(rows
            .iter()
            .map(|row| {
                let (kind, key): (&str, String) = (row.get(2), row.get(3));
                let location = if kind == "message" {
                    HitLocation::Message(key.parse().unwrap_or(usize::MAX))
                } else {
                    HitLocation::Payload(key)
                };
                (row.get(0), Hit { session: row.get(1), location, snippet: String::new() })
            })
            .collect())
    }

    /// The snippets of chunks `ids` for web-search query `query`, by id.
    fn headlines(&self, query: &str, ids: &[i64]) -> Result<HashMap<i64, String>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let options = search::headline_options();
        let rows = self.read(async |client| {
            let statement = client
                .prepare_cached(&format!(
                    "WITH query AS (SELECT websearch_to_tsquery('simple', $1) AS words) \
                     SELECT id, body, ts_headline('simple', {}, words, $3) \
                     FROM contextfold.search, query WHERE id = ANY($2)",
                    search::WORDS
                ))
                .await?;
            Ok(client.query(&statement, &[&query, &ids, &options]).await?)
        })?;
        Ok(rows.iter().map(|row| (row.get(0), search::snippet(row.get(2), row.get(1)))).collect())
    }
}
