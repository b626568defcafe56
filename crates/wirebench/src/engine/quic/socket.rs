//! The UDP socket under every quinn endpoint of ours: quinn's own socket layer (`quinn::udp`:
//! GSO, GRO, ECN, source addresses) behind a readiness registration that wakes the endpoint
//! only for what it waits for.
//!
//! quinn's tokio socket registers for readability and writability at once, and reads until the
//! kernel says "would block". On a quiet connection (one request, one answer) that costs two
//! extra system calls per packet received: every send that the kernel completes at once
//! (always, on loopback) raises a writable edge that wakes the event loop for nothing, and
//! every wake-up ends with a `recvmmsg` that finds the queue empty. Here:
//! - the socket is registered for readability only; writability is watched (on a second
//!   descriptor of the same socket) only once a send has found the socket full, which a
//!   request–response exchange never does;
//! - a `recvmmsg` that returns fewer datagrams than it had room for emptied the queue, so the
//!   readiness is cleared there and then (tokio's tick check keeps a datagram that arrived
//!   meanwhile from being missed) instead of asking the kernel again.

use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit, UdpSocketState};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A UDP socket for quinn, registered with the tokio runtime that is current when it is made.
#[derive(Debug)]
pub struct QuicUdpSocket {
    /// The socket, registered for readability only.
    io: AsyncFd<std::net::UdpSocket>,
    /// quinn's per-socket state: segmentation offload, ECN and source-address handling.
    state: UdpSocketState,
    /// Writability of the socket, watched through a duplicate descriptor once a send found
    /// the socket full (see [`QuicUdpSocket::try_send`]). Set once, then read without a lock
    /// on every send.
    writable: OnceLock<AsyncFd<OwnedFd>>,
}

impl QuicUdpSocket {
    /// Wraps a non-blocking UDP socket; must be called within a tokio runtime.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<Arc<Self>> {
        let state = UdpSocketState::new((&socket).into())?;
        // SAFETY: the AsyncFd owns the socket, whose descriptor stays open and unreplaced for
        // as long as the registration lives.
        let io = unsafe { AsyncFd::register_with_interest(socket, Interest::READABLE)? };
        Ok(Arc::new(QuicUdpSocket {
            io,
            state,
            writable: OnceLock::new(),
        }))
    }

    /// Starts watching writability (once). Registering reports the socket's current state, so
    /// room that appeared since the send that failed is not missed. Two sends racing here may
    /// both register; the second watch is dropped, which deregisters it.
    fn watch_writability(&self) -> io::Result<()> {
        if self.writable.get().is_none() {
            let fd = OwnedFd::from(self.io.get_ref().try_clone()?);
            // SAFETY: as in `new`: the AsyncFd owns this duplicate descriptor.
            let watch = unsafe { AsyncFd::register_with_interest(fd, Interest::WRITABLE)? };
            let _ = self.writable.set(watch);
        }
        Ok(())
    }
}

impl AsyncUdpSocket for QuicUdpSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(WritablePoller {
            socket: self,
            waiting: None,
        })
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        let send = || self.state.send(self.io.get_ref().into(), transmit);
        match self.writable.get() {
            // Through the watch, so that "would block" clears its readiness and the next
            // `poll_writable` waits for room.
            Some(watch) => watch.try_io(Interest::WRITABLE, |_| send()),
            None => match send() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.watch_writability()?;
                    Err(e)
                }
                other => other,
            },
        }
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = match self.io.poll_read_ready(cx) {
                Poll::Ready(guard) => guard?,
                Poll::Pending => return Poll::Pending,
            };
            let room = bufs.len().min(meta.len()).min(quinn::udp::BATCH_SIZE);
            match guard.try_io(|socket| self.state.recv(socket.get_ref().into(), bufs, meta)) {
                Ok(Ok(n)) => {
                    if n < room {
                        // recvmmsg stops early only at an empty queue.
                        guard.clear_ready();
                    }
                    return Poll::Ready(Ok(n));
                }
                // quinn's endpoint driver ends on any receive error but a reset, and with it
                // every connection (and, on the server, the UDP sessions behind the
                // demultiplexer). A datagram socket's errors are one-offs the kernel has
                // now cleared (an ICMP report, a short allocation failure), so, as quinn's own
                // tokio socket does, they end nothing: this call received no datagram.
                Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Poll::Ready(Err(e))
                }
                Ok(Err(_)) => return Poll::Ready(Ok(0)),
                // Would block: readiness is cleared; poll again to register the waker.
                Err(_) => continue,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get_ref().local_addr()
    }

    fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    fn max_transmit_segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.state.gro_segments()
    }
}

/// A wait for room to send (one per quinn connection): ready at once unless a send has found
/// the socket full, then ready when the watch says so.
struct WritablePoller {
    socket: Arc<QuicUdpSocket>,
    /// The wait in progress.
    waiting: Option<Pin<Box<dyn Future<Output = io::Result<()>> + Send + Sync>>>,
}

impl std::fmt::Debug for WritablePoller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WritablePoller").finish_non_exhaustive()
    }
}

impl UdpPoller for WritablePoller {
    fn poll_writable(mut self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        if self.waiting.is_none() {
            if self.socket.writable.get().is_none() {
                return Poll::Ready(Ok(()));
            }
            let socket = Arc::clone(&self.socket);
            // `writable()` has a waiter per call, so every connection sharing the socket is
            // woken, not just the last one to ask.
            self.waiting = Some(Box::pin(async move {
                match socket.writable.get() {
                    Some(watch) => watch.writable().await.map(|mut guard| guard.retain_ready()),
                    None => Ok(()),
                }
            }));
        }
        let result = match self.waiting.as_mut() {
            Some(waiting) => waiting.as_mut().poll(cx),
            None => Poll::Ready(Ok(())),
        };
        if result.is_ready() {
            self.waiting = None;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::net::UdpSocket;
    use std::time::Duration;

    use super::*;

    const WAIT: Duration = Duration::from_secs(5);

    fn bound() -> std::net::UdpSocket {
        crate::transport::net::udp_socket(false, Some("127.0.0.1:0".parse().unwrap()), None)
            .unwrap()
    }

    /// Receives what is queued now (waiting for the first datagram), as quinn's endpoint does.
    async fn receive(socket: &QuicUdpSocket) -> Vec<Vec<u8>> {
        let mut storage = vec![[0u8; 2048]; quinn::udp::BATCH_SIZE];
        let mut bufs: Vec<IoSliceMut> = storage.iter_mut().map(|b| IoSliceMut::new(b)).collect();
        let mut meta = [RecvMeta::default(); quinn::udp::BATCH_SIZE];
        let n = tokio::time::timeout(
            WAIT,
            poll_fn(|cx| socket.poll_recv(cx, &mut bufs, &mut meta)),
        )
        .await
        .expect("a datagram arrives")
        .unwrap();
        (0..n).map(|i| bufs[i][..meta[i].len].to_vec()).collect()
    }

    /// A short receive clears readiness without asking the kernel again, yet a datagram that
    /// arrives afterwards still wakes the receiver (tokio's registration reports it).
    #[tokio::test]
    async fn a_short_receive_does_not_miss_the_next_datagram() {
        let socket = QuicUdpSocket::new(bound()).unwrap();
        let to = socket.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        for byte in [1u8, 2, 3] {
            peer.send_to(&[byte; 10], to).unwrap();
        }
        // All three queued ones in one receive (fewer than the batch: the queue was drained).
        let mut got = Vec::new();
        while got.len() < 3 {
            got.extend(receive(&socket).await);
        }
        assert_eq!(got, [vec![1u8; 10], vec![2; 10], vec![3; 10]]);
        peer.send_to(&[4u8; 10], to).unwrap();
        assert_eq!(receive(&socket).await, [vec![4u8; 10]]);
    }

    /// Before a send has found the socket full, a connection may always send; once writability
    /// is watched, the watch reports the room an idle socket has, and sends still leave.
    #[tokio::test]
    async fn a_watched_socket_reports_room_and_still_sends() {
        let socket = QuicUdpSocket::new(bound()).unwrap();
        let mut poller = socket.clone().create_io_poller();
        let ready = poll_fn(|cx| Poll::Ready(poller.as_mut().poll_writable(cx))).await;
        assert!(
            matches!(ready, Poll::Ready(Ok(()))),
            "unwatched: ready at once"
        );

        socket.watch_writability().unwrap();
        tokio::time::timeout(WAIT, poll_fn(|cx| poller.as_mut().poll_writable(cx)))
            .await
            .expect("the watch reports room")
            .unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let transmit = Transmit {
            destination: peer.local_addr().unwrap(),
            ecn: None,
            contents: b"through the watch",
            segment_size: None,
            src_ip: None,
        };
        socket.try_send(&transmit).unwrap();
        let mut buf = [0u8; 64];
        peer.set_read_timeout(Some(WAIT)).unwrap();
        let (n, _) = peer.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"through the watch");
    }
}
