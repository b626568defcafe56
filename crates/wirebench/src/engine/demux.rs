//! One UDP port for two protocols: a wrapper around quinn's socket that takes wirebench's own
//! datagrams out of each received batch (their first byte has the QUIC "fixed bit" clear) and
//! hands them to a handler, passing everything else on to quinn untouched.
//!
//! The server's QUIC endpoint is configured not to let peers grease the fixed bit, so a QUIC
//! packet never looks like ours. The handler runs inside quinn's receive path: it must be quick
//! and must not block.

use std::fmt::Debug;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
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

/// Takes QUIC datagrams that are not quinn's (`engine::quic::inline_server`): runs inside quinn's
/// receive path, so must be quick and must not block.
pub trait QuicDivert: Send + Sync + Debug + 'static {
    /// Whether it took the QUIC datagrams of one receive (several `stride` bytes apart, GRO)
    /// from `peer`, which arrived at `dst_ip`; false leaves them to quinn.
    fn take(&self, data: &[u8], stride: usize, peer: SocketAddr, dst_ip: Option<IpAddr>) -> bool;
}

/// The shared socket: quinn sees a normal `AsyncUdpSocket`.
#[derive(Debug)]
pub struct DemuxSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    handler: Arc<dyn DatagramHandler>,
    /// Takes the QUIC connections that are served inline (`engine::quic::inline_server`).
    inline: Option<Box<dyn QuicDivert>>,
}

impl DemuxSocket {
    /// Wraps quinn's socket; our datagrams go to `handler`, the packets of QUIC connections
    /// served inline to `inline`.
    pub fn new(
        inner: Arc<dyn AsyncUdpSocket>,
        handler: Arc<dyn DatagramHandler>,
        inline: Option<Box<dyn QuicDivert>>,
    ) -> Self {
        DemuxSocket {
            inner,
            handler,
            inline,
        }
    }

    /// Whether the router of inline connections took this QUIC datagram.
    fn taken_inline(&self, data: &[u8], meta: &RecvMeta) -> bool {
        self.inline
            .as_ref()
            .is_some_and(|r| r.take(data, meta.stride.max(1), meta.addr, meta.dst_ip))
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
            } else if self.taken_inline(&bufs[i][..len], &meta[i]) {
                // Served on a socket and thread of its own.
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
