//! Real kernel paths: two network namespaces joined by a veth pair with a 1500-byte MTU, made by
//! the test and removed when it ends (even on failure). Needs root and `ip netns`; skips with a
//! message where they are missing. Traffic stays inside the namespaces.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::TEST_TIMEOUT;

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
async fn udp_messages_larger_than_the_path_mtu_cross_a_real_link() {
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
        let mut err_lines = BufReader::new(server.stderr.take().expect("stderr")).lines();
        let line = tokio::time::timeout(Duration::from_secs(20), err_lines.next_line())
            .await
            .expect("server starts")
            .expect("stderr")
            .expect("listening line");
        let addr = line.split_whitespace().nth(4).expect("address").to_string();
        // 8000-byte messages: each datagram is fragmented on a 1500-byte link, and segmentation
        // offload must fall back to one datagram per send.
        let out = tokio::process::Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.a,
                env!("CARGO_BIN_EXE_wirebench"),
                "run",
                "--no-store",
                "--server",
                &addr,
            ])
            .args([
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
            .kill_on_drop(true)
            .output()
            .await
            .expect("client runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
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
        server.kill().await.expect("stop our server");
    })
    .await
    .expect("test finished in time");
    drop(lab);
}
