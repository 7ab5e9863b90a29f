//! Connections: the pools (with TLS through rustls), opening and migrating the store, and
//! running reads and transactions, with PostgreSQL's errors classified (what to retry, what
//! to tell the user).

use super::blocking::Driver;
use super::schema::{self, Found};
use super::{url, PostgresOptions, PostgresStore, PostgresUrl, POSTGRES_SCHEMA_VERSION};
use crate::store::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod, Transaction};
use tokio_postgres::error::SqlState;

/// How often a transaction aborted as a deadlock or serialization failure is tried.
const ATTEMPTS: usize = 5;

/// How a store is opened: what may be created or changed on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Create the schema when missing; migrate an older one.
    Create,
    /// Only an existing store; migrate an older one.
    Existing,
    /// Only an existing store of this build's schema; read-only transactions.
    ReadOnly,
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
    pub(super) fn connect(
        url: &PostgresUrl,
        options: PostgresOptions,
        mode: Mode,
    ) -> Result<PostgresStore, StoreError> {
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
pub(in crate::store) fn describe(err: &tokio_postgres::Error) -> String {
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
