//! iperf3's flags on `wirebench run` and `server`, as an iperf3 user types them: each with
//! iperf3's meaning, or refused with one line saying what to use instead; `--json-stream` line
//! by line; and iperf3's `-J` shape read by a script written for iperf3's own output (python3),
//! for TCP, UDP, -R and -P, the same script run on a real iperf3's document first.

use std::process::Stdio;

use serde_json::Value;

use crate::cli::{stderr, wirebench};
use crate::interop::{have_iperf3, RealServer};
use crate::iperf3_client::assert_schema;
use crate::support::TempPath;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test]
async fn iperf3_flags_mean_on_run_what_they_mean_in_iperf3() {
    // -i in bare seconds; -k blocks of -l; -N, -M, -S carried in the session's options.
    let out = wirebench(&[
        "run",
        "-k",
        "100",
        "-l",
        "1000",
        "-N",
        "-M",
        "1000",
        "-S",
        "0x10",
        "-J",
        "--no-store",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &doc["runs"][0];
    assert_eq!(run["client"]["bytes"], 100_000);
    assert_eq!(run["client"]["messages"], 100);
    assert_eq!(run["server"]["bytes"], 100_000);
    let options = &doc["parameters"]["options"];
    assert_eq!(
        (&options["nodelay"], &options["mss"], &options["tos"]),
        (&Value::from(true), &Value::from(1000), &Value::from(16))
    );
    assert_eq!(run["server"]["data_path"]["nodelay"], true);

    let out = wirebench(&["run", "-t", "1.2", "-i", ".5", "--no-store"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // Half seconds: three lines on a quiet machine ([0.00-0.50], [0.50-1.00], the rest), at
    // least two when the sampler's tick comes late; 5 s would be one, 0.5 ms thousands.
    let lines = text.matches(" s] sent").count();
    assert!(
        text.contains("[   0.00-") && (2..=12).contains(&lines),
        "{text}"
    );
    // -i 0: no interval lines, as iperf3's.
    let out = wirebench(&["run", "-n", "1MiB", "-i", "0", "--no-store"]).await;
    assert!(out.status.success() && !stdout(&out).contains(" s] sent"));

    // -B: every client socket from this address (the embedded server sees it); -A: the CPU.
    let out = wirebench(&[
        "run",
        "-B",
        "127.0.0.2",
        "-A",
        "0",
        "--proto",
        "tcp,udp",
        "-n",
        "1MiB",
        "--no-store",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.matches("from 127.0.0.2:").count(), 2, "{text}");

    // --fq-rate paces TCP in the kernel: the sender never runs far ahead of it.
    let out = wirebench(&["run", "--fq-rate", "40M", "-t", "1", "-J", "--no-store"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent_bps = doc["runs"][0]["headline"]["sent_bps"].as_f64().unwrap();
    assert!(sent_bps < 40e6 * 1.5, "{sent_bps}");

    // -V shows both ends' data path; --get-server-output and --forceflush are accepted.
    let out = wirebench(&[
        "run",
        "-V",
        "--get-server-output",
        "--forceflush",
        "-n",
        "1MiB",
        "--no-store",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("  path:   client "),
        "{}",
        stdout(&out)
    );
}

#[tokio::test]
async fn a_title_prefixes_every_line_and_a_logfile_takes_the_output() {
    let out = wirebench(&["run", "-T", "lab 3", "-n", "1MiB", "--no-store"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().count() >= 3, "{text}");
    assert!(text.lines().all(|l| l.starts_with("lab 3:  ")), "{text}");
    let out = wirebench(&["run", "-T", "lab 3", "-n", "1MiB", "-J", "--no-store"]).await;
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["title"], "lab 3");
    crate::cli::assert_matches_schema(&doc);

    let log = TempPath::new(".log");
    std::fs::write(&log.0, "earlier line\n").unwrap();
    let out = wirebench(&[
        "run",
        "--logfile",
        log.arg(),
        "-T",
        "t",
        "-n",
        "1MiB",
        "--no-store",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let logged = std::fs::read_to_string(&log.0).unwrap();
    assert!(logged.starts_with("earlier line\n"), "appended: {logged}");
    assert!(logged.contains("t:  [1/1] tcp stream, run 1"), "{logged}");
}

#[tokio::test]
async fn iperf3_flags_without_a_meaning_here_say_what_to_use_instead() {
    let cases: [(&[&str], &str); 20] = [
        (&["-Z"], "-Z/--zerocopy"),
        (&["--sctp"], "--sctp"),
        (&["-F", "data.bin"], "-F/--file"),
        (&["-I", "pid"], "$!"),
        (&["--cport", "5000"], "--cport"),
        (&["-L", "7"], "-S"),
        (&["--dscp", "EF"], "-S 184"),
        (&["--username", "u"], "--psk"),
        (&["--connect-timeout", "100"], "drop the flag"),
        (&["--skip-rx-copy"], "always copy"),
        (&["-b", "1G/100"], "give -b 1G"),
        (&["--timestamps"], "ts(1)"),
        (&["-d"], "-V"),
        (&["-m"], "mptcpize"),
        (&["-A", "1,2"], "taskset"),
        (&["--iperf3-shape"], "add -J"),
        (&["--bind-dev", "eth0"], "-B"),
        (&["-v"], "wirebench --version"),
        (&["--dont-fragment"], "add --proto udp"),
        (&["-u", "-R", "--dont-fragment"], "without -R"),
    ];
    for (flags, expect) in cases {
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        let out = wirebench(&args).await;
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {said}");
        assert!(said.contains(expect), "{flags:?}: {said}");
        assert_eq!(said.lines().count(), 1, "{flags:?}: {said}");
        assert!(!said.contains("unexpected argument"), "{flags:?}: {said}");
    }
    // The flags whose iperf3 meaning is what wirebench always does are taken as that, and
    // iperf3's -b 0 is unpaced.
    let out = wirebench(&[
        "run",
        "--proto",
        "udp",
        "-n",
        "1MiB",
        "-l",
        "1000",
        "-b",
        "0",
        "--udp-counters-64bit",
        "--repeating-payload",
        "--gsro",
        "--dont-fragment",
        "-J",
        "--no-store",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"][0]["client"]["messages"], 1049, "{doc}");
    assert!(
        doc["parameters"]["rate_bps"].is_null(),
        "{}",
        doc["parameters"]
    );
    let out = wirebench(&["run", "-k", "10", "-n", "1MiB"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("three ways to end a run"),
        "{}",
        stderr(&out)
    );
    let out = wirebench(&["run", "--proto", "udp", "--fq-rate", "10M"]).await;
    assert!(
        stderr(&out).contains("pace UDP and QUIC with -b/--rate"),
        "{}",
        stderr(&out)
    );
    let out = wirebench(&["run", "--proto", "tcp,udp", "-J", "--iperf3-shape"]).await;
    assert!(
        stderr(&out).contains("one test, and this plan has 2 runs"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn server_one_off_stops_after_its_first_session() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
        .to_string();
    let mut server = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
        .args(["server", "-1", "-B", "127.0.0.1", "--port", &port])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let target = format!("127.0.0.1:{port}");
    // The server may take a moment to listen: the client retries its connection a few times.
    let mut ran = None;
    for _ in 0..50 {
        let out = wirebench(&["run", "-c", &target, "-n", "1MiB", "--no-store"]).await;
        if out.status.success() {
            ran = Some(out);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(ran.is_some(), "the client never ran against the -1 server");
    let status = tokio::time::timeout(crate::support::TEST_TIMEOUT, server.wait())
        .await
        .expect("the -1 server exits by itself")
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn json_stream_prints_start_intervals_and_end_as_the_run_goes() {
    for shape in [&[][..], &["--iperf3-shape"][..]] {
        let mut args = vec![
            "run",
            "--json-stream",
            "--proto",
            "tcp,udp",
            "-t",
            "1.2",
            "-i",
            "0.5",
            "--no-store",
        ];
        args.extend_from_slice(shape);
        let out = wirebench(&args).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let lines: Vec<Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect();
        for line in &lines {
            assert_schema(line, "json-stream.schema.json");
        }
        let runs = split_runs(&lines);
        assert_eq!(runs.len(), 2, "{shape:?}: one start ... end per run");
        for (intervals, end) in runs {
            // Half seconds, then the part of the last one the run had left: three on a quiet
            // machine, at least two on a busy one (the sampler's tick may come late). A wrong
            // unit is 1000 times off: one interval (500 s) or thousands (0.5 ms).
            assert!(
                (2..=12).contains(&intervals.len()),
                "{shape:?}: {intervals:?}"
            );
            let spans = interval_spans(&intervals, !shape.is_empty());
            for pair in spans.windows(2) {
                assert_eq!(pair[0].1, pair[1].0, "{shape:?}: consecutive: {spans:?}");
            }
            for (from, to) in &spans {
                assert!(to - from <= 1.5, "{shape:?}: {spans:?}");
            }
            if shape.is_empty() {
                // What the intervals add up to is what the client sent.
                let summed: u64 = intervals
                    .iter()
                    .map(|i| i["interval"]["bytes"].as_u64().unwrap())
                    .sum();
                assert_eq!(summed, end["run"]["client"]["bytes"].as_u64().unwrap());
            } else {
                assert!(end["sum_received"]["bits_per_second"].as_f64().unwrap() > 0.0);
            }
        }
    }
    // Without -i the intervals are iperf3's: every second.
    let out = wirebench(&["run", "--json-stream", "-t", "1.5", "--no-store"]).await;
    let lines: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let runs = split_runs(&lines);
    let spans = interval_spans(&runs[0].0, false);
    assert!(
        spans.len() >= 2 && (0.25..=2.0).contains(&(spans[0].1 - spans[0].0)),
        "{spans:?}"
    );
}

/// Each run's interval events and its end event's data, checking each run opens with "start".
fn split_runs(lines: &[Value]) -> Vec<(Vec<Value>, Value)> {
    let mut runs = Vec::new();
    let mut open: Option<Vec<Value>> = None;
    for line in lines {
        match line["event"].as_str() {
            Some("start") => {
                assert!(open.is_none(), "a start inside a run");
                open = Some(Vec::new());
            }
            Some("interval") => open
                .as_mut()
                .expect("interval after start")
                .push(line["data"].clone()),
            Some("end") => runs.push((open.take().expect("end after start"), line["data"].clone())),
            other => panic!("unexpected event {other:?}"),
        }
    }
    runs
}

/// Each interval's start and end, seconds.
fn interval_spans(intervals: &[Value], iperf3_shape: bool) -> Vec<(f64, f64)> {
    intervals
        .iter()
        .map(|i| {
            if iperf3_shape {
                (
                    i["sum"]["start"].as_f64().unwrap(),
                    i["sum"]["end"].as_f64().unwrap(),
                )
            } else {
                let ns = |k: &str| i["interval"][k].as_u64().unwrap() as f64 / 1e9;
                (ns("start_ns"), ns("end_ns"))
            }
        })
        .collect()
}

/// Reads what a dashboard reads from iperf3's `-J`: the keys and nothing wirebench-specific.
const IPERF3_READER: &str = r#"
import json, sys
d = json.load(sys.stdin)
end = d["end"]
t = d["start"]["test_start"]
out = [t["protocol"], str(t["num_streams"]), str(t["reverse"])]
out.append("%.0f" % end["sum_sent"]["bits_per_second"])
out.append("%.0f" % end["sum_received"]["bits_per_second"])
out.append(str(end["sum_received"]["bytes"]))
out.append(str(len(end["streams"])))
if t["protocol"] == "UDP":
    out.append("%.3f" % end["sum"]["lost_percent"])
    out.append("%.3f" % end["sum"]["jitter_ms"])
    out.append(str(end["streams"][0]["udp"]["packets"]))
else:
    out.append(str(end["streams"][0]["sender"]["bytes"]))
    out.append(str(end["streams"][0]["receiver"]["bytes"]))
out.append("%.1f" % end["cpu_utilization_percent"]["host_total"])
for i in d["intervals"]:
    out.append("%.0f" % i["sum"]["bits_per_second"])
print(" ".join(out))
"#;

async fn read_with_python(doc: &[u8]) -> Vec<String> {
    let mut child = tokio::process::Command::new("python3")
        .args(["-c", IPERF3_READER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs");
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, doc)
        .await
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(&out)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn a_script_written_for_iperf3s_json_reads_the_iperf3_shape() {
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("SKIP: python3 is not installed");
        return;
    }
    // The script is iperf3's: it reads a real iperf3's document first.
    if have_iperf3("a_script_written_for_iperf3s_json_reads_the_iperf3_shape") {
        let server = RealServer::start().await;
        let port = server.addr.port().to_string();
        let real = tokio::process::Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-u", "-n", "100K", "-J"])
            .kill_on_drop(true)
            .output()
            .await
            .unwrap();
        let read = read_with_python(&real.stdout).await;
        assert_eq!(read[0], "UDP", "{read:?}");
    }
    for (args, protocol, streams, reverse) in [
        // 128 KiB messages (a plan of TCP streams alone): enough of them to be timed.
        (&["-n", "64MiB", "-i", "1"][..], "TCP", 1, "0"),
        (&["-n", "64MiB", "-P", "2", "-R"][..], "TCP", 2, "1"),
        (
            &["--proto", "udp", "-b", "50M", "-n", "1MiB", "-l", "1000"][..],
            "UDP",
            1,
            "0",
        ),
        (
            &[
                "--proto", "udp", "-b", "50M", "-n", "1MiB", "-l", "1000", "-R", "-P", "2",
            ][..],
            "UDP",
            2,
            "1",
        ),
    ] {
        let mut all = vec!["run", "-J", "--iperf3-shape", "--no-store"];
        all.extend_from_slice(args);
        let out = wirebench(&all).await;
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_schema(&doc, "iperf3-shape.schema.json");
        let read = read_with_python(&out.stdout).await;
        assert_eq!(read[0], protocol, "{args:?}: {read:?}");
        assert_eq!(read[1], streams.to_string(), "{args:?}");
        assert_eq!(read[2], reverse, "{args:?}");
        assert_eq!(read[6], streams.to_string(), "{args:?}: one entry per flow");
        // The figures are the record's: what the receiver got, and its goodput.
        let received: u64 = read[5].parse().unwrap();
        assert!(received > 0 && received <= 64 << 20, "{args:?}: {read:?}");
        let goodput: f64 = read[4].parse().unwrap();
        assert!(goodput > 0.0, "{args:?}: {read:?}");
        if protocol == "UDP" {
            let lost_pct: f64 = read[7].parse().unwrap();
            assert!((0.0..=100.0).contains(&lost_pct), "{read:?}");
            // 1 MiB in 1000 B datagrams is 1049 of them, split over the flows.
            let first: u64 = read[9].parse().unwrap();
            let expected: &[u64] = if streams == 1 { &[1049] } else { &[524, 525] };
            assert!(expected.contains(&first), "{args:?}: {read:?}");
        }
    }
}
