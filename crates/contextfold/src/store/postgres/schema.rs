//! The store's tables, in a PostgreSQL schema of their own (`contextfold`), and their
//! versioned migrations.
//!
//! `contextfold.schema_version` holds the version. Migrations run in one transaction under
//! an advisory lock, so replicas starting together migrate once; a store already up to date
//! is opened without any lock. A schema named `contextfold` without that table belongs to
//! another program and is left alone.

use super::super::StoreError;
use tokio_postgres::GenericClient;

/// The PostgreSQL schema that holds the store.
pub(super) const SCHEMA: &str = "contextfold";

/// The key of the advisory lock taken while migrating (`contextfo` in ASCII).
const MIGRATION_LOCK: i64 = 0x636f_6e74_6578_7466;

/// The migrations, in order; migration `i` brings the schema to version `i + 1`. JSON
/// values are kept as text in the form `encode_json` writes, so they come back byte for
/// byte; `ord` columns keep insertion order.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE contextfold.sessions (
    id text PRIMARY KEY,
    name text NOT NULL,
    created bigint NOT NULL,
    meta text,
    ord bigserial NOT NULL
);
CREATE INDEX sessions_order ON contextfold.sessions (created, ord);
CREATE TABLE contextfold.messages (
    session text NOT NULL REFERENCES contextfold.sessions (id) ON DELETE CASCADE,
    seq integer NOT NULL,
    hash text NOT NULL,
    shape text NOT NULL,
    json text NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE TABLE contextfold.payloads (
    session text NOT NULL REFERENCES contextfold.sessions (id) ON DELETE CASCADE,
    ref text NOT NULL,
    tool text NOT NULL,
    kind text NOT NULL,
    target text,
    tokens bigint NOT NULL,
    message bigint NOT NULL,
    block bigint NOT NULL,
    payload text NOT NULL,
    PRIMARY KEY (session, ref)
);
CREATE INDEX payloads_ref ON contextfold.payloads (ref);
CREATE TABLE contextfold.summaries (
    session text NOT NULL REFERENCES contextfold.sessions (id) ON DELETE CASCADE,
    head_hash text NOT NULL,
    summarizer text NOT NULL,
    text_json text NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    created bigint NOT NULL,
    ord bigserial NOT NULL,
    PRIMARY KEY (session, head_hash, summarizer)
);
CREATE TABLE contextfold.reports (
    id bigserial PRIMARY KEY,
    session text NOT NULL REFERENCES contextfold.sessions (id) ON DELETE CASCADE,
    json text NOT NULL,
    created bigint NOT NULL
);
CREATE INDEX reports_session ON contextfold.reports (session, id);
CREATE TABLE contextfold.search (
    id bigserial PRIMARY KEY,
    session text NOT NULL REFERENCES contextfold.sessions (id) ON DELETE CASCADE,
    kind text NOT NULL,
    key text NOT NULL,
    body text NOT NULL,
    tsv tsvector NOT NULL
);
CREATE INDEX search_words ON contextfold.search USING gin (tsv);
CREATE INDEX search_session ON contextfold.search (session);
"#,
    // 2: conversation state, one versioned value per key (see `store::state`).
    r#"
CREATE TABLE contextfold.states (
    key text PRIMARY KEY,
    version bigint NOT NULL,
    state bytea NOT NULL,
    updated bigint NOT NULL
);
"#,
    // 3: when a session was last written, so old ones can be pruned (`NULL`: at creation).
    "ALTER TABLE contextfold.sessions ADD COLUMN updated bigint;",
    // 4: the model calls of a session, one JSON object each (see `SessionStore::put_call`).
    r#"
CREATE TABLE contextfold.calls (
    id bigserial PRIMARY KEY,
    session text NOT NULL REFERENCES contextfold.sessions (id) ON DELETE CASCADE,
    json text NOT NULL,
    created bigint NOT NULL
);
CREATE INDEX calls_session ON contextfold.calls (session, id);
"#,
];

/// The schema version this build writes.
pub const POSTGRES_SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What the database holds of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// No `contextfold` schema.
    Nothing,
    /// A `contextfold` schema without a version: another program's.
    Foreign,
    /// The store at this version.
    Version(i64),
}

/// What the database holds, read without locking anything.
pub(super) async fn inspect(client: &impl GenericClient) -> Result<Found, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1), \
             to_regclass(format('%I.schema_version', $1::text)) IS NOT NULL",
            &[&SCHEMA],
        )
        .await?;
    let (schema, versioned): (bool, bool) = (row.get(0), row.get(1));
    Ok(match (schema, versioned) {
        (false, _) => Found::Nothing,
        (true, false) => Found::Foreign,
        (true, true) => {
            let version: Option<i32> = client
                .query_opt("SELECT max(version) FROM contextfold.schema_version", &[])
                .await?
                .and_then(|row| row.get(0));
            Found::Version(i64::from(version.unwrap_or(0)))
        }
    })
}

/// Whether `found` can be used (after migrating, when `create`); the error names `server`.
pub(super) fn check(found: Found, server: &str) -> Result<(), StoreError> {
    let path = std::path::PathBuf::from(server);
    match found {
        Found::Foreign => Err(StoreError::ForeignSchema { server: server.to_string() }),
        Found::Version(version) if version > POSTGRES_SCHEMA_VERSION => {
            Err(StoreError::NewerSchema { path, found: version, known: POSTGRES_SCHEMA_VERSION })
        }
        _ => Ok(()),
    }
}

/// Creates the schema or brings it up to date, in one transaction under the migration lock.
/// Returns what was found under the lock (another replica may have migrated meanwhile).
pub(super) async fn migrate(client: &mut deadpool_postgres::Client) -> Result<Found, tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    transaction.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    let found = inspect(&*transaction).await?;
    let from = match found {
        Found::Foreign => return Ok(found),
        Found::Version(version) if version >= POSTGRES_SCHEMA_VERSION => return Ok(found),
        Found::Version(version) => version,
        Found::Nothing => {
            transaction
                .batch_execute(
                    "CREATE SCHEMA contextfold; \
                     CREATE TABLE contextfold.schema_version (version integer NOT NULL); \
                     INSERT INTO contextfold.schema_version VALUES (0);",
                )
                .await?;
            0
        }
    };
    for migration in &MIGRATIONS[usize::try_from(from).unwrap_or(0)..] {
        transaction.batch_execute(migration).await?;
    }
    transaction
        .execute("UPDATE contextfold.schema_version SET version = $1", &[&(POSTGRES_SCHEMA_VERSION as i32)])
        .await?;
    transaction.commit().await?;
    Ok(Found::Version(POSTGRES_SCHEMA_VERSION))
}
