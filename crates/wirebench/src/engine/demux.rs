//! One UDP port for two protocols: a wrapper around quinn's socket that takes wirebench's own
//! datagrams out of each received batch (their first byte has the QUIC "fixed bit" clear) and
//! hands them to a handler, passing everything else on to quinn untouched.
//!
//! The server's QUIC endpoint is configured not to let peers grease the fixed bit, so a QUIC
//! packet never looks like ours. The handler runs inside quinn's receive path: it must be quick
//! and must not block.

use std::fmt::Debug;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use wirebench_core::machine::seq::DropMark;
use wirebench_core::wire::datagram;

/// Receives wirebench data-plane datagrams taken out of the shared UDP socket, or read by one
/// of the server's receive lanes (`engine::udp::lanes`).
pub trait DatagramHandler: Send + Sync + Debug + 'static {
    /// The datagrams of one receive from `from`: with GRO several of one flow, each `stride`
    /// bytes long (the last may be shorter), queued when the receiving socket's drop counter
    /// stood at `mark` (None where the socket does not say, as the shared one). `reply` sends
    /// a datagram back to `from` (from the address it arrived at) and reports whether the
    /// kernel took it.
    fn handle(
        &self,
        data: &[u8],
        stride: usize,
        from: SocketAddr,
        mark: Option<DropMark>,
        reply: &mut dyn FnMut(&[u8]) -> bool,
    );
}

/// The shared socket: quinn sees a normal `AsyncUdpSocket`.
#[derive(Debug)]
pub struct DemuxSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    handler: Arc<dyn DatagramHandler>,
}

impl DemuxSocket {
    /// Wraps quinn's socket; our datagrams go to `handler`.
    pub fn new(inner: Arc<dyn AsyncUdpSocket>, handler: Arc<dyn DatagramHandler>) -> Self {
        DemuxSocket { inner, handler }
    }

    fn dispatch(&self, data: &[u8], meta: &RecvMeta) {
        let mut reply = |bytes: &[u8]| -> bool {
            let t = Transmit {
                destination: meta.addr,
                ecn: None,
                contents: bytes,
                segment_size: None,
                src_ip: meta.dst_ip,
            };
            self.inner.try_send(&t).is_ok()
        };
        // With GRO one receive can carry several datagrams of one flow, `stride` bytes apart.
        self.handler
            .handle(data, meta.stride.max(1), meta.addr, None, &mut reply);
    }
}

impl AsyncUdpSocket for DemuxSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let received = ready!(self.inner.poll_recv(cx, bufs, meta))?;
        let mut kept = 0;
        for i in 0..received {
            let len = meta[i].len.min(bufs[i].len());
            let ours = bufs[i][..len]
                .first()
                .is_some_and(|b| datagram::looks_like_ours(*b));
            if ours {
                self.dispatch(&bufs[i][..len], &meta[i]);
            } else {
                // Compact QUIC datagrams to the front; quinn reads bufs[i] and meta[i] by index.
                if i != kept {
                    meta.swap(i, kept);
                    bufs.swap(i, kept);
                }
                kept += 1;
            }
        }
        // Zero is a valid answer: quinn calls again, within its own time budget.
        Poll::Ready(Ok(kept))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}
