//! End-to-end tests of the store commands against PostgreSQL (`--store postgres://…` and
//! `CONTEXTFOLD_STORE_URL`), each test in a database of its own on the server
//! `CONTEXTFOLD_TEST_POSTGRES_URL` names: what `compact` and `evict` keep comes back through
//! `recall`, `search` and `sessions` as it does from a SQLite file, and every failure is one
//! line, exit 2, naming the server and database and never the password.

use crate::common::{arg, contextfold, contextfold_env, fixture, json_lines, notice, scratch, Run};
use contextfold::core::hash::payload_ref;
use contextfold::store::POSTGRES_SCHEMA_VERSION;
use serde_json::Value;

const SESSION: &str = "examples/session.json";
const SERVER: &str = "CONTEXTFOLD_TEST_POSTGRES_URL";

/// A database of one test's own, dropped with it.
pub struct Database {
    admin: String,
    name: String,
    pub url: String,
}

impl Database {
    /// A fresh database, or `None` after a visible notice without a server (a failure with
    /// `CI` set).
    pub fn create(test: &str) -> Option<Database> {
        let Some(admin) = std::env::var(SERVER).ok().filter(|url| !url.is_empty()) else {
            assert!(std::env::var_os("CI").is_none(), "CI is set but {SERVER} is not (see .ci/setup.d/30-postgres.sh)");
            notice(&format!("skipped: no PostgreSQL server for the CLI store tests (set {SERVER})"));
            return None;
        };
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let name = format!("cf_cli_{test}_{}_{nanos:x}", std::process::id());
        execute(&admin, &format!("CREATE DATABASE {name}"));
        let url = database_url(&admin, &name);
        Some(Database { admin, name, url })
    }

    /// What `url` shows in messages: the same URL without its password.
    fn shown(&self) -> String {
        contextfold::store::StoreLocation::parse(&self.url).expect("a URL").to_string()
    }

    fn password(&self) -> Option<String> {
        let authority = self.url.split_once("://")?.1.split(['/', '?']).next()?;
        authority.rsplit_once('@')?.0.split_once(':').map(|(_, password)| password.to_string())
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        // Best effort, on a thread of its own: a failing test must not abort here.
        let _ =
            std::thread::spawn(move || execute(&admin, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).join();
    }
}

/// `url` naming the database `name` instead.
fn database_url(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest[end..].find('?').map(|at| &rest[end + at..]).unwrap_or("");
    format!("{scheme}://{}/{name}{query}", &rest[..end])
}

/// Runs one statement on the server at `url`.
pub fn execute(url: &str, statement: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let (client, connection) =
            tokio_postgres::connect(url, tokio_postgres::NoTls).await.unwrap_or_else(|err| panic!("{SERVER}: {err}"));
        let connection = tokio::spawn(connection);
        client.batch_execute(statement).await.unwrap_or_else(|err| panic!("{statement}: {err:?}"));
        drop(client);
        let _ = connection.await;
    });
}

/// Runs the binary with `CONTEXTFOLD_STORE_URL` set to `url` when given.
fn run(args: &[&str], store_url: Option<&str>) -> Run {
    let env: Vec<(&str, &str)> = store_url.map(|url| ("CONTEXTFOLD_STORE_URL", url)).into_iter().collect();
    contextfold_env(None, args, b"", &env)
}

/// Checks that nothing the binary printed holds the password.
fn no_password(db: &Database, run: &Run) {
    if let Some(password) = db.password().filter(|password| !password.is_empty()) {
        assert!(!run.stdout.contains(&password) && !run.stderr.contains(&password), "{}{}", run.stdout, run.stderr);
    }
}

/// Checks a failure: exit 2, one line on standard error holding each of `needles`.
fn fails(db: &Database, run: &Run, needles: &[&str]) {
    assert_eq!(run.code, 2, "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "one line: {}", run.stderr);
    for needle in needles {
        assert!(run.stderr.contains(needle), "{needle:?} not in {}", run.stderr);
    }
    no_password(db, run);
}

fn ok_json(db: &Database, args: &[&str], store_url: Option<&str>) -> Vec<Value> {
    let out = run(args, store_url);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    no_password(db, &out);
    out.stdout.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect()
}

/// The refs of a report: its evicted items, then its clipped outputs.
fn refs(report: &Value) -> Vec<String> {
    ["items", "clipped"]
        .iter()
        .flat_map(|key| report[*key].as_array().cloned().unwrap_or_default())
        .map(|item| item["ref"].as_str().expect("a ref").to_string())
        .collect()
}

#[test]
fn compact_and_evict_keep_what_recall_search_and_sessions_give_back() {
    let Some(db) = Database::create("roundtrip") else { return };
    let example = fixture(SESSION);
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&example).unwrap()).unwrap();
    let compact = ["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "--json", "--no-redact"];
    let report = ok_json(&db, &[&compact[..], &["--store", &db.url]].concat(), None).remove(0);
    let session = report["session"].as_str().expect("the report names the session").to_string();
    let refs = refs(&report);
    assert!(refs.len() > 3, "the budget evicts: {report}");
    for reference in &refs {
        let out = run(&["recall", reference, "--store", &db.url], None);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let value = serde_json::from_str::<Value>(&out.stdout)
            .ok()
            .filter(|value| payload_ref(value) == *reference)
            .unwrap_or(Value::String(out.stdout.clone()));
        assert_eq!(payload_ref(&value), *reference, "{reference} comes back exactly");
    }
    let listed = ok_json(&db, &["sessions", "--json", "--store", &db.url], None);
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0]["id"].as_str(), listed[0]["name"].as_str()), (Some(session.as_str()), Some("session.json")));
    assert_eq!(listed[0]["messages"].as_u64(), Some(input["messages"].as_array().unwrap().len() as u64));
    assert_eq!(listed[0]["payloads"].as_u64(), Some(refs.len() as u64));
    assert_eq!(listed[0]["format"], "anthropic");
    let exported = run(&["sessions", "export", &session, "--store", &db.url], None);
    assert_eq!(exported.stdout, contextfold(&["convert", &example, "--to", "anthropic"]).stdout);

    // Search: the same fields as from a SQLite file, the match in brackets.
    let hits = ok_json(&db, &["search", "decimal", "--json", "--store", &db.url], None);
    assert!(!hits.is_empty());
    for hit in &hits {
        assert_eq!(hit["session"], session.as_str());
        assert!(hit.get("message").is_some() != hit.get("ref").is_some(), "{hit}");
        assert!(hit["snippet"].as_str().is_some_and(|snippet| snippet.to_lowercase().contains("[decimal]")), "{hit}");
    }
    let text = run(&["search", "decimal", "--store", &db.url], None);
    assert!(text.stdout.lines().all(|line| line.starts_with(&session)), "{}", text.stdout);

    // evict appends a second session; rm deletes one with all it holds.
    let evicted = ok_json(&db, &["evict", &example, "--keep", "1", "--json", "--store", &db.url], None).remove(0);
    let second = evicted["session"].as_str().expect("a session").to_string();
    assert_eq!(ok_json(&db, &["sessions", "--json", "--store", &db.url], None).len(), 2);
    let removed = run(&["sessions", "rm", &session, "--store", &db.url], None);
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    let listed = ok_json(&db, &["sessions", "--json", "--store", &db.url], None);
    assert_eq!(listed.iter().map(|info| info["id"].as_str().unwrap().to_string()).collect::<Vec<_>>(), vec![second]);
}

#[test]
fn the_store_variable_names_the_store_when_store_names_none() {
    let Some(db) = Database::create("variable") else { return };
    let dir = scratch("store-postgres-cli", "variable");
    let example = fixture(SESSION);
    // `--store` last, without a value: the variable's store, not a file.
    let args = ["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "--json", "--store"];
    let out = contextfold_env(Some(&dir), &args, b"", &[("CONTEXTFOLD_STORE_URL", &db.url)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!dir.join(".contextfold").exists(), "no file store");
    let listed = ok_json(&db, &["sessions", "--json"], Some(&db.url));
    assert_eq!(listed.len(), 1);
    // A --store flag wins over the variable.
    let file = dir.join("s.db");
    let out = run(&["sessions", "--store", &arg(&file)], Some(&db.url));
    fails(&db, &out, &["no store at", &arg(&file)]);
}

#[test]
fn failures_name_the_server_and_database_never_the_password() {
    let Some(db) = Database::create("failures") else { return };
    let shown = db.shown();
    // A database without a store: readers create nothing.
    fails(&db, &run(&["sessions", "--store", &db.url], None), &[&format!("no store at {shown}")]);
    fails(&db, &run(&["search", "x", "--store", &db.url], None), &["no store at"]);
    let example = fixture(SESSION);
    let compact = ["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "--json"];
    assert_eq!(run(&[&compact[..], &["--store", &db.url]].concat(), None).code, 0);
    fails(&db, &run(&["recall", "cf-000000000000", "--store", &db.url], None), &["cf-000000000000", &shown]);
    fails(&db, &run(&["sessions", "rm", "s-none", "--store", &db.url], None), &["s-none", &shown]);
    fails(&db, &run(&["sessions", "export", "s-none", "--store", &db.url], None), &["s-none", &shown]);
    let append = run(&[&compact[..], &["--store", &db.url, "--session", "s-none"]].concat(), None);
    fails(&db, &append, &["s-none", &shown]);

    let secret = "Wr0ng-pa55word";
    let (scheme, rest) = db.url.split_once("://").unwrap();
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let user = rest.rsplit_once('@').and_then(|(credentials, _)| credentials.split(':').next()).unwrap_or("postgres");
    let wrong = format!("{scheme}://{user}:{secret}@{host}");
    let out = run(&["sessions", "--store", &wrong], None);
    if out.code == 0 {
        notice("the test server trusts every password; its rejection is not tested");
    } else {
        fails(&db, &out, &["password authentication failed", &shown]);
        assert!(!out.stderr.contains(secret), "{}", out.stderr);
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let unreachable = format!("postgres://ada:{secret}@127.0.0.1:{port}/agents");
    let out = run(&["sessions", "--store", &unreachable], None);
    fails(&db, &out, &[&format!("postgres://ada@127.0.0.1:{port}/agents"), "error connecting"]);
    assert!(!out.stderr.contains(secret), "{}", out.stderr);
    let out = run(&["sessions", "--store", &format!("postgres://ada:{secret}@host:port/agents")], None);
    fails(&db, &out, &["not a valid PostgreSQL URL"]);
    assert!(!out.stderr.contains(secret), "{}", out.stderr);
    let out = run(&[&compact[..], &["--store", &unreachable]].concat(), None);
    fails(&db, &out, &["error connecting"]);
    assert!(!out.stderr.contains(secret), "{}", out.stderr);
}

/// The same compaction stored in a SQLite file and in PostgreSQL: the same output, sessions
/// listing and search hits.
#[test]
fn postgres_and_sqlite_stores_answer_alike() {
    let Some(db) = Database::create("alike") else { return };
    let dir = scratch("store-postgres-cli", "alike");
    let file = arg(&dir.join("s.db"));
    let example = fixture(SESSION);
    let mut outputs = Vec::new();
    for store in [file.as_str(), db.url.as_str()] {
        let out = arg(&dir.join(format!("out-{}.json", outputs.len())));
        let compact =
            ["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "-o", &out, "--store", store];
        assert_eq!(run(&compact, None).code, 0);
        outputs.push(std::fs::read_to_string(&out).unwrap());
    }
    assert_eq!(outputs[0], outputs[1], "the store changes no output");
    let strip = |mut values: Vec<Value>, field: &str| -> Vec<Value> {
        values.iter_mut().for_each(|value| {
            value.as_object_mut().unwrap().remove(field);
            value.as_object_mut().unwrap().remove("created");
        });
        values.sort_by_key(|value| value.to_string());
        values
    };
    let listed = |store: &str| strip(json_lines(&["sessions", "--json", "--store", store]), "id");
    assert_eq!(listed(&file), listed(&db.url));
    for query in ["decimal", "invoice total", "test_invoice", "billing/tests", "DEFAULT_TABLE"] {
        let found = |store: &str| {
            let hits = strip(json_lines(&["search", query, "--json", "--limit", "100", "--store", store]), "session");
            hits.into_iter().map(|hit| format!("{} {}", hit["message"], hit["ref"])).collect::<Vec<_>>()
        };
        let (sqlite, postgres) = (found(&file), found(&db.url));
        assert!(!sqlite.is_empty(), "{query}");
        let mut sqlite = sqlite;
        let mut postgres = postgres;
        sqlite.sort();
        postgres.sort();
        assert_eq!(sqlite, postgres, "{query}: the same messages and payloads");
    }
}

/// A login role that may only read the store of `db`, dropped with it (before the database).
struct Reader {
    admin: String,
    db_url: String,
    role: String,
    url: String,
}

impl Reader {
    fn create(db: &Database) -> Reader {
        let role = format!("{}_reader", db.name);
        let password = "Rd-0nly-pa55word";
        execute(
            &db.url,
            &format!(
                "CREATE ROLE {role} LOGIN PASSWORD '{password}'; GRANT USAGE ON SCHEMA contextfold TO {role}; \
                 GRANT SELECT ON ALL TABLES IN SCHEMA contextfold TO {role};"
            ),
        );
        let (scheme, rest) = db.url.split_once("://").expect("a URL");
        let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let url = format!("{scheme}://{role}:{password}@{host}");
        Reader { admin: db.admin.clone(), db_url: db.url.clone(), role, url }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let (admin, db_url, role) = (self.admin.clone(), self.db_url.clone(), self.role.clone());
        let _ = std::thread::spawn(move || {
            execute(&db_url, &format!("DROP OWNED BY {role}"));
            execute(&admin, &format!("DROP ROLE IF EXISTS {role}"));
        })
        .join();
    }
}

/// Hardening 14 on PostgreSQL: the reading commands need no more than `SELECT` on the
/// store's tables (their transactions are read-only and they never migrate), and a store of
/// an older schema is left as it is, with a sentence saying to upgrade it.
#[test]
fn hardening_14_reading_commands_need_only_select_and_never_migrate() {
    let Some(db) = Database::create("readers") else { return };
    let example = fixture(SESSION);
    let compact = ["compact", &example, "--budget", "2000", "--tokenizer", "estimate", "--json", "--store", &db.url];
    let report = ok_json(&db, &compact, None).remove(0);
    let session = report["session"].as_str().expect("a session").to_string();
    let reference = refs(&report).into_iter().next().expect("the budget evicts");
    let reader = Reader::create(&db);
    let readers = |store: &str| -> Vec<Vec<String>> {
        [
            vec!["sessions", "--store", store],
            vec!["sessions", "export", &session, "--store", store],
            vec!["search", "decimal", "--store", store],
            vec!["search", "decimal", "--session", &session, "--store", store],
            vec!["recall", &reference, "--store", store],
        ]
        .into_iter()
        .map(|words| words.into_iter().map(str::to_string).collect())
        .collect()
    };
    for words in readers(&reader.url) {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let out = run(&words, None);
        assert_eq!(out.code, 0, "{words:?} as a role that may only read: {}", out.stderr);
        assert!(!out.stdout.is_empty(), "{words:?}");
    }
    // The role really may not write: a writer with it fails, in one line.
    let out = run(&[&compact[..7], &["--store", &reader.url]].concat(), None);
    assert_eq!((out.code, out.stderr.trim_end().lines().count()), (2, 1), "{}", out.stderr);
    // An older schema: every reader says to upgrade, and none migrates it for the next.
    execute(&db.url, "UPDATE contextfold.schema_version SET version = 0");
    for words in readers(&db.url) {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let refused = format!("has schema 0 and this build reads schema {POSTGRES_SCHEMA_VERSION}");
        fails(&db, &run(&words, None), &[&refused, "sessions upgrade --store"]);
    }
}
