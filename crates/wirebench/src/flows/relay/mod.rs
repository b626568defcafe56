//! The impairment relay: owns the sockets and tasks that sit between a client and a server on
//! one port (TCP and UDP, like the server) and forward through `wirebench_core::machine::impair`; must not
//! make impairment decisions itself (they are the core machine's) nor print anything (what it
//! must tell, it hands over as [`Relay::notices`]).
//!
//! UDP (our datagrams and QUIC) gets one socket toward the server per client address, so the
//! server sees one peer per client; TCP is relayed as a byte stream, one upstream connection per
//! accepted one, with delay, jitter and rate only. It never forwards to itself (a loop), holds
//! at most its byte budget ([`RelayConfig::max_held`]), [`MAX_UDP_FLOWS`] flows and
//! [`MAX_TCP_CONNECTIONS`] connections, and says
//! when the system refuses it a socket.

mod hold;
mod inline;
mod tcp;
mod udp;

pub use hold::MAX_HELD_BYTES;
pub use inline::RunRelay;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
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
    /// Most bytes held at once, all flows and directions ([`MAX_HELD_BYTES`] by default): a
    /// datagram that finds no room is dropped as a full queue drops it, a TCP pipe waits.
    pub max_held: u64,
}

/// Counts of one flow or connection, both directions; its task updates them after each event.
pub(crate) type FlowCounts = Arc<Mutex<[Counts; 2]>>;

/// The flows of one protocol: those running, and the sum of those that ended.
#[derive(Debug, Default)]
struct Flows {
    running: Vec<FlowCounts>,
    ended: [Counts; 2],
    ended_count: u64,
}

/// All flows' counts, for snapshots; the byte budget they share; what the relay must tell.
#[derive(Debug)]
pub(crate) struct Registry {
    udp: Mutex<Flows>,
    tcp: Mutex<Flows>,
    /// What all flows hold, in bytes.
    pub(crate) hold: hold::Hold,
    /// Troubles so far, by kind (for notices at the first, second, fourth, … of each).
    troubles: [AtomicU64; Trouble::COUNT],
    notices: mpsc::UnboundedSender<String>,
}

/// A running flow's place in the registry: its counts, folded into the totals when it ends.
#[derive(Debug)]
pub(crate) struct FlowSlot {
    registry: Arc<Registry>,
    udp: bool,
    /// The flow's counts; its task updates them after each event.
    pub(crate) counts: FlowCounts,
}

impl Drop for FlowSlot {
    fn drop(&mut self) {
        let list = if self.udp {
            &self.registry.udp
        } else {
            &self.registry.tcp
        };
        let Ok(mut flows) = list.lock() else {
            return;
        };
        flows.running.retain(|c| !Arc::ptr_eq(c, &self.counts));
        if let Ok(c) = self.counts.lock() {
            flows.ended[0].add(&c[0]);
            flows.ended[1].add(&c[1]);
        }
        flows.ended_count += 1;
    }
}

/// What the relay tells its owner about.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Trouble {
    /// The system refused a socket towards the server or an accept (file descriptors).
    Sockets = 0,
    /// A new UDP client beyond [`MAX_UDP_FLOWS`].
    Flows = 1,
    /// A datagram dropped for want of room in the relay's byte budget.
    Memory = 2,
    /// A new TCP connection beyond [`MAX_TCP_CONNECTIONS`], closed at once.
    Connections = 3,
}

impl Trouble {
    const COUNT: usize = 4;
}

impl Registry {
    fn new(notices: mpsc::UnboundedSender<String>, max_held: u64) -> Registry {
        Registry {
            udp: Mutex::default(),
            tcp: Mutex::default(),
            hold: hold::Hold::new(max_held),
            troubles: Default::default(),
            notices,
        }
    }

    /// Counts one `trouble`; the first, second, fourth, eighth… of each kind make a notice
    /// (so a flood shows without flooding the log), saying how many so far.
    pub(crate) fn trouble(&self, trouble: Trouble, what: impl FnOnce() -> String) {
        let n = self.troubles[trouble as usize].fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            let _ = self.notices.send(format!("{} ({n} so far)", what()));
        }
    }

    /// A new UDP flow's place, or None when [`MAX_UDP_FLOWS`] run already.
    pub(crate) fn udp_flow(self: &Arc<Self>) -> Option<FlowSlot> {
        let counts = FlowCounts::default();
        let mut flows = self.udp.lock().ok()?;
        if flows.running.len() >= MAX_UDP_FLOWS {
            return None;
        }
        flows.running.push(Arc::clone(&counts));
        Some(FlowSlot {
            registry: Arc::clone(self),
            udp: true,
            counts,
        })
    }

    /// A new TCP connection's place, or None when [`MAX_TCP_CONNECTIONS`] run already.
    pub(crate) fn tcp_connection(self: &Arc<Self>) -> Option<FlowSlot> {
        let counts = FlowCounts::default();
        let mut flows = self.tcp.lock().ok()?;
        if flows.running.len() >= MAX_TCP_CONNECTIONS {
            return None;
        }
        flows.running.push(Arc::clone(&counts));
        Some(FlowSlot {
            registry: Arc::clone(self),
            udp: false,
            counts,
        })
    }

    fn snapshot(&self) -> RelayCounts {
        let mut out = RelayCounts::default();
        let sum = |list: &Mutex<Flows>, up: &mut Counts, down: &mut Counts| -> u64 {
            let Ok(flows) = list.lock() else { return 0 };
            up.add(&flows.ended[0]);
            down.add(&flows.ended[1]);
            for flow in &flows.running {
                if let Ok(c) = flow.lock() {
                    up.add(&c[0]);
                    down.add(&c[1]);
                }
            }
            flows.ended_count + flows.running.len() as u64
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
    notices: Option<mpsc::UnboundedReceiver<String>>,
}

/// A UDP flow with no datagram either way for this long is closed (its upstream socket freed).
pub const UDP_FLOW_IDLE: Duration = Duration::from_secs(120);

/// Most UDP flows (client addresses) relayed at once; datagrams from further addresses are
/// dropped until one ends.
pub const MAX_UDP_FLOWS: usize = 1024;

/// Most TCP connections relayed at once; a further client is closed at once until one ends.
/// Each holds two sockets and two read buffers of up to 64 KiB (at most 128 MiB in all), and
/// two relays pointed at each other stop there instead of connecting to each other until the
/// file descriptors run out.
pub const MAX_TCP_CONNECTIONS: usize = 1024;

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
        if is_self(cfg.upstream, local_addr) {
            anyhow::bail!(
                "--to {} is the relay's own --listen {local_addr}: it would forward to itself for ever; point --to at the server",
                cfg.upstream
            );
        }
        let (notices_tx, notices) = mpsc::unbounded_channel();
        let registry = Arc::new(Registry::new(notices_tx, cfg.max_held));
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
            notices: Some(notices),
        })
    }

    /// What the relay has to tell (out of sockets, too many flows, out of memory room), one
    /// line each; the first call takes them.
    pub fn notices(&mut self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.notices.take()
    }

    /// Bytes the relay holds now (see [`hold::MAX_HELD_BYTES`]).
    pub fn held_bytes(&self) -> u64 {
        self.registry.hold.held()
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

/// Whether `upstream` reaches the relay itself at `local`: the same address, or the same port
/// on an address of this host when the relay listens on all of them.
fn is_self(upstream: SocketAddr, local: SocketAddr) -> bool {
    use crate::transport::net::canonical_ip;
    if upstream.port() != local.port() {
        return false;
    }
    let (to, at) = (canonical_ip(upstream.ip()), canonical_ip(local.ip()));
    to == at || (at.is_unspecified() && is_local(to))
}

/// Whether `ip` is one of this host's addresses (binding to it succeeds only then).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback()
        || ip.is_unspecified()
        || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
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
