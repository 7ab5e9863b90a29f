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
mod schema;
mod search;
mod url;

pub use schema::POSTGRES_SCHEMA_VERSION;
pub use url::PostgresUrl;

use super::{
    aligned_prefix, check_payload_sessions, decode_json, encode_json, log_gap, message_from_stored, message_hash,
    message_text, new_session_id, now_secs, searchable_text, shape_name, Appended, At, Hit, HitLocation, Payload,
    SessionId, SessionInfo, SessionStore, StoreError, Summary,
};
use crate::summarize::Usage;
use blocking::Driver;
use contextfold_core::Message;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Transaction};
use schema::Found;
use serde_json::Value;
use std::time::Duration;
use tokio_postgres::error::SqlState;

/// How often a transaction aborted as a deadlock or serialization failure is tried.
const ATTEMPTS: usize = 5;

/// How a store is opened: what may be created or changed on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Create the schema when missing; migrate an older one.
    Create,
    /// Only an existing store; migrate an older one.
    Existing,
    /// Only an existing store of this build's schema; read-only transactions.
    ReadOnly,
}

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

/// Connections that may hold conversation locks at once, per pooled connection (16 for the
/// default pool of 8); lockers beyond wait for one.
const LOCK_CONNECTIONS_PER_CONNECTION: usize = 2;

/// Why a step inside a transaction failed.
pub(in crate::store) enum Failure {
    Db(tokio_postgres::Error),
    Store(StoreError),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(err: tokio_postgres::Error) -> Self {
        Failure::Db(err)
    }
}

impl From<StoreError> for Failure {
    fn from(err: StoreError) -> Self {
        Failure::Store(err)
    }
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

    fn connect(url: &PostgresUrl, options: PostgresOptions, mode: Mode) -> Result<PostgresStore, StoreError> {
        let url = url.clone();
        let options = match url.pool_max_conns() {
            Some(max) => options.max_connections(max),
            None => options,
        };
        let (mut config, tls) = url.config();
        if mode == Mode::ReadOnly {
            let given = config.get_options().map(|options| format!("{options} ")).unwrap_or_default();
            config.options(format!("{given}-c default_transaction_read_only=on"));
        }
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = || match tls {
            url::Tls::Off => Ok(Manager::from_config(config.clone(), tokio_postgres::NoTls, manager_config.clone())),
            url::Tls::Required => {
                let tls = rustls_connector().map_err(|err| StoreError::Invalid(format!("TLS for {url}: {err}")))?;
                Ok(Manager::from_config(config.clone(), tls, manager_config.clone()))
            }
        };
        let driver = Driver::new().map_err(|source| StoreError::Io { path: url.to_string().into(), source })?;
        let pool = |size: usize| {
            Pool::builder(manager()?)
                .max_size(size)
                .wait_timeout(Some(options.wait))
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .build()
                .map_err(|err| StoreError::Invalid(format!("the connection pool for {url}: {err}")))
        };
        let lockers = options.max_connections * LOCK_CONNECTIONS_PER_CONNECTION;
        let (locks, pool) = (pool(lockers)?, pool(options.max_connections)?);
        let store = PostgresStore { url, options, pool, locks, driver };
        store.driver.run(store.prepare(mode))?;
        Ok(store)
    }

    /// Checks the database, creating or migrating the store as `mode` allows.
    async fn prepare(&self, mode: Mode) -> Result<(), StoreError> {
        let mut client = self.pool.get().await.map_err(|err| self.pool_error(err))?;
        let mut found = schema::inspect(&**client).await.map_err(|err| self.db(err))?;
        schema::check(found, &self.server())?;
        match (found, mode) {
            (Found::Nothing, Mode::Existing | Mode::ReadOnly) => {
                return Err(StoreError::Missing { path: self.server().into() })
            }
            (Found::Version(version), _) if version == POSTGRES_SCHEMA_VERSION => return Ok(()),
            (Found::Version(version), Mode::ReadOnly) => {
                return Err(StoreError::OlderSchema {
                    path: self.server().into(),
                    found: version,
                    known: POSTGRES_SCHEMA_VERSION,
                })
            }
            _ => found = schema::migrate(&mut client).await.map_err(|err| self.db(err))?,
        }
        schema::check(found, &self.server())
    }

    /// The store's URL without its password.
    pub fn url(&self) -> &PostgresUrl {
        &self.url
    }

    fn server(&self) -> String {
        self.url.to_string()
    }

    pub(in crate::store) fn db(&self, cause: tokio_postgres::Error) -> StoreError {
        StoreError::Postgres { server: self.server(), cause }
    }

    pub(in crate::store) fn pool_error(&self, err: PoolError) -> StoreError {
        match err {
            PoolError::Backend(cause) => self.db(cause),
            PoolError::Timeout(_) => StoreError::PoolTimeout {
                server: self.server(),
                waited: self.options.wait,
                connections: self.options.max_connections,
            },
            other => StoreError::Invalid(format!("the connection pool for {}: {other}", self.url)),
        }
    }

    pub(in crate::store) fn failure(&self, failure: Failure) -> StoreError {
        match failure {
            Failure::Db(source) => self.db(source),
            Failure::Store(err) => err,
        }
    }

    /// Runs `work` on a pooled connection.
    pub(in crate::store) fn read<T>(
        &self,
        work: impl AsyncFnOnce(&deadpool_postgres::Client) -> Result<T, Failure>,
    ) -> Result<T, StoreError> {
        self.driver.run(async {
            let client = self.pool.get().await.map_err(|err| self.pool_error(err))?;
            work(&client).await.map_err(|failure| self.failure(failure))
        })
    }

    /// Runs `work` in one transaction, committed when it succeeds; retried when PostgreSQL
    /// aborts it as a deadlock or a serialization failure.
    pub(in crate::store) fn write<T>(
        &self,
        work: impl AsyncFn(&Transaction<'_>) -> Result<T, Failure>,
    ) -> Result<T, StoreError> {
        self.driver.run(async {
            let mut client = self.pool.get().await.map_err(|err| self.pool_error(err))?;
            let mut attempt = 1;
            loop {
                let result = async {
                    let transaction = client.transaction().await?;
                    let value = work(&transaction).await?;
                    transaction.commit().await?;
                    Ok(value)
                }
                .await;
                match result {
                    Err(Failure::Db(err)) if attempt < ATTEMPTS && retryable(&err) => attempt += 1,
                    result => return result.map_err(|failure| self.failure(failure)),
                }
            }
        })
    }
}

/// Whether PostgreSQL aborted the transaction only because of a concurrent one.
fn retryable(err: &tokio_postgres::Error) -> bool {
    matches!(err.code(), Some(code) if *code == SqlState::T_R_DEADLOCK_DETECTED || *code == SqlState::T_R_SERIALIZATION_FAILURE)
}

/// TLS through rustls with the Mozilla roots and the ring provider.
fn rustls_connector() -> Result<tokio_postgres_rustls::MakeRustlsConnect, rustls::Error> {
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// One sentence on a PostgreSQL failure and what to do about it.
pub(super) fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        let hint = match db.code() {
            code if *code == SqlState::INVALID_PASSWORD || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
                "; check the user and password of the store URL"
            }
            code if *code == SqlState::INVALID_CATALOG_NAME => {
                "; create the database or correct its name in the store URL"
            }
            code if *code == SqlState::INSUFFICIENT_PRIVILEGE => {
                "; the user needs the right to create a schema in the database (or a store created by one who has)"
            }
            _ => "",
        };
        return format!("{}: {}{hint}", db.severity().to_lowercase(), db.message());
    }
    let mut text = err.to_string();
    let tls = text.contains("TLS");
    let mut cause = std::error::Error::source(err);
    let mut io = false;
    while let Some(inner) = cause {
        io |= inner.is::<std::io::Error>();
        text.push_str(&format!(": {inner}"));
        cause = inner.source();
    }
    if tls {
        text.push_str(
            "; check that the server offers TLS with a certificate the Mozilla roots vouch for, or the URL's sslmode",
        );
    } else if io {
        text.push_str("; check that the server is running and that the store URL's host and port are right");
    }
    text
}

/// Locks the session's row until the transaction ends, so that writes to one session take
/// turns; fails when there is no such session.
async fn lock_session(transaction: &Transaction<'_>, session: &str) -> Result<(), Failure> {
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

async fn append_in(
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
async fn touch(transaction: &Transaction<'_>, session: &str) -> Result<(), Failure> {
    let statement = transaction.prepare_cached("UPDATE contextfold.sessions SET updated = $2 WHERE id = $1").await?;
    transaction.execute(&statement, &[&session, &to_i64(now_secs())]).await?;
    Ok(())
}

async fn put_payload_in(transaction: &Transaction<'_>, payload: &Payload) -> Result<bool, Failure> {
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

async fn put_summary_in(transaction: &Transaction<'_>, session: &str, summary: &Summary) -> Result<(), Failure> {
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

async fn put_report_in(transaction: &Transaction<'_>, session: &str, report: &Value) -> Result<(), Failure> {
    lock_session(transaction, session).await?;
    let statement = transaction
        .prepare_cached("INSERT INTO contextfold.reports (session, json, created) VALUES ($1, $2, $3)")
        .await?;
    transaction.execute(&statement, &[&session, &encode_json(report), &to_i64(now_secs())]).await?;
    Ok(())
}

async fn put_call_in(transaction: &Transaction<'_>, session: &str, call: &Value) -> Result<(), Failure> {
    lock_session(transaction, session).await?;
    let statement = transaction
        .prepare_cached("INSERT INTO contextfold.calls (session, json, created) VALUES ($1, $2, $3)")
        .await?;
    transaction.execute(&statement, &[&session, &encode_json(call), &to_i64(now_secs())]).await?;
    touch(transaction, session).await
}

async fn session_exists(client: &deadpool_postgres::Client, session: &str) -> Result<bool, Failure> {
    let statement = client.prepare_cached("SELECT 1 FROM contextfold.sessions WHERE id = $1").await?;
    Ok(client.query_opt(&statement, &[&session]).await?.is_some())
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
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
        check_payload_sessions(session, payloads)?;
        self.write(async |transaction| {
            let appended = append_in(transaction, session, messages, At::Aligned).await?;
            for payload in payloads {
                put_payload_in(transaction, payload).await?;
            }
            if let Some(summary) = summary {
                put_summary_in(transaction, session, summary).await?;
            }
            put_report_in(transaction, session, report).await?;
            touch(transaction, session).await?;
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

    fn search(&self, session: Option<&str>, query: &str, limit: usize) -> Result<Vec<Hit>, StoreError> {
        let Some(query) = search::websearch_query(query).filter(|_| limit > 0) else {
            return Ok(Vec::new());
        };
        let limit = to_i64(limit as u64);
        let options = search::headline_options();
        // The best chunk of each message or payload, the best first; headlines only for those
        // returned. A statement of its own for one session, so its plan can use the session's
        // index.
        let within = if session.is_some() { "session = $2" } else { "$2::text IS NULL" };
        let rows = self.read(async |client| {
            let statement = client
                .prepare_cached(&format!(
                    "WITH query AS (SELECT websearch_to_tsquery('simple', $1) AS words), \
                         best AS ( \
                           SELECT DISTINCT ON (session, kind, key) id, session, kind, key, body, \
                           ts_rank(tsv, words) AS rank \
                           FROM contextfold.search, query \
                           WHERE tsv @@ words AND {within} \
                           ORDER BY session, kind, key, rank DESC, id), \
                         top AS (SELECT * FROM best ORDER BY rank DESC, id LIMIT $3) \
                         SELECT session, kind, key, body, ts_headline('simple', {}, words, $4) \
                         FROM top, query ORDER BY rank DESC, id",
                    search::WORDS
                ))
                .await?;
            Ok(client.query(&statement, &[&query, &session, &limit, &options]).await?)
        })?;
        Ok(rows
            .iter()
            .map(|row| {
                let (kind, key): (&str, String) = (row.get(1), row.get(2));
                let location = if kind == "message" {
                    HitLocation::Message(key.parse().unwrap_or(usize::MAX))
                } else {
                    HitLocation::Payload(key)
                };
                Hit { session: row.get(0), location, snippet: search::snippet(row.get(4), row.get(3)) }
            })
            .collect())
    }
}
