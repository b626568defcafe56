//! The server's sending handle on its shared UDP socket (reversed UDP sessions' data leave
//! through it); registered with the runtime only while a session sends.

use std::io;

use tokio::net::UdpSocket;

/// The server's second handle on its shared UDP socket, for sending reversed sessions' data
/// with errors reported (quinn's own send path drops most of them).
///
/// It is registered with the runtime only while a reversed session sends
/// ([`UdpTx::for_session`]): a registration is woken by every datagram that arrives on the
/// shared socket and every send that leaves it (the QUIC endpoint's too), and a registration
/// held for the server's life woke an idle runtime worker for each of them (0.4 CPU s per
/// 2 GiB QUIC download, on a thread with nothing to do).
#[derive(Debug)]
pub(crate) struct UdpTx {
    socket: std::net::UdpSocket,
    state: quinn::udp::UdpSocketState,
}

impl UdpTx {
    /// Wraps a duplicate of the shared socket.
    pub(crate) fn new(socket: std::net::UdpSocket) -> io::Result<UdpTx> {
        let state = quinn::udp::UdpSocketState::new((&socket).into())?;
        Ok(UdpTx { socket, state })
    }

    /// A handle for one session's sends, registered with the current runtime until dropped.
    pub(crate) fn for_session(&self) -> io::Result<UdpSocket> {
        UdpSocket::from_std(self.socket.try_clone()?)
    }

    /// The socket's sending state (its segmentation offload, its error reporting).
    pub(crate) fn state(&self) -> &quinn::udp::UdpSocketState {
        &self.state
    }
}
