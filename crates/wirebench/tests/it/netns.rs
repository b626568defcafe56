//! Real kernel paths: two network namespaces joined by a veth pair with a 1500-byte MTU, made by
//! the test and removed when it ends (even on failure), and lab/netns-lab.sh's three namespaces
//! with a tbf-shaped router. Needs root, `ip netns` and `tc`; skips with a message where they
//! are missing. Traffic stays inside the namespaces.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::cli::wirebench;
use crate::support::{TempPath, TEST_TIMEOUT};

/// Two namespaces, `a` (client, 10.213.0.1) and `b` (server, 10.213.0.2), on one veth link.
struct Lab {
    a: String,
    b: String,
}

impl Lab {
    /// Builds the lab, or says why it cannot.
    fn new(tag: &str) -> Result<Lab, String> {
        let id = std::process::id();
        let lab = Lab {
            a: format!("wb{tag}a{id}"),
            b: format!("wb{tag}b{id}"),
        };
        let (va, vb) = (format!("wb{tag}x{id}"), format!("wb{tag}y{id}"));
        let steps: Vec<Vec<&str>> = vec![
            vec!["netns", "add", &lab.a],
            vec!["netns", "add", &lab.b],
            vec!["link", "add", &va, "type", "veth", "peer", "name", &vb],
            vec!["link", "set", &va, "netns", &lab.a],
            vec!["link", "set", &vb, "netns", &lab.b],
            vec!["-n", &lab.a, "addr", "add", "10.213.0.1/24", "dev", &va],
            vec!["-n", &lab.b, "addr", "add", "10.213.0.2/24", "dev", &vb],
            vec!["-n", &lab.a, "link", "set", &va, "mtu", "1500", "up"],
            vec!["-n", &lab.b, "link", "set", &vb, "mtu", "1500", "up"],
            vec!["-n", &lab.a, "link", "set", "lo", "up"],
            vec!["-n", &lab.b, "link", "set", "lo", "up"],
        ];
        for step in steps {
            let ok = Command::new("ip")
                .args(&step)
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if !ok {
                // Drop removes whatever was made.
                return Err(format!(
                    "`ip {}` failed (needs root and iproute2)",
                    step.join(" ")
                ));
            }
        }
        Ok(lab)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

#[tokio::test]
async fn udp_messages_larger_than_the_path_mtu_cross_a_real_link_unless_dont_fragment_forbids_it() {
    let lab = match Lab::new("m") {
        Ok(lab) => lab,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let mut server = tokio::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.b,
                env!("CARGO_BIN_EXE_wirebench"),
                "server",
                "--bind",
                "10.213.0.2",
                "--port",
                "0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the server in its namespace");
        let (addr, _stderr) = crate::support::listening_address(&mut server).await;
        // Our client in namespace a, against the server, with `args`.
        let client = |args: &[&str]| {
            tokio::process::Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &lab.a,
                    env!("CARGO_BIN_EXE_wirebench"),
                    "run",
                ])
                .args(["--no-store", "--server", &addr])
                .args(args)
                .kill_on_drop(true)
                .output()
        };
        let json_of = |out: std::process::Output| -> Value {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).expect("JSON")
        };
        // 8000-byte messages: each datagram is fragmented on a 1500-byte link, and segmentation
        // offload must fall back to one datagram per send.
        let out = client(&[
            "--proto",
            "udp,tcp",
            "--mode",
            "saw,stream",
            "-l",
            "8000",
            "-n",
            "800001",
            "--rate",
            "100Mbit",
            "--json",
        ])
        .await
        .expect("client runs");
        let doc = json_of(out);
        let runs = doc["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 4);
        for r in runs {
            assert_eq!(r["client"]["messages"], 101, "{r}");
            assert_eq!(r["client"]["bytes"], 800001, "{r}");
            let (m, lost) = (
                r["server"]["messages"].as_u64().unwrap(),
                r["server"]["lost"].as_u64().unwrap(),
            );
            if r["protocol"] == "udp" && r["mechanism"] == "stream" {
                assert_eq!(m + lost, 101, "{r}");
            } else {
                assert_eq!(
                    (m, r["server"]["bytes"].as_u64().unwrap()),
                    (101, 800001),
                    "{r}"
                );
            }
        }
        // --dont-fragment: the same 8000-byte messages are refused at once, saying which -l
        // fits; 1456 bytes (1500 less IP, UDP and our 16-byte header) cross whole, both ways
        // of sending.
        for mode in ["stream", "saw"] {
            let args = [
                "--proto",
                "udp",
                "--dont-fragment",
                "--mode",
                mode,
                "-l",
                "8000",
                "-n",
                "80000",
            ];
            let out = client(&args).await.expect("client runs");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{mode}: {err}");
            assert!(
                err.contains("8016-byte datagram does not fit the path MTU")
                    && err.contains("-l 1456"),
                "{mode}: {err}"
            );
        }
        let out = client(&[
            "--proto",
            "udp",
            "--dont-fragment",
            "--mode",
            "saw,stream",
            "-l",
            "1456",
            "-n",
            "145600",
            "--rate",
            "100Mbit",
            "--json",
        ])
        .await
        .expect("client runs");
        let doc = json_of(out);
        for r in doc["runs"].as_array().expect("runs") {
            assert_eq!(r["client"]["messages"], 100, "{r}");
            let m = r["server"]["messages"].as_u64().unwrap();
            assert_eq!(m + r["server"]["lost"].as_u64().unwrap(), 100, "{r}");
        }
        server.kill().await.expect("stop our server");
    })
    .await
    .expect("test finished in time");
    drop(lab);
}

/// Why lab/netns-lab.sh cannot run here, if it cannot: it needs root, `ip` and `tc`.
fn lab_script_unavailable() -> Option<String> {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return Some("lab/netns-lab.sh needs root".into());
    }
    for tool in ["ip", "tc"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("`{tool}` (iproute2) is not installed"));
        }
    }
    None
}

/// The seed's comparison through the lab: rr over UDP and TCP with 1 and 64 requests in flight,
/// 1 KiB requests toward a server behind a 10 Mbit/s tbf with a 12 KiB queue and bucket. The
/// router's queue drops what does not fit, UDP datagrams and TCP segments alike: at K=64 UDP
/// loses requests and TCP retransmits (TCP_INFO total_retrans, from the stored record), and the
/// report says which path measured them.
#[tokio::test]
async fn the_lab_drops_udp_and_tcp_alike_in_an_rr_sweep() {
    if let Some(why) = lab_script_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    tokio::time::timeout(TEST_TIMEOUT, async {
        let db = TempPath::new(".sqlite3");
        let stats = TempPath::new(".stats");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../lab/netns-lab.sh");
        let out = tokio::process::Command::new("bash")
            .arg(script)
            .args(["--rate", "10mbit", "--burst", "4kb", "--tbf-limit", "8kb"])
            .args([
                "--stats",
                stats.arg(),
                "--bin",
                env!("CARGO_BIN_EXE_wirebench"),
            ])
            .args(["rr", "--proto", "udp,tcp", "--concurrency", "1,64"])
            .args([
                "--request",
                "1024",
                "--response",
                "64",
                "-t",
                "2",
                "--timeout",
                "200ms",
            ])
            .args(["--db", db.arg()])
            .kill_on_drop(true)
            .output()
            .await
            .expect("the lab script runs");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{said}");
        let tc_drops: u64 = std::fs::read_to_string(&stats.0)
            .expect("the lab's counters")
            .lines()
            .find_map(|l| l.strip_prefix("tc_drops=")?.parse().ok())
            .expect("tc_drops in the counters");
        assert!(tc_drops > 0, "the tbf queue dropped nothing: {said}");

        let json = wirebench(&["report", "--rr", "1", "--db", db.arg(), "--format", "json"]).await;
        assert!(json.status.success(), "{}", crate::cli::stderr(&json));
        let doc: Value = serde_json::from_slice(&json.stdout).expect("JSON report");
        let results = doc["results"].as_array().expect("results");
        assert_eq!(results.len(), 4, "{doc}");
        let at = |proto: &str, k: u64| {
            results
                .iter()
                .find(|r| r["protocol"] == proto && r["concurrency"] == k)
                .unwrap_or_else(|| panic!("no {proto} K={k} result in {doc}"))
        };
        for r in results {
            let note = r["path_note"].as_str().unwrap_or_default();
            assert!(
                note.starts_with("netns lab: tbf rate 10mbit burst 4kb limit 8kb"),
                "{r}"
            );
            assert!(r["answered"].as_u64().unwrap() > 0, "{r}");
        }
        let udp = at("udp", 64);
        assert!(
            udp["lost"].as_u64().unwrap() > 0,
            "no UDP request lost at K=64: {udp}"
        );
        let tcp = at("tcp", 64);
        let retrans = tcp["transport"]["tcp_total_retrans"]
            .as_u64()
            .unwrap_or_else(|| panic!("no TCP_INFO total_retrans: {tcp}"));
        assert!(retrans > 0, "no TCP segment retransmitted at K=64: {tcp}");
        assert!(tcp["retrans_rate"].as_f64().unwrap() > 0.0, "{tcp}");
        // TCP repairs what the queue dropped: every request answered.
        assert_eq!(tcp["lost"], 0, "{tcp}");

        let text = wirebench(&["report", "--rr", "1", "--db", db.arg()]).await;
        let text = String::from_utf8_lossy(&text.stdout).into_owned();
        assert!(
            text.contains("\npath: netns lab: tbf rate 10mbit"),
            "{text}"
        );
        assert!(
            text.contains("drops UDP datagrams and TCP segments alike"),
            "{text}"
        );
    })
    .await
    .expect("test finished in time");
}

/// The lab with the router's egress toward the server shaped by tbf (20 Mbit/s, a 256 KiB
/// queue, so a load in that direction queues up to ~100 ms), running `mode_and_args`: its JSON
/// output.
async fn shaped_up_lab(mode_and_args: &[&str]) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../lab/netns-lab.sh");
    let out = tokio::process::Command::new("bash")
        .arg(script)
        .args(["--rate", "20mbit", "--tbf-limit", "256kb"])
        .args(["--bin", env!("CARGO_BIN_EXE_wirebench")])
        .args(mode_and_args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("the lab script runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Latency under load by direction, in the lab: the router's tbf (20 Mbit/s, a 256 KiB queue)
/// shapes only the client → server direction, so a TCP upload queues there and nowhere else.
/// UDP probes stamped by the server (one kernel's clock at both ends) show the queue in the up
/// direction while the down direction stays as idle.
#[tokio::test]
async fn the_loaded_direction_shows_its_queue_in_the_lab() {
    if let Some(why) = lab_script_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    tokio::time::timeout(TEST_TIMEOUT, async {
        let doc = shaped_up_lab(&[
            "wirebench",
            "-t",
            "3",
            "--latency-probe=udp",
            "--json",
            "--no-store",
        ])
        .await;
        crate::cli::assert_matches_schema(&doc);
        let probe = &doc["runs"][0]["loaded_latency"]["probes"][0];
        let w = &probe["one_way"];
        let ns = |v: &Value| v.as_i64().unwrap_or_else(|| panic!("a number in {w}"));
        for phase in ["idle", "loaded"] {
            assert_eq!(w[phase]["clock"]["source"], "same_clock", "{w}");
            assert!(ns(&w[phase]["clock"]["bound_ns"]) <= 1_000, "{w}");
        }
        let (up, down) = (&w["loaded"]["up"], &w["loaded"]["down"]);
        eprintln!(
            "lab, TCP upload through 20 Mbit/s: up p50 {} p99 {} ns, down p50 {} p99 {} ns",
            ns(&up["p50_ns"]),
            ns(&up["p99_ns"]),
            ns(&down["p50_ns"]),
            ns(&down["p99_ns"])
        );
        assert!(ns(&up["p99_ns"]) >= 20_000_000, "no queue up: {w}");
        assert!(ns(&down["p50_ns"]) <= 10_000_000, "a queue down: {w}");
        let series = probe["series"].as_array().expect("series");
        assert!(series.iter().any(|s| s["up_ns"].is_i64()), "{probe}");
    })
    .await
    .expect("test finished in time");
}

/// `wirebench latency` in the lab: the router's tbf (20 Mbit/s, 256 KiB) shapes only the
/// client → server direction. The upload phase's goodput is the shaper's and its queue shows
/// in the up direction only; the download, unshaped, queues nowhere; one kernel's clock at
/// both ends bounds every one-way figure within a microsecond.
#[tokio::test]
async fn latency_by_direction_in_the_lab() {
    if let Some(why) = lab_script_unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    tokio::time::timeout(TEST_TIMEOUT, async {
        let doc = shaped_up_lab(&["latency", "-t", "2s", "--phases", "idle,upload,download", "--json"]).await;
        assert_eq!(doc["clock"]["source"], "same_clock", "{doc}");
        let phase = |name: &str| {
            doc["phases"]
                .as_array()
                .and_then(|a| a.iter().find(|p| p["phase"] == name))
                .unwrap_or_else(|| panic!("no {name} phase in {doc}"))
                .clone()
        };
        let ns = |p: &Value, dir: &str, q: &str| {
            p["one_way"][dir][q]
                .as_i64()
                .unwrap_or_else(|| panic!("no {dir} {q} in {p}"))
        };
        let (idle, upload, download) = (phase("idle"), phase("upload"), phase("download"));
        for p in [&idle, &upload, &download] {
            assert_eq!(p["probes"]["lost"], 0, "{p}");
            assert_eq!(p["one_way"]["outside_bound"], 0, "{p}");
        }
        eprintln!(
            "lab latency: upload up p99 {} ns, down p50 {} ns; download up p50 {} ns; upload {} bit/s",
            ns(&upload, "up", "p99_ns"),
            ns(&upload, "down", "p50_ns"),
            ns(&download, "up", "p50_ns"),
            upload["upload_bps"]
        );
        assert!(ns(&upload, "up", "p99_ns") >= 20_000_000, "{upload}");
        assert!(ns(&upload, "down", "p50_ns") <= 10_000_000, "{upload}");
        assert!(ns(&download, "up", "p50_ns") <= 10_000_000, "{download}");
        let up_bps = upload["upload_bps"].as_f64().expect("upload goodput");
        assert!((5e6..=21e6).contains(&up_bps), "{upload}");
        assert!(idle["upload_bps"].is_null() && download["upload_bps"].is_null());
        let series = upload["series"].as_array().expect("series");
        assert!(series.iter().all(|s| s["up_ns"].is_i64()), "{upload}");
    })
    .await
    .expect("test finished in time");
}
