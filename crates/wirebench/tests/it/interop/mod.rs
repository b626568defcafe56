//! Interoperability with the real world: wirebench's iperf3 client against Debian's `iperf3 -s`,
//! the real `iperf3 -c` against wirebench's iperf3 listener, and our QUIC perf client against
//! our QUIC perf server. The iperf3 tests skip with a message where `iperf3` is not installed
//! (CI installs it).

mod our_client;
mod our_listener;
mod perf;

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use wirebench::flows::iperf3::server::Iperf3Server;
use wirebench::flows::server::{ServerEvent, SessionSummary};

use crate::support::TEST_TIMEOUT;

/// Whether Debian's iperf3 is on PATH; says why a test skips when it is not.
pub(crate) fn have_iperf3(test: &str) -> bool {
    let ok = std::process::Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIP {test}: `iperf3` is not installed (apt-get install iperf3)");
    }
    ok
}

/// A real `iperf3 -s` on a free loopback port, killed (by its PID) when dropped.
pub(crate) struct RealServer {
    pub(crate) addr: SocketAddr,
    child: Child,
}

impl RealServer {
    pub(crate) async fn start() -> RealServer {
        for _ in 0..10 {
            // Find a free port, then let iperf3 take it; retry if someone else did first.
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut child = Command::new("iperf3")
                .args([
                    "-s",
                    "-B",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "--forceflush",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("iperf3 starts");
            let stdout = child.stdout.take().expect("piped stdout");
            let mut lines = BufReader::new(stdout).lines();
            let ready = tokio::time::timeout(Duration::from_secs(10), async {
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.contains("Server listening on") {
                        return true;
                    }
                }
                false
            })
            .await
            .unwrap_or(false);
            // Keep draining its output so it never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            if ready {
                return RealServer {
                    addr: SocketAddr::from(([127, 0, 0, 1], port)),
                    child,
                };
            }
            let _ = child.start_kill();
        }
        panic!("iperf3 -s did not start on any of 10 ports");
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        // Kills exactly the child this test started.
        let _ = self.child.start_kill();
    }
}

/// Our iperf3 listener on a free loopback port, serving until dropped.
pub(crate) struct OurIperf3 {
    pub(crate) addr: SocketAddr,
    events: mpsc::UnboundedReceiver<ServerEvent>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl OurIperf3 {
    pub(crate) async fn start() -> OurIperf3 {
        OurIperf3::start_with(&Default::default()).await
    }

    /// The listener behind a gate with these limits (`server --iperf3 --max-rate ...`).
    pub(crate) async fn start_with(limits: &wirebench::flows::server::Limits) -> OurIperf3 {
        let server = Iperf3Server::bind("127.0.0.1:0".parse().unwrap())
            .await
            .expect("bind the iperf3 listener");
        let addr = server.local_addr();
        let (tx, events) = mpsc::unbounded_channel();
        let gate = wirebench::flows::server::gate::Gate::new(limits);
        gate.set_events(tx);
        let task = tokio::spawn(server.run(gate));
        OurIperf3 { addr, events, task }
    }

    pub(crate) async fn next_session(&mut self) -> SessionSummary {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), self.events.recv())
                .await
                .expect("a session within 30 s")
                .expect("listener running");
            if let ServerEvent::Session(s) = ev {
                return *s;
            }
        }
    }
}

impl OurIperf3 {
    async fn next_notice(&mut self) -> String {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), self.events.recv())
                .await
                .expect("a notice within 30 s")
                .expect("listener running");
            if let ServerEvent::Notice(n) = ev {
                return n.message;
            }
        }
    }
}

impl Drop for OurIperf3 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs the real iperf3 client with `args` against `addr`; returns its JSON document.
pub(crate) async fn real_client(addr: SocketAddr, args: &[&str]) -> Value {
    let port = addr.port().to_string();
    let out = tokio::time::timeout(
        TEST_TIMEOUT,
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "--json"])
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("iperf3 -c finished in time")
    .expect("iperf3 -c ran");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("iperf3 printed JSON");
    assert!(
        out.status.success(),
        "iperf3 -c {args:?} failed: {}",
        doc["error"]
    );
    doc
}
