//! The relay from the command line: `run --impair` recording the relay's counts, bad impairments
//! refused, `wirebench relay` printing its counts, and an rr sweep saying what it dropped.

use wirebench::flows::client::SessionRequest;
use wirebench_core::vocab::plan::{Mechanism, Protocol};

use super::{relay, spec};
use crate::support::{TestServer, TEST_TIMEOUT};

/// `run --impair` puts the relay in front of the embedded server and records what it did with
/// each run; the JSON still matches the schema, and the server's loss is the relay's drops.
#[tokio::test]
async fn run_impair_records_the_relays_counts_with_each_run() {
    let db = crate::support::TempPath::new(".sqlite3");
    let out = crate::cli::wirebench(&[
        "run",
        "--db",
        db.arg(),
        "--json",
        "--proto",
        "udp",
        "--mode",
        "stream,saw",
        "-l",
        "1000",
        "-n",
        "300000",
        "--rate",
        "20Mbit",
        "--rto",
        "100ms",
        "--impair",
        "loss=up:5%",
        "--impair-seed",
        "9",
    ])
    .await;
    assert!(out.status.success(), "{}", crate::cli::stderr(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_matches_schema(&doc);
    assert!(doc["parameters"]["server"]
        .as_str()
        .unwrap()
        .contains("via impairment relay"));
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let stream = &runs[0];
    assert!(
        stream["relay"]["udp_up"]["dropped"].as_u64().unwrap() > 0,
        "{stream}"
    );
    assert_eq!(
        stream["server"]["lost"],
        stream["relay"]["udp_up"]["dropped"]
    );
    let saw = &runs[1];
    // Up only: acknowledgements are never dropped. Every datagram the client sent either was
    // dropped by the relay or reached the server, so each retransmission is a data drop or a
    // copy the server counted as a duplicate (an acknowledgement later than the RTO on a busy
    // host): an identity whatever the timing.
    assert_eq!(saw["relay"]["udp_down"]["dropped"], 0);
    let field = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("a count: {saw}"));
    assert!(field(&saw["relay"]["udp_up"]["dropped"]) > 0, "{saw}");
    assert_eq!(
        field(&saw["client"]["retransmissions"]),
        field(&saw["relay"]["udp_up"]["dropped"]) + field(&saw["server"]["duplicates"]),
        "{saw}"
    );
}

#[tokio::test]
async fn bad_impairments_get_one_line_and_exit_status_2() {
    let cases: [(&[&str], &str); 6] = [
        (&["run", "--impair", "speed=1"], "allowed loss, delay"),
        (
            &["run", "--proto", "udp", "--impair", "loss=5"],
            "5% or 0.5%",
        ),
        (
            &["run", "--proto", "tcp", "--impair", "loss=5%"],
            "UDP and QUIC only",
        ),
        (
            &["relay", "--listen", "x", "--to", "127.0.0.1:1"],
            "--listen x",
        ),
        (
            &[
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--to",
                "127.0.0.1:1",
                "--proto",
                "tcp",
                "--duplicate",
                "1%",
            ],
            "UDP and QUIC only",
        ),
        (
            &[
                "relay",
                "--listen",
                "127.0.0.1:0",
                "--to",
                "127.0.0.1:1",
                "--delay",
                "sideways:1ms",
            ],
            "delay",
        ),
    ];
    for (args, expect) in cases {
        let out = crate::cli::wirebench(args).await;
        let err = crate::cli::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
    }
}

/// `wirebench relay` as a process: counts on SIGUSR1 and at SIGTERM, as JSON lines, equal to
/// what a session through it reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_command_prints_its_counts_on_sigusr1_and_at_exit() {
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt, BufReader};
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = TestServer::start().await;
        let to = server.addr.to_string();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args(["relay", "--listen", "127.0.0.1:0", "--to", &to])
            .args(["--loss", "up:10%", "--seed", "4", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("relay starts");
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = err.next_line().await.unwrap().expect("listening line");
        let addr: std::net::SocketAddr = first
            .split_whitespace()
            .nth(4)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("address in {first:?}"));
        let mut sp = spec(Protocol::Udp, Mechanism::Stream, 500, 500_000);
        sp.rate_bps = Some(20_000_000);
        let out = SessionRequest::new(addr, &sp)
            .run()
            .await
            .expect("session through the relay");
        server.next_session().await;
        let pid = child.id().expect("pid") as i32;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        for (signal, reason) in [(libc::SIGUSR1, "signal"), (libc::SIGTERM, "exit")] {
            // SAFETY: kill(2) on the child we started; no memory is involved.
            assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
            let line = lines.next_line().await.unwrap().expect("a counts line");
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON line");
            assert_eq!(v["reason"], reason, "{v}");
            assert_eq!(v["seed"], 4);
            assert_eq!(v["counts"]["udp_up"]["received"], 1000);
            assert_eq!(v["counts"]["udp_up"]["dropped"], out.server.lost, "{v}");
            assert_eq!(v["counts"]["udp_flows"], 1);
            assert!(v["counts"]["tcp_connections"].as_u64().unwrap() >= 1);
        }
        let status = child.wait().await.expect("relay exits");
        assert!(status.success(), "{status:?}");
    })
    .await
    .expect("test finished in time");
}

/// Validates a `run --json` document against docs/run-output.schema.json.
fn assert_matches_schema(doc: &serde_json::Value) {
    let schema_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/run-output.schema.json"
    );
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler
        .add_resource("run-output.schema.json", schema)
        .unwrap();
    let index = compiler
        .compile("run-output.schema.json", &mut schemas)
        .expect("the schema compiles");
    if let Err(e) = schemas.validate(doc, index) {
        panic!("output does not match the schema: {e:#}");
    }
}

/// An rr sweep through a relay that drops 10% of UDP datagrams each way, stored with the path
/// note README suggests: UDP loses requests, and `report --rr` says the relay dropped UDP only,
/// so TCP's retransmissions there are the kernel's over clean loopback legs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rr_sweep_through_the_relay_says_what_it_dropped() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = TestServer::start().await;
        let relay = relay(&server, "loss=10%", 11).await;
        let db = crate::support::TempPath::new(".sqlite3");
        let to = relay.local_addr().to_string();
        let out = crate::cli::wirebench(&[
            "rr",
            "--server",
            &to,
            "--proto",
            "udp,tcp",
            "--concurrency",
            "1,8",
            "--count",
            "100",
            "--timeout",
            "100ms",
            "--path-note",
            "relay --loss 10% (seed 11)",
            "--db",
            db.arg(),
        ])
        .await;
        assert!(out.status.success(), "{}", crate::cli::stderr(&out));
        let counts = relay.counts();
        assert!(
            counts.udp_up.dropped + counts.udp_down.dropped > 0,
            "{counts:?}"
        );
        let report = crate::cli::wirebench(&["report", "--rr", "1", "--db", db.arg()]).await;
        let text = String::from_utf8_lossy(&report.stdout).into_owned();
        assert!(report.status.success(), "{}", crate::cli::stderr(&report));
        assert!(
            text.contains("\npath: relay --loss 10% (seed 11)\n"),
            "{text}"
        );
        assert!(
            text.contains("the relay drops UDP datagrams only"),
            "{text}"
        );
        assert!(text.contains("clean loopback legs"), "{text}");
        // UDP's losses are the relay's drops: some requests at K=8 were never answered.
        let lost: u64 = text
            .lines()
            .filter(|l| l.starts_with("  udp "))
            .map(|l| {
                l.split_whitespace()
                    .nth(5)
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            })
            .sum();
        assert!(lost > 0, "{text}");
    })
    .await
    .expect("test finished in time");
}
