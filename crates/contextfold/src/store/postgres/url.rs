//! A store URL (`postgres://user:password@host:port/db?…`): its connection settings, the
//! form every message shows (the same URL without its password), and whether the connection
//! needs TLS.
//!
//! TLS: a server on this machine (loopback addresses, `localhost`, a Unix socket) is reached
//! without TLS unless the URL says `sslmode=require`; any other server needs TLS (through
//! rustls, checking its certificate against the Mozilla roots) unless the URL says
//! `sslmode=disable`.
//!
//! One parameter is contextfold's own, not libpq's: `pool_max_conns=N` bounds the store's
//! connection pool (as pgx spells it); it is taken out before the rest is read.

use super::super::location::is_postgres_url;
use super::super::StoreError;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::Config;

/// How long connecting may take when the URL does not say (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed store URL. Its `Display` and `Debug` never show the password.
#[derive(Clone)]
pub struct PostgresUrl {
    config: Config,
    shown: String,
    pool_max_conns: Option<usize>,
}

/// The query parameter that bounds the connection pool.
const POOL_MAX_CONNS: &str = "pool_max_conns";

/// Whether the connection is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tls {
    /// Plain TCP or a Unix socket.
    Off,
    /// rustls, the server's certificate checked against the Mozilla roots.
    Required,
}

impl PostgresUrl {
    /// Parses a `postgres://` or `postgresql://` URL. The error never repeats the URL.
    pub fn parse(text: &str) -> Result<PostgresUrl, StoreError> {
        if !is_postgres_url(text) {
            return Err(StoreError::BadUrl("it must start with postgres:// or postgresql://".into()));
        }
        let (rest, pool_max_conns) = take_pool_max_conns(text)?;
        let mut config: Config = rest.parse().map_err(|err: tokio_postgres::Error| {
            let detail = std::error::Error::source(&err).map(ToString::to_string).unwrap_or_else(|| err.to_string());
            StoreError::BadUrl(scrub(&detail, text))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("contextfold");
        }
        let shown = shown(&config);
        Ok(PostgresUrl { config, shown, pool_max_conns })
    }

    /// The most pooled connections the URL asks for (`pool_max_conns=N`), if it does.
    pub fn pool_max_conns(&self) -> Option<usize> {
        self.pool_max_conns
    }

    /// The connection settings, with the TLS mode this store uses.
    pub(super) fn config(&self) -> (Config, Tls) {
        let mut config = self.config.clone();
        let tls = match (config.get_ssl_mode(), self.is_local()) {
            (SslMode::Disable, _) | (SslMode::Prefer, true) => Tls::Off,
            _ => Tls::Required,
        };
        config.ssl_mode(if tls == Tls::Off { SslMode::Disable } else { SslMode::Require });
        (config, tls)
    }

    /// Whether every host is on this machine.
    fn is_local(&self) -> bool {
        let addresses = self.config.get_hostaddrs();
        let hosts_local = self.config.get_hosts().iter().all(|host| match host {
            Host::Tcp(name) => is_local_name(name),
            #[cfg(unix)]
            Host::Unix(_) => true,
        });
        hosts_local && addresses.iter().all(IpAddr::is_loopback)
    }

    /// The database, as the server will see it (the user's name when the URL names none).
    pub fn database(&self) -> Option<&str> {
        self.config.get_dbname().or(self.config.get_user())
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgresUrl({})", self.shown)
    }
}

fn is_local_name(name: &str) -> bool {
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|address| address.is_loopback())
        || bare.starts_with('/')
}

/// `postgres://user@host:port/db`: what a message may show of the URL.
fn shown(config: &Config) -> String {
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let name = match host {
                Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                Host::Unix(path) => path.display().to_string().replace('/', "%2F"),
            };
            match ports.get(i).or(ports.first().filter(|_| ports.len() == 1)) {
                Some(port) => format!("{name}:{port}"),
                None => name,
            }
        })
        .collect();
    let user = config.get_user().map(|user| format!("{user}@")).unwrap_or_default();
    let database = config.get_dbname().map(|db| format!("/{db}")).unwrap_or_default();
    format!("postgres://{user}{}{database}", hosts.join(","))
}

/// `text` without its `pool_max_conns` parameter, and that parameter's value.
fn take_pool_max_conns(text: &str) -> Result<(String, Option<usize>), StoreError> {
    let Some((base, query)) = text.split_once('?') else { return Ok((text.to_string(), None)) };
    let mut found = None;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((POOL_MAX_CONNS, value)) => {
                let max = value.parse::<usize>().ok().filter(|max| *max > 0).ok_or_else(|| {
                    StoreError::BadUrl(format!(
                        "{POOL_MAX_CONNS} must be a number of connections above 0, not `{value}`"
                    ))
                })?;
                found = Some(max);
            }
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, found))
}

/// `detail` with the password of `url` (if any) masked, should a parser ever quote it.
fn scrub(detail: &str, url: &str) -> String {
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?']).next())
        .and_then(|authority| authority.rsplit_once('@'))
        .and_then(|(credentials, _)| credentials.split_once(':'))
        .map(|(_, password)| password)
        .filter(|password| !password.is_empty());
    match password {
        Some(password) => detail.replace(password, "***"),
        None => detail.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_without_the_password() {
        let url =
            PostgresUrl::parse("postgres://ada:hunter2-secret@db.example.com:6543/agents?sslmode=prefer").unwrap();
        assert_eq!(url.to_string(), "postgres://ada@db.example.com:6543/agents");
        assert!(!format!("{url:?}").contains("hunter2"));
        assert_eq!(url.database(), Some("agents"));
        let url = PostgresUrl::parse("postgresql://localhost/agents").unwrap();
        assert_eq!(url.to_string(), "postgres://localhost:5432/agents", "the port it will use");
        let url = PostgresUrl::parse("postgres://ada@%2Frun%2Fpostgresql:5432/db").unwrap();
        assert_eq!(url.to_string(), "postgres://ada@%2Frun%2Fpostgresql:5432/db");
    }

    #[test]
    fn tls_for_remote_hosts_only() {
        let tls = |text: &str| PostgresUrl::parse(text).unwrap().config().1;
        assert_eq!(tls("postgres://u@db.example.com/d"), Tls::Required);
        assert_eq!(tls("postgres://u@10.1.2.3/d"), Tls::Required);
        assert_eq!(tls("postgres://u@db.example.com/d?sslmode=disable"), Tls::Off);
        assert_eq!(tls("postgres://u@localhost/d"), Tls::Off);
        assert_eq!(tls("postgres://u@127.0.0.1:5432/d"), Tls::Off);
        assert_eq!(tls("postgres://u@[::1]:5432/d"), Tls::Off);
        assert_eq!(tls("postgres://u@%2Ftmp%2Fpg/d"), Tls::Off);
        assert_eq!(tls("postgres://u@localhost/d?sslmode=require"), Tls::Required);
        assert_eq!(tls("postgres://u@localhost,db.example.com/d"), Tls::Required);
        let (config, _) = PostgresUrl::parse("postgres://u@db.example.com/d").unwrap().config();
        assert_eq!(config.get_ssl_mode(), SslMode::Require);
        assert_eq!(config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
    }

    #[test]
    fn the_pool_bound_is_read_from_the_url() {
        let url = PostgresUrl::parse("postgres://ada:pw@localhost/agents?pool_max_conns=3&sslmode=disable").unwrap();
        assert_eq!(url.pool_max_conns(), Some(3));
        assert_eq!(url.config().1, Tls::Off, "the other parameters are still read");
        assert_eq!(url.to_string(), "postgres://ada@localhost:5432/agents");
        assert_eq!(PostgresUrl::parse("postgres://ada@localhost/agents").unwrap().pool_max_conns(), None);
        for bad in ["0", "many", ""] {
            let err = PostgresUrl::parse(&format!("postgres://ada:pa55word@h/d?pool_max_conns={bad}")).unwrap_err();
            assert!(err.to_string().contains("pool_max_conns must be a number"), "{err}");
            assert!(!err.to_string().contains("pa55word"), "{err}");
        }
    }

    #[test]
    fn bad_urls_are_refused_without_repeating_them() {
        for bad in [
            "postgres://ada:pa55word@host:notaport/db",
            "postgres://ada:pa55word@host/db?sslmode=sometimes",
            "postgres://ada:pa55word@host/db?frobnicate=1",
            "mysql://ada:pa55word@host/db",
        ] {
            let err = PostgresUrl::parse(bad).expect_err(bad).to_string();
            assert!(err.starts_with("the store URL is not a valid PostgreSQL URL"), "{err}");
            assert!(!err.contains("pa55word"), "{err}");
        }
        assert_eq!(scrub("bad value pa55word", "postgres://a:pa55word@h/d"), "bad value ***");
    }
}
