//! Running the iperf3 client and the two servers of the conformance test (ours, the binary, and
//! a real `iperf3 -s`), and reading the figures the client printed in its `-J` document.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use super::{iperf3, HUNG};

/// One end's totals as the client prints them.
#[derive(Debug, Clone, Default)]
pub(super) struct Side {
    pub(super) bytes: u64,
    pub(super) seconds: f64,
    pub(super) bps: f64,
    pub(super) packets: Option<u64>,
    pub(super) lost: Option<u64>,
}

impl Side {
    fn of(v: &Value) -> Option<Side> {
        Some(Side {
            bytes: v["bytes"].as_u64()?,
            seconds: v["seconds"].as_f64()?,
            bps: v["bits_per_second"].as_f64()?,
            packets: v["packets"].as_u64(),
            lost: v["lost_packets"].as_u64(),
        })
    }

    fn text(&self) -> String {
        let mut s = format!(
            "{} B {:.2} s {:.1} Mbit/s",
            self.bytes,
            self.seconds,
            self.bps / 1e6
        );
        if let (Some(p), Some(l)) = (self.packets, self.lost) {
            s.push_str(&format!(" lost {l}/{p}"));
        } else if let Some(p) = self.packets {
            s.push_str(&format!(" {p} dgrams"));
        }
        s
    }
}

/// What one run of the client showed.
#[derive(Debug, Default)]
pub(super) struct Figures {
    /// Exit status; None when it hung and was killed.
    pub(super) rc: Option<i32>,
    pub(super) wall: Duration,
    pub(super) error: Option<String>,
    pub(super) stderr: String,
    pub(super) reverse: bool,
    pub(super) sent: Option<Side>,
    pub(super) received: Option<Side>,
    pub(super) bidir_reverse: Option<(Side, Side)>,
    pub(super) remote_cpu: f64,
    pub(super) sender_cc: Option<String>,
    pub(super) receiver_cc: Option<String>,
    pub(super) server_output: bool,
}

impl Figures {
    /// Each direction's sender and receiver.
    pub(super) fn directions(&self) -> Vec<(&Side, &Side)> {
        let mut out = Vec::new();
        if let (Some(s), Some(r)) = (&self.sent, &self.received) {
            out.push((s, r));
        }
        if let Some((s, r)) = &self.bidir_reverse {
            out.push((s, r));
        }
        out
    }

    pub(super) fn row(&self) -> String {
        let rc = self.rc.map_or("HUNG".to_string(), |rc| rc.to_string());
        let mut s = format!("rc {rc} {:.2} s", self.wall.as_secs_f64());
        if let Some(e) = &self.error {
            return format!("{s} error: {e}");
        }
        if self.rc != Some(0) {
            return format!("{s} {}", self.stderr.lines().next().unwrap_or(""));
        }
        for (sent, received) in self.directions() {
            s.push_str(&format!(
                " | sent {} | received {}",
                sent.text(),
                received.text()
            ));
        }
        s.push_str(&format!(
            " | server CPU {:.1} % cc {}",
            self.remote_cpu,
            if self.reverse {
                self.sender_cc.as_deref()
            } else {
                self.receiver_cc.as_deref()
            }
            .unwrap_or("-")
        ));
        if self.server_output {
            s.push_str(" +server output");
        }
        s
    }
}

/// Runs the client with `line` against the server on `port`; kills it after [`HUNG`].
pub(super) async fn client(port: u16, line: &str) -> Figures {
    let args: Vec<&str> = line.split_whitespace().collect();
    let host = if args.contains(&"-6") {
        "::1"
    } else {
        "127.0.0.1"
    };
    let mut cmd = Command::new(iperf3());
    cmd.args(["-c", host, "-p", &port.to_string()]).args(&args);
    if !args.contains(&"-J") {
        cmd.arg("-J");
    }
    let started = Instant::now();
    let out = tokio::time::timeout(HUNG, cmd.kill_on_drop(true).output()).await;
    let wall = started.elapsed();
    let Ok(Ok(out)) = out else {
        return Figures {
            rc: None,
            wall,
            ..Figures::default()
        };
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut f = Figures {
        rc: out.status.code(),
        wall,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ..Figures::default()
    };
    // -V prints text before the document.
    let Some(doc) = stdout
        .find("{\n")
        .and_then(|at| serde_json::from_str::<Value>(&stdout[at..]).ok())
    else {
        return f;
    };
    f.error = doc["error"].as_str().map(str::to_string);
    f.reverse = doc["start"]["test_start"]["reverse"].as_u64() == Some(1);
    let end = &doc["end"];
    f.sent = Side::of(&end["sum_sent"]);
    f.received = Side::of(&end["sum_received"]);
    if let (Some(s), Some(r)) = (
        Side::of(&end["sum_sent_bidir_reverse"]),
        Side::of(&end["sum_received_bidir_reverse"]),
    ) {
        f.bidir_reverse = Some((s, r));
    }
    f.remote_cpu = end["cpu_utilization_percent"]["remote_total"]
        .as_f64()
        .unwrap_or(0.0);
    f.sender_cc = end["sender_tcp_congestion"].as_str().map(str::to_string);
    f.receiver_cc = end["receiver_tcp_congestion"].as_str().map(str::to_string);
    f.server_output =
        doc.get("server_output_text").is_some() || doc.get("server_output_json").is_some();
    f
}

pub(super) fn version() -> String {
    std::process::Command::new(iperf3())
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// A server process the test started, killed (by its PID) when dropped.
pub(super) struct Spawned {
    pub(super) port: u16,
    child: Child,
    what: &'static str,
}

impl Spawned {
    /// `wirebench server --iperf3` on free ports, all addresses (IPv4 and IPv6).
    pub(super) async fn wirebench() -> Spawned {
        for _ in 0..10 {
            let (own, port) = (free_port(), free_port());
            let mut child = Command::new(env!("CARGO_BIN_EXE_wirebench"))
                .args([
                    "server",
                    "--bind",
                    "::",
                    "--port",
                    &own.to_string(),
                    "--iperf3",
                ])
                .args(["--iperf3-port", &port.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("wirebench server starts");
            drain(child.stdout.take());
            if ready(child.stderr.take(), "iperf3 listener on").await {
                return Spawned {
                    port,
                    child,
                    what: "wirebench server",
                };
            }
            let _ = child.start_kill();
        }
        panic!("wirebench server --iperf3 did not start on any of 10 port pairs");
    }

    /// A real `iperf3 -s` on a free port, all addresses.
    pub(super) async fn iperf3() -> Spawned {
        for _ in 0..10 {
            let port = free_port();
            let mut child = Command::new(iperf3())
                .args(["-s", "-p", &port.to_string(), "--forceflush"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("iperf3 -s starts");
            if ready(child.stdout.take(), "Server listening on").await {
                return Spawned {
                    port,
                    child,
                    what: "iperf3 -s",
                };
            }
            let _ = child.start_kill();
        }
        panic!("iperf3 -s did not start on any of 10 ports");
    }

    /// The server survived the line.
    pub(super) fn still_running(&mut self) {
        assert!(
            matches!(self.child.try_wait(), Ok(None)),
            "{} exited",
            self.what
        );
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        // Kills exactly the process this test started.
        let _ = self.child.start_kill();
    }
}

/// A port the OS just said is free (TCP and UDP are taken together by both servers; a
/// collision makes the server fail to start, and the caller tries another).
fn free_port() -> u16 {
    std::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Waits (10 s at most) for a line containing `marker`, then keeps draining the output.
async fn ready<R: AsyncRead + Unpin + Send + 'static>(out: Option<R>, marker: &str) -> bool {
    let Some(out) = out else {
        return false;
    };
    let mut lines = BufReader::new(out).lines();
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains(marker) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    found
}

/// Reads an output to its end, so the process never blocks on a full pipe.
fn drain<R: AsyncRead + Unpin + Send + 'static>(out: Option<R>) {
    if let Some(out) = out {
        let mut lines = BufReader::new(out).lines();
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    }
}
