//! `run -t`: time-based runs against the embedded server, for every protocol and mechanism.
//! The sender stops after its last whole message and ends the session as usual, so both sides'
//! counts agree exactly (UDP streaming: received + lost = sent) and the record says the time
//! ended the run.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli::{assert_matches_schema, stderr, wirebench};
use crate::support::within;

/// Longest a run of `-t 1` may take end to end (process start, set-up and the drain of what
/// the transport buffered included): generous, for a loaded 2-vCPU machine.
const WALL_LIMIT: Duration = Duration::from_secs(15);

/// Runs `wirebench run -t SECS -J --no-store EXTRA...`, checks the document against the
/// schema and returns its only run.
async fn timed_run(secs: &str, extra: &[&str]) -> Value {
    let mut args = vec!["run", "-t", secs, "-J", "--no-store", "-l", "1400"];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let out = wirebench(&args).await;
    let wall = started.elapsed();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    assert!(wall < WALL_LIMIT, "{args:?} took {wall:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("-J prints one JSON document");
    assert_matches_schema(&doc);
    let secs: f64 = secs.parse().expect("whole seconds");
    assert_eq!(
        doc["parameters"]["duration_us"].as_f64(),
        Some(secs * 1e6),
        "{doc}"
    );
    doc["runs"][0].clone()
}

/// The checks every timed run passes: ended by time, the client's transfer time near the
/// time asked (bounded, generously), whole messages, and the server's counts.
fn assert_timed(run: &Value, secs: f64, label: &str) {
    assert_eq!(run["ended_by"], "time", "{label}: {run}");
    let client_secs = run["client"]["seconds"].as_f64().expect("client seconds");
    assert!(
        (0.9 * secs..=secs + 2.0).contains(&client_secs),
        "{label}: the run took {client_secs} s for -t {secs}"
    );
    let sent = run["client"]["messages"].as_u64().expect("messages sent");
    let sent_bytes = run["client"]["bytes"].as_u64().expect("bytes sent");
    assert!(sent > 0, "{label}: nothing sent");
    assert_eq!(sent_bytes, sent * 1400, "{label}: whole messages only");
    let read = run["server"]["messages"].as_u64().expect("messages read");
    let read_bytes = run["server"]["bytes"].as_u64().expect("bytes read");
    assert_eq!(run["server"]["aborted"], false, "{label}: {run}");
    if run["protocol"] == "udp" && run["mechanism"] == "stream" {
        let lost = run["server"]["lost"].as_u64().expect("lost");
        assert_eq!(read + lost, sent, "{label}: received + lost = sent");
    } else {
        assert_eq!(
            (read, read_bytes),
            (sent, sent_bytes),
            "{label}: exact counts"
        );
    }
}

#[tokio::test]
async fn tcp_runs_for_the_time_asked_both_mechanisms() {
    within(async {
        for mode in ["stream", "saw"] {
            let run = timed_run("1", &["--proto", "tcp", "--mode", mode]).await;
            assert_timed(&run, 1.0, &format!("tcp {mode}"));
        }
    })
    .await;
}

#[tokio::test]
async fn udp_runs_for_the_time_asked_both_mechanisms() {
    within(async {
        // Paced, so the loopback drops little and the figures are the ones asked for.
        let run = timed_run("1", &["--proto", "udp", "--mode", "stream", "-b", "100M"]).await;
        assert_timed(&run, 1.0, "udp stream");
        let run = timed_run("1", &["--proto", "udp", "--mode", "saw"]).await;
        assert_timed(&run, 1.0, "udp saw");
    })
    .await;
}

#[tokio::test]
async fn quic_runs_for_the_time_asked_both_mechanisms() {
    within(async {
        // Paced: what QUIC buffered before the deadline still drains after it, and an unpaced
        // sender on a debug build buffers seconds of it.
        let run = timed_run("1", &["--proto", "quic", "--mode", "stream", "-b", "50M"]).await;
        assert_timed(&run, 1.0, "quic stream");
        let run = timed_run("1", &["--proto", "quic", "--mode", "saw"]).await;
        assert_timed(&run, 1.0, "quic saw");
    })
    .await;
}

#[tokio::test]
async fn reversed_and_parallel_timed_runs_end_by_time() {
    within(async {
        let run = timed_run("1", &["--proto", "tcp", "-R"]).await;
        assert_timed(&run, 1.0, "tcp -R");
        let run = timed_run("1", &["--proto", "tcp", "-P", "2"]).await;
        assert_timed(&run, 1.0, "tcp -P 2");
        assert_eq!(run["flows"].as_array().map(Vec::len), Some(2), "{run}");
    })
    .await;
}

/// The "done when": `run -t 2 --proto tcp` and `run -u -b 100M -t 2` in text, and
/// `run -J -t 1` (the JSON runs above).
#[tokio::test]
async fn iperf3_style_timed_command_lines_work() {
    within(async {
        let out = wirebench(&["run", "-t", "2", "--proto", "tcp", "--no-store"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("131072-byte messages, 2 s each"), "{text}");
        assert!(text.contains("ended by: time (-t)"), "{text}");
        assert!(text.contains("timed 2 s"), "{text}");

        let run = timed_run("2", &["-u", "-b", "100M"]).await;
        assert_timed(&run, 2.0, "-u -b 100M -t 2");
        // -b paces the sender: never above the rate (a loaded machine only slows it, so the lower
        // bound is loose: it catches a unit taken ten times too small, not a busy machine).
        let h = &run["headline"];
        let sent = h["sent_bps"].as_f64().expect("sent rate");
        assert!(
            (50e6..=105e6).contains(&sent),
            "-b 100M sends at about 100 Mbit/s, got {sent}"
        );
        let goodput = h["goodput_bps"].as_f64().expect("goodput");
        assert!(goodput <= sent, "received at most what was sent: {h}");

        let run = timed_run("1", &[]).await;
        assert_timed(&run, 1.0, "-J -t 1");
    })
    .await;
}

#[tokio::test]
async fn time_and_total_together_are_refused_and_bare_numbers_are_seconds() {
    within(async {
        let out = wirebench(&["run", "-t", "1", "-n", "5MiB", "--no-store"]).await;
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("-n/--total and -t/--time are two ways to end a run"),
            "{err}"
        );
        let out = wirebench(&["run", "-t", "2", "-O", "2", "--no-store"]).await;
        assert_eq!(out.status.code(), Some(2));
        assert!(
            stderr(&out).contains("-O/--omit 2s leaves nothing of -t/--time 2s"),
            "{}",
            stderr(&out)
        );
        for (value, wanted) in [("0", "out of range"), ("abc", "a bare number is seconds")] {
            let out = wirebench(&["run", "-t", value, "--no-store"]).await;
            assert_eq!(out.status.code(), Some(2), "-t {value}");
            assert!(
                stderr(&out).contains(wanted),
                "-t {value}: {}",
                stderr(&out)
            );
        }
        // 500ms with a unit; the record keeps the time asked.
        let out = wirebench(&["run", "-t", "500ms", "-J", "--no-store", "-n", "100MiB"]).await;
        assert_eq!(out.status.code(), Some(2), "still two limits");
        let out = wirebench(&["run", "-t", "500ms", "-J", "--no-store"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        assert_eq!(doc["parameters"]["duration_us"], 500_000, "{doc}");
        assert_eq!(doc["runs"][0]["ended_by"], "time");
    })
    .await;
}

/// A server bounds a timed session by its --max-duration (at admission) and --max-bytes (the
/// receiver stops there and aborts the session, naming the flag).
#[tokio::test]
async fn a_server_holds_timed_sessions_to_its_limits() {
    within(async {
        let (mut server, addr, _lines) =
            // iperf3's spelling of --max-duration, in its bare seconds.
            crate::cli::start_server(&["--server-max-duration", "1", "--max-bytes", "1MiB"]).await;
        let out = wirebench(&["run", "-c", &addr, "-t", "2", "--no-store"]).await;
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("(--max-duration)"),
            "{}",
            stderr(&out)
        );
        let out = wirebench(&[
            "run",
            "-c",
            &addr,
            "-t",
            "500ms",
            "--no-store",
            "-b",
            "100M",
        ])
        .await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(text.contains("(--max-bytes)"), "{text}");
        server.kill().await.expect("the server stops");
    })
    .await;
}

/// `-f`: every bit rate of the run block and the interval lines in the one unit asked for.
#[tokio::test]
async fn rate_unit_applies_to_run_blocks_and_interval_lines() {
    within(async {
        let out = wirebench(&["run", "-t", "1", "-i", "250ms", "-f", "m", "--no-store"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        let rated: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("/s") && !l.contains("cpu:") && !l.contains("transport:"))
            .collect();
        assert!(rated.iter().any(|l| l.contains("goodput:")), "{text}");
        assert!(
            rated.iter().any(|l| l.trim_start().starts_with('[')),
            "{text}"
        );
        for line in &rated {
            assert!(line.contains("Mbit/s"), "{line}");
            for other in ["Gbit/s", "kbit/s", "MiB/s", "GiB/s"] {
                assert!(!line.contains(other), "-f m printed {other}: {line}");
            }
        }
        // Enough data to take more than 1 ms on any machine (a faster run is "too short to
        // time" and prints no rate): 32 MiB is 2.7 ms at 100 Gbit/s.
        let out = wirebench(&["run", "-n", "32MiB", "-f", "K", "--no-store"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        let goodput = text
            .lines()
            .find(|l| l.contains("goodput:"))
            .expect("a goodput line");
        assert!(
            goodput.contains("KiB/s") && !goodput.contains("bit/s"),
            "{goodput}"
        );
    })
    .await;
}
