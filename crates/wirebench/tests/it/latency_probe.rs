//! `run --latency-probe`: probe flows beside real runs against the embedded server — exact
//! probe counts within the interval's bounds, with -P and -R, stored and exported, and through
//! the impairment relay the loaded round trip rising by queue / rate as physics says.

use serde_json::Value;

use crate::cli::{assert_matches_schema, stderr, wirebench};
use crate::support::TempPath;

/// Probes before the load (`latency_probe::DEFAULT_IDLE_PROBES`).
const IDLE_PROBES: u64 = 10;

/// Runs `wirebench run ARGS --json` and returns its document, checked against the schema.
async fn run_json(args: &[&str]) -> Value {
    let mut all = vec!["run", "--json"];
    all.extend_from_slice(args);
    let out = wirebench(&all).await;
    assert!(out.status.success(), "{all:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_matches_schema(&doc);
    doc
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Checks one probe flow's counts and series against the interval; returns its loaded answers.
fn check_probe(p: &Value, interval_ns: u64, lossless: bool) -> u64 {
    assert_eq!(u(&p["interval_ns"]), interval_ns, "{p}");
    for phase in ["idle", "loaded"] {
        let ph = &p[phase];
        assert_eq!(
            u(&ph["sent"]),
            u(&ph["answered"]) + u(&ph["lost"]),
            "{phase}: sent = answered + lost: {ph}"
        );
    }
    let idle = &p["idle"];
    assert_eq!(u(&idle["sent"]), IDLE_PROBES, "{idle}");
    if lossless {
        assert_eq!(
            u(&idle["lost"]),
            0,
            "nothing loses an idle loopback probe: {idle}"
        );
        assert_eq!(u(&p["loaded"]["lost"]), 0, "nor a loaded one: {p}");
    }
    let loaded = &p["loaded"];
    let duration = u(&loaded["duration_ns"]);
    // One probe per interval, the first at the start; a busy host may delay a few, so at least
    // a quarter of the ticks carry one.
    let ticks = duration / interval_ns + 1;
    let sent = u(&loaded["sent"]);
    assert!(
        sent <= ticks,
        "{sent} probes in {duration} ns at {interval_ns} ns"
    );
    assert!(
        sent >= ticks / 4 && sent >= 1,
        "{sent} of {ticks} ticks: {loaded}"
    );
    // The series is every answered loaded probe, in order, inside the phase.
    let series = p["series"].as_array().expect("series");
    assert_eq!(series.len() as u64, u(&loaded["answered"]));
    let times: Vec<u64> = series.iter().map(|s| u(&s["t_ns"])).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    assert!(
        times.iter().all(|&t| t <= duration),
        "{times:?} vs {duration}"
    );
    let rtt = &loaded["rtt"];
    let (p50, p90, p99) = (u(&rtt["p50_ns"]), u(&rtt["p90_ns"]), u(&rtt["p99_ns"]));
    assert!(u(&rtt["min_ns"]) <= p50 && p50 <= p90 && p90 <= p99 && p99 <= u(&rtt["max_ns"]));
    // The increase is computed from the two medians, once, in the record.
    let idle_p50 = u(&idle["rtt"]["p50_ns"]) as i64;
    assert_eq!(
        p["increase"]["p50_ns"].as_i64(),
        Some(p50 as i64 - idle_p50)
    );
    assert_eq!(
        p["increase"]["p99_ns"].as_i64(),
        Some(p99 as i64 - idle_p50)
    );
    u(&loaded["answered"])
}

fn probes(run: &Value) -> &Vec<Value> {
    run["loaded_latency"]["probes"]
        .as_array()
        .unwrap_or_else(|| panic!("no probes: {run}"))
}

/// The default probes (UDP and the run's protocol) beside a TCP run: counts exact, stored and
/// exported as printed; the text has the block.
#[tokio::test]
async fn probes_beside_a_timed_run_are_counted_stored_and_exported() {
    let db = TempPath::new(".sqlite3");
    let doc = run_json(&[
        "--db",
        db.arg(),
        "--proto",
        "tcp",
        "-t",
        "2",
        "--latency-probe",
    ])
    .await;
    let run = &doc["runs"][0];
    let p = probes(run);
    let protocols: Vec<&str> = p.iter().map(|p| p["protocol"].as_str().unwrap()).collect();
    assert_eq!(protocols, ["udp", "tcp"]);
    for probe in p {
        assert!(check_probe(probe, 100_000_000, true) >= 1);
    }
    let export = wirebench(&["export", "1", "--db", db.arg()]).await;
    assert!(export.status.success(), "{}", stderr(&export));
    let exported: Value = serde_json::from_slice(&export.stdout).expect("JSON");
    assert_eq!(exported["runs"][0]["loaded_latency"], run["loaded_latency"]);

    let out = wirebench(&[
        "run",
        "--no-store",
        "--proto",
        "udp",
        "--rate",
        "50Mbit",
        "-t",
        "1",
        "--latency-probe=udp,same,tcp",
        "--probe-interval",
        "50ms",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // `same` is UDP here: two probe flows, not three.
    assert_eq!(text.matches("latency under load").count(), 2, "{text}");
    assert!(
        text.contains("latency under load (udp probe every 50ms)"),
        "{text}"
    );
    assert!(text.contains("idle:     p50 "), "{text}");
    assert!(text.contains("sent, "), "{text}");
    assert!(text.contains("increase: "), "{text}");
}

/// With -P 2 the probes still run once per run, beside both flows.
#[tokio::test]
async fn probes_beside_parallel_flows() {
    let doc = run_json(&[
        "--no-store",
        "--proto",
        "tcp",
        "-P",
        "2",
        "-t",
        "1",
        "--latency-probe=tcp",
        "--probe-interval",
        "20ms",
    ])
    .await;
    let run = &doc["runs"][0];
    assert_eq!(run["flows"].as_array().map(Vec::len), Some(2));
    let p = probes(run);
    assert_eq!(p.len(), 1);
    check_probe(&p[0], 20_000_000, true);
}

/// Beside a QUIC run the default probes are UDP and QUIC (a stream of its own connection).
#[tokio::test]
async fn probes_beside_a_quic_run_include_a_quic_probe() {
    let doc = run_json(&[
        "--no-store",
        "--proto",
        "quic",
        "-t",
        "1",
        "--latency-probe",
    ])
    .await;
    let p = probes(&doc["runs"][0]);
    let protocols: Vec<&str> = p.iter().map(|p| p["protocol"].as_str().unwrap()).collect();
    assert_eq!(protocols, ["udp", "quic"]);
    for probe in p {
        check_probe(probe, 100_000_000, true);
    }
}

/// With -R (the server sends) the probes are the same flows: UDP probes beside a reversed UDP
/// run, each repeat its own record.
#[tokio::test]
async fn probes_beside_reversed_runs_and_each_repeat() {
    let doc = run_json(&[
        "--no-store",
        "--proto",
        "udp",
        "-R",
        "--rate",
        "50Mbit",
        "-t",
        "1",
        "--repeat",
        "2",
        "--latency-probe",
        "--probe-interval",
        "25ms",
    ])
    .await;
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert_eq!(run["reverse"], true);
        let p = probes(run);
        assert_eq!(p.len(), 1, "udp,same is one UDP flow for a UDP run");
        check_probe(&p[0], 25_000_000, true);
    }
}

/// Probes the relay drops are counted lost, never dropped from the counts: 20 % of the UDP
/// probes' requests lost on the way up.
#[tokio::test]
async fn lost_probes_are_counted() {
    let doc = run_json(&[
        "--no-store",
        "--proto",
        "udp",
        "--rate",
        "10Mbit",
        "-t",
        "1",
        "--latency-probe=udp",
        "--probe-interval",
        "20ms",
        "--impair",
        "loss=up:20%",
        "--impair-seed",
        "3",
    ])
    .await;
    let p = &probes(&doc["runs"][0])[0];
    check_probe(p, 20_000_000, false);
    let (idle, loaded) = (&p["idle"], &p["loaded"]);
    let lost = u(&idle["lost"]) + u(&loaded["lost"]);
    let sent = u(&idle["sent"]) + u(&loaded["sent"]);
    assert!(lost > 0, "{p}");
    // 20 % of the requests: well inside 5 % to 40 % for some 60 probes.
    assert!(
        lost * 20 >= sent && lost * 5 <= sent * 2,
        "{lost} of {sent} probes lost at 20 % loss"
    );
}

/// Through `--impair rate=R,queue=Q` a TCP load keeps the relay's shared link queue full, so a
/// TCP probe beside it waits about Q / R longer than idle; with a queue 16 times shallower the
/// increase is far smaller.
#[tokio::test]
async fn through_a_deep_queue_the_loaded_rtt_rises_by_queue_over_rate() {
    let increase = |doc: &Value| -> f64 {
        let p = &probes(&doc["runs"][0])[0];
        check_probe(p, 100_000_000, true);
        p["increase"]["p50_ns"].as_i64().expect("increase") as f64
    };
    let args = |queue: &'static str| -> Vec<String> {
        [
            "--no-store",
            "--proto",
            "tcp",
            "-t",
            "2",
            "--latency-probe=tcp",
            "--impair",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("rate=20Mbit,queue={queue}")])
        .collect()
    };
    let deep_args = args("256KiB");
    let deep = run_json(&deep_args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let shallow_args = args("16KiB");
    let shallow = run_json(&shallow_args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    // 256 KiB at 20 Mbit/s: 262144 × 8 / 20e6 = 104.9 ms.
    let expected = 262_144.0 * 8.0 / 20e6 * 1e9;
    let (deep, shallow) = (increase(&deep), increase(&shallow));
    eprintln!(
        "p50 increase: deep queue {:.1} ms (queue/rate {:.1} ms), shallow {:.1} ms",
        deep / 1e6,
        expected / 1e6,
        shallow / 1e6
    );
    assert!(
        deep > 0.3 * expected && deep < 3.0 * expected,
        "deep queue: +{deep} ns vs queue/rate {expected} ns"
    );
    assert!(
        shallow < deep / 3.0,
        "shallow queue +{shallow} ns vs deep +{deep} ns"
    );
}

/// Bad probe flags: one line saying what is allowed, exit status 2.
#[tokio::test]
async fn bad_probe_flags_get_one_line_and_exit_status_2() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["run", "--latency-probe=icmp"],
            "allowed udp, tcp, quic, same",
        ),
        (
            &["run", "--latency-probe", "--probe-interval", "0ms"],
            "allowed 1ms to 10s",
        ),
        (
            &["run", "--latency-probe", "--probe-interval", "soon"],
            "--probe-interval",
        ),
        (&["run", "--probe-interval", "10ms"], "--latency-probe"),
    ];
    for (args, wanted) in cases {
        let out = wirebench(args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(wanted), "{args:?}: {err}");
    }
}
