//! iperf3's `-J` document, field for field: `run -J --iperf3-shape` carries every key a real
//! iperf3 client writes for the same mode (TCP, UDP, -R, -P 4, --bidir, UDP -R; the real
//! iperf3 run first against a real `iperf3 -s`), the keys iperf3 3.16–3.21 added, and is read
//! by two of iperf3's own JSON consumers from PyPI: the `iperf3` package's `TestResult` and
//! `piperf3`'s pydantic model (installed by `.ci/run` into `target/python`).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;

use crate::cli::{stderr, wirebench};
use crate::interop::{have_iperf3, RealServer};

/// Each mode: its name, iperf3's flags, wirebench's.
const MODES: &[(&str, &[&str], &[&str])] = &[
    ("TCP", &[], &[]),
    (
        "UDP",
        &["-u", "-b", "100M"],
        &["--proto", "udp", "-b", "100M"],
    ),
    ("TCP -R", &["-R"], &["-R"]),
    ("TCP -P 4", &["-P", "4"], &["-P", "4"]),
    ("TCP --bidir", &["--bidir"], &["--bidir"]),
    (
        "UDP -R",
        &["-u", "-b", "100M", "-R"],
        &["--proto", "udp", "-b", "100M", "-R"],
    ),
];

/// Keys of iperf3 3.16–3.21 that Debian's older iperf3 does not write (from iperf3's
/// `iperf_api.c` and `iperf_tcp.c`): the shape must carry them too.
const NEWER_KEYS: &[&str] = &[
    ".start.timestamp.timemillisecs",
    ".start.target_bitrate",
    ".start.fq_rate",
    ".start.sock_bufsize",
    ".start.sndbuf_actual",
    ".start.rcvbuf_actual",
    ".start.test_start.bidir",
    ".start.test_start.fqrate",
    ".start.test_start.interval",
    ".start.test_start.gso",
    ".start.test_start.gro",
    ".start.connected[].local_host",
    ".start.connected[].local_port",
];

/// Keys iperf3 3.20+ writes for a TCP stream's sender (TCP_INFO's reordering count), which
/// 3.12 does not.
const NEWER_TCP_SENDER_KEYS: &[&str] = &[
    ".end.streams[].sender.reorder",
    ".intervals[].streams[].reorder",
];

/// Every leaf's path, arrays as `[]` (`.end.streams[].sender.bytes`).
fn key_paths(v: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, at: String, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) => m
                .iter()
                .for_each(|(k, x)| walk(x, format!("{at}.{k}"), out)),
            Value::Array(a) => a.iter().for_each(|x| walk(x, format!("{at}[]"), out)),
            _ => {
                out.insert(at);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(v, String::new(), &mut out);
    out
}

/// wirebench's iperf3-shaped document of one second of `mode` against its embedded server.
async fn our_document(mode: &str, flags: &[&str]) -> Value {
    let mut args = vec!["run", "-J", "--iperf3-shape", "--no-store", "-t", "1"];
    args.extend_from_slice(flags);
    let out = wirebench(&args).await;
    assert!(out.status.success(), "{mode}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("one JSON document")
}

#[tokio::test]
async fn the_iperf3_shape_has_every_key_a_real_iperf3_writes() {
    if !have_iperf3("the_iperf3_shape_has_every_key_a_real_iperf3_writes") {
        return;
    }
    let server = RealServer::start().await;
    let port = server.addr.port().to_string();
    for (mode, theirs, ours) in MODES {
        let mut args = vec!["-c", "127.0.0.1", "-p", &port, "-t", "1", "-J"];
        args.extend_from_slice(theirs);
        let real = tokio::process::Command::new("iperf3")
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output()
            .await
            .expect("iperf3 runs");
        let real: Value = serde_json::from_slice(&real.stdout).expect("iperf3's -J");
        assert!(real.get("error").is_none(), "{mode}: iperf3 failed: {real}");
        let doc = our_document(mode, ours).await;
        let have = key_paths(&doc);
        let real_keys = key_paths(&real);
        let missing: Vec<&String> = real_keys.iter().filter(|k| !have.contains(*k)).collect();
        assert!(missing.is_empty(), "{mode}: iperf3 writes {missing:?}");
        let newer: Vec<&&str> = NEWER_KEYS.iter().filter(|k| !have.contains(**k)).collect();
        assert!(newer.is_empty(), "{mode}: iperf3 3.21 writes {newer:?}");
        if matches!(*mode, "TCP" | "TCP -P 4") {
            let newer: Vec<&&str> = NEWER_TCP_SENDER_KEYS
                .iter()
                .filter(|k| !have.contains(**k))
                .collect();
            assert!(newer.is_empty(), "{mode}: iperf3 3.21 writes {newer:?}");
        }
        // Every second by default, as iperf3 reports; no stub of a few milliseconds at the
        // end that moved nothing.
        let intervals = doc["intervals"].as_array().expect("intervals");
        assert!(!intervals.is_empty(), "{mode}: no intervals without -i");
        for i in intervals {
            let sum = &i["sum"];
            assert!(
                sum["bytes"].as_u64().unwrap() > 0 || sum["seconds"].as_f64().unwrap() >= 0.1,
                "{mode}: {sum}"
            );
        }
        // `sender` is iperf3's: whether the client sent the stream.
        let sends = !theirs.contains(&"-R");
        assert_eq!(
            doc["end"]["sum_sent"]["sender"], real["end"]["sum_sent"]["sender"],
            "{mode}"
        );
        assert_eq!(
            doc["end"]["sum_received"]["sender"], real["end"]["sum_received"]["sender"],
            "{mode}"
        );
        assert_eq!(doc["intervals"][0]["sum"]["sender"], sends, "{mode}");
        // One entry per connection, each with the client's own port.
        let connected = doc["start"]["connected"].as_array().unwrap();
        assert_eq!(
            connected.len(),
            real["start"]["connected"].as_array().unwrap().len(),
            "{mode}"
        );
        let ports: BTreeSet<u64> = connected
            .iter()
            .map(|c| c["local_port"].as_u64().unwrap())
            .collect();
        assert_eq!(ports.len(), connected.len(), "{mode}: {connected:?}");
        assert!(!ports.contains(&0), "{mode}: {connected:?}");
    }
}

/// Where `.ci/run` installs the PyPI consumers.
fn consumers_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python")
}

/// Reads a document with both consumers: the `iperf3` package's `TestResult` (every mode)
/// and `piperf3`'s model (TCP only, as it reads real iperf3's TCP output only), printing what
/// each parsed. piperf3's package imports its CLI and plots on import; its model module
/// needs only pydantic, so it is imported on its own.
const CONSUMERS: &str = r#"
import json, sys, types
doc = sys.stdin.read()
import iperf3
r = iperf3.TestResult(doc)
assert r.error is None, r.error
out = [r.protocol, str(r.local_port), r.time, str(r.timesecs)]
if r.protocol == "TCP":
    out += ["%.0f" % r.received_bps, str(r.received_bytes), str(r.sent_bytes)]
    pkg = types.ModuleType("piperf3")
    pkg.__path__ = [sys.argv[1] + "/piperf3"]
    sys.modules["piperf3"] = pkg
    import piperf3.models as models
    m = models.Iperf3JsonResult.model_validate(json.loads(doc))
    out += ["%.0f" % m.end.sum_received.bits_per_second, str(len(m.intervals))]
else:
    out += ["%.0f" % r.bps, str(r.packets), "%.3f" % r.lost_percent]
print("|".join(out))
"#;

#[tokio::test]
async fn iperf3s_json_consumers_read_the_iperf3_shape() {
    let path = consumers_path();
    let have = std::process::Command::new("python3")
        .args(["-c", "import iperf3, pydantic, pydantic_settings"])
        .env("PYTHONPATH", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && path.join("piperf3/models.py").exists();
    if !have {
        eprintln!(
            "SKIP iperf3s_json_consumers_read_the_iperf3_shape: the PyPI consumers are not in \
             {} (.ci/run installs iperf3, piperf3 and pydantic there with pip)",
            path.display()
        );
        return;
    }
    for (mode, _, ours) in MODES {
        let doc = our_document(mode, ours).await;
        let mut child = tokio::process::Command::new("python3")
            .args(["-c", CONSUMERS])
            .arg(&path)
            .env("PYTHONPATH", &path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs");
        let mut stdin = child.stdin.take().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut stdin, doc.to_string().as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let read: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .trim_end()
            .split('|')
            .map(str::to_string)
            .collect();
        // What they parsed is what the document says.
        let start = &doc["start"];
        let end = &doc["end"];
        assert_eq!(read[0], start["test_start"]["protocol"].as_str().unwrap());
        assert_eq!(read[1], start["connected"][0]["local_port"].to_string());
        assert_eq!(start["timestamp"]["time"].as_str(), Some(read[2].as_str()));
        let rest = &read[3..];
        assert_eq!(rest[0], start["timestamp"]["timesecs"].to_string());
        if read[0] == "TCP" {
            let goodput = format!(
                "{:.0}",
                end["sum_received"]["bits_per_second"].as_f64().unwrap()
            );
            assert_eq!(rest[1], goodput, "{mode}");
            assert_eq!(rest[2], end["sum_received"]["bytes"].to_string(), "{mode}");
            assert_eq!(rest[3], end["sum_sent"]["bytes"].to_string(), "{mode}");
            assert_eq!(rest[4], goodput, "{mode}: piperf3");
            assert_eq!(
                rest[5],
                doc["intervals"].as_array().unwrap().len().to_string(),
                "{mode}: piperf3"
            );
        } else {
            assert_eq!(rest[2], end["sum"]["packets"].to_string(), "{mode}");
            assert!(rest[2].parse::<u64>().unwrap() > 0, "{mode}: {read:?}");
        }
    }
}

#[tokio::test]
async fn run_iperf3_reports_every_second_and_both_ends_cpu() {
    if !have_iperf3("run_iperf3_reports_every_second_and_both_ends_cpu") {
        return;
    }
    for reverse in [false, true] {
        // iperf3 -s takes a moment after a test before it takes the next: one per test.
        let server = RealServer::start().await;
        let target = server.addr.to_string();
        let mut args = vec![
            "run",
            "--iperf3",
            &target,
            "-t",
            "2",
            "-J",
            "--iperf3-shape",
            "--no-store",
        ];
        if reverse {
            args.push("-R");
        }
        let out = wirebench(&args).await;
        assert!(out.status.success(), "-R {reverse}: {}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        // iperf3's client reports every second by default: two seconds give two intervals (and
        // perhaps a last stub that moved bytes), adding up to what our streams moved.
        let intervals = doc["intervals"].as_array().unwrap();
        assert!(
            (2..=3).contains(&intervals.len()),
            "-R {reverse}: {intervals:?}"
        );
        let first = &intervals[0]["sum"];
        let seconds = first["seconds"].as_f64().unwrap();
        assert!((0.9..=1.5).contains(&seconds), "-R {reverse}: {first}");
        assert_eq!(first["sender"], !reverse, "-R {reverse}");
        let summed: u64 = intervals
            .iter()
            .map(|i| i["sum"]["bytes"].as_u64().unwrap())
            .sum();
        let ours = if reverse {
            &doc["end"]["sum_received"]
        } else {
            &doc["end"]["sum_sent"]
        };
        assert_eq!(summed, ours["bytes"].as_u64().unwrap(), "-R {reverse}");
        // Our TCP senders' retransmissions, from their TCP_INFO, as iperf3's client has them.
        if !reverse {
            assert!(ours["retransmits"].is_u64(), "{ours}");
            assert!(
                doc["end"]["streams"][0]["sender"]["retransmits"].is_u64(),
                "{doc}"
            );
        }
        // Both ends' CPU: ours from getrusage, the iperf3 server's as it reported it.
        let cpu = &doc["end"]["cpu_utilization_percent"];
        assert!(
            cpu["host_total"].as_f64().unwrap() > 0.0,
            "-R {reverse}: {cpu}"
        );
        assert!(
            cpu["remote_total"].as_f64().unwrap() > 0.0,
            "-R {reverse}: {cpu}"
        );
    }
}
