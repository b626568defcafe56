//! Stopped campaigns: Ctrl-C after k runs leaves k runs and an aborted campaign (TCP, and QUIC
//! flows on threads of their own), and a killed one keeps its finished runs.

use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use wirebench::store::Store;
use wirebench_core::record::Status;

use super::runs_of;
use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TEST_TIMEOUT};
use wirebench::store::run::Run;

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
        let c = store.campaign::<Run>(1).unwrap().unwrap();
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
        let c = Store::open(&db.0)
            .unwrap()
            .campaign::<Run>(1)
            .unwrap()
            .unwrap();
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
