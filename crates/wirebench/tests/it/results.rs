//! The one result model, end to end: what `run` prints, stores, exports, reports and compares
//! is the same goodput and loss, computed once (wirebench_core::record), and the output details
//! issue 14 found wrong stay right.

use serde_json::Value;
use wirebench_core::record::transfer_span_ns;
use wirebench_core::vocab::plan::Mechanism;

use crate::cli::{stderr, wirebench};
use crate::support::TempPath;

pub(crate) fn schema_check(doc: &Value, file: &str) {
    let path = format!("{}/../../docs/{file}", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource(file, schema).unwrap();
    let index = compiler
        .compile(file, &mut schemas)
        .expect("schema compiles");
    if let Err(e) = schemas.validate(doc, index) {
        panic!("does not match {file}: {e:#}");
    }
}

/// The campaign of issue 14's "done when", smaller: TCP and unpaced UDP streaming, 3 repeats.
/// The tables `run` ends with are the tables `report` prints; every run's goodput is its
/// receiver's bytes × 8 over its transfer time; UDP loss is in the tables; the export
/// validates against its schema; compare judges goodput.
#[tokio::test]
async fn run_tables_report_export_and_compare_show_one_goodput() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let args = [
            "run",
            "--proto",
            "tcp,udp",
            "--mode",
            "stream",
            "-l",
            "1024",
            "-n",
            "8MiB",
            "--repeat",
            "3",
            "--db",
            db.arg(),
        ];
        let out = wirebench(&args).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}{}", stderr(&out));
        for needle in [
            "Statistics for TCP Streaming",
            "Statistics for UDP Streaming",
            "Statistics for Client UDP Streaming",
            "Goodput (",
            "Lost (%): Min = ",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert!(!text.contains("Throughput (Gbit/s)"), "{text}");

        // The run's tables are the report's tables, figure for figure.
        let report = wirebench(&["report", "--last", "--db", db.arg()]).await;
        assert!(report.status.success(), "{}", stderr(&report));
        let report = String::from_utf8_lossy(&report.stdout).into_owned();
        let tables = |t: &str| t[t.find("Statistics for ").expect("tables")..].to_string();
        let run_tables = tables(&text);
        let run_tables = &run_tables[..run_tables
            .find("stored as campaign")
            .unwrap_or(run_tables.len())];
        assert_eq!(run_tables.trim_end(), tables(&report).trim_end());

        // Every run's headline goodput is the receiver's bytes over the run's transfer time,
        // the one definition (the longer of the two ends' spans when streaming).
        let export = wirebench(&["export", "1", "--db", db.arg()]).await;
        assert!(export.status.success(), "{}", stderr(&export));
        let doc: Value = serde_json::from_slice(&export.stdout).unwrap();
        schema_check(&doc, "export.schema.json");
        let runs = doc["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 6);
        for r in runs {
            let h = &r["headline"];
            let received = r["server"]["bytes"].as_f64().unwrap();
            let span = |end: &str| r[end]["elapsed_ns"].as_u64().unwrap();
            let mechanism = if r["mechanism"] == "stream" {
                Mechanism::Stream
            } else {
                Mechanism::StopAndWait
            };
            let transfer_ns = transfer_span_ns(mechanism, span("client"), span("server"));
            assert_eq!(h["transfer_ns"], transfer_ns, "{r}");
            let seconds = transfer_ns as f64 / 1e9;
            if let Some(goodput) = h["goodput_bps"].as_f64() {
                let expected = received * 8.0 / seconds;
                assert!((goodput - expected).abs() / expected < 0.01, "{r}");
                assert!(goodput <= h["sent_bps"].as_f64().unwrap());
            }
            if r["protocol"] == "udp" {
                let lost = r["server"]["lost"].as_u64().unwrap();
                assert_eq!(h["delivery"]["lost"], lost);
                let sent = r["client"]["messages"].as_f64().unwrap();
                assert_eq!(h["delivery"]["lost_pct"], lost as f64 * 100.0 / sent);
            } else {
                assert!(h["delivery"].is_null());
            }
        }
        // The JSON report's configurations are the run document's summary.
        let json = wirebench(&["report", "1", "--format", "json", "--db", db.arg()]).await;
        let json: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(json["configurations"], doc["summary"]);

        // A second import of the same export is refused (exit 2) and says so; --again imports it.
        let file = TempPath::new(".json");
        std::fs::write(&file.0, &export.stdout).unwrap();
        let again = wirebench(&["import", file.arg(), "--db", db.arg()]).await;
        assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
        assert!(stderr(&again).contains("already in"), "{}", stderr(&again));
        let forced = wirebench(&["import", file.arg(), "--again", "--db", db.arg()]).await;
        assert!(forced.status.success(), "{}", stderr(&forced));
        // An endless file is refused at the documented bound, in one line, and stores nothing.
        let listed = wirebench(&["runs", "--db", db.arg()]).await.stdout;
        let endless = wirebench(&["import", "/dev/zero", "--db", db.arg()]).await;
        assert_eq!(endless.status.code(), Some(2), "{}", stderr(&endless));
        assert!(
            stderr(&endless).contains("at most 256 MiB"),
            "{}",
            stderr(&endless)
        );
        assert_eq!(
            stderr(&endless).trim().lines().count(),
            1,
            "{}",
            stderr(&endless)
        );
        assert_eq!(wirebench(&["runs", "--db", db.arg()]).await.stdout, listed);

        // Compare judges goodput: the same runs, no significant difference.
        let cmp = wirebench(&["compare", "1", "2", "--db", db.arg()]).await;
        let cmp = String::from_utf8_lossy(&cmp.stdout).into_owned();
        assert!(cmp.contains("median goodput"), "{cmp}");
        assert_eq!(cmp.matches("no significant difference").count(), 2, "{cmp}");
    })
    .await
}

/// With -i, a run's heading comes before its interval lines, so they read as its own.
#[tokio::test]
async fn interval_lines_follow_their_runs_heading() {
    crate::support::within(async {
        let out = wirebench(&[
            "run",
            "--proto",
            "udp",
            "--mode",
            "stream",
            "--rate",
            "100Mbit",
            "-n",
            "1MiB",
            "-i",
            "20ms",
            "--repeat",
            "2",
            "--no-store",
        ])
        .await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}{}", stderr(&out));
        let lines: Vec<&str> = text.lines().collect();
        for k in 1..=2 {
            let heading = format!("[{k}/2] udp stream, run {k}");
            let at = lines
                .iter()
                .position(|l| *l == heading)
                .unwrap_or_else(|| panic!("{heading}: {text}"));
            assert_eq!(lines.iter().filter(|l| **l == heading).count(), 1, "{text}");
            // About 84 ms at 100 Mbit/s: intervals of 20 ms follow the heading, then the block.
            assert!(
                lines[at + 1].trim_start().starts_with("[   0.00-"),
                "{text}"
            );
            let block = lines[at..].iter().position(|l| l.starts_with("  goodput:"));
            assert!(block.is_some_and(|b| b > 2), "{text}");
        }
    })
    .await
}

/// -P 2 -R: the server sent and the client received, and the lines say so; the session id in
/// the text is the one the store keeps.
#[tokio::test]
async fn parallel_reverse_labels_the_directions_and_ids_match() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let out = wirebench(&[
            "run",
            "--proto",
            "tcp",
            "--mode",
            "stream",
            "-P",
            "2",
            "-R",
            "-n",
            "1MiB",
            "--db",
            db.arg(),
        ])
        .await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}{}", stderr(&out));
        assert!(text.contains("server: 2 sessions: sent "), "{text}");
        assert!(text.contains("flow 1: client received "), "{text}");
        assert!(!text.contains("server: 2 sessions: read"), "{text}");

        let one = wirebench(&["run", "--proto", "udp", "-n", "64KiB", "--db", db.arg()]).await;
        let text = String::from_utf8_lossy(&one.stdout).into_owned();
        let export = wirebench(&["export", "2", "--db", db.arg()]).await;
        let doc: Value = serde_json::from_slice(&export.stdout).unwrap();
        let session = doc["runs"][0]["session"].as_u64().unwrap();
        assert!(
            text.contains(&format!("server: session {session} udp")),
            "{session}: {text}"
        );
    })
    .await
}

/// A campaign with no finished run has nothing to report: exit 2 and a sentence that says so.
#[tokio::test]
async fn report_of_a_campaign_without_runs_says_so() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        // Nothing listens on port 1 of loopback: the first run fails and none finishes.
        let failed = wirebench(&[
            "run",
            "--server",
            "127.0.0.1:1",
            "-n",
            "1KiB",
            "--db",
            db.arg(),
        ])
        .await;
        assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
        let out = wirebench(&["report", "--last", "--db", db.arg()]).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("has no finished run"),
            "{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    })
    .await
}

/// A timed run (`-t`) is stored with the limit that ended it: `show` and `runs` give its time,
/// `export` its `ended_by` and `duration_us` (checked against the schema).
#[tokio::test]
async fn a_timed_run_is_stored_ended_by_time() {
    crate::support::within(async {
        let db = TempPath::new(".sqlite3");
        let out = wirebench(&["run", "-t", "1", "--db", db.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let show = wirebench(&["show", "1", "--db", db.arg()]).await;
        let show = String::from_utf8_lossy(&show.stdout).into_owned();
        assert!(show.contains("131072-byte messages, 1 s × 1"), "{show}");
        assert!(show.contains("tcp stream 131072 B × 1 s, run 1"), "{show}");
        let export = wirebench(&["export", "1", "--db", db.arg()]).await;
        assert!(export.status.success(), "{}", stderr(&export));
        let doc: Value = serde_json::from_slice(&export.stdout).unwrap();
        schema_check(&doc, "export.schema.json");
        assert_eq!(doc["parameters"]["duration_us"], 1_000_000, "{doc}");
        assert_eq!(doc["runs"][0]["ended_by"], "time", "{doc}");
    })
    .await
}
