//! The impairment relay: owns the sockets and tasks that sit between a client and a server on
//! one port (TCP and UDP, like the server) and forward through `wirebench_core::machine::impair`; must not
//! make impairment decisions itself (they are the core machine's) nor print anything.
//!
//! UDP (our datagrams and QUIC) gets one socket toward the server per client address, so the
//! server sees one peer per client; TCP is relayed as a byte stream, one upstream connection per
//! accepted one, with delay, jitter and rate only.

mod inline;
mod tcp;
mod udp;

pub use inline::RunRelay;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::task::JoinHandle;
use wirebench_core::machine::impair::{Counts, Impairments};
pub use wirebench_core::record::RelayCounts;

/// What the relay is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayConfig {
    /// Address (and port; 0 picks one) to accept clients on, TCP and UDP.
    pub listen: SocketAddr,
    /// The server everything is forwarded to.
    pub upstream: SocketAddr,
    /// Per-direction impairments (`up` = client → server).
    pub impairments: Impairments,
    /// PRNG seed: the same seed and the same traffic give the same decisions.
    pub seed: u64,
    /// Relay TCP.
    pub tcp: bool,
    /// Relay UDP.
    pub udp: bool,
}

/// Counts of one flow or connection, both directions; its task updates them after each event.
pub(crate) type FlowCounts = Arc<Mutex<[Counts; 2]>>;

/// All flows' counts, for snapshots.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    udp: Mutex<Vec<FlowCounts>>,
    tcp: Mutex<Vec<FlowCounts>>,
}

impl Registry {
    /// A new UDP flow's counts.
    pub(crate) fn udp_flow(&self) -> FlowCounts {
        let c = FlowCounts::default();
        if let Ok(mut v) = self.udp.lock() {
            v.push(c.clone());
        }
        c
    }

    /// A new TCP connection's counts.
    pub(crate) fn tcp_connection(&self) -> FlowCounts {
        let c = FlowCounts::default();
        if let Ok(mut v) = self.tcp.lock() {
            v.push(c.clone());
        }
        c
    }

    fn snapshot(&self) -> RelayCounts {
        let mut out = RelayCounts::default();
        let sum = |list: &Mutex<Vec<FlowCounts>>, up: &mut Counts, down: &mut Counts| -> u64 {
            let Ok(list) = list.lock() else { return 0 };
            for flow in list.iter() {
                if let Ok(c) = flow.lock() {
                    up.add(&c[0]);
                    down.add(&c[1]);
                }
            }
            list.len() as u64
        };
        out.udp_flows = sum(&self.udp, &mut out.udp_up, &mut out.udp_down);
        out.tcp_connections = sum(&self.tcp, &mut out.tcp_up, &mut out.tcp_down);
        out
    }
}

/// A running relay; its tasks stop when it is dropped.
#[derive(Debug)]
pub struct Relay {
    local_addr: SocketAddr,
    registry: Arc<Registry>,
    tasks: Vec<JoinHandle<()>>,
}

/// A UDP flow with no datagram either way for this long is closed (its upstream socket freed).
pub const UDP_FLOW_IDLE: Duration = Duration::from_secs(120);

impl Relay {
    /// Binds TCP and UDP on the same port and starts forwarding.
    pub async fn start(cfg: RelayConfig) -> Result<Relay> {
        let (tcp_listener, udp_socket) = bind_pair(cfg.listen)?;
        let local_addr = match (&tcp_listener, &udp_socket) {
            (Some(l), _) => l.local_addr(),
            (None, Some(u)) => u.local_addr(),
            (None, None) => anyhow::bail!("the relay needs TCP, UDP or both"),
        }
        .context("while reading the relay's address")?;
        let registry = Arc::new(Registry::default());
        let mut tasks = Vec::new();
        if let Some(listener) = tcp_listener.filter(|_| cfg.tcp) {
            let listener = tokio::net::TcpListener::from_std(listener)
                .context("while registering the relay's TCP listener")?;
            tasks.push(tokio::spawn(tcp::accept_loop(
                listener,
                cfg.upstream,
                cfg.impairments,
                cfg.seed,
                registry.clone(),
            )));
        }
        if let Some(socket) = udp_socket.filter(|_| cfg.udp) {
            let socket = tokio::net::UdpSocket::from_std(socket)
                .context("while registering the relay's UDP socket")?;
            tasks.push(tokio::spawn(udp::dispatch_loop(
                Arc::new(socket),
                cfg.upstream,
                cfg.impairments,
                cfg.seed,
                registry.clone(),
            )));
        }
        Ok(Relay {
            local_addr,
            registry,
            tasks,
        })
    }

    /// Where clients reach the relay.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// What it did so far.
    pub fn counts(&self) -> RelayCounts {
        self.registry.snapshot()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

type BoundPair = (Option<std::net::TcpListener>, Option<std::net::UdpSocket>);

/// TCP and UDP on one port; with port 0 the TCP port is chosen first and UDP tries to follow
/// (a few attempts, in case another program holds that UDP port).
fn bind_pair(listen: SocketAddr) -> Result<BoundPair> {
    let mut last_err = None;
    for _ in 0..16 {
        let listener = crate::transport::net::tcp_listener(listen)?;
        let addr = listener
            .local_addr()
            .context("while reading the relay's TCP address")?;
        match crate::transport::net::udp_socket(addr.is_ipv6(), Some(addr), None) {
            Ok(udp) => return Ok((Some(listener), Some(udp))),
            Err(e) if listen.port() == 0 => last_err = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or_else(|| anyhow::anyhow!("no port free for TCP and UDP together")))
}

/// How long before a release the relay stops sleeping and yields in a loop instead: tokio's
/// timer rounds sleeps up to whole milliseconds and wakes late, which would add 1–2 ms to every delay.
const SPIN_BEFORE: Duration = Duration::from_millis(2);

/// Waits until `t`, to within tens of microseconds: a timer sleep to [`SPIN_BEFORE`] ahead,
/// then yielding to the runtime until the time has come.
async fn wait_until(t: std::time::Instant) {
    if let Some(early) = t.checked_sub(SPIN_BEFORE) {
        if early > std::time::Instant::now() {
            tokio::time::sleep_until(tokio::time::Instant::from_std(early)).await;
        }
    }
    while std::time::Instant::now() < t {
        tokio::task::yield_now().await;
    }
}
