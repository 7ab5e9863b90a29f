//! Faults of replicas on PostgreSQL, as users run `contextfold serve --store postgres://…`:
//! the database stopped mid-run (the proxy goes on from memory, says so once, and recovers
//! when it returns, nothing half-written), a replica killed inside a compaction's transaction
//! (the other goes on with the conversation, the store holds the compaction whole or not at
//! all), and 200 requests at once on a pool of two connections (they wait; none fails).
//!
//! The outage test runs a PostgreSQL cluster of its own (`initdb`, `pg_ctl` in a temporary
//! directory, on a free loopback port), since it stops and starts it; the others use the
//! server `CONTEXTFOLD_TEST_POSTGRES_URL` names. Every wait has a deadline, and every process
//! started is stopped when its guard drops.

use crate::common::{notice, scratch, Scratch};
use crate::serve_state_cli::{compactions, run, same_requests, start, Client, Scripted};
use crate::store_postgres_cli::{execute, Database};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A PostgreSQL cluster of one test's own, stopped and removed when dropped.
struct Cluster {
    bin: PathBuf,
    dir: Scratch,
    port: u16,
}

impl Cluster {
    /// A new cluster, started; `None` after a visible notice when PostgreSQL is not installed
    /// (a failure with `CI` set).
    fn start(test: &str) -> Option<Cluster> {
        let Some(bin) = postgres_bin() else {
            assert!(std::env::var_os("CI").is_none(), "CI is set but initdb and pg_ctl are not installed");
            notice("skipped: PostgreSQL (initdb, pg_ctl) is not installed, so the outage test cannot run");
            return None;
        };
        let dir = scratch("serve-faults", &format!("cluster-{test}"));
        as_root_chown(&dir);
        let initdb = owner(bin.join("initdb"))
            .args(["-D", &dir.join("data").display().to_string(), "-U", "contextfold", "--auth=trust"])
            .args(["-E", "UTF8", "--locale=C.UTF-8"])
            .output()
            .expect("initdb runs");
        assert!(initdb.status.success(), "initdb: {}", String::from_utf8_lossy(&initdb.stderr));
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().unwrap().port();
        let cluster = Cluster { bin, dir, port };
        cluster.pg_ctl_start();
        Some(cluster)
    }

    fn pg_ctl_start(&self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} -c fsync=off",
            self.port,
            self.dir.display()
        );
        let data = self.dir.join("data").display().to_string();
        let log = self.dir.join("server.log").display().to_string();
        let status = owner(self.bin.join("pg_ctl"))
            .args(["-D", &data, "-l", &log, "-w", "-t", "30", "start", "-o", &options])
            .output()
            .expect("pg_ctl runs");
        assert!(status.status.success(), "PostgreSQL starts: {}", std::fs::read_to_string(&log).unwrap_or_default());
    }

    /// Stops the server (its sessions ended at once, as `pg_ctl stop -m fast` does).
    fn stop(&self) {
        let data = self.dir.join("data").display().to_string();
        let status = owner(self.bin.join("pg_ctl"))
            .args(["-D", &data, "-w", "-t", "30", "stop", "-m", "fast"])
            .output()
            .expect("pg_ctl runs");
        assert!(status.status.success(), "PostgreSQL stops: {}", String::from_utf8_lossy(&status.stderr));
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://contextfold@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.join("data").display().to_string();
        let _ =
            owner(self.bin.join("pg_ctl")).args(["-D", &data, "-w", "-t", "30", "stop", "-m", "immediate"]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory holding `initdb` and `pg_ctl`: on the `PATH`, else Debian's newest.
fn postgres_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path).find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    });
    if on_path.is_some() {
        return on_path;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    versions.sort_by_key(|bin| {
        bin.parent().and_then(Path::file_name).and_then(|name| name.to_str()?.parse::<u32>().ok()).unwrap_or(0)
    });
    versions.pop()
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0\n"))
}

/// `program`, run as `nobody` when the tests run as root (PostgreSQL refuses root).
fn owner(program: PathBuf) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "nobody", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn as_root_chown(dir: &Path) {
    if is_root() {
        let status = Command::new("chown").arg("nobody").arg(dir).status().expect("chown runs");
        assert!(status.success());
    }
}

/// Runs `query` on the database at `url` and returns each row's first column as text.
fn query(url: &str, query: &str) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connects");
        let connection = tokio::spawn(connection);
        let rows = client.query(query, &[]).await.unwrap_or_else(|err| panic!("{query}: {err:?}"));
        drop(client);
        let _ = connection.await;
        rows.iter().map(|row| row.get::<_, String>(0)).collect()
    })
}

/// Checks that what the store at `url` holds is whole: each session's messages numbered
/// without a gap, every ref a report names stored, and no payload no report names (what a
/// transaction cut short would leave). Returns how many reports it holds.
fn whole(url: &str) -> usize {
    let gaps = query(
        url,
        "SELECT session FROM contextfold.messages GROUP BY session HAVING count(*) <> max(seq) + 1 OR min(seq) <> 0",
    );
    assert!(gaps.is_empty(), "sessions with a gap in their messages: {gaps:?}");
    use contextfold::store::SessionStore;
    let store = contextfold::store::PostgresStore::open_existing(url).expect("the store");
    let (mut named, mut reports) = (BTreeSet::new(), 0);
    for session in store.sessions().expect("sessions") {
        for report in store.reports(&session.id).expect("reports") {
            reports += 1;
            for item in ["items", "clipped"].iter().flat_map(|key| report[*key].as_array().cloned().unwrap_or_default())
            {
                named.insert(format!("{} {}", session.id, item["ref"].as_str().expect("a ref")));
            }
        }
    }
    let stored: BTreeSet<String> =
        query(url, "SELECT session || ' ' || ref FROM contextfold.payloads").into_iter().collect();
    assert_eq!(named, stored, "the payloads are those the reports name, no more and no fewer");
    reports
}

/// Waits until `done` holds, failing with `what` after `limit`.
fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Log lines of a replica that hold `text`.
fn count(lines: &[String], text: &str) -> usize {
    lines.iter().filter(|line| line.contains(text)).count()
}

const STORE_FAILED: &str = "the store failed";
const STORE_BACK: &str = "the store works again";
/// What the log line of a compaction the store did not keep says.
const UNSTORED: &str = "; not stored:";

#[test]
fn a_replica_goes_on_through_a_postgres_outage_and_recovers_with_nothing_half_written() {
    const TURNS: usize = 8;
    let Some(cluster) = Cluster::start("outage") else { return };
    let (straight, outage) = (cluster.url("straight"), cluster.url("outage"));
    execute(&cluster.url("postgres"), "CREATE DATABASE straight");
    execute(&cluster.url("postgres"), "CREATE DATABASE outage");
    let upstream = Scripted::start();
    let dir = scratch("serve-faults", "outage");
    let names = ["pa", "pb", "pc", "pd"];

    let mut alone: Vec<Client> = names.iter().map(|name| Client::new(name)).collect();
    let mut one = start(&dir, &upstream.url, &straight, &[]);
    run(&mut alone, 3 * TURNS, std::slice::from_ref(&one.addr), |_, _| 0);
    assert_eq!(one.stop("-TERM"), 0);
    let expected = upstream.take();

    let mut clients: Vec<Client> = names.iter().map(|name| Client::new(name)).collect();
    let mut replica = start(&dir, &upstream.url, &outage, &[]);
    let addr = std::slice::from_ref(&replica.addr);
    run(&mut clients, TURNS, addr, |_, _| 0);
    let before = replica.stderr();
    cluster.stop();
    // Every request is answered while the store is away (`Client::step` checks each).
    run(&mut clients, TURNS, addr, |_, _| 0);
    let during = replica.stderr();
    cluster.pg_ctl_start();
    run(&mut clients, TURNS, addr, |_, _| 0);
    assert_eq!(replica.stop("-TERM"), 0);
    let after = replica.stderr();

    assert_eq!(count(&before, STORE_FAILED), 0, "{before:#?}");
    assert_eq!(count(&during, "\"action\":"), names.len() * TURNS, "a log line per request during the outage");
    assert_eq!(count(&during, STORE_FAILED), 1, "the outage is logged once, not per request: {during:#?}");
    assert!(count(&during, UNSTORED) >= 1, "compactions went on from memory during the outage: {during:#?}");
    assert_eq!(count(&after, STORE_BACK), 1, "the recovery is logged once: {after:#?}");
    assert_eq!(count(&after, STORE_FAILED), 0, "{after:#?}");
    // What memory held during the outage is what the store would have: the same requests.
    same_requests(&expected, &upstream.take(), "through an outage");

    let stored_compactions =
        [&before, &during, &after].iter().map(|lines| compactions(lines) - count(lines, UNSTORED)).sum::<usize>();
    assert_eq!(whole(&outage), stored_compactions, "every compaction stored whole, those of the outage not at all");
    let versions = query(&outage, "SELECT version::text FROM contextfold.states");
    assert_eq!(versions.len(), names.len());
    assert!(
        versions.iter().all(|version| version == &(2 * TURNS).to_string()),
        "each conversation's state written once per request the store saw: {versions:?}"
    );
}

#[test]
fn a_replica_killed_inside_a_compaction_leaves_it_to_the_other_whole_or_not_at_all() {
    const TURNS: usize = 14;
    let (Some(single), Some(shared)) = (Database::create("killed_one"), Database::create("killed_two")) else {
        return;
    };
    let upstream = Scripted::start();
    let dir = scratch("serve-faults", "killed");
    let mut alone = [Client::new("kx")];
    let mut one = start(&dir, &upstream.url, &single.url, &[]);
    run(&mut alone, TURNS, std::slice::from_ref(&one.addr), |_, _| 0);
    assert_eq!(one.stop("-TERM"), 0);
    let expected = upstream.take();
    let compacting = |body: &String| body.contains("cf-") || body.contains("[contextfold: summary");
    let first = (0..TURNS).find(|turn| compacting(&expected[&("kx".to_string(), *turn)])).expect("it compacts");

    let mut replicas = [start(&dir, &upstream.url, &shared.url, &[]), start(&dir, &upstream.url, &shared.url, &[])];
    let addrs = [replicas[0].addr.clone(), replicas[1].addr.clone()];
    let mut client = Client::new("kx");
    for turn in 0..first {
        client.step(&addrs[turn % 2]);
    }
    // The compaction's transaction will wait for the reports table, after writing the rest.
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let blocker = runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&shared.url, tokio_postgres::NoTls).await.expect("connects");
        tokio::spawn(connection);
        client.batch_execute("BEGIN; LOCK TABLE contextfold.reports IN EXCLUSIVE MODE").await.expect("locks");
        client
    });
    let waiting = "SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database() \
                   AND wait_event_type = 'Lock' AND query LIKE '%contextfold.reports%'";
    let killed = std::thread::scope(|scope| {
        let attempt = scope.spawn(|| client.try_step(&addrs[0]));
        wait_until(Duration::from_secs(60), "the compaction reaches its report", || {
            query(&shared.url, waiting)[0] == "1"
        });
        assert_eq!(whole(&shared.url), 0, "nothing of the compaction is visible before it commits");
        replicas[0].stop("-KILL");
        attempt.join().expect("joins")
    });
    assert!(killed.is_err(), "the killed replica answered: {killed:?}");
    runtime.block_on(blocker.batch_execute("COMMIT")).expect("unlocks");
    wait_until(Duration::from_secs(60), "the killed replica's sessions end", || query(&shared.url, waiting)[0] == "0");
    assert_eq!(whole(&shared.url), 0, "the killed compaction left nothing");

    // The client tries again, on the other replica, and goes on there.
    for _ in first..TURNS {
        client.step(&addrs[1]);
    }
    assert_eq!(replicas[1].stop("-TERM"), 0);
    let lines = replicas[1].stderr();
    same_requests(&expected, &upstream.take(), "after a replica was killed");
    let stored = whole(&shared.url);
    assert!(stored >= 1, "the other replica's compactions are stored");
    assert_eq!(stored, compactions(&lines), "each of its compactions stored once, whole");
}

#[test]
fn two_hundred_requests_at_once_wait_for_a_pool_of_two_and_none_fails() {
    const CONVERSATIONS: usize = 200;
    let Some(db) = Database::create("pool") else { return };
    let upstream = Scripted::start();
    let dir = scratch("serve-faults", "pool");
    let separator = if db.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}pool_max_conns=2", db.url);
    let mut replica = start(&dir, &upstream.url, &url, &[]);
    let mut clients: Vec<Client> = (0..CONVERSATIONS).map(|index| Client::new(&format!("q{index:03}"))).collect();
    let connections = "SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database() \
                       AND application_name = 'contextfold'";
    let done = std::sync::atomic::AtomicBool::new(false);
    let most = std::thread::scope(|scope| {
        let watch = scope.spawn(|| {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(query(&db.url, connections)[0].parse::<usize>().unwrap());
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        });
        // Each call is checked: 200 OK, an answer the client reads.
        run(&mut clients, 2, std::slice::from_ref(&replica.addr), |_, _| 0);
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        watch.join().expect("joins")
    });
    assert_eq!(replica.stop("-TERM"), 0);
    let lines = replica.stderr();
    assert_eq!(count(&lines, "\"action\":"), 2 * CONVERSATIONS, "every request answered and logged");
    assert_eq!(count(&lines, STORE_FAILED), 0, "no store call gave up waiting: {lines:#?}");
    // Two pooled connections and four for the conversations' locks, however many wait.
    assert!((2..=6).contains(&most), "the pool's bound held: {most} connections at most");
    let versions = query(&db.url, "SELECT version::text FROM contextfold.states");
    assert_eq!(versions.len(), CONVERSATIONS);
    assert!(versions.iter().all(|version| version == "2"), "every request's state was stored: {versions:?}");
    notice(&format!("pool: {} requests through a pool of two, {most} connections at most", 2 * CONVERSATIONS));
}
