//! One-way delay per direction (`ping` over UDP, TCP and QUIC): through a relay that delays
//! the two directions differently, each direction's delay is the relay's, within the bound the
//! run reports; with the server's clock set 2.5 s ahead (libfaketime, as a host whose clock is
//! wrong), the estimate recovers the offset within its bound and says the one-clock claim was
//! contradicted.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::cli::{assert_matches_doc_schema, stderr, wirebench};
use crate::support::{TestServer, TEST_TIMEOUT};

const UP_MS: i64 = 5;
const DOWN_MS: i64 = 20;
/// How late a loaded machine may hand on a delayed datagram, or wake the ping to read it:
/// the measured delay may exceed the configured one by this much, never fall below it.
const LATE_SLACK_NS: i64 = 15_000_000;

/// Debian's libfaketime (package `faketime`).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Starts `wirebench` with `args` and `env`, and returns it with the address its first stderr
/// line names (the word after "on").
async fn start_listening(args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("wirebench starts");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let first = lines.next_line().await.unwrap().expect("a listening line");
    let addr = first
        .split_whitespace()
        .skip_while(|w| *w != "on")
        .nth(1)
        .unwrap_or_else(|| panic!("an address in {first:?}"))
        .to_string();
    // Keep reading so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, addr)
}

/// `ping --proto PROTO` to `target`: its result's `one_way` object.
async fn ping_one_way(proto: &str, target: &str, count: &str) -> Value {
    let out = wirebench(&[
        "ping",
        "--proto",
        proto,
        "-c",
        count,
        "--json",
        "--no-store",
        "--per-probe",
        target,
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("ping --json");
    // --per-probe: one entry per timed exchange, in sending order.
    let w = &doc["results"][0]["one_way"];
    let probes = w["probes"]
        .as_array()
        .expect("--per-probe lists the probes");
    assert_eq!(Some(probes.len() as u64), w["exchanges"].as_u64(), "{w}");
    let sent: Vec<i64> = probes
        .iter()
        .filter_map(|p| p["sent_unix_ns"].as_i64())
        .collect();
    assert!(sent.windows(2).all(|t| t[0] < t[1]), "{w}");
    assert_matches_doc_schema(&doc, "rr-output.schema.json");
    doc["results"][0]["one_way"].clone()
}

fn ns(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("a number, got {v}"))
}

/// 5 ms up, 20 ms down through the relay: one kernel's clock at both ends, so the bound is a
/// microsecond or less, and each direction's smallest delay is its own configured delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asymmetric_path_shows_each_directions_delay() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let to = server.addr.to_string();
        let (_relay, addr) = start_listening(
            &[
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--to",
                &to,
                "--delay",
                "up:5ms",
                "--delay",
                "down:20ms",
            ],
            &[],
        )
        .await;
        // UDP datagrams, and TCP and QUIC streams: each stamped by the server.
        for proto in ["udp", "tcp", "quic"] {
            let w = ping_one_way(proto, &addr, "10").await;
            assert_eq!(w["clock"]["source"], "same_clock", "{proto}: {w}");
            let bound = ns(&w["clock"]["bound_ns"]);
            assert!(
                bound <= 1_000,
                "one clock: the bound is the clock reads', {w}"
            );
            assert_eq!(w["exchanges"], 10, "{proto}: {w}");
            assert_eq!(w["outside_bound"], 0, "{proto}: {w}");
            for (direction, ms) in [("up", UP_MS), ("down", DOWN_MS)] {
                let configured = ms * 1_000_000;
                let min = ns(&w[direction]["min_ns"]);
                eprintln!(
                    "{proto} {direction}: configured {ms} ms, measured min {min} ns ± {bound}"
                );
                assert!(min + bound >= configured, "{proto} {direction}: {w}");
                assert!(
                    min <= configured + LATE_SLACK_NS,
                    "{proto} {direction}: {w}"
                );
            }
        }
    })
    .await
    .expect("test finished in time");
}

/// A server whose clock runs 2.5 s ahead: the exchanges contradict "one clock", and the offset
/// they bound contains the true 2.5 s, within well under a millisecond on loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offset_server_clock_is_recovered_within_its_bound() {
    if !Path::new(LIBFAKETIME).exists() {
        eprintln!("skipped: {LIBFAKETIME} is missing (apt-get install faketime)");
        return;
    }
    tokio::time::timeout(TEST_TIMEOUT, async {
        let (_server, addr) = start_listening(
            &["server", "--bind", "127.0.0.1", "--port", "0"],
            &[
                ("LD_PRELOAD", LIBFAKETIME),
                ("FAKETIME", "+2.5s"),
                // Only the wall clock is set ahead; timers keep the real monotonic clock.
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ],
        )
        .await;
        let w = ping_one_way("udp", &addr, "50").await;
        let clock = &w["clock"];
        assert_eq!(clock["source"], "exchanges", "{w}");
        assert_eq!(clock["contradicted"], "same_clock", "{w}");
        let (offset, bound) = (ns(&clock["offset_ns"]), ns(&clock["bound_ns"]));
        eprintln!("server clock +2.5 s: estimated {offset} ns ± {bound}");
        assert!((offset - 2_500_000_000).abs() <= bound, "{w}");
        assert!(
            bound < 1_000_000,
            "a sub-millisecond round trip bounds it below 1 ms: {w}"
        );
        for direction in ["up", "down"] {
            assert!(ns(&w[direction]["min_ns"]) + bound >= 0, "{direction}: {w}");
        }
    })
    .await
    .expect("test finished in time");
}

/// `wirebench latency` against the embedded server: the phases asked for, in order, each with
/// answered probes, one-way figures on one clock and its load's goodput in its direction only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_runs_its_phases_in_order_on_loopback() {
    let out = wirebench(&[
        "latency",
        "-t",
        "1s",
        "--phases",
        "idle,download,upload",
        "--json",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("latency --json");
    assert_matches_doc_schema(&doc, "latency-output.schema.json");
    let phases = doc["phases"].as_array().expect("phases");
    let names: Vec<&str> = phases.iter().filter_map(|p| p["phase"].as_str()).collect();
    assert_eq!(names, ["idle", "download", "upload"]);
    assert_eq!(doc["clock"]["source"], "same_clock", "{doc}");
    for p in phases {
        assert!(p["probes"]["answered"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(
            p["probes"]["sent"].as_u64(),
            Some(p["probes"]["answered"].as_u64().unwrap() + p["probes"]["lost"].as_u64().unwrap())
        );
        assert!(p["one_way"]["up"]["p50_ns"].is_i64(), "{p}");
    }
    assert!(phases[0]["upload_bps"].is_null() && phases[0]["download_bps"].is_null());
    assert!(phases[1]["download_bps"].as_f64().unwrap() > 0.0 && phases[1]["upload_bps"].is_null());
    assert!(phases[2]["upload_bps"].as_f64().unwrap() > 0.0 && phases[2]["download_bps"].is_null());
}

/// Bad flags get one line that says what is allowed, and exit status 2.
#[tokio::test]
async fn bad_flags_are_refused_in_one_line() {
    for (args, expect) in [
        (
            &["latency", "--phases", "idle,sideways"][..],
            "allowed idle, upload, download, both",
        ),
        (&["latency", "--phases", "idle,idle"], "given twice"),
        (&["latency", "-P", "0"], "allowed 1 to 16"),
        (&["latency", "--load", "udp"], "expected tcp or quic"),
        (&["latency", "--probe-interval", "0ms"], "allowed 1ms to 1s"),
        (&["latency", "-t", "301s"], "allowed 1s to 300s"),
        (&["latency", "-l", "0"], "expected 1 to 16MiB"),
        (&["ping", "-l", "8", "--per-probe"], "give -l 16 or more"),
    ] {
        let out = wirebench(args).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

/// A stored latency campaign: `runs` lists it, `report --latency` gives its phases as a table,
/// one CSV row per phase, the JSON document, and an HTML chart of each direction over time
/// with each phase named where it starts; `export --latency` gives its document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latency_campaign_is_stored_listed_and_charted() {
    let db = crate::support::TempPath::new(".sqlite3");
    let out = wirebench(&[
        "latency",
        "-t",
        "1s",
        "--phases",
        "idle,upload",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("stored as latency campaign 1"), "{said}");
    let runs = wirebench(&["runs", "--db", db.arg()]).await;
    let listed = String::from_utf8_lossy(&runs.stdout).into_owned();
    assert!(listed.contains("idle,upload against embedded"), "{listed}");
    assert!(listed.contains("upload: up p99"), "{listed}");
    let db_arg = db.arg().to_string();
    let report = |format: &'static str| {
        let db_arg = db_arg.clone();
        async move {
            let args = [
                "report",
                "--latency",
                "1",
                "--db",
                &db_arg,
                "--format",
                format,
            ];
            let out = wirebench(&args).await;
            assert!(out.status.success(), "{format}: {}", stderr(&out));
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };
    let json: Value = serde_json::from_str(&report("json").await).expect("JSON");
    let phases = json["results"][0]["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 2, "{json}");
    let csv = report("csv").await;
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with("test,phase,"), "{csv}");
    assert!(
        lines[1].starts_with("1,idle,") && lines[2].starts_with("1,upload,"),
        "{csv}"
    );
    let html = report("html").await;
    for text in [
        "<svg",
        "Up (client → server)",
        "Down (server → client)",
        "idle 0.0 s",
        "upload ",
    ] {
        assert!(html.contains(text), "{text} missing from the HTML report");
    }
    let text = report("table").await;
    assert!(
        text.contains("rtt p50") && text.contains("up p99"),
        "{text}"
    );
    let export = wirebench(&["export", "1", "--latency", "--db", db.arg()]).await;
    let doc: Value = serde_json::from_slice(&export.stdout).expect("export JSON");
    assert_eq!(doc["kind"], "latency", "{doc}");
}

/// TCP and QUIC probes are stamped too (the server stamps stream answers): `latency --probe`
/// gives each direction's delay whatever the probes' transport.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_probes_are_stamped_too() {
    for probe in ["tcp", "quic"] {
        let out = wirebench(&[
            "latency",
            "-t",
            "1s",
            "--phases",
            "idle",
            "--probe",
            probe,
            "--json",
            "--no-store",
        ])
        .await;
        assert!(out.status.success(), "{probe}: {}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("latency --json");
        assert_matches_doc_schema(&doc, "latency-output.schema.json");
        assert_eq!(doc["plan"]["probe"], probe, "{doc}");
        assert_eq!(doc["clock"]["source"], "same_clock", "{probe}: {doc}");
        let idle = &doc["phases"][0];
        assert_eq!(idle["one_way"]["outside_bound"], 0, "{probe}: {idle}");
        assert!(idle["one_way"]["up"]["p50_ns"].is_i64(), "{probe}: {idle}");
        assert!(
            idle["series"]
                .as_array()
                .is_some_and(|s| s.iter().all(|p| p["down_ns"].is_i64())),
            "{probe}: {idle}"
        );
    }
}
