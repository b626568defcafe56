//! The state every connection handler of one server shares: the registry, the gate, the
//! options, the shared UDP socket's figures and send handle, the QUIC connection threads.
//! Built once by `Server::bind`; holds no logic.

use std::sync::Arc;

use super::gate::Gate;
use super::options::ServerOptions;
use super::registry::Registry;
use super::udp_tx::UdpTx;
use crate::engine::quic::home::ConnectionHomes;

/// State every connection handler shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) registry: Arc<Registry>,
    pub(crate) cert_der: Vec<u8>,
    /// Effective receive and send buffers of the shared UDP socket.
    pub(crate) udp_buffers: (u64, u64),
    /// A second handle on the shared UDP socket, for reversed UDP sessions' data.
    pub(crate) udp_tx: UdpTx,
    /// Limits and authentication.
    pub(crate) options: ServerOptions,
    /// The gate every session passes: admission, limits, accounting, session lines.
    pub(crate) gate: Arc<Gate>,
    /// The threads QUIC connections run on (`engine::quic::home`).
    pub(crate) quic_homes: ConnectionHomes,
}
