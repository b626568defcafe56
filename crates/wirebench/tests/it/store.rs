//! The results store: migrations from an old-version fixture, refusal of foreign or newer
//! databases without changing them, every finished run stored by `run`, Ctrl-C after k runs,
//! and the history commands (runs, show, export, import).

use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use wirebench::store::liveness::this_process;
use wirebench::store::{schema, Store};
use wirebench_core::record::campaign::Writer;
use wirebench_core::record::{Environment, NewCampaign, Parameters, Status};

use crate::cli::{stderr, wirebench};
use crate::postgres::{backends, TestDb};
use crate::support::{TempPath, TEST_TIMEOUT};

const V1_FIXTURE: &str = include_str!("../fixtures/store-v1.sql");

fn parameters() -> Parameters {
    serde_json::from_value(serde_json::json!({
        "server": "embedded 127.0.0.1:1", "embedded_server": true,
        "protocols": ["tcp"], "mechanisms": ["stream"], "msg_size": 1000,
        "total_bytes": 10000, "repeat": 2, "rto_us": null, "rate_bps": null, "grace_us": 250000
    }))
    .expect("parameters")
}

#[test]
fn v1_fixture_is_migrated_and_still_readable() {
    let db = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&db.0)
        .and_then(|c| c.execute_batch(V1_FIXTURE))
        .expect("fixture loads");
    let store = Store::open(&db.0).expect("v1 store opens");
    assert_eq!(store.schema_version().unwrap(), schema::CURRENT_VERSION);
    let campaigns = store.campaigns().unwrap();
    assert_eq!(campaigns.len(), 1);
    let c = &campaigns[0];
    assert_eq!(
        (
            c.id,
            c.status,
            c.stored_runs,
            c.planned_runs,
            c.aborted_runs
        ),
        (1, Status::Complete, 2, 2, 0)
    );
    assert_eq!(c.origin, "run", "v2 fills in the origin of old campaigns");
    assert_eq!(c.environment.host_name.as_deref(), Some("fixture-host"));
    assert_eq!(c.environment.rmem_max_bytes, Some(212_992));
    let runs = store.runs(1).unwrap();
    let names: Vec<String> = runs
        .iter()
        .map(|(p, r)| format!("{} {} {}", r.protocol, r.mechanism, p.msg_size))
        .collect();
    assert_eq!(names, ["tcp saw 1000", "udp saw 1000"]);
    assert_eq!(runs[0].1.client.bytes, 10_000);
    assert_eq!(runs[1].1.server.bytes, 10_000);
    assert_eq!(
        (c.msg_sizes.as_slice(), c.totals.as_slice()),
        (&[1000][..], &[10_000][..])
    );
    drop(store);
    // Opening again is a no-op: nothing is migrated twice.
    let store = Store::open(&db.0).expect("reopens");
    assert_eq!(store.campaigns().unwrap().len(), 1);
}

#[test]
fn runs_are_committed_one_by_one_and_bad_writes_change_nothing() {
    for db in backends() {
        runs_are_committed_one_by_one(&db);
    }
}

fn runs_are_committed_one_by_one(db: &TestDb) {
    let mut store = db.open();
    let id = store
        .begin_campaign(&NewCampaign {
            started_at_unix_s: 1_700_000_000,
            parameters: parameters(),
            planned_runs: 2,
            msg_sizes: vec![1000],
            totals: vec![10_000],
            environment: Environment::default(),
        })
        .unwrap();
    assert_eq!(store.campaign(id).unwrap().unwrap().status, Status::Running);
    let (point, run) = fixture_run();
    store.add_run(id, 1, point, &run).unwrap();
    // A second run at the same position is refused and leaves the first as it was.
    assert!(store.add_run(id, 1, point, &run).is_err());
    // A run for a campaign that does not exist is refused.
    assert!(store.add_run(id + 7, 1, point, &run).is_err());
    assert_eq!(store.runs(id).unwrap(), vec![(point, run.clone())]);
    store
        .finish_campaign(id, Status::Aborted, 1_700_000_100, Some("interrupted"))
        .unwrap();
    drop(store);
    let store = db.open();
    let c = store.campaign(id).unwrap().unwrap();
    assert_eq!((c.status, c.stored_runs), (Status::Aborted, 1));
    assert_eq!(c.error.as_deref(), Some("interrupted"));
    assert_eq!(c.finished_at_unix_s, Some(1_700_000_100));
    assert_eq!(store.last_campaign_id().unwrap(), Some(id));
    assert!(store.campaign(id + 1).unwrap().is_none());
}

/// The first run of the V1 fixture: a real run record.
fn fixture_run() -> (
    wirebench_core::vocab::sweep::Point,
    wirebench_core::record::RunRecord,
) {
    let f = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&f.0)
        .and_then(|c| c.execute_batch(V1_FIXTURE))
        .unwrap();
    let fixture = Store::open(&f.0).unwrap();
    fixture.runs(1).unwrap().remove(0)
}

#[test]
fn foreign_newer_and_broken_databases_are_refused_unchanged() {
    let newer = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&newer.0)
        .and_then(|c| c.execute_batch("PRAGMA user_version = 99; CREATE TABLE x (y);"))
        .unwrap();
    let foreign = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&foreign.0)
        .and_then(|c| c.execute_batch("CREATE TABLE notes (text TEXT);"))
        .unwrap();
    let garbage = TempPath::new(".sqlite3");
    std::fs::write(&garbage.0, b"this is not a database, it is a text file\n").unwrap();
    for (db, expect) in [
        (&newer, "newer than this wirebench"),
        (&foreign, "not a wirebench results store"),
        (&garbage, "not a database"),
    ] {
        let before = std::fs::read(&db.0).unwrap();
        let err = format!("{:#}", Store::open(&db.0).err().expect("refused"));
        assert!(err.contains("cannot open results database"), "{err}");
        assert!(err.contains(expect), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
        assert_eq!(
            std::fs::read(&db.0).unwrap(),
            before,
            "{err}: file unchanged"
        );
    }
}

/// Only campaigns left `running` by a dead writer on this host become `interrupted`: a live
/// writer's, another host's, and one without a recorded writer (older stores, imports) stay
/// as they are; the V1 fixture's runs survive the V6 table rebuild.
#[test]
fn only_campaigns_of_dead_writers_on_this_host_become_interrupted() {
    let db = TestDb::sqlite();
    rusqlite::Connection::open(db.arg())
        .and_then(|c| c.execute_batch(V1_FIXTURE))
        .expect("fixture loads");
    dead_writers_are_marked(&db, 1);
    // PostgreSQL: the same rules, with one finished campaign stored first.
    if let Some(db) = TestDb::postgres() {
        let mut store = db.open();
        let id = store
            .begin_campaign(&NewCampaign {
                started_at_unix_s: 1_600_000_000,
                parameters: parameters(),
                planned_runs: 1,
                msg_sizes: vec![1000],
                totals: vec![10_000],
                environment: Environment::default(),
            })
            .unwrap();
        let (point, run) = fixture_run();
        store.add_run(id, 1, point, &run).unwrap();
        store
            .finish_campaign(id, Status::Complete, 1_600_000_001, None)
            .unwrap();
        drop(store);
        dead_writers_are_marked(&db, id);
    }
}

/// Begins five running campaigns (a live writer, another host's, an unknown one, a dead
/// one, one of another boot) in `db`, whose campaign `finished` is complete with runs, and
/// checks what the next open marks.
fn dead_writers_are_marked(db: &TestDb, finished: i64) {
    let mut store = db.open();
    let fixture_runs = store.runs(finished).unwrap().len();
    assert!(fixture_runs > 0);
    let me = this_process();
    let dead_pid = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let mut begin = |writer: Option<Writer>| {
        let id = store
            .begin_campaign(&NewCampaign {
                started_at_unix_s: 1_700_000_000,
                parameters: parameters(),
                planned_runs: 2,
                msg_sizes: vec![1000],
                totals: vec![10_000],
                environment: Environment::default(),
            })
            .unwrap();
        if let Some(w) = writer {
            store.claim_campaign(id, &w).unwrap();
        }
        id
    };
    let live = begin(Some(me.clone()));
    let elsewhere = begin(Some(Writer {
        pid: dead_pid,
        host: Some("another-host.invalid".into()),
        boot_id: None,
    }));
    let unknown = begin(None);
    let dead = begin(Some(Writer {
        pid: dead_pid,
        ..me.clone()
    }));
    let rebooted = begin(Some(Writer {
        boot_id: Some("a-previous-boot".into()),
        ..me.clone()
    }));
    drop(store);
    // The next open marks them.
    let store = db.open();
    let status = |id| store.campaign(id).unwrap().unwrap().status;
    assert_eq!(status(live), Status::Running, "this process is alive");
    assert_eq!(
        status(elsewhere),
        Status::Running,
        "another host's pid says nothing here"
    );
    assert_eq!(status(unknown), Status::Running, "no writer recorded");
    if me.host.is_some() {
        assert_eq!(status(dead), Status::Interrupted);
        let why = store
            .campaign(dead)
            .unwrap()
            .unwrap()
            .error
            .unwrap_or_default();
        assert!(why.contains(&format!("pid {dead_pid}")), "{why}");
        if me.boot_id.is_some() {
            assert_eq!(
                status(rebooted),
                Status::Interrupted,
                "a pid of another boot"
            );
        }
    }
    assert_eq!(
        store.runs(finished).unwrap().len(),
        fixture_runs,
        "{}: runs kept by the V6 rebuild",
        db.name()
    );
    assert_eq!(status(finished), Status::Complete);
}

fn runs_of(db: impl Into<wirebench::store::Location>, id: i64) -> (Status, usize) {
    let store = Store::open(db).unwrap();
    let c = store.campaign(id).unwrap().expect("campaign stored");
    (c.status, store.runs(id).unwrap().len())
}

#[tokio::test]
async fn run_stores_every_run_and_history_reads_it_back() {
    crate::support::within(async {
        for db in backends() {
            run_stores_every_run(&db).await;
        }
    })
    .await
}

async fn run_stores_every_run(db: &TestDb) {
    let out = wirebench(&[
        "run",
        "--db",
        db.arg(),
        "--proto",
        "tcp,udp",
        "--mode",
        "stream,saw",
        "-l",
        "1000",
        "-n",
        "20000",
        "--repeat",
        "2",
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(
        text.contains("stored as campaign 1 (8 runs, complete)"),
        "{text}"
    );
    assert_eq!(runs_of(db.location(), 1), (Status::Complete, 8));

    let out = wirebench(&["runs", "--db", db.arg()]).await;
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(list.contains("complete"), "{list}");
    assert!(list.contains("8/8"), "{list}");
    assert!(list.contains("tcp,udp × stream,saw"), "{list}");
    if let Some(host) = this_process().host {
        assert!(list.contains(&host), "the measuring host is listed: {list}");
    }

    let out = wirebench(&["show", "1", "--db", db.arg()]).await;
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        shown.lines().filter(|l| l.starts_with('[')).count(),
        8,
        "{shown}"
    );
    assert!(
        shown.contains("[8] udp saw 1000 B × 20000 B, run 2"),
        "{shown}"
    );

    let out = wirebench(&["show", "5", "--db", db.arg()]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("wirebench runs"), "{}", stderr(&out));

    // export -> import -> export gives the same document, apart from the campaign id.
    let out = wirebench(&["export", "1", "--db", db.arg()]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let mut first: Value = serde_json::from_slice(&out.stdout).expect("export is JSON");
    assert_eq!(first["runs"].as_array().map(Vec::len), Some(8));
    assert_eq!(first["summary"].as_array().map(Vec::len), Some(4));
    assert_eq!(first["campaign"]["status"], "complete");
    let file = TempPath::new(".json");
    std::fs::write(&file.0, &out.stdout).unwrap();
    let other = db.another();
    let out = wirebench(&["import", file.arg(), "--db", other.arg()]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wirebench(&["export", "1", "--db", other.arg()]).await;
    let mut second: Value = serde_json::from_slice(&out.stdout).expect("export is JSON");
    first["campaign"]["id"] = Value::Null;
    second["campaign"]["id"] = Value::Null;
    assert_eq!(first, second);

    // A broken file is refused and the store keeps what it had.
    std::fs::write(&file.0, b"{\"schema_version\": 1, \"runs\": [").unwrap();
    let out = wirebench(&["import", file.arg(), "--db", other.arg()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not a wirebench export"),
        "{}",
        stderr(&out)
    );
    let out = wirebench(&["runs", "--db", other.arg()]).await;
    let list = String::from_utf8_lossy(&out.stdout);
    assert_eq!(list.lines().count(), 2, "header and one campaign: {list}");
}

#[tokio::test]
async fn no_store_writes_nothing() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let out = wirebench(&["run", "--no-store", "-n", "10000"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!String::from_utf8_lossy(&out.stdout).contains("stored as"));
        let out = wirebench(&["run", "--no-store", "--db", db.arg()]).await;
        assert_eq!(out.status.code(), Some(2), "--db and --no-store conflict");
        assert!(!db.0.exists());
    })
    .await
}

/// Stops a running campaign with `signal` once three runs are printed; returns how many runs
/// were printed in all, the exit code, and the store.
/// A TCP stop-and-wait campaign of 1000 runs of 2 MB in 1000-byte messages.
const TCP_SAW_PLAN: [&str; 4] = ["tcp", "saw", "1000", "2MB"];

async fn interrupt_after_3_runs(signal: &str) -> (usize, Option<i32>, TempPath) {
    interrupt_plan_after_3_runs(signal, TCP_SAW_PLAN).await
}

/// Runs `[proto, mode, msg size, total]` 1000 times, sends `signal` after the third run is
/// printed; what was printed and the exit code.
async fn interrupt_plan_after_3_runs(
    signal: &str,
    [proto, mode, size, total]: [&str; 4],
) -> (usize, Option<i32>, TempPath) {
    let db = TempPath::new(".sqlite3");
    let data_home = TempPath::new("-data");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args([
            "run",
            "--db",
            db.arg(),
            "--proto",
            proto,
            "--mode",
            mode,
            "-l",
            size,
            "-n",
            total,
            "--repeat",
            "1000",
        ])
        .env("XDG_DATA_HOME", &data_home.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("wirebench starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = 0;
    let heading = format!("/1000] {proto} {mode}");
    let run_line = |l: &str| l.starts_with('[') && l.contains(&heading);
    tokio::time::timeout(TEST_TIMEOUT, async {
        while printed < 3 {
            let line = lines.next_line().await.unwrap().expect("runs are printed");
            printed += usize::from(run_line(&line));
        }
    })
    .await
    .expect("three runs in time");
    let pid = child.id().expect("running").to_string();
    let status = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let rest = tokio::time::timeout(TEST_TIMEOUT, async {
        let mut rest = Vec::new();
        while let Ok(Some(line)) = lines.next_line().await {
            rest.push(line);
        }
        rest
    })
    .await
    .expect("wirebench ends after the signal");
    printed += rest.iter().filter(|l| run_line(l)).count();
    let exit = child.wait().await.unwrap();
    (printed, exit.code(), db)
}

/// Ctrl-C after k runs: exactly the runs printed (each is stored before it is printed) are in
/// the store, and the campaign is marked aborted.
#[tokio::test]
async fn interrupt_after_k_runs_leaves_k_runs_and_an_aborted_campaign() {
    crate::support::within(async {
        let (printed, code, db) = interrupt_after_3_runs("-INT").await;
        assert_eq!(code, Some(130), "128 + SIGINT");
        let (status, stored) = runs_of(&db.0, 1);
        assert_eq!(status, Status::Aborted);
        assert_eq!(stored, printed, "every printed run is stored, nothing more");
        assert!((3..1000).contains(&stored));
        // The run in flight is stored too, as aborted: the next position of the plan, with the
        // parameters it was started with and no figures.
        let store = Store::open(&db.0).unwrap();
        let aborted = store.aborted_runs(1).unwrap();
        assert_eq!(aborted.len(), 1, "{aborted:?}");
        let a = &aborted[0];
        assert_eq!(a.position, stored as u64 + 1);
        assert_eq!(
            a.repeat_index, stored as u32,
            "one combination: repeat index = position - 1"
        );
        assert_eq!(
            (a.params.protocol.as_str(), a.params.mechanism.as_str()),
            ("tcp", "saw")
        );
        assert_eq!((a.params.msg_size, a.params.total_bytes), (1000, 2_000_000));
        let c = store.campaign(1).unwrap().unwrap();
        assert_eq!((c.stored_runs, c.aborted_runs), (stored as u64, 1));
        drop(store);
        // Reports and exports hold the finished runs only; `show` lists the aborted one last.
        let out = wirebench(&["export", "1", "--db", db.arg()]).await;
        let doc: Value = serde_json::from_slice(&out.stdout).expect("export is JSON");
        assert_eq!(doc["runs"].as_array().map(Vec::len), Some(stored));
        let out = wirebench(&["show", "1", "--db", db.arg()]).await;
        let shown = String::from_utf8_lossy(&out.stdout);
        let last = shown.lines().last().unwrap_or_default();
        // It says why it stopped and what the client had moved by then.
        let head = format!(
            "[{}] tcp saw 1000 B × 2000000 B, run {}: aborted (",
            stored + 1,
            stored + 1
        );
        assert!(last.starts_with(&head), "{shown}");
        assert!(last.contains("SIGINT"), "{shown}");
        // The history says so too.
        let out = wirebench(&["runs", "--db", db.arg()]).await;
        let listed = String::from_utf8_lossy(&out.stdout);
        assert!(
            listed.contains(&format!("{stored}/")) && listed.contains("(+1 aborted in flight)"),
            "{listed}"
        );
    })
    .await
}

/// Ctrl-C in a QUIC campaign whose flows run on threads of their own (large messages): the
/// same truthful store, and the process ends rather than waiting for the flow's thread.
#[tokio::test]
async fn interrupting_quic_flows_on_their_own_threads_stores_what_finished() {
    crate::support::within(async {
        let (printed, code, db) =
            interrupt_plan_after_3_runs("-INT", ["quic", "stream", "64KiB", "32MiB"]).await;
        assert_eq!(code, Some(130), "128 + SIGINT");
        let (status, stored) = runs_of(&db.0, 1);
        assert_eq!(status, Status::Aborted);
        assert_eq!(stored, printed, "every printed run is stored, nothing more");
        assert!((3..1000).contains(&stored));
        let store = Store::open(&db.0).unwrap();
        assert_eq!(store.aborted_runs(1).unwrap().len(), 1);
    })
    .await
}

/// A crash (SIGKILL) after k runs: the k committed runs are intact and the store opens; the
/// next command that opens the store finds the writer dead and marks the campaign
/// `interrupted`.
#[tokio::test]
async fn a_killed_campaign_keeps_its_finished_runs() {
    crate::support::within(async {
        let (printed, code, db) = interrupt_after_3_runs("-KILL").await;
        assert_eq!(code, None, "killed by a signal");
        // `wirebench runs` is the next command to open the store: it says what happened.
        let out = wirebench(&["runs", "--db", db.arg()]).await;
        let listed = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(listed.contains("interrupted"), "{listed}");
        let (status, stored) = runs_of(&db.0, 1);
        assert_eq!(status, Status::Interrupted);
        let c = Store::open(&db.0).unwrap().campaign(1).unwrap().unwrap();
        let error = c.error.unwrap_or_default();
        assert!(error.contains("ended without storing its end"), "{error}");
        let store = Store::open(&db.0).unwrap();
        assert!(
            store.aborted_runs(1).unwrap().is_empty(),
            "a crash has no chance to store the run in flight"
        );
        drop(store);
        // The kill may land between a run's commit and its printing: at most one stored run was
        // not printed yet.
        assert!(
            stored == printed || stored == printed + 1,
            "{stored} stored, {printed} printed"
        );
        assert!((3..1000).contains(&stored));
    })
    .await
}

/// A `run --json` document (no `campaign` block) imports as a complete campaign.
#[tokio::test]
async fn run_json_output_imports() {
    crate::support::within(async {
        let out = wirebench(&[
            "run",
            "--no-store",
            "--json",
            "--proto",
            "udp",
            "--mode",
            "saw",
            "-n",
            "5000",
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let file = TempPath::new(".json");
        std::fs::write(&file.0, &out.stdout).unwrap();
        let db = TempPath::new(".sqlite3");
        let out = wirebench(&["import", file.arg(), "--db", db.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(runs_of(&db.0, 1), (Status::Complete, 1));
        let store = Store::open(&db.0).unwrap();
        let c = store.campaign(1).unwrap().unwrap();
        assert_eq!((c.origin.as_str(), c.stored_runs), ("import", 1));
        assert_eq!(store.runs(1).unwrap()[0].1.server.bytes, 5000);
    })
    .await
}

/// A sweep runs in the documented order — message sizes, then totals, then protocols, then
/// mechanisms, repeats innermost — and stores exactly the measured runs (no warm-ups).
#[tokio::test]
async fn a_sweep_runs_in_the_documented_order_and_stores_no_warmups() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let out = wirebench(&[
            "run",
            "--db",
            db.arg(),
            "--proto",
            "udp,tcp",
            "--mode",
            "saw,stream",
            "-l",
            "100..400:x4",
            "-n",
            "4000,2000",
            "--repeat",
            "2",
            "--warmup",
            "1",
        ])
        .await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", stderr(&out));
        assert!(
            text.contains("wirebench: 32 runs: 2 message sizes × 2 totals"),
            "{text}"
        );
        assert!(text.contains("[32/32]"), "{text}");
        let store = Store::open(&db.0).unwrap();
        let c = store.campaign(1).unwrap().unwrap();
        assert_eq!(
            (c.msg_sizes.as_slice(), c.totals.as_slice()),
            (&[100, 400][..], &[4000, 2000][..])
        );
        assert_eq!(
            (c.planned_runs, c.stored_runs, c.status),
            (32, 32, Status::Complete)
        );
        let got: Vec<String> = store
            .runs(1)
            .unwrap()
            .iter()
            .map(|(p, r)| {
                format!(
                    "{} {} {} {} {}",
                    p.msg_size, p.total_bytes, r.protocol, r.mechanism, r.repeat_index
                )
            })
            .collect();
        let mut expected = Vec::new();
        for size in [100, 400] {
            for total in [4000, 2000] {
                for proto in ["udp", "tcp"] {
                    for mode in ["saw", "stream"] {
                        for repeat in 0..2 {
                            expected.push(format!("{size} {total} {proto} {mode} {repeat}"));
                        }
                    }
                }
            }
        }
        assert_eq!(got, expected);
        for (p, r) in store.runs(1).unwrap() {
            assert_eq!(
                r.client.bytes, p.total_bytes,
                "each run moved its own total"
            );
        }
        // The report has one configuration per size × total × protocol × mechanism.
        let out = wirebench(&["report", "1", "--format", "csv", "--db", db.arg()]).await;
        let csv = String::from_utf8_lossy(&out.stdout);
        let configurations: std::collections::BTreeSet<&str> = csv
            .lines()
            .skip(1)
            .filter_map(|l| l.match_indices(',').nth(3).map(|(i, _)| &l[..i]))
            .collect();
        assert_eq!(configurations.len(), 16, "{csv}");
        // Both sides' messages, bytes and time for each.
        let side_rows = csv
            .lines()
            .filter(|l| l.contains(",client,") || l.contains(",server,"))
            .count();
        assert_eq!(side_rows, 16 * 2 * 3, "{csv}");
        assert!(
            csv.contains("\ntcp,stream,400,2000,2,client,bytes,B,2000,"),
            "{csv}"
        );
    })
    .await
}

/// A PostgreSQL database written by a newer wirebench, or holding someone else's tables, is
/// refused on one line and left as it was; a bad URL is a usage error before anything runs.
#[tokio::test]
async fn postgres_newer_foreign_and_bad_urls_are_refused() {
    crate::support::within(async {
        for (url, expect) in [
            (
                "postgres://wb@127.0.0.1:notaport/db",
                "not a PostgreSQL URL",
            ),
            (
                "mysql://wb@127.0.0.1/db",
                "expected a file path or a postgres://",
            ),
        ] {
            let out = wirebench(&["runs", "--db", url]).await;
            assert_eq!(out.status.code(), Some(2), "{url}: {}", stderr(&out));
            assert!(stderr(&out).contains(expect), "{url}: {}", stderr(&out));
            assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
        }
        let Some(db) = TestDb::postgres() else { return };
        let (name, cluster) = db.pg().expect("a PostgreSQL store");
        let newer = db.another();
        let (newer_name, _) = newer.pg().expect("pg");
        cluster.sql(
            newer_name,
            "CREATE TABLE wirebench_schema (version BIGINT NOT NULL);
         INSERT INTO wirebench_schema VALUES (99);",
        );
        cluster.sql(
            name,
            "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine');",
        );
        for (db, expect) in [
            (&newer, "newer than this wirebench"),
            (&db, "not a wirebench results store"),
        ] {
            let err = format!("{:#}", Store::open(db.location()).err().expect("refused"));
            assert!(err.contains("cannot open results database"), "{err}");
            assert!(err.contains(expect), "{err}");
            assert!(!err.contains('\n'), "one line: {err}");
            let out = wirebench(&["runs", "--db", db.arg()]).await;
            assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
            assert!(stderr(&out).contains(expect), "{}", stderr(&out));
        }
        let (newer_name, _) = newer.pg().expect("pg");
        assert_eq!(
            cluster.ints(newer_name, "SELECT version FROM wirebench_schema"),
            [99],
            "unchanged"
        );
        assert_eq!(
            cluster.ints(
                name,
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ),
            [1],
            "no table added beside the foreign one"
        );
        // Nobody listens on a closed port: one line, exit status 1, no hang.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let out = wirebench(&["runs", "--db", &format!("postgres://wb@127.0.0.1:{port}/x")]).await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot open results database"),
            "{}",
            stderr(&out)
        );
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
    })
    .await
}

/// Eight `wirebench run` processes write to one PostgreSQL database at once (the first opens
/// of a new database migrate it under a lock): every campaign and every run is there, complete,
/// with distinct ids and this host as the measuring host; WIREBENCH_DB names the store.
#[tokio::test]
async fn eight_processes_write_campaigns_to_one_postgres_at_once() {
    crate::support::within(async {
        let Some(db) = TestDb::postgres() else { return };
        let started = std::time::Instant::now();
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let data_home = TempPath::new("-data");
                let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
                    .args(["run", "--proto", "tcp,udp", "-l", "1000", "-n", "20000"])
                    .args(["--repeat", "2"])
                    .env("WIREBENCH_DB", db.arg())
                    .env("XDG_DATA_HOME", &data_home.0)
                    .kill_on_drop(true)
                    .output();
                (data_home, child)
            })
            .collect();
        let mut outputs = Vec::new();
        for (_home, child) in writers {
            let out = tokio::time::timeout(TEST_TIMEOUT, child)
                .await
                .expect("in time")
                .expect("ran");
            assert!(out.status.success(), "{}", stderr(&out));
            outputs.push(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let store = db.open();
        let campaigns = store.campaigns().unwrap();
        assert_eq!(campaigns.len(), 8);
        let mut ids: Vec<i64> = campaigns.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 8, "distinct campaign ids");
        let host = this_process().host;
        for c in &campaigns {
            assert_eq!(
                (c.status, c.stored_runs, c.planned_runs),
                (Status::Complete, 4, 4)
            );
            assert_eq!(c.environment.host_name, host, "the measuring host");
            assert!(
                outputs
                    .iter()
                    .filter(
                        |o| o.contains(&format!("stored as campaign {} (4 runs, complete)", c.id))
                    )
                    .count()
                    == 1,
                "each writer got its own id: {outputs:?}"
            );
        }
        let (name, cluster) = db.pg().expect("pg");
        assert_eq!(cluster.ints(name, "SELECT count(*) FROM run"), [32]);
        assert_eq!(
            cluster.ints(name, "SELECT count(DISTINCT id) FROM run"),
            [32]
        );
        assert_eq!(
            cluster.ints(
                name,
                "SELECT count(DISTINCT (campaign_id, position)) FROM run"
            ),
            [32]
        );
        eprintln!(
            "8 writers, 8 campaigns, 32 runs in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    })
    .await
}

/// `store copy` moves a campaign (finished and aborted runs) from SQLite into PostgreSQL and
/// back: the exported documents are the same, and a second copy copies nothing.
#[tokio::test]
async fn store_copy_moves_history_to_postgres_and_back() {
    crate::support::within(async {
        let Some(pg) = TestDb::postgres() else { return };
        let sqlite = TestDb::sqlite();
        let out = wirebench(&["run", "--db", sqlite.arg(), "-l", "1000", "-n", "20000"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        {
            let mut store = sqlite.open();
            let id = store
                .begin_campaign(&NewCampaign {
                    started_at_unix_s: 1_700_000_000,
                    parameters: parameters(),
                    planned_runs: 2,
                    msg_sizes: vec![1000],
                    totals: vec![10_000],
                    environment: Environment::default(),
                })
                .unwrap();
            let (point, run) = fixture_run();
            store.add_run(id, 1, point, &run).unwrap();
            let params = serde_json::from_value(serde_json::json!({
                "protocol": "tcp", "mechanism": "stream", "msg_size": 1000, "total_bytes": 10000,
                "rto_us": null, "rate_bps": null, "grace_us": 250000
            }))
            .expect("session parameters");
            let aborted = wirebench_core::record::AbortedRun {
                position: 2,
                repeat_index: 1,
                params,
            };
            let so_far = wirebench_core::record::campaign::SoFar {
                messages: 3,
                bytes: 3000,
                elapsed: std::time::Duration::from_millis(5),
            };
            store
                .add_stopped_run(id, &aborted, "SIGTERM", Some(so_far))
                .unwrap();
            store
                .finish_campaign(id, Status::Aborted, 1_700_000_010, Some("stopped"))
                .unwrap();
        }
        let copy = |from: &TestDb, to: &TestDb| {
            let (from, to) = (from.arg().to_string(), to.arg().to_string());
            async move { wirebench(&["store", "copy", "--from", &from, "--to", &to]).await }
        };
        let out = copy(&sqlite, &pg).await;
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{said}{}", stderr(&out));
        assert!(said.contains("copied 2 campaign(s)"), "{said}");
        assert!(said.contains("0 already there"), "{said}");
        let out = copy(&sqlite, &pg).await;
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            said.contains("copied 0 campaign(s)") && said.contains("2 already there"),
            "{said}"
        );
        let back = TestDb::sqlite();
        let out = wirebench(&["store", "migrate", "--from", pg.arg(), "--to", back.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        for id in ["1", "2"] {
            let mut docs = Vec::new();
            for db in [&sqlite, &pg, &back] {
                let out = wirebench(&["export", id, "--db", db.arg()]).await;
                assert!(out.status.success(), "{}", stderr(&out));
                let mut doc: Value = serde_json::from_slice(&out.stdout).unwrap();
                doc["campaign"]["id"] = Value::Null;
                docs.push(doc);
            }
            assert_eq!(docs[0], docs[1], "campaign {id} in PostgreSQL");
            assert_eq!(docs[0], docs[2], "campaign {id} back in SQLite");
        }
        let (a, b) = (sqlite.open(), back.open());
        assert_eq!(a.aborted_details(2).unwrap(), b.aborted_details(2).unwrap());
        let out = wirebench(&["store", "copy", "--from", pg.arg(), "--to", pg.arg()]).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    })
    .await
}
