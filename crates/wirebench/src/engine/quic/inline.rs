//! A client's QUIC connection driven inline on the calling thread, on quinn-proto (the sans-IO
//! state machine quinn is built on): receive a datagram, feed it, poll what to send, send it,
//! with no task, waker or reactor in between. Stop-and-wait round trips use it, as UDP's do
//! (`engine::udp::saw`): through quinn, each round trip passed the endpoint driver, the
//! connection driver and the stream task, with an `epoll_wait` and a wake-up between each
//! (measured on two CPUs, both ends on one: 7.5 µs of client CPU per 1 KiB round trip; UDP's
//! inline path takes 2.9; this one 5.3, and the round trip's p50 fell from 12.7 to 10.1 µs).
//!
//! One blocking, connected UDP socket; its read timeout is the connection's next timer (loss
//! detection, delayed ACKs, keep-alives) or [`STOP_LOOK`], whichever is sooner, so a stop flag
//! set on another thread is seen within that.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, Event, ReadError, StreamId,
    WriteError,
};
use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use wirebench_core::wire::proto::{DataPathInfo, SessionParams};

use super::{DEFAULT_MTU, HANDSHAKE_TIMEOUT};
use crate::engine::interval::Progress;
use crate::engine::stream::blocking::{self, Played};
use crate::engine::stream::ReadTally;
use crate::engine::SendTally;
use crate::transport::{net, tls};

/// Longest a wait for a datagram lasts before the stop flag is looked at again.
pub const STOP_LOOK: Duration = Duration::from_millis(50);

/// Shortest read timeout set: a timer due sooner is handled at most this late (only loss
/// detection runs that close, and only when packets were lost).
const SHORTEST_WAIT: Duration = Duration::from_micros(100);

/// Largest datagram read: the largest UDP payload QUIC allows.
const RECV_BUFFER: usize = super::MAX_UDP_PAYLOAD as usize;

/// One client connection and its socket, driven by whoever calls it.
pub struct InlineConnection {
    socket: UdpSocket,
    server: SocketAddr,
    endpoint: Endpoint,
    handle: ConnectionHandle,
    conn: Connection,
    /// What `poll_transmit` writes into.
    out: Vec<u8>,
    /// What a datagram is read into.
    inbox: Vec<u8>,
    /// The socket's read timeout as last set.
    wait: Option<Duration>,
    /// Set on another thread to end every wait with an error.
    stop: Arc<AtomicBool>,
}

impl InlineConnection {
    /// A client's UDP socket for `server`: connected and blocking. A clone of it is the
    /// [`wake`] handle of the connection built on it.
    pub fn socket(server: SocketAddr) -> Result<UdpSocket> {
        let socket = super::client_socket(server)?;
        socket
            .connect(server)
            .with_context(|| format!("while connecting the QUIC socket to {server}"))?;
        socket
            .set_nonblocking(false)
            .context("while preparing the QUIC socket")?;
        Ok(socket)
    }

    /// Connects to `server` over `socket` (from [`InlineConnection::socket`]), trusting
    /// exactly `pinned_cert_der`, PMTU discovery bounded by `max_mtu` (None: [`DEFAULT_MTU`]),
    /// and completes the handshake; also returns what its UDP socket runs with.
    pub fn connect(
        socket: UdpSocket,
        server: SocketAddr,
        pinned_cert_der: Vec<u8>,
        max_mtu: Option<u16>,
        stop: Arc<AtomicBool>,
    ) -> Result<(InlineConnection, DataPathInfo)> {
        let info = super::client_socket_info(&socket);
        let (endpoint_cfg, cfg) =
            super::client_configs(pinned_cert_der, max_mtu.unwrap_or(DEFAULT_MTU))?;
        let mut endpoint = Endpoint::new(Arc::new(endpoint_cfg), None, true, None);
        let (handle, conn) = endpoint
            .connect(Instant::now(), cfg, server, tls::SERVER_NAME)
            .map_err(|e| anyhow!("while starting the QUIC handshake: {e}"))?;
        let mut this = InlineConnection {
            socket,
            server,
            endpoint,
            handle,
            conn,
            out: Vec::with_capacity(RECV_BUFFER),
            inbox: vec![0u8; RECV_BUFFER],
            wait: None,
            stop,
        };
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        loop {
            this.flush()?;
            if !this.conn.is_handshaking() {
                this.events()?;
                return Ok((this, info));
            }
            if Instant::now() >= deadline {
                bail!("QUIC handshake with {server} failed: no answer in {HANDSHAKE_TIMEOUT:?}");
            }
            this.wait_once()
                .with_context(|| format!("QUIC handshake with {server} failed"))?;
            this.events()
                .with_context(|| format!("QUIC handshake with {server} failed"))?;
        }
    }

    /// Opens a bidirectional stream.
    pub fn open_bi(&mut self) -> Result<StreamId> {
        self.conn
            .streams()
            .open(Dir::Bi)
            .context("while opening the QUIC stream: the server allows none")
    }

    /// Writes all of `data` on `stream`, sending as it goes and waiting while flow control
    /// holds it back.
    pub fn write_all(&mut self, stream: StreamId, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            match self.write_some(stream, data)? {
                0 => self.turn()?,
                n => data = &data[n..],
            }
        }
        self.flush()
    }

    /// What `stream` has ready, up to `buf.len()` bytes, without waiting: `Some(0)` when
    /// nothing came yet, `None` at the stream's end.
    fn read_some(&mut self, stream: StreamId, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let mut recv = self.conn.recv_stream(stream);
        let mut chunks = match recv.read(true) {
            Ok(chunks) => chunks,
            Err(e) => return Err(io::Error::other(format!("QUIC stream read: {e}"))),
        };
        let got = match chunks.next(buf.len()) {
            Ok(Some(chunk)) => {
                buf[..chunk.bytes.len()].copy_from_slice(&chunk.bytes);
                Ok(Some(chunk.bytes.len()))
            }
            Ok(None) => Ok(None),
            Err(ReadError::Blocked) => Ok(Some(0)),
            Err(e) => Err(io::Error::other(format!("QUIC stream read: {e}"))),
        };
        // Flow-control credit the read frees goes out with the next flush.
        let _ = chunks.finalize();
        got
    }

    /// Writes what of `data` flow control lets through on `stream` now (0: none yet).
    fn write_some(&mut self, stream: StreamId, data: &[u8]) -> io::Result<usize> {
        match self.conn.send_stream(stream).write(data) {
            Ok(n) => Ok(n),
            Err(WriteError::Blocked) => Ok(0),
            Err(e) => Err(io::Error::other(format!("QUIC stream write: {e}"))),
        }
    }

    /// Sends what is ready, waits for one datagram or timer, takes what it says.
    fn turn(&mut self) -> io::Result<()> {
        self.flush()?;
        self.wait_once()?;
        self.events()
    }

    /// Finishes our side of `stream` (its FIN goes with the next flush).
    pub fn finish(&mut self, stream: StreamId) -> io::Result<()> {
        self.conn
            .send_stream(stream)
            .finish()
            .map_err(|e| io::Error::other(format!("QUIC stream finish: {e}")))?;
        self.flush()
    }

    /// Keeps the connection going (acknowledgements, retransmissions, keep-alives) until
    /// `until` is set or the connection ends.
    pub fn serve_until(&mut self, until: &AtomicBool) {
        while !until.load(Ordering::Relaxed) {
            if self.turn().is_err() {
                return;
            }
        }
    }

    /// Closes the connection and sends the close at once; the server times out one that
    /// misses it.
    pub fn close(mut self, reason: &'static [u8]) {
        self.conn
            .close(Instant::now(), 0u32.into(), Bytes::from_static(reason));
        let _ = self.flush();
    }

    /// The connection's figures as quinn reports them.
    pub fn stats(&self) -> quinn::ConnectionStats {
        self.conn.stats()
    }

    /// Sends every datagram the connection has ready.
    fn flush(&mut self) -> io::Result<()> {
        let now = Instant::now();
        while let Some(t) = self.conn.poll_transmit(now, 1, &mut self.out) {
            let sent = self.socket.send(&self.out[..t.size]);
            self.out.clear();
            match sent {
                Ok(_) => {}
                // A full socket buffer drops this one, as a full queue on the path would:
                // QUIC's loss recovery sends it again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        self.endpoint_events();
        Ok(())
    }

    /// Waits for one datagram, at most until the connection's next timer (or
    /// [`STOP_LOOK`]), and feeds it; then runs the timers that are due.
    fn wait_once(&mut self) -> io::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            // Not `Interrupted`, which the stream loops' reads retry.
            return Err(io::Error::other("stopped"));
        }
        let now = Instant::now();
        let timer = self.conn.poll_timeout();
        let wait = timer
            .map_or(STOP_LOOK, |t| t.saturating_duration_since(now))
            .clamp(SHORTEST_WAIT, STOP_LOOK);
        // One setsockopt only when the wait shrinks or grows a lot: an early wake-up costs a
        // turn of the loop, a late one a timer handled late.
        if self.wait.is_none_or(|w| wait < w || wait > w * 4) {
            self.socket.set_read_timeout(Some(wait))?;
            self.wait = Some(wait);
        }
        match self.socket.recv(&mut self.inbox) {
            // Nothing: the socket was shut down for reading by [`wake`].
            Ok(0) => {}
            Ok(n) => self.feed(n)?,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
        let now = Instant::now();
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
        Ok(())
    }

    /// Hands one received datagram to the endpoint, and what it says to the connection.
    fn feed(&mut self, len: usize) -> io::Result<()> {
        let now = Instant::now();
        let data = BytesMut::from(&self.inbox[..len]);
        match self
            .endpoint
            .handle(now, self.server, None, None, data, &mut self.out)
        {
            Some(DatagramEvent::ConnectionEvent(_, event)) => self.conn.handle_event(event),
            Some(DatagramEvent::Response(t)) => {
                let sent = self.socket.send(&self.out[..t.size]);
                self.out.clear();
                sent?;
            }
            Some(DatagramEvent::NewConnection(_)) | None => {}
        }
        Ok(())
    }

    /// Passes the connection's word to the endpoint and back.
    fn endpoint_events(&mut self) {
        while let Some(event) = self.conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(self.handle, event) {
                self.conn.handle_event(back);
            }
        }
    }

    /// Takes the connection's application events; a lost connection is an error.
    fn events(&mut self) -> io::Result<()> {
        while let Some(event) = self.conn.poll() {
            if let Event::ConnectionLost { reason } = event {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    format!("the QUIC connection was lost: {reason}"),
                ));
            }
        }
        Ok(())
    }
}

/// Wakes the thread blocked on the connection over `socket` (a clone of its socket) at once,
/// so it sees a stop or close flag set just before without waiting out [`STOP_LOOK`]: shut
/// down for reading, its `recv` returns; sending still works, so the close still goes.
pub fn wake(socket: &UdpSocket) {
    let _ = SockRef::from(socket).shutdown(std::net::Shutdown::Read);
}

/// One stream of an [`InlineConnection`] through tokio's I/O traits, for the generic loops of
/// `engine::stream` driven by `engine::stream::blocking::block_on`: a read that finds nothing, or a
/// write that flow control holds back, drives the connection (waiting in `recv`) until it can
/// go on, as `engine::stream::blocking::Blocking` does on a TCP socket. The reading and the writing
/// handle of a stream share its connection.
pub struct InlineStream<'a> {
    conn: &'a Mutex<InlineConnection>,
    id: StreamId,
}

impl<'a> InlineStream<'a> {
    /// A handle on stream `id` of `conn`.
    pub fn new(conn: &'a Mutex<InlineConnection>, id: StreamId) -> Self {
        InlineStream { conn, id }
    }

    /// The connection, which only one handle uses at a time (never contended: `block_on`
    /// polls one handle at a time, on one thread; a mutex only because the stream loops'
    /// futures must be `Send`).
    fn connection(&self) -> io::Result<MutexGuard<'a, InlineConnection>> {
        self.conn
            .lock()
            .map_err(|_| io::Error::other("a QUIC connection's thread panicked"))
    }
}

impl AsyncRead for InlineStream<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut c = self.connection()?;
        loop {
            match c.read_some(self.id, buf.initialize_unfilled())? {
                Some(0) => c.turn()?,
                Some(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // The end of the stream: a read of nothing.
                None => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl AsyncWrite for InlineStream<'_> {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut c = self.connection()?;
        loop {
            match c.write_some(self.id, data)? {
                0 if !data.is_empty() => c.turn()?,
                n => return Poll::Ready(Ok(n)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.connection()?.flush())
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.connection()?.finish(self.id))
    }
}

/// What a stop-and-wait leg on an inline connection did: sent (its tally, when the first
/// message left and the last acknowledgement came, the round trips) or received
/// (`--reverse`); and the CPU its thread ended on.
pub type LegPlayed = (PlayedRole, Option<u32>);

/// The role a leg played, and its figures.
pub enum PlayedRole {
    /// The client sent.
    Sent {
        /// Messages, bytes and writes.
        tally: SendTally,
        /// When the first message left.
        started: Instant,
        /// When the last acknowledgement came.
        done_at: Instant,
        /// Every round trip, nanoseconds.
        rtt_ns: Histogram<u64>,
    },
    /// The client received (`--reverse`).
    Received(ReadTally),
}

/// A session's stop-and-wait leg on an inline connection of its own thread (a blocking pool
/// thread): connect, announce the session with `preamble`, play the role of `p` either way
/// (`engine::stream::blocking::play` over an [`InlineStream`]). The thread then keeps the connection going until
/// [`LegControl::close`] (the acknowledgement of our last packet may still have to go, and the
/// server's report comes on the control connection meanwhile), and closes it.
pub fn start_stop_and_wait(
    server: SocketAddr,
    pinned_cert_der: Vec<u8>,
    p: &SessionParams,
    preamble: Vec<u8>,
    rtt_ns: Histogram<u64>,
    progress: Arc<Progress>,
) -> Result<(oneshot::Receiver<Result<LegPlayed>>, LegControl)> {
    let stop = Arc::new(AtomicBool::new(false));
    let close = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = oneshot::channel();
    let socket = InlineConnection::socket(server)?;
    let waker = socket
        .try_clone()
        .context("while preparing the QUIC socket")?;
    let (stopping, closing, p) = (Arc::clone(&stop), Arc::clone(&close), p.clone());
    let thread = tokio::task::spawn_blocking(move || {
        let mtu = p.options.quic_mtu;
        let (c, data_path) =
            match InlineConnection::connect(socket, server, pinned_cert_der, mtu, stopping) {
                Ok(both) => both,
                Err(e) => {
                    let _ = done_tx.send(Err(e));
                    return None;
                }
            };
        let conn = Mutex::new(c);
        let played = play(&conn, &p, &preamble, rtt_ns, &progress.bytes);
        let failed = played.is_err();
        let _ = done_tx.send(played.map(|role| (role, net::current_cpu())));
        let mut c = conn.into_inner().ok()?;
        if !failed {
            c.serve_until(&closing);
        }
        let stats = c.stats();
        c.close(if failed { b"failed" } else { b"done" });
        Some((stats, data_path))
    });
    let control = LegControl {
        stop,
        close,
        waker,
        thread,
    };
    Ok((done_rx, control))
}

/// The leg's work on its thread: the stream opened, the preamble, the role.
fn play(
    conn: &Mutex<InlineConnection>,
    p: &SessionParams,
    preamble: &[u8],
    mut rtt_ns: Histogram<u64>,
    progress: &AtomicU64,
) -> Result<PlayedRole> {
    let lock = || {
        conn.lock()
            .map_err(|_| anyhow!("the QUIC connection's thread panicked"))
    };
    let stream = lock()?.open_bi()?;
    lock()?
        .write_all(stream, preamble)
        .context("while writing the connection preamble")?;
    let (mut reader, mut writer) = (
        InlineStream::new(conn, stream),
        InlineStream::new(conn, stream),
    );
    let started = Instant::now();
    let played = blocking::play(&mut reader, &mut writer, p, &mut rtt_ns, progress)
        .context("the data transfer failed")?;
    let done_at = Instant::now();
    Ok(match played {
        Played::Received(tally) => PlayedRole::Received(tally),
        Played::Sent(tally) => {
            lock()?.finish(stream).context("the data transfer failed")?;
            PlayedRole::Sent {
                tally,
                started,
                done_at,
                rtt_ns,
            }
        }
    })
}

/// What the caller keeps of a leg started by [`start_stop_and_wait`]: how to stop it, and how to
/// close it and learn its connection's figures.
pub struct LegControl {
    stop: Arc<AtomicBool>,
    close: Arc<AtomicBool>,
    waker: UdpSocket,
    thread: tokio::task::JoinHandle<Option<(quinn::ConnectionStats, DataPathInfo)>>,
}

impl LegControl {
    /// Stops the leg where it is (the server is gone): its result is an error.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        wake(&self.waker);
    }

    /// Ends the connection (the report is in, or the leg failed) and returns its figures and
    /// what its socket ran with; `None` when it never connected.
    pub async fn close(self) -> Result<Option<(quinn::ConnectionStats, DataPathInfo)>> {
        self.close.store(true, Ordering::Relaxed);
        wake(&self.waker);
        self.thread.await.context("the QUIC thread failed")
    }
}
