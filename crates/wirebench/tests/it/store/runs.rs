//! What `run` stores: every run, read back by the history commands; nothing with --no-store;
//! `run --json` output imported; a sweep in the documented order without its warm-ups.

use serde_json::Value;
use wirebench::store::writer::this_process;
use wirebench::store::Store;
use wirebench_core::record::Status;

use super::runs_of;
use crate::cli::{stderr, wirebench};
use crate::postgres::{backends, TestDb};
use crate::support::TempPath;
use wirebench::store::run::Run;

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
        let c = store.campaign::<Run>(1).unwrap().unwrap();
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
        let c = store.campaign::<Run>(1).unwrap().unwrap();
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
