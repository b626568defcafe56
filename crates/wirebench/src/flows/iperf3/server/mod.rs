//! The iperf3 listener of `wirebench server --iperf3`: serves real `iperf3 -c` clients (TCP and
//! UDP, forward, `-R` and `--bidir`, `-P N`, `-O`, the client's socket options) on its own
//! port, several tests at once, and reports what a real iperf3 server reports. Each test
//! passes the server's gate (admission, `--max-bytes` both ways, `--max-rate`,
//! `--max-duration`, the shutdown) and is reported by it as one session line. This file owns
//! the listener and the routing of connections by cookie; one test's dialogue is `test`, its
//! data `streams` and the UDP `hub`, its figures `results`. Must not touch wirebench's own
//! listener.

mod results;
mod shared;
mod sockets;
mod streams;
mod tcp_streams;
mod test;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;

use super::hub::{hub, HubCmd};
use super::recv_cookie;
use crate::flows::server::gate::Gate;
use shared::Shared;
use test::{Outcome, Refused, Test};

/// A bound iperf3 listener (TCP and UDP on one port), ready to run.
#[derive(Debug)]
pub struct Iperf3Server {
    listener: TcpListener,
    udp: Arc<UdpSocket>,
    local: SocketAddr,
}

impl Iperf3Server {
    /// Binds TCP and UDP on the same port; with port 0 the OS picks the TCP port and UDP takes
    /// the same number (retrying a few times if that UDP port is taken).
    pub async fn bind(listen: SocketAddr) -> Result<Iperf3Server> {
        let attempts = if listen.port() == 0 { 20 } else { 1 };
        let mut last_err = None;
        for _ in 0..attempts {
            let tcp = crate::transport::net::tcp_listener(listen)?;
            let port = tcp
                .local_addr()
                .context("while reading the TCP port")?
                .port();
            match crate::transport::net::udp_socket(
                listen.is_ipv6(),
                Some(SocketAddr::new(listen.ip(), port)),
                None,
            ) {
                Ok(udp) => {
                    let listener = TcpListener::from_std(tcp)
                        .context("while registering the iperf3 TCP listener")?;
                    let udp = UdpSocket::from_std(udp)
                        .context("while registering the iperf3 UDP socket")?;
                    let local = listener.local_addr().context("while reading the address")?;
                    return Ok(Iperf3Server {
                        listener,
                        udp: Arc::new(udp),
                        local,
                    });
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err
            .unwrap_or_else(|| anyhow::anyhow!("no port"))
            .context(format!(
                "cannot use UDP port {} next to TCP for iperf3",
                listen.port()
            )))
    }

    /// The address (and the one port) it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until dropped; every test passes `gate`, which reports it.
    pub async fn run(self, gate: Arc<Gate>) -> Result<()> {
        let (hub_tx, hub_rx) = mpsc::unbounded_channel();
        let hub_task = tokio::spawn(hub(self.udp.clone(), hub_rx));
        let _guard = AbortOnDrop(hub_task);
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            hub: hub_tx,
            udp: self.udp.clone(),
            gate,
            next_test: AtomicU64::new(1),
        });
        let mut order = 0u64;
        let mut failed_accepts = 0u64;
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors, the accept fails until one is freed: said the 1st,
                    // 2nd, 4th, 8th… time (a notice every 10 ms made 1,665 lines in 16 s).
                    failed_accepts += 1;
                    if failed_accepts.is_power_of_two() {
                        shared.notice(
                            self.local,
                            format!("iperf3 accept failed: {e} ({failed_accepts} so far; out of file descriptors? raise `ulimit -n`)"),
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            // The order of accepts is the order the client opened its streams in.
            order += 1;
            let shared = shared.clone();
            tokio::spawn(async move { route(stream, order, peer, shared).await });
        }
    }
}

/// Reads the cookie of a new connection (the `order`-th accepted): a known cookie makes it a
/// data stream of that test, an unknown one starts a test.
async fn route(mut stream: TcpStream, order: u64, peer: SocketAddr, shared: Arc<Shared>) {
    let cookie = match recv_cookie(&mut stream).await {
        Ok(c) => c,
        Err(e) => {
            shared.notice(peer, format!("iperf3 connection refused: {e:#}"));
            return;
        }
    };
    let waiting = shared
        .pending
        .lock()
        .ok()
        .and_then(|p| p.get(&cookie).cloned());
    if let Some(test) = waiting {
        let _ = test.send((order, stream));
        return;
    }
    let _ = stream.set_nodelay(true);
    // Register the cookie before PARAM_EXCHANGE, so data connections find this test.
    let (tx, rx) = mpsc::unbounded_channel();
    if let Ok(mut p) = shared.pending.lock() {
        p.insert(cookie, tx);
    }
    let id = shared.next_test.fetch_add(1, Ordering::Relaxed);
    let mut test = Test {
        id,
        peer,
        shared: shared.clone(),
        data: rx,
        plan: None,
        pass: None,
    };
    let outcome = test.serve(&mut stream).await;
    if let Ok(mut p) = shared.pending.lock() {
        p.remove(&cookie);
    }
    let _ = shared.hub.send(HubCmd::Forget { test: id });
    end(&mut test, outcome);
    let _ = stream.shutdown().await;
}

/// Ends the test through its pass (the gate prints its line); a test that never got that far
/// (a port scan, a stray connection) is a notice at most, and a refused one was counted and
/// told by the gate already.
fn end(test: &mut Test, outcome: Result<Outcome>) {
    let (Some(plan), Some(mut pass)) = (test.plan.clone(), test.pass.take()) else {
        if let Err(e) = &outcome {
            if !e.is::<Refused>() {
                test.shared
                    .notice(test.peer, format!("iperf3 test refused: {e:#}"));
            }
        }
        return;
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            // What the data path moved before it failed, as the gate's meter counted it.
            pass.abort(format!("{e:#}"));
            return;
        }
    };
    let mut report = results::session_report(&outcome.tallies, &plan, &outcome.span);
    report.data_path = outcome.data_path;
    if plan.reverse || plan.bidir {
        // The other half of what moved: what the client reported reading of what we sent, on
        // the streams we sent on (with --bidir its results list the streams it sent on too;
        // iperf3 matches a stream across the two ends by its id).
        let sending: Vec<u32> = outcome
            .tallies
            .iter()
            .filter(|t| t.sends)
            .map(|t| wirebench_core::wire::iperf3::stream_id(t.index))
            .collect();
        let sent: u64 = outcome
            .tallies
            .iter()
            .filter(|t| t.sends)
            .map(|t| t.bytes)
            .sum();
        let read = outcome
            .client
            .streams
            .iter()
            .filter(|s| sending.contains(&s.id))
            .fold(0u64, |sum, s| sum.saturating_add(s.bytes));
        test.shared.notice(
            test.peer,
            format!(
                "iperf3 {} test: wirebench sent {sent} bytes; the iperf3 client reported reading {read} bytes after its omitted seconds",
                if plan.bidir { "--bidir" } else { "-R" }
            ),
        );
    }
    pass.end(report, Ok(()));
}

/// Stops the hub's task when the listener goes.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
