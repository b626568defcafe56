//! `wirebench rr` sweeps in the store and in `report --rr`: the seed's figure — UDP requests
//! lost against TCP retransmissions, side by side, as the requests in flight grow — in one
//! table and one chart. A live sweep is stored with exact counts; a fixture sweep renders its
//! table and chart byte for byte as their snapshots (WIREBENCH_UPDATE_SNAPSHOTS=1 rewrites them
//! after an intended change).

use serde_json::Value;
use wirebench::store::Store;
use wirebench_core::record::rr::{NewRrCampaign, RrResult};
use wirebench_core::record::Status;

use crate::cli::{stderr, wirebench};
use crate::postgres::{backends, TestDb};
use crate::support::TempPath;
use wirebench::store::rr::Rr;

/// A live sweep over UDP and TCP at K = 1 and 4 is stored result by result: `runs` lists it,
/// every result reads back with sent = answered + lost, and `report --rr` prints its table.
#[tokio::test]
async fn a_live_rr_sweep_is_stored_and_reported() {
    crate::support::within(async {
        for db in backends() {
            a_live_rr_sweep_is_stored_and_reported_on(&db).await;
        }
    })
    .await
}

async fn a_live_rr_sweep_is_stored_and_reported_on(db: &TestDb) {
    let out = wirebench(&[
        "rr",
        "--proto",
        "udp,tcp",
        "--concurrency",
        "1,4",
        "--flows",
        "2",
        "--count",
        "50",
        "--db",
        db.arg(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("stored as rr sweep 1"), "{text}");
    assert!(text.contains("requests in flight sweep"), "{text}");
    let store = db.open();
    let results = store
        .results::<Rr>(1)
        .unwrap()
        .into_iter()
        .map(|r| r.result)
        .collect::<Vec<_>>();
    assert_eq!(results.len(), 4);
    for r in &results {
        assert_eq!(r.sent, 2 * 50, "{r:?}");
        assert_eq!(r.answered + r.lost, r.sent, "{r:?}");
    }
    let info = store.campaign::<Rr>(1).unwrap().unwrap();
    assert_eq!(info.status, Status::Complete);
    assert_eq!(info.campaign.concurrency, "1,4");
    drop(store);
    let runs = wirebench(&["runs", "--db", db.arg()]).await;
    let listed = String::from_utf8_lossy(&runs.stdout);
    assert!(
        listed.contains("4/4") && listed.contains("over udp,tcp"),
        "{listed}"
    );
    let report = wirebench(&["report", "--rr", "1", "--db", db.arg()]).await;
    assert!(report.status.success(), "{}", stderr(&report));
    let table = String::from_utf8_lossy(&report.stdout);
    assert_eq!(
        table.lines().filter(|l| l.starts_with("  udp ")).count(),
        2,
        "{table}"
    );
    // No store with --no-store; ping is never stored.
    let none = TempPath::new(".sqlite3");
    let out = wirebench(&["rr", "--count", "5", "--no-store"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!none.0.exists());
}

#[tokio::test]
async fn a_stored_sweep_reports_loss_against_retransmissions() {
    crate::support::within(async {
        for db in backends() {
            a_stored_sweep_reports_loss_against_retransmissions_on(&db).await;
        }
    })
    .await
}

async fn a_stored_sweep_reports_loss_against_retransmissions_on(db: &TestDb) {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{manifest}/tests/fixtures/rr-sweep.json")).unwrap(),
    )
    .unwrap();
    let results: Vec<RrResult> = serde_json::from_value(fixture["results"].clone()).unwrap();
    {
        let store = db.open();
        let id = store
            .begin::<Rr>(&NewRrCampaign {
                started_at_unix_s: 1_700_000_000,
                server: "embedded 127.0.0.1:40000".into(),
                protocols: "udp,tcp".into(),
                concurrency: "1,8,32".into(),
                request_bytes: 64,
                response_bytes: 512,
                flows: 2,
                planned_results: 6,
                host_name: Some("testhost".into()),
                wirebench_version: "0.1.0".into(),
            })
            .unwrap()
            .id;
        for (i, r) in results.iter().enumerate() {
            store.record::<Rr>(id, i as u64 + 1, r).unwrap();
        }
        store
            .finish::<Rr>(id, Status::Complete, 1_700_000_060, None)
            .unwrap();
        assert_eq!(
            serde_json::to_value(
                store
                    .results::<Rr>(id)
                    .unwrap()
                    .into_iter()
                    .map(|r| r.result)
                    .collect::<Vec<_>>()
            )
            .unwrap(),
            fixture["results"],
            "stored results read back unchanged"
        );
    }
    for (format, file) in [("table", "rr-report.txt"), ("html", "rr-report.html")] {
        let out = wirebench(&[
            "report",
            "--rr",
            "--last",
            "--format",
            format,
            "--db",
            db.arg(),
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let page = String::from_utf8(out.stdout).unwrap();
        let snapshot = format!("{manifest}/tests/snapshots/{file}");
        if std::env::var_os("WIREBENCH_UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(&snapshot, &page).unwrap();
        }
        assert!(
            page == std::fs::read_to_string(&snapshot).expect("snapshot exists"),
            "the rr report differs from {snapshot}:\n{page}"
        );
        if format == "html" {
            assert!(page.contains("Loss and retransmissions against requests in flight"));
            assert!(
                page.contains("UDP requests lost") && page.contains("TCP segments retransmitted")
            );
        } else {
            // UDP loss and TCP retransmissions side by side: 2 % and 0.4 % at K = 32.
            let k32: Vec<&str> = page.lines().filter(|l| l.contains(" 32 ")).collect();
            assert!(
                k32.iter().any(|l| l.contains("udp") && l.contains("2.000")),
                "{page}"
            );
            assert!(
                k32.iter().any(|l| l.contains("tcp") && l.contains("0.400")),
                "{page}"
            );
        }
    }
    let json = wirebench(&["report", "--rr", "1", "--format", "json", "--db", db.arg()]).await;
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["results"], fixture["results"]);
    let wrong = wirebench(&["report", "--rr", "7", "--db", db.arg()]).await;
    assert_eq!(wrong.status.code(), Some(2), "{}", stderr(&wrong));
}

/// SIGTERM in the middle of a stored sweep: exit status 143, the sweep stored as aborted with
/// the results that finished before the signal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stores_the_sweep_as_aborted() {
    crate::support::within(async {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let db = TempPath::new(".sqlite3");
        let data_home = TempPath::new("-data");
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args([
                "rr",
                "--proto",
                "udp",
                "--concurrency",
                "1,2",
                "-t",
                "30",
                "--db",
                db.arg(),
            ])
            .env("XDG_DATA_HOME", &data_home.0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("wirebench starts");
        // The heading is printed once the sweep is stored as begun and before its first request.
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        tokio::time::timeout(crate::support::TEST_TIMEOUT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with("rr udp to ") {
                    return;
                }
            }
            panic!("no heading");
        })
        .await
        .expect("the sweep starts in time");
        let pid = i32::try_from(child.id().expect("still running")).unwrap();
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let out = tokio::time::timeout(crate::support::TEST_TIMEOUT, child.wait_with_output())
            .await
            .expect("it ends after the signal")
            .expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(143), "{err}");
        assert!(err.contains("rr sweep 1 is stored as aborted"), "{err}");
        let store = Store::open(&db.0).unwrap();
        let info = store.campaign::<Rr>(1).unwrap().expect("the sweep");
        assert_eq!(info.status, Status::Aborted);
        assert!(info.finished_at_unix_s.is_some());
    })
    .await
}

/// `store copy` carries an rr sweep (campaign and results) into a fresh store of each backend:
/// `report --rr --format json` reads the same from both, and a second copy copies nothing.
#[tokio::test]
async fn store_copy_carries_an_rr_sweep_once() {
    crate::support::within(async {
        let from = TestDb::sqlite();
        let out = wirebench(&[
            "rr",
            "--proto",
            "udp",
            "--concurrency",
            "1,2",
            "--count",
            "20",
            "--db",
            from.arg(),
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        let report = |db: &TestDb| {
            let db = db.arg().to_string();
            async move {
                let out =
                    wirebench(&["report", "--rr", "--last", "--format", "json", "--db", &db]).await;
                assert!(out.status.success(), "{}", stderr(&out));
                out.stdout
            }
        };
        let original = report(&from).await;
        for to in backends() {
            for (copied, there) in [(1, 0), (0, 1)] {
                let out =
                    wirebench(&["store", "copy", "--from", from.arg(), "--to", to.arg()]).await;
                let said = String::from_utf8_lossy(&out.stdout).into_owned();
                assert!(out.status.success(), "{said}{}", stderr(&out));
                assert!(
                    said.contains(&format!("{copied} rr sweep(s)"))
                        && said.contains(&format!("; {there} already there")),
                    "{said}"
                );
            }
            assert_eq!(report(&to).await, original);
            assert_eq!(to.open().results::<Rr>(1).unwrap().len(), 2);
        }
    })
    .await
}

/// The sessions lab: a ping and an rr sweep over 1, 2 and 3 flows, stored in one database,
/// make one `report --rr A B`: one table with every result of both, each row with its
/// throughput per session in bit/s (answered × (request + response bytes) × 8 / elapsed /
/// flows, from the stored result), the flows axis ticking at whole numbers; JSON is an array of
/// the two documents.
#[tokio::test]
async fn report_rr_pools_a_ping_and_an_rr_sweep_with_throughput_per_session() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let ping = wirebench(&["ping", "--proto", "tcp", "--count", "20", "--db", db.arg()]).await;
        assert!(ping.status.success(), "{}", stderr(&ping));
        let rr = wirebench(&[
            "rr",
            "--proto",
            "tcp",
            "--flows",
            "1,2,3",
            "--count",
            "20",
            "--db",
            db.arg(),
        ])
        .await;
        assert!(rr.status.success(), "{}", stderr(&rr));
        let store = Store::open(&db.0).unwrap();
        let mut results: Vec<RrResult> = Vec::new();
        for id in [1, 2] {
            let info = store.campaign::<Rr>(id).unwrap();
            let stored = match info {
                Some(_) => store.results::<Rr>(id).unwrap(),
                None => store.results::<wirebench::store::rr::Ping>(id).unwrap(),
            };
            results.extend(stored.into_iter().map(|r| r.result));
        }
        drop(store);
        assert_eq!(results.len(), 1 + 3, "one ping result, three rr flows");

        let out = wirebench(&["report", "--rr", "1", "2", "--db", db.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains("2 sweeps pooled"), "{text}");
        assert!(
            text.contains("ping sweep 1") || text.contains("rr sweep 1"),
            "{text}"
        );
        let header = text
            .lines()
            .find(|l| l.trim_start().starts_with("proto"))
            .expect("a table header");
        assert!(header.contains("per flow"), "{header}");
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("  tcp ") || l.starts_with("  udp "))
            .collect();
        assert_eq!(rows.len(), results.len(), "{text}");
        for (row, r) in rows.iter().zip(&results) {
            let bps = r.answered as f64 * f64::from(r.request_bytes + r.response_bytes) * 8.0
                / (r.elapsed_ns as f64 / 1e9)
                / f64::from(r.flows);
            let shown = wirebench_core::vocab::units::format_bitrate(bps);
            assert!(row.ends_with(&shown), "{row} should end with {shown}");
            assert_eq!(r.throughput_per_flow_bps(), Some(bps));
        }

        // --last 2 is the same two sweeps, oldest first.
        let last = wirebench(&["report", "--rr", "--last", "2", "--db", db.arg()]).await;
        assert!(last.status.success(), "{}", stderr(&last));
        assert_eq!(String::from_utf8_lossy(&last.stdout), text);

        let html = wirebench(&[
            "report",
            "--rr",
            "1",
            "2",
            "--format",
            "html",
            "--db",
            db.arg(),
        ])
        .await;
        assert!(html.status.success(), "{}", stderr(&html));
        let html = String::from_utf8_lossy(&html.stdout).into_owned();
        let charts = crate::browser::charts_of(&html);
        assert!(!charts.is_empty(), "flows vary: charts against the flows");
        // The ping and the rr sweep's one flow are both TCP at one flow: each series names its
        // sweep, so no line joins the two sweeps' points.
        for chart in &charts {
            crate::browser::check_chart("ping and rr", chart);
        }
        let names = crate::browser::texts_of(charts[charts.len() - 1]);
        for name in ["TCP, ping sweep 1", "TCP, rr sweep 2"] {
            assert!(names.iter().any(|t| t == name), "{name}: {names:?}");
        }
        let ticks = crate::browser::texts_of(charts[0]);
        assert!(
            ticks
                .iter()
                .any(|t| t == "Flows (connections or sockets, count)"),
            "{ticks:?}"
        );
        // Whole flows only: 1, 2, 3, never 1.5 or 2.5 (the y axis has its own decimals).
        for whole in ["1", "2", "3"] {
            assert!(ticks.iter().any(|t| t == whole), "{whole}: {ticks:?}");
        }
        assert!(!ticks.iter().any(|t| t == "1.5" || t == "2.5"), "{ticks:?}");

        // The ping alone ran at one load: no one-point "against" chart, but one bar of its
        // response time per protocol.
        let ping_html =
            wirebench(&["report", "--rr", "1", "--format", "html", "--db", db.arg()]).await;
        assert!(ping_html.status.success(), "{}", stderr(&ping_html));
        let ping_html = String::from_utf8_lossy(&ping_html.stdout).into_owned();
        let charts = crate::browser::charts_of(&ping_html);
        assert_eq!(charts.len(), 1, "{ping_html}");
        crate::browser::check_chart("ping", charts[0]);
        assert!(charts[0].contains("Response time per protocol"));
        assert!(!charts[0].contains(" against "), "{}", charts[0]);
        assert!(ping_html.contains("per flow"), "{ping_html}");

        let json = wirebench(&[
            "report",
            "--rr",
            "1",
            "2",
            "--format",
            "json",
            "--db",
            db.arg(),
        ])
        .await;
        assert!(json.status.success(), "{}", stderr(&json));
        let v: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(v.as_array().map(Vec::len), Some(2), "{v}");
    })
    .await
}
