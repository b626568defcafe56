//! A client's QUIC connection driven inline on the calling thread, on quinn-proto (the sans-IO
//! state machine quinn is built on): receive a datagram, feed it, poll what to send, send it,
//! with no task, waker or reactor in between. Stop-and-wait round trips use it, as UDP's do
//! (`engine::udp::saw`): through quinn, each round trip passed the endpoint driver, the
//! connection driver and the stream task, with an `epoll_wait` and a wake-up between each
//! (measured on two CPUs, both ends on one: 7.5 µs of client CPU per 1 KiB round trip; UDP's
//! inline path takes 2.9; this one 5.3, and the round trip's p50 fell from 12.7 to 10.1 µs).
//! A datagram goes to quinn without a copy, and quinn is asked for packets only after
//! something changed (p50 8.47 → 8.27 µs, both ends on one CPU).
//!
//! One blocking, connected UDP socket with no read timeout: a [`RecvAlarm`] interrupts a
//! receive at the connection's next timer (loss detection, delayed ACKs, keep-alives), its
//! limit or [`STOP_LOOK`], whichever is soonest, so a stop flag set on another thread is seen
//! within that. A read timeout (`SO_RCVTIMEO`) armed and cancelled a kernel timer on every
//! receive of both ends (`engine::alarm` says what that costs); the alarm's timer stays where
//! it is through a steady exchange.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use quinn_proto::{
    Connection, ConnectionHandle, ConnectionId, DatagramEvent, Dir, Endpoint, EndpointConfig,
    Event, ReadError, ServerConfig, StreamEvent, StreamId, WriteError,
};
use rand::RngCore;
use socket2::SockRef;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use wirebench_core::wire::proto::{DataPathInfo, SessionParams};

use super::{DEFAULT_MTU, HANDSHAKE_TIMEOUT};
use crate::engine::alarm::RecvAlarm;
use crate::engine::demux::Strays;
use crate::engine::interval::Progress;
use crate::engine::stream::blocking::{self, Played};
use crate::engine::stream::ReadTally;
use crate::engine::SendTally;
use crate::transport::{net, syscall, tls};

/// Longest a wait for a datagram lasts before the stop flag is looked at again.
pub const STOP_LOOK: Duration = Duration::from_millis(50);

/// Shortest wait: a timer due sooner is handled at most this late (only loss detection runs
/// that close, and only when packets were lost).
const SHORTEST_WAIT: Duration = Duration::from_micros(100);

/// A wait may end this fraction of its length late (1/8): see [`InlineConnection::wait_once`].
const LATE_BY_AT_MOST_ONE_IN: u32 = 8;

/// The first bytes of the destination connection ID of an inline client's first packet: the
/// server then serves the connection inline too (`engine::quic::inline_server`).
pub const INLINE_MARK: [u8; 8] = *b"wb:inlin";

/// The length of that connection ID: QUIC's longest, which quinn's clients never choose
/// (they use 8 bytes), so one of theirs cannot carry the mark by chance.
const MARKED_CID_LEN: usize = 20;

/// A client's first destination connection ID, marked for the server to serve it inline.
pub fn marked_initial_cid() -> ConnectionId {
    let mut id = [0u8; MARKED_CID_LEN];
    id[..INLINE_MARK.len()].copy_from_slice(&INLINE_MARK);
    rand::thread_rng().fill_bytes(&mut id[INLINE_MARK.len()..]);
    ConnectionId::new(&id)
}

/// Whether `packet` is a QUIC version 1 Initial whose destination connection ID is marked.
pub fn is_marked_initial(packet: &[u8]) -> bool {
    // A long header (0x80), Initial (type bits 0x30 clear in version 1), the version, then
    // the destination connection ID's length and the ID itself.
    let long_initial = packet.first().is_some_and(|b| b & 0xb0 == 0x80);
    long_initial
        && packet.get(1..5) == Some(&[0, 0, 0, 1])
        && packet.get(5) == Some(&(MARKED_CID_LEN as u8))
        && packet.get(6..6 + INLINE_MARK.len()) == Some(&INLINE_MARK[..])
}

/// Longest wait while datagrams may still be handed over from the server's shared socket
/// ([`Forwarded`]): they are looked for at least this often.
const FORWARD_LOOK: Duration = Duration::from_millis(1);

/// Largest datagram read: the largest UDP payload QUIC allows.
pub(crate) const RECV_BUFFER: usize = super::MAX_UDP_PAYLOAD as usize;

/// One connection and its socket, a client's or a server's, driven by whoever calls it.
pub struct InlineConnection {
    socket: UdpSocket,
    peer: SocketAddr,
    /// The address the peer's datagrams arrive at, where the socket is not bound to it alone.
    local_ip: Option<IpAddr>,
    endpoint: Endpoint,
    handle: ConnectionHandle,
    conn: Connection,
    /// What `poll_transmit` writes into.
    out: Vec<u8>,
    /// What a datagram is read into. Each datagram is split off it, without a copy, and the
    /// room is taken back once quinn has let go of the datagram (its stream data read), as a
    /// round trip's always is: the copy and an allocation less per datagram.
    recv_buf: BytesMut,
    /// Datagrams are copied out of `recv_buf` instead, from the first time quinn still held
    /// the last one when the next came (data held for later, or out of order): a datagram
    /// split off holds the whole buffer, and a peer whose packets quinn holds by the thousand
    /// could make each hold 64 KiB.
    copy_datagrams: bool,
    /// Whether the connection may have something to send: something was fed to it, written,
    /// read or timed out since the last `poll_transmit` that found nothing. A `poll_transmit`
    /// that finds nothing still walks every packet space and stream, and each end of a
    /// stop-and-wait round trip made one such call more than it needed (before each wait).
    dirty: bool,
    /// Interrupts a receive at the end of its wait; made by the thread that waits, at its
    /// first wait.
    alarm: Option<RecvAlarm>,
    /// Set on another thread to end every wait with an error.
    stop: Arc<AtomicBool>,
    /// A server's: the connection's datagrams that reached the shared socket before this
    /// socket was connected (`engine::quic::inline_server`), while the handshake runs.
    forwarded: Option<Arc<Forwarded>>,
    /// A server's, until [`stop_forwarding`](Self::stop_forwarding): where datagrams from
    /// other addresses go, which its socket (a member of the port's group) caught before it
    /// was connected (`engine::demux::Strays`). A client's socket is its own: None, and its
    /// receives do not ask who sent.
    strays: Option<Arc<Strays>>,
    /// When a wait fails with `TimedOut` instead (a handshake's or a stream's limit).
    deadline: Option<Instant>,
    /// Streams whose data the peer has acknowledged to their end.
    finished: Vec<StreamId>,
}

/// Receives one datagram into `buf` (empty before; never zeroed: a connection's thread touches
/// only the pages its datagrams fill) and returns its length. A server's socket, a member of
/// the port's group, can have caught others' datagrams before it was connected
/// (`engine::demux::Strays`): with `strays` (where they go, the peer, and the address they
/// arrived at where the socket is not bound to one), one from another address than the peer is
/// handed there instead, and `buf` stays empty (0). A client's socket is its own: without
/// `strays` the receive does not ask who sent.
fn receive_into(
    socket: &UdpSocket,
    buf: &mut BytesMut,
    strays: Option<(&Strays, SocketAddr, Option<IpAddr>)>,
) -> io::Result<usize> {
    let room = buf.spare_capacity_mut();
    let (n, from) = match strays {
        None => (syscall::recv_uninit(socket, room, 0)?, None),
        Some(_) => {
            let (n, from) = SockRef::from(socket).recv_from(room)?;
            (n, from.as_socket())
        }
    };
    // SAFETY: the receive initialised the first `n` bytes of the spare room, which starts
    // where the (empty) buffer does.
    unsafe { buf.set_len(n) };
    match (strays, from) {
        (Some((strays, peer, local_ip)), Some(from)) if from != peer => {
            strays.push(buf, from, local_ip);
            buf.clear();
            Ok(0)
        }
        _ => Ok(n),
    }
}

/// Datagrams handed from one thread to a connection driven on another.
#[derive(Debug, Default)]
pub struct Forwarded {
    queue: Mutex<Vec<BytesMut>>,
}

impl Forwarded {
    /// Adds what one receive brought: several datagrams `stride` bytes apart (GRO).
    pub fn push(&self, data: &[u8], stride: usize) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.extend(data.chunks(stride.max(1)).map(BytesMut::from));
        }
    }

    /// Takes every datagram queued so far.
    fn take(&self) -> Vec<BytesMut> {
        self.queue
            .lock()
            .map(|mut queue| std::mem::take(&mut *queue))
            .unwrap_or_default()
    }
}

impl InlineConnection {
    /// A client's UDP socket for `server`: connected and blocking. A clone of it is the
    /// [`net::wake_reader`] handle of the connection built on it.
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
        let this = InlineConnection::connect_with(socket, server, (endpoint_cfg, cfg), stop)?;
        Ok((this, info))
    }

    /// Connects to `server` over `socket` with these endpoint and connection settings, and
    /// completes the handshake. The connection's first packet asks the server to serve it
    /// inline too (`engine::quic::inline_server`).
    pub fn connect_with(
        socket: UdpSocket,
        server: SocketAddr,
        (endpoint_cfg, mut cfg): (EndpointConfig, quinn::ClientConfig),
        stop: Arc<AtomicBool>,
    ) -> Result<InlineConnection> {
        cfg.initial_dst_cid_provider(Arc::new(marked_initial_cid));
        let mut endpoint = Endpoint::new(Arc::new(endpoint_cfg), None, true, None);
        let (handle, conn) = endpoint
            .connect(Instant::now(), cfg, server, tls::SERVER_NAME)
            .map_err(|e| anyhow!("while starting the QUIC handshake: {e}"))?;
        let mut this = InlineConnection::new(socket, server, None, endpoint, (handle, conn), stop);
        this.handshake()
            .with_context(|| format!("QUIC handshake with {server} failed"))?;
        Ok(this)
    }

    /// A connection as it starts, before its handshake.
    fn new(
        socket: UdpSocket,
        peer: SocketAddr,
        local_ip: Option<IpAddr>,
        endpoint: Endpoint,
        (handle, conn): (ConnectionHandle, Connection),
        stop: Arc<AtomicBool>,
    ) -> InlineConnection {
        InlineConnection {
            socket,
            peer,
            local_ip,
            endpoint,
            handle,
            conn,
            out: Vec::with_capacity(RECV_BUFFER),
            recv_buf: BytesMut::with_capacity(RECV_BUFFER),
            copy_datagrams: false,
            dirty: true,
            alarm: None,
            stop,
            forwarded: None,
            strays: None,
            deadline: None,
            finished: Vec::new(),
        }
    }

    /// A server's connection, opened by the client's first datagram, which `forwarded` holds
    /// with any that followed it to the shared socket; `socket` is connected to the client
    /// (`peer`) and receives the rest. Completes the handshake and returns the connection,
    /// still taking what `forwarded` gets until [`stop_forwarding`](Self::stop_forwarding).
    /// What `socket` received from any other address goes to `strays`.
    pub fn accept(
        socket: UdpSocket,
        (peer, local_ip): (SocketAddr, Option<IpAddr>),
        (forwarded, strays): (Arc<Forwarded>, Arc<Strays>),
        (endpoint_cfg, server_cfg): &(Arc<EndpointConfig>, Arc<ServerConfig>),
        stop: Arc<AtomicBool>,
    ) -> Result<InlineConnection> {
        let now = Instant::now();
        let mut endpoint = Endpoint::new(
            Arc::clone(endpoint_cfg),
            Some(Arc::clone(server_cfg)),
            true,
            None,
        );
        let mut out = Vec::with_capacity(RECV_BUFFER);
        let mut queued = forwarded.take().into_iter();
        let opened = loop {
            let Some(datagram) = queued.next() else {
                bail!("the client's first datagram opened no QUIC connection");
            };
            match endpoint.handle(now, peer, local_ip, None, datagram, &mut out) {
                Some(DatagramEvent::NewConnection(incoming)) => {
                    match endpoint.accept(incoming, now, &mut out, None) {
                        Ok(opened) => break opened,
                        Err(refused) => {
                            if let Some(t) = refused.response {
                                let _ = socket.send(&out[..t.size]);
                            }
                            bail!("QUIC handshake refused: {}", refused.cause);
                        }
                    }
                }
                Some(DatagramEvent::Response(t)) => {
                    let _ = socket.send(&out[..t.size]);
                    out.clear();
                }
                Some(DatagramEvent::ConnectionEvent(..)) | None => {}
            }
        };
        let mut this = InlineConnection::new(socket, peer, local_ip, endpoint, opened, stop);
        this.forwarded = Some(forwarded);
        this.strays = Some(strays);
        for datagram in queued {
            this.feed_datagram(now, datagram)?;
        }
        this.handshake()?;
        Ok(this)
    }

    /// Drives the handshake to its end, at most [`HANDSHAKE_TIMEOUT`].
    fn handshake(&mut self) -> Result<()> {
        self.deadline = Some(Instant::now() + HANDSHAKE_TIMEOUT);
        loop {
            self.flush()?;
            if !self.conn.is_handshaking() {
                self.events()?;
                self.deadline = None;
                return Ok(());
            }
            self.wait_once().map_err(|e| match e.kind() {
                io::ErrorKind::TimedOut => anyhow!("no answer in {HANDSHAKE_TIMEOUT:?}"),
                _ => e.into(),
            })?;
            self.events()?;
        }
    }

    /// No more datagrams come from the shared socket: waits go back to [`STOP_LOOK`]. Nor
    /// from anyone but the peer: what the socket caught before its connect was queued ahead of
    /// the client's packets that completed the handshake and carried the stream's preamble, so
    /// its receives stop asking who sent (on a 1 KiB QUIC ping, same CPU, asking cost 1 %).
    pub fn stop_forwarding(&mut self) -> io::Result<()> {
        self.strays = None;
        if let Some(forwarded) = self.forwarded.take() {
            let now = Instant::now();
            for datagram in forwarded.take() {
                self.feed_datagram(now, datagram)?;
            }
        }
        Ok(())
    }

    /// The first bidirectional stream the peer opens, and its first `buf.len()` bytes, within
    /// `limit`.
    pub fn accept_bi(&mut self, buf: &mut [u8], limit: Duration) -> io::Result<StreamId> {
        self.deadline = Some(Instant::now() + limit);
        let stream = loop {
            if let Some(id) = self.conn.streams().accept(Dir::Bi) {
                break id;
            }
            self.turn()?;
        };
        let mut filled = 0;
        while filled < buf.len() {
            match self.read_some(stream, &mut buf[filled..])? {
                Some(0) => self.turn()?,
                Some(n) => filled += n,
                None => return Err(io::ErrorKind::UnexpectedEof.into()),
            }
        }
        self.deadline = None;
        Ok(stream)
    }

    /// Opens a bidirectional stream.
    pub fn open_bi(&mut self) -> Result<StreamId> {
        self.dirty = true;
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
        if chunks.finalize().should_transmit() {
            self.dirty = true;
        }
        got
    }

    /// Writes what of `data` flow control lets through on `stream` now (0: none yet).
    fn write_some(&mut self, stream: StreamId, data: &[u8]) -> io::Result<usize> {
        match self.conn.send_stream(stream).write(data) {
            Ok(n) => {
                self.dirty |= n > 0;
                Ok(n)
            }
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
        self.dirty = true;
        self.flush()
    }

    /// Sleeps `interval` (a pause between a ping's exchanges) with the alarm stopped, which
    /// would otherwise fire every millisecond of it once its timer came due.
    pub fn pause(&mut self, interval: Duration) -> io::Result<()> {
        if let Some(alarm) = &mut self.alarm {
            alarm.set(None)?;
        }
        std::thread::sleep(interval);
        Ok(())
    }

    /// Keeps the connection going (acknowledgements, retransmissions, keep-alives) until
    /// `until` is set, the connection ends or `limit` has passed.
    pub fn serve_until(&mut self, until: &AtomicBool, limit: Option<Duration>) {
        self.deadline = limit.map(|l| Instant::now() + l);
        while !until.load(Ordering::Relaxed) {
            if self.turn().is_err() {
                return;
            }
        }
    }

    /// Closes the connection and sends the close at once; the peer times out one that
    /// misses it.
    pub fn close(mut self, reason: &'static [u8]) {
        self.close_now(reason);
    }

    fn close_now(&mut self, reason: &'static [u8]) {
        if !self.conn.is_closed() {
            self.conn
                .close(Instant::now(), 0u32.into(), Bytes::from_static(reason));
            self.dirty = true;
            let _ = self.flush();
        }
    }

    /// The connection's figures as quinn reports them.
    pub fn stats(&self) -> quinn::ConnectionStats {
        self.conn.stats()
    }

    /// Sends every datagram the connection has ready (none to look for unless `dirty`).
    fn flush(&mut self) -> io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let now = Instant::now();
        while let Some(t) = self.conn.poll_transmit(now, 1, &mut self.out) {
            let sent = syscall::send_through_signals(&self.socket, &self.out[..t.size], 0);
            self.out.clear();
            match sent {
                Ok(_) => {}
                // A full socket buffer drops this one, as a full queue on the path would:
                // QUIC's loss recovery sends it again.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        // Nothing more until something is fed, written, read or timed out (a pacing delay
        // is a timer too).
        self.dirty = false;
        self.endpoint_events();
        Ok(())
    }

    /// Waits for one datagram, at most until the connection's next timer, its limit or
    /// [`STOP_LOOK`], and feeds it; then runs the timers that are due.
    fn wait_once(&mut self) -> io::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            // Not `Interrupted`, which the stream loops' reads retry.
            return Err(io::Error::other("stopped"));
        }
        let mut now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time"));
        }
        let look = match &self.forwarded {
            Some(forwarded) => {
                let handed = forwarded.take();
                if !handed.is_empty() {
                    for datagram in handed {
                        self.feed_datagram(now, datagram)?;
                    }
                    return Ok(());
                }
                FORWARD_LOOK
            }
            None => STOP_LOOK,
        };
        let timer = self.conn.poll_timeout();
        let wait = timer
            .map_or(look, |t| t.saturating_duration_since(now))
            .clamp(SHORTEST_WAIT, look);
        let wake = self.deadline.map_or(now + wait, |d| d.min(now + wait));
        // In a steady exchange the wake moves later by a round trip each time, and the alarm's
        // timer stays put (it moves once per half its distance, about every 12 ms). A wake an
        // eighth of its distance earlier is kept that late (3 ms of a 26 ms loss-detection
        // timer; a read timeout was up to 4 ms late, the kernel's tick): as a jittery RTT's
        // variance decays, that timer comes a little earlier with every round trip.
        let alarm = match &mut self.alarm {
            Some(alarm) => alarm,
            slot => slot.insert(RecvAlarm::for_this_thread()?),
        };
        alarm.set_late_by(Some(wake), (wake - now) / LATE_BY_AT_MOST_ONE_IN)?;
        // Room for the largest datagram: the room the last one took, taken back if quinn let go
        // of it, or else a new buffer for copies from now on. Never zeroed: a connection's
        // thread touches only the pages its datagrams fill (a server holds one buffer per
        // connection).
        if !self.copy_datagrams && !self.recv_buf.try_reclaim(RECV_BUFFER) {
            self.copy_datagrams = true;
            self.recv_buf = BytesMut::with_capacity(RECV_BUFFER);
        }
        let strays = self
            .strays
            .as_deref()
            .map(|s| (s, self.peer, self.local_ip));
        let received = receive_into(&self.socket, &mut self.recv_buf, strays);
        // One reading of the clock serves the datagram and the timers.
        now = Instant::now();
        match received {
            // Nothing: the socket was shut down for reading by `net::wake_reader`, or what came
            // was not the peer's (handed back).
            Ok(0) => {}
            Ok(_) => {
                let datagram = if self.copy_datagrams {
                    let copy = BytesMut::from(&self.recv_buf[..]);
                    self.recv_buf.clear();
                    copy
                } else {
                    // Shares the buffer until quinn drops it.
                    self.recv_buf.split()
                };
                self.feed_datagram(now, datagram)?;
            }
            // The alarm (or another signal): the timers and limits are looked at.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                if let Some(alarm) = &mut self.alarm {
                    alarm.interrupted(now);
                }
            }
            Err(e) => return Err(e),
        }
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
            self.dirty = true;
        }
        Ok(())
    }

    /// Hands one received datagram to the endpoint, and what it says to the connection.
    fn feed_datagram(&mut self, now: Instant, datagram: BytesMut) -> io::Result<()> {
        match self
            .endpoint
            .handle(now, self.peer, self.local_ip, None, datagram, &mut self.out)
        {
            Some(DatagramEvent::ConnectionEvent(_, event)) => {
                self.conn.handle_event(event);
                self.dirty = true;
            }
            Some(DatagramEvent::Response(t)) => {
                let sent = syscall::send_through_signals(&self.socket, &self.out[..t.size], 0);
                self.out.clear();
                sent?;
            }
            // Another connection from the same address: not served here.
            Some(DatagramEvent::NewConnection(incoming)) => {
                self.endpoint.ignore(incoming);
            }
            None => {}
        }
        Ok(())
    }

    /// Passes the connection's word to the endpoint and back.
    fn endpoint_events(&mut self) {
        while let Some(event) = self.conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(self.handle, event) {
                self.conn.handle_event(back);
                self.dirty = true;
            }
        }
    }

    /// Takes the connection's application events; a lost connection is an error.
    fn events(&mut self) -> io::Result<()> {
        while let Some(event) = self.conn.poll() {
            match event {
                Event::ConnectionLost { reason } => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        format!("the QUIC connection was lost: {reason}"),
                    ));
                }
                Event::Stream(StreamEvent::Finished { id }) => self.finished.push(id),
                _ => {}
            }
        }
        Ok(())
    }
}

impl Drop for InlineConnection {
    /// A connection dropped unclosed (its session refused it, or its thread ended early) says
    /// so to its peer rather than leave it to time out.
    fn drop(&mut self) {
        self.close_now(b"dropped");
    }
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

    /// Waits, at most `limit`, for the peer to finish the stream with nothing more on it
    /// (`InvalidData` if more came, `TimedOut` past the limit).
    pub fn wait_end(&self, limit: Duration) -> io::Result<()> {
        let mut c = self.connection()?;
        c.deadline = Some(Instant::now() + limit);
        let ended = loop {
            match c.read_some(self.id, &mut [0u8; 1]) {
                Ok(Some(0)) => {
                    if let Err(e) = c.turn() {
                        break Err(e);
                    }
                }
                Ok(Some(_)) => {
                    break Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "more than the session's total came",
                    ))
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        c.deadline = None;
        ended
    }

    /// Finishes our side of the stream and waits, at most `limit`, until the peer has
    /// acknowledged all of it (`TimedOut` past the limit).
    pub fn finish_acknowledged(&self, limit: Duration) -> io::Result<()> {
        let mut c = self.connection()?;
        c.finish(self.id)?;
        c.deadline = Some(Instant::now() + limit);
        let mut acknowledged = Ok(());
        while !c.finished.contains(&self.id) {
            if let Err(e) = c.turn() {
                acknowledged = Err(e);
                break;
            }
        }
        c.deadline = None;
        acknowledged
    }

    /// Finishes our side of the stream (its end goes with the next datagram sent).
    pub fn finish(&self) -> io::Result<()> {
        self.connection()?.finish(self.id)
    }
}

impl io::Read for InlineStream<'_> {
    /// Blocks, driving the connection, until something came (0: the stream's end).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut c = self.connection()?;
        loop {
            match c.read_some(self.id, buf)? {
                Some(0) if !buf.is_empty() => c.turn()?,
                Some(n) => return Ok(n),
                None => return Ok(0),
            }
        }
    }
}

impl io::Write for InlineStream<'_> {
    /// Blocks, driving the connection, until flow control lets something through.
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut c = self.connection()?;
        loop {
            match c.write_some(self.id, data)? {
                0 if !data.is_empty() => c.turn()?,
                n => return Ok(n),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.connection()?.flush()
    }
}

impl AsyncRead for InlineStream<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = io::Read::read(&mut *self, buf.initialize_unfilled())?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for InlineStream<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(io::Write::write(&mut *self, data))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _cx: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(io::Write::flush(&mut *self))
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
            c.serve_until(&closing, None);
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
        net::wake_reader(&self.waker);
    }

    /// Ends the connection (the report is in, or the leg failed) and returns its figures and
    /// what its socket ran with; `None` when it never connected.
    pub async fn close(self) -> Result<Option<(quinn::ConnectionStats, DataPathInfo)>> {
        self.close.store(true, Ordering::Relaxed);
        net::wake_reader(&self.waker);
        self.thread.await.context("the QUIC thread failed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::tls::ServerIdentity;

    /// The first datagram of a client connection, with `mark` its first packet marked or not.
    fn first_datagram(mark: bool) -> Vec<u8> {
        let identity = ServerIdentity::self_signed().unwrap();
        let (endpoint_cfg, mut cfg) =
            super::super::client_configs(identity.leaf_der().to_vec(), 1452).unwrap();
        if mark {
            cfg.initial_dst_cid_provider(Arc::new(marked_initial_cid));
        }
        let mut endpoint = quinn_proto::Endpoint::new(Arc::new(endpoint_cfg), None, true, None);
        let server: SocketAddr = "127.0.0.1:4433".parse().unwrap();
        let (_, mut conn) = endpoint
            .connect(Instant::now(), cfg, server, tls::SERVER_NAME)
            .unwrap();
        let mut out = Vec::new();
        let t = conn.poll_transmit(Instant::now(), 1, &mut out).unwrap();
        out.truncate(t.size);
        out
    }

    #[test]
    fn only_a_marked_initial_is_taken() {
        assert!(is_marked_initial(&first_datagram(true)));
        assert!(!is_marked_initial(&first_datagram(false)));
        // A short header carrying the mark where a long one has its ID is not an Initial.
        let mut short = first_datagram(true);
        short[0] &= 0x7f;
        assert!(!is_marked_initial(&short));
        assert!(!is_marked_initial(&[]));
    }

    /// Runs `serve` on a server's inline connection and `play` on a client's, connected over
    /// loopback, each on a thread of its own (the connection's alarm is its waiting thread's),
    /// on the stream the client opened with one byte. Returns what each returned.
    fn over_loopback<T, U>(
        serve: impl FnOnce(&Mutex<InlineConnection>, StreamId) -> T + Send + 'static,
        play: impl FnOnce(&Mutex<InlineConnection>, StreamId) -> U,
    ) -> (T, U)
    where
        T: Send + 'static,
    {
        let identity = ServerIdentity::self_signed().unwrap();
        let mut endpoint_cfg = EndpointConfig::default();
        endpoint_cfg.grease_quic_bit(false);
        let configs = (
            Arc::new(endpoint_cfg),
            Arc::new(super::super::server_config(&identity).unwrap()),
        );
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let server = socket.local_addr().unwrap();
        let serving = std::thread::spawn(move || {
            // The first datagram, as the shared socket hands it on (`inline_server`).
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut first = vec![0u8; RECV_BUFFER];
            let (n, peer) = socket.recv_from(&mut first).unwrap();
            socket.set_read_timeout(None).unwrap();
            socket.connect(peer).unwrap();
            let forwarded = Arc::new(Forwarded::default());
            forwarded.push(&first[..n], n);
            let stop = Arc::new(AtomicBool::new(false));
            let strays = Arc::new(Strays::default());
            let mut conn =
                InlineConnection::accept(socket, (peer, None), (forwarded, strays), &configs, stop)
                    .unwrap();
            let stream = conn
                .accept_bi(&mut [0u8; 1], Duration::from_secs(10))
                .unwrap();
            conn.stop_forwarding().unwrap();
            let conn = Mutex::new(conn);
            let served = serve(&conn, stream);
            conn.into_inner()
                .unwrap()
                .serve_until(&AtomicBool::new(false), Some(Duration::from_millis(100)));
            served
        });
        let leaf = identity.leaf_der().to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let (mut client, _) = InlineConnection::connect(
            InlineConnection::socket(server).unwrap(),
            server,
            leaf,
            None,
            stop,
        )
        .unwrap();
        let stream = client.open_bi().unwrap();
        client.write_all(stream, b"x").unwrap();
        let client = Mutex::new(client);
        let played = play(&client, stream);
        client.into_inner().unwrap().close(b"done");
        (serving.join().unwrap(), played)
    }

    /// Times the connection's alarm moved its timer.
    fn alarm_moves(conn: &Mutex<InlineConnection>) -> u64 {
        conn.lock()
            .unwrap()
            .alarm
            .as_ref()
            .map_or(0, RecvAlarm::moves)
    }

    /// Reads one message on `stream` and writes it back.
    fn echo_one(conn: &Mutex<InlineConnection>, stream: StreamId, message: &mut [u8]) {
        let (mut reader, mut writer) = (
            InlineStream::new(conn, stream),
            InlineStream::new(conn, stream),
        );
        io::Read::read_exact(&mut reader, message).unwrap();
        io::Write::write_all(&mut writer, message).unwrap();
        io::Write::flush(&mut writer).unwrap();
    }

    /// Writes one message on `stream` and reads its echo.
    fn ping_one(conn: &Mutex<InlineConnection>, stream: StreamId, message: &mut [u8]) {
        let (mut reader, mut writer) = (
            InlineStream::new(conn, stream),
            InlineStream::new(conn, stream),
        );
        io::Write::write_all(&mut writer, message).unwrap();
        io::Write::flush(&mut writer).unwrap();
        io::Read::read_exact(&mut reader, message).unwrap();
    }

    /// A ping's exchanges of 1 KiB each way: the client's and the server's alarm each move
    /// their timer about once per half its distance (a loss-detection timer 25 ms or more
    /// ahead: one per 12 ms or more), never per receive as a read timeout is armed (4,000
    /// moves), nor per receive as that timer creeps earlier on a busy machine (75–98 moves in
    /// 150 ms before it could be late). The bound allows one move per 5 ms of the exchange,
    /// however slowly a busy machine runs it.
    #[test]
    fn a_steady_exchange_leaves_the_alarms_in_place() {
        const ROUND_TRIPS: usize = 2000;
        type OneExchange = fn(&Mutex<InlineConnection>, StreamId, &mut [u8]);
        // The moves of `conn`'s alarm over the exchanges, and how long they took.
        let exchanges = |one: OneExchange| {
            move |conn: &Mutex<InlineConnection>, stream| {
                let mut message = [7u8; 1024];
                let (before, began) = (alarm_moves(conn), Instant::now());
                for _ in 0..ROUND_TRIPS {
                    one(conn, stream, &mut message);
                }
                (alarm_moves(conn) - before, began.elapsed())
            }
        };
        let (served, played) = over_loopback(exchanges(echo_one), exchanges(ping_one));
        for (end, (moves, took)) in [("server", served), ("client", played)] {
            let allowed = 4 + took.as_millis() / 5;
            assert!(
                u128::from(moves) <= allowed,
                "the {end}'s alarm moved {moves} times in {ROUND_TRIPS} round trips \
                 ({took:?}; at most {allowed})"
            );
        }
    }

    /// A pause between a ping's exchanges stops the alarm, which would otherwise fire every
    /// millisecond of it once its timer came due; the next exchange sets it again.
    #[test]
    fn a_pause_stops_the_alarm() {
        let echo = |conn: &Mutex<InlineConnection>, stream| {
            let mut message = [0u8; 64];
            for _ in 0..2 {
                echo_one(conn, stream, &mut message);
            }
        };
        let ping = |conn: &Mutex<InlineConnection>, stream| {
            let off = |c: &InlineConnection| c.alarm.as_ref().is_some_and(RecvAlarm::is_off);
            let mut message = [7u8; 64];
            let mut states = Vec::new();
            for _ in 0..2 {
                ping_one(conn, stream, &mut message);
                states.push(off(&conn.lock().unwrap()));
                conn.lock()
                    .unwrap()
                    .pause(Duration::from_millis(1))
                    .unwrap();
                states.push(off(&conn.lock().unwrap()));
            }
            states
        };
        let ((), states) = over_loopback(echo, ping);
        assert_eq!(states, [false, true, false, true]);
    }

    /// A server's socket joins the port's group before it is connected, and what it caught
    /// meanwhile (here: queued before the connect) goes back to the shared socket with its
    /// sender; the peer's datagram is the connection's.
    #[test]
    fn a_server_socket_hands_back_what_others_sent() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
        stranger.send_to(b"\x01not yours", port).unwrap();
        peer.send_to(b"\x41yours", port).unwrap();
        socket.connect(peer.local_addr().unwrap()).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let strays = Strays::default();
        let here = Some((&strays, peer.local_addr().unwrap(), None));
        let mut buf = BytesMut::with_capacity(RECV_BUFFER);
        assert_eq!(receive_into(&socket, &mut buf, here).unwrap(), 0);
        assert!(buf.is_empty());
        assert_eq!(
            strays.queued(),
            vec![(b"\x01not yours".to_vec(), stranger.local_addr().unwrap())]
        );
        assert_eq!(receive_into(&socket, &mut buf, here).unwrap(), 6);
        assert_eq!(&buf[..], b"\x41yours");
        assert_eq!(strays.queued().len(), 1, "the peer's datagram stays here");
    }
}
