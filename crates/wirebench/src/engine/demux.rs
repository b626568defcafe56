//! One UDP port for two protocols: a wrapper around quinn's socket that takes wirebench's own
//! datagrams out of each received batch (their first byte has the QUIC "fixed bit" clear) and
//! hands them to a handler, passing everything else on to quinn untouched.
//!
//! The server's QUIC endpoint is configured not to let peers grease the fixed bit, so a QUIC
//! packet never looks like ours. The handler runs inside quinn's receive path: it must be quick
//! and must not block.
//!
//! It also reads [`Strays`]: datagrams for this socket that another socket of the port took.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use wirebench_core::machine::seq::DropMark;
use wirebench_core::wire::datagram;

/// Receives wirebench data-plane datagrams taken out of the shared UDP socket, or read by one
/// of the server's receive lanes (`engine::udp::lanes`).
pub trait DatagramHandler: Send + Sync + Debug + 'static {
    /// The datagrams of one receive from `from` to `to` (None where the receiving socket does
    /// not say, as one bound to a single address): with GRO several of one flow, each `stride`
    /// bytes long (the last may be shorter), queued when the receiving socket's drop counter
    /// stood at `mark` (None where the socket does not say, as the shared one). `reply` sends
    /// a datagram back to `from` (from the address it arrived at) and reports whether the
    /// kernel took it.
    fn handle(
        &self,
        data: &[u8],
        stride: usize,
        addresses: (SocketAddr, Option<IpAddr>),
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

    /// Where its connections' sockets hand back what was not theirs.
    fn strays(&self) -> Arc<Strays>;
}

/// The most stray datagrams queued at once, and their most bytes (a UDP receive buffer's worth);
/// more are dropped and reported (a socket caught them only between its bind and its connect,
/// and the shared socket drains the queue meanwhile).
const MAX_STRAYS: usize = 4096;
const MAX_STRAY_BYTES: usize = 8 << 20;

/// Datagrams for the shared socket that another socket of the server's port received: a socket
/// of a QUIC connection served inline (`engine::quic::inline_server`), between its bind and its
/// connect. Once a port group holds a connected socket, Linux gives every datagram to the
/// unconnected member that joined last, whatever the group's steering program says (kernel
/// 6.18: `lab/reuseport-window.py`; docs/dev/fuzzing-and-chaos.md, "UDP loss in the concurrent
/// phase"): UDP sessions' data, other QUIC connections' packets. That socket's thread hands
/// back each datagram that did not come from its peer, and the shared socket reads it as if it
/// had arrived there, so the demultiplexer routes it as any other: to its session, to quinn,
/// or to a connection served inline.
#[derive(Debug, Default)]
pub struct Strays {
    queue: Mutex<StrayQueue>,
    /// Whether the queue may hold something: the shared socket's receive looks at this alone.
    pending: AtomicBool,
    /// The shared socket's receive, woken when something is queued.
    waker: AtomicWaker,
}

/// The queued datagrams, and what a full queue dropped since [`Strays::take_dropped`].
#[derive(Debug, Default)]
struct StrayQueue {
    datagrams: VecDeque<(Vec<u8>, RecvMeta)>,
    /// Their bytes.
    bytes: usize,
    /// Dropped because the queue was full.
    dropped: u64,
    /// The sender of the last one dropped.
    dropped_from: Option<SocketAddr>,
}

impl Strays {
    /// Hands back one datagram from `from`, which arrived at `dst_ip` (None where the socket
    /// is bound to one address).
    pub fn push(&self, data: &[u8], from: SocketAddr, dst_ip: Option<IpAddr>) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.datagrams.len() >= MAX_STRAYS || queue.bytes + data.len() > MAX_STRAY_BYTES {
            queue.dropped += 1;
            queue.dropped_from = Some(from);
            return;
        }
        let meta = RecvMeta {
            addr: from,
            len: data.len(),
            stride: data.len(),
            ecn: None,
            dst_ip,
        };
        queue.bytes += data.len();
        queue.datagrams.push_back((data.to_vec(), meta));
        self.pending.store(true, Ordering::Release);
        drop(queue);
        self.waker.wake();
    }

    /// How many datagrams a full queue dropped since the last call, and the last one's sender;
    /// None if none.
    pub fn take_dropped(&self) -> Option<(u64, SocketAddr)> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let dropped = std::mem::take(&mut queue.dropped);
        let from = queue.dropped_from.take()?;
        Some((dropped, from))
    }

    /// What is queued, and from where (for tests).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> Vec<(Vec<u8>, SocketAddr)> {
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue
            .datagrams
            .iter()
            .map(|(d, m)| (d.clone(), m.addr))
            .collect()
    }

    /// Moves queued datagrams into a receive's buffers, one each; how many.
    fn take_into(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> usize {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let mut taken = 0;
        while taken < bufs.len().min(meta.len()) {
            let Some((data, m)) = queue.datagrams.pop_front() else {
                break;
            };
            queue.bytes -= data.len();
            let len = data.len().min(bufs[taken].len());
            bufs[taken][..len].copy_from_slice(&data[..len]);
            meta[taken] = RecvMeta {
                len,
                stride: len,
                ..m
            };
            taken += 1;
        }
        self.pending
            .store(!queue.datagrams.is_empty(), Ordering::Release);
        taken
    }
}

/// The shared socket: quinn sees a normal `AsyncUdpSocket`.
#[derive(Debug)]
pub struct DemuxSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    handler: Arc<dyn DatagramHandler>,
    /// Takes the QUIC connections that are served inline (`engine::quic::inline_server`).
    inline: Option<Box<dyn QuicDivert>>,
    /// What their sockets caught that was this socket's.
    strays: Arc<Strays>,
}

impl DemuxSocket {
    /// Wraps quinn's socket; our datagrams go to `handler`, the packets of QUIC connections
    /// served inline to `inline`.
    pub fn new(
        inner: Arc<dyn AsyncUdpSocket>,
        handler: Arc<dyn DatagramHandler>,
        inline: Option<Box<dyn QuicDivert>>,
    ) -> Self {
        let strays = inline.as_ref().map(|d| d.strays()).unwrap_or_default();
        DemuxSocket {
            inner,
            handler,
            inline,
            strays,
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
        self.handler.handle(
            data,
            meta.stride.max(1),
            (meta.addr, meta.dst_ip),
            None,
            &mut reply,
        );
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
        let received = if self.strays.pending.load(Ordering::Acquire) {
            self.strays.take_into(bufs, meta)
        } else {
            match self.inner.poll_recv(cx, bufs, meta) {
                Poll::Ready(received) => received?,
                Poll::Pending => {
                    // Only a receive that waits registers (not one per datagram batch), and
                    // looks again after: one handed back before the registration is taken
                    // here, one after it wakes this receive.
                    self.strays.waker.register(cx.waker());
                    if !self.strays.pending.load(Ordering::Acquire) {
                        return Poll::Pending;
                    }
                    self.strays.take_into(bufs, meta)
                }
            }
        };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what the demultiplexer hands to the sessions.
    #[derive(Debug, Default)]
    struct Taken(Mutex<Vec<(Vec<u8>, SocketAddr)>>);

    impl DatagramHandler for Taken {
        fn handle(
            &self,
            data: &[u8],
            _stride: usize,
            (from, _to): (SocketAddr, Option<IpAddr>),
            _mark: Option<DropMark>,
            _reply: &mut dyn FnMut(&[u8]) -> bool,
        ) {
            self.0.lock().unwrap().push((data.to_vec(), from));
        }
    }

    /// Takes no connection inline; owns the queue of handed-back datagrams.
    #[derive(Debug, Default)]
    struct NoneInline(Arc<Strays>);

    impl QuicDivert for NoneInline {
        fn take(&self, _: &[u8], _: usize, _: SocketAddr, _: Option<IpAddr>) -> bool {
            false
        }

        fn strays(&self) -> Arc<Strays> {
            Arc::clone(&self.0)
        }
    }

    /// Receives once from `demux` into two 64 KiB buffers: what quinn got, with their senders.
    async fn receive(demux: &DemuxSocket) -> Vec<(Vec<u8>, SocketAddr)> {
        let mut storage = vec![0u8; 2 << 16];
        let (a, b) = storage.split_at_mut(1 << 16);
        let mut bufs = [IoSliceMut::new(a), IoSliceMut::new(b)];
        let mut meta = [RecvMeta::default(); 2];
        let n = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            std::future::poll_fn(|cx| demux.poll_recv(cx, &mut bufs, &mut meta)),
        )
        .await
        .expect("a receive within 10 s")
        .unwrap();
        (0..n)
            .map(|i| (bufs[i][..meta[i].len].to_vec(), meta[i].addr))
            .collect()
    }

    /// What another socket of the port caught is read as the shared socket's: ours to the
    /// sessions, QUIC to quinn, each with its real sender; and handing one back wakes a
    /// receive that waits.
    #[tokio::test]
    async fn handed_back_datagrams_are_routed_as_the_shared_sockets() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let inner = quinn::Runtime::wrap_udp_socket(&quinn::TokioRuntime, socket).unwrap();
        let inline = NoneInline::default();
        let strays = inline.strays();
        let sessions = Arc::new(Taken::default());
        let demux = DemuxSocket::new(inner, sessions.clone(), Some(Box::new(inline)));
        let from: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let ours = [0x01, 0, 0, 0, 0xAB, 0xCD, 0, 1];
        strays.push(&ours, from, None);
        strays.push(&[0x41, 7, 7], from, None);
        assert_eq!(receive(&demux).await, vec![(vec![0x41, 7, 7], from)]);
        assert_eq!(*sessions.0.lock().unwrap(), vec![(ours.to_vec(), from)]);

        let later = Arc::clone(&strays);
        let pusher = std::thread::spawn(move || later.push(&[0x42, 1], from, None));
        assert_eq!(receive(&demux).await, vec![(vec![0x42, 1], from)]);
        pusher.join().unwrap();
        assert_eq!(strays.take_dropped(), None);
    }

    /// A full queue drops what comes, by count and by bytes, and says how many and from where,
    /// once; taking from it makes room again.
    #[test]
    fn a_full_queue_drops_and_says_so() {
        let strays = Strays::default();
        let from: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let other: SocketAddr = "127.0.0.1:10".parse().unwrap();
        for _ in 0..MAX_STRAYS {
            strays.push(&[0x41], from, None);
        }
        strays.push(&[0x41], from, None);
        strays.push(&[0x41], other, None);
        assert_eq!(strays.take_dropped(), Some((2, other)));
        assert_eq!(strays.take_dropped(), None);
        assert_eq!(strays.queued().len(), MAX_STRAYS);

        let large = Strays::default();
        let datagram = vec![0x41u8; 65_507];
        let fit = MAX_STRAY_BYTES / datagram.len();
        for _ in 0..=fit {
            large.push(&datagram, from, None);
        }
        assert_eq!(large.queued().len(), fit);
        assert_eq!(large.take_dropped(), Some((1, from)));
        let mut storage = vec![0u8; 65_536];
        let mut bufs = [IoSliceMut::new(&mut storage)];
        let mut meta = [RecvMeta::default()];
        assert_eq!(large.take_into(&mut bufs, &mut meta), 1);
        large.push(&datagram, from, None);
        assert_eq!(large.queued().len(), fit);
        assert_eq!(large.take_dropped(), None);
    }
}
