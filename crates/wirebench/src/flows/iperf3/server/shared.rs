//! What every connection handler of the iperf3 listener shares (the tests waiting for their
//! data connections, the UDP hub, the socket, the server's gate), in a file of its own so the
//! listener and a test's dialogue both use it without importing each other.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc;
use wirebench_core::wire::iperf3::COOKIE_LEN;

use super::super::hub::HubCmd;
use crate::flows::server::gate::Gate;

/// Where a test waits for its TCP data connections: each with the order it was accepted in.
pub(super) type DataConnections = mpsc::UnboundedSender<(u64, TcpStream)>;

/// State every connection handler shares.
pub(super) struct Shared {
    /// Tests waiting for their TCP data connections, by cookie.
    pub(super) pending: Mutex<HashMap<[u8; COOKIE_LEN], DataConnections>>,
    pub(super) hub: mpsc::UnboundedSender<HubCmd>,
    pub(super) udp: Arc<UdpSocket>,
    pub(super) gate: Arc<Gate>,
    pub(super) next_test: AtomicU64,
}

impl Shared {
    pub(super) fn notice(&self, peer: SocketAddr, message: String) {
        self.gate.notice(peer, message);
    }
}
