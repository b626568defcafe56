//! The running relay: what it is asked to do ([`RelayConfig`]), the TCP listener and UDP socket
//! it binds on one port, and the forwarding tasks it starts and owns until it is dropped; it
//! refuses to forward to itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use wirebench_core::machine::impair::Impairments;
use wirebench_core::record::RelayCounts;

use super::registry::Registry;
use super::{tcp, udp};

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
    /// Most bytes held at once, all flows and directions ([`MAX_HELD_BYTES`](super::hold::MAX_HELD_BYTES) by default): a
    /// datagram that finds no room is dropped as a full queue drops it, a TCP pipe waits.
    pub max_held: u64,
}

/// A running relay; its tasks stop when it is dropped.
#[derive(Debug)]
pub struct Relay {
    local_addr: SocketAddr,
    registry: Arc<Registry>,
    tasks: Vec<JoinHandle<()>>,
    notices: Option<mpsc::UnboundedReceiver<String>>,
}

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

    /// Bytes the relay holds now (see [`MAX_HELD_BYTES`](super::hold::MAX_HELD_BYTES)).
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
