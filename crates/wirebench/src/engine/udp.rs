//! The UDP client data path: one message per datagram behind our 16-byte header. Streaming
//! sends batches with GSO through `quinn::udp` (one `sendmsg` carries up to 64 datagrams);
//! stop-and-wait drives the core `StopAndWaitSender` machine with real time.
//!
//! Every send error is counted; none is swallowed. On a connected socket (the client's),
//! ECONNREFUSED — the kernel's report of an ICMP port unreachable — means the server's port is
//! closed: the server is gone, and the sender stops at once instead of retrying.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use quinn::udp::{Transmit, UdpSocketState};
use socket2::SockRef;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use wirebench_core::machine::pacing::most_catch_up;
use wirebench_core::machine::saw::{AckOutcome, RtoPolicy, StopAndWaitSender};
use wirebench_core::vocab::plan::{message_count, message_len};
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::vocab::units::BitRate;
use wirebench_core::wire::datagram::{self, Header, Kind, HEADER_LEN};
use wirebench_core::wire::proto::DataPathInfo;

use super::SendTally;

pub use crate::transport::net::UDP_SOCKET_BUFFER;

/// Largest UDP payload one GSO `sendmsg` may carry in total (IPv4 limit, the smaller one).
const GSO_MAX_BYTES: usize = datagram::MAX_UDP_PAYLOAD_V4;

/// Consecutive errors or timeouts after which the client gives up on the server.
const MAX_CONSECUTIVE_FAILURES: u32 = 20;

/// A UDP socket connected to the server, with `quinn::udp`'s GSO-capable state.
#[derive(Debug)]
pub struct UdpClient {
    socket: UdpSocket,
    state: UdpSocketState,
    server: SocketAddr,
}

impl UdpClient {
    /// Opens a socket of the server's address family and connects it, so only the server's
    /// datagrams are received.
    pub async fn connect(server: SocketAddr, buffer: Option<u32>) -> Result<Self> {
        let std_socket = crate::transport::net::udp_socket(server.is_ipv6(), None, buffer)?;
        let socket = UdpSocket::from_std(std_socket).context("while registering the UDP socket")?;
        socket
            .connect(server)
            .await
            .with_context(|| format!("while connecting the UDP socket to {server}"))?;
        let state = UdpSocketState::new((&socket).into())
            .context("while preparing the UDP socket for GSO")?;
        // quinn::udp sets "don't fragment" (QUIC probes the path MTU itself). Our messages are
        // up to 64 KiB, one per datagram, and must cross any path the way iperf3's do: let the
        // IP layer fragment what does not fit.
        allow_fragmentation(&socket, server.is_ipv6())
            .context("while allowing IP fragmentation on the UDP socket")?;
        Ok(UdpClient {
            socket,
            state,
            server,
        })
    }

    /// What this socket runs with: buffers, and the most datagrams one `sendmsg` may carry
    /// (1 without GSO).
    pub fn data_path(&self, busy_poll: bool) -> DataPathInfo {
        let (recv, send) = crate::transport::net::buffer_sizes(&SockRef::from(&self.socket));
        DataPathInfo {
            recv_buffer: recv as u64,
            send_buffer: send as u64,
            busy_poll,
            gso_segments: u32::try_from(self.state.max_gso_segments()).unwrap_or(u32::MAX),
            ..DataPathInfo::default()
        }
    }

    /// Streaming: sends every message once, as fast as the socket allows or paced to `rate`;
    /// with a `deadline` (a timed session), no batch after it.
    pub async fn send_stream(
        &self,
        session: u32,
        (total_bytes, deadline): (u64, Option<Instant>),
        msg_size: u32,
        rate: Option<BitRate>,
        progress: &AtomicU64,
    ) -> Result<SendTally> {
        let to = DatagramSender {
            socket: &self.socket,
            state: &self.state,
            destination: self.server,
        };
        to.send_stream(session, (total_bytes, deadline), msg_size, rate, progress)
            .await
    }

    /// The async socket (stop-and-wait).
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// The socket taken off the runtime, for a data-path thread of its own (busy-poll
    /// stop-and-wait spins on it; ping makes it blocking); it is still non-blocking.
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        self.socket.into_std()
    }

    /// The GSO/GRO state of the socket.
    pub fn state(&self) -> &UdpSocketState {
        &self.state
    }
}

/// A UDP socket with `quinn::udp`'s GSO-capable state and where its datagrams go: the client's
/// connected socket, or the server's shared socket sending to a reversed session's client.
#[derive(Debug, Clone, Copy)]
pub struct DatagramSender<'a> {
    /// The socket.
    pub socket: &'a UdpSocket,
    /// Its GSO/GRO state.
    pub state: &'a UdpSocketState,
    /// Where the datagrams go.
    pub destination: SocketAddr,
}

impl DatagramSender<'_> {
    /// Streaming: sends every message once, as fast as the socket allows or paced to `rate`;
    /// with a `deadline` (a timed session), no batch after it (the clock is read once per
    /// batch anyway, for the timestamp).
    pub async fn send_stream(
        &self,
        session: u32,
        (total_bytes, deadline): (u64, Option<Instant>),
        msg_size: u32,
        rate: Option<BitRate>,
        progress: &AtomicU64,
    ) -> Result<SendTally> {
        let segment = HEADER_LEN + msg_size as usize;
        let most_per_call = (GSO_MAX_BYTES / segment).max(1);
        // One buffer for the whole run: headers are rewritten in place, payload stays zero.
        let mut batch =
            vec![0u8; segment * most_per_call.min(self.state.max_gso_segments().max(1))];
        let count = message_count(total_bytes, msg_size);
        let mut tally = SendTally::default();
        let started = Instant::now();
        let mut next = 0u64;
        let mut failures = 0u32;
        // Segmentation offload needs each datagram to fit the path MTU; a larger one makes the
        // kernel refuse the batch, and from then on we send one datagram per call (which the
        // IP layer may fragment, as for any UDP sender).
        let mut gso_cap = self.state.max_gso_segments().max(1);
        // Only a connected socket's errors are about its one peer: the server's shared socket
        // may hear about another client's closed port.
        let connected = self.socket.peer_addr().is_ok();
        // Where pacing counts from: (time, bytes sent by then).
        let mut pace_from = (started, 0u64);
        while next < count {
            let per_call = most_per_call
                .min(gso_cap)
                .min(self.state.max_gso_segments())
                .max(1)
                .min(batch.len() / segment);
            let n = (count - next).min(per_call as u64);
            let mut len = 0usize;
            let mut payload = 0u64;
            // One clock read per batch: the datagrams of one sendmsg leave together.
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            let sent_us = now.duration_since(started).as_micros() as u32;
            for k in 0..n {
                let seq = next + k;
                let msg_len = message_len(seq, total_bytes, msg_size) as usize;
                let at = k as usize * segment;
                Header {
                    kind: Kind::Data,
                    retransmit: false,
                    session,
                    seq,
                }
                .write_to(&mut batch[at..])
                .context("datagram buffer too small")?;
                datagram::write_timestamp(
                    &mut batch[at + HEADER_LEN..at + HEADER_LEN + msg_len],
                    sent_us,
                );
                len = at + HEADER_LEN + msg_len;
                payload += msg_len as u64;
            }
            let transmit = Transmit {
                destination: self.destination,
                ecn: None,
                contents: &batch[..len],
                segment_size: (n > 1).then_some(segment),
                src_ip: None,
            };
            tally.send_calls += 1;
            match self.send(&transmit).await {
                Ok(()) => {
                    failures = 0;
                    tally.messages += n;
                    tally.datagrams += n;
                    tally.bytes += payload;
                    progress.store(tally.bytes, Ordering::Relaxed);
                    next += n;
                }
                Err(e) if connected && port_closed(&e) => {
                    return Err(e).context(PORT_CLOSED);
                }
                Err(e) if n > 1 && refuses_segmentation(&e) => {
                    tally.send_errors += 1;
                    gso_cap = 1;
                }
                Err(e) => {
                    // Counted, then the same batch is tried again: a refused send is not a sent datagram.
                    tally.send_errors += 1;
                    failures += 1;
                    if failures >= MAX_CONSECUTIVE_FAILURES {
                        return Err(e).context("UDP sends keep failing");
                    }
                    tokio::task::yield_now().await;
                }
            }
            if let Some(rate) = rate {
                pace(&mut pace_from, tally.bytes, rate).await;
            }
        }
        Ok(tally)
    }

    /// Sends one (possibly segmented) transmit, waiting for writability; returns real errors
    /// (`try_send`, unlike quinn's `send`, swallows none).
    async fn send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.socket
            .async_io(Interest::WRITABLE, || {
                self.state.try_send(self.socket.into(), transmit)
            })
            .await
    }
}

/// What stop-and-wait needs from a UDP socket: send one datagram, and receive one before a
/// deadline (`None` when the deadline passes first).
pub trait DatagramPort {
    /// Sends one datagram to the connected peer.
    fn send(&mut self, datagram: &[u8]) -> impl Future<Output = io::Result<usize>> + Send;
    /// Receives one datagram, or `None` at `deadline`.
    fn recv_until(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
    ) -> impl Future<Output = Option<io::Result<usize>>> + Send;
    /// Whether the socket is connected to its one peer, so that ECONNREFUSED means that
    /// peer's port is closed (the client's sockets; not the server's shared one).
    fn connected(&self) -> bool {
        false
    }
}

/// The usual port: the async socket, sleeping until a datagram or the timer.
#[derive(Debug)]
pub struct AsyncPort<'a>(pub &'a UdpSocket);

impl DatagramPort for AsyncPort<'_> {
    async fn send(&mut self, datagram: &[u8]) -> io::Result<usize> {
        self.0.send(datagram).await
    }

    async fn recv_until(&mut self, buf: &mut [u8], deadline: Instant) -> Option<io::Result<usize>> {
        tokio::time::timeout_at(deadline.into(), self.0.recv(buf))
            .await
            .ok()
    }

    fn connected(&self) -> bool {
        self.0.peer_addr().is_ok()
    }
}

/// The busy-poll port: a non-blocking std socket spun on in a thread of its own (driven with
/// `engine::blocking::block_on`); it never sleeps, so no wake-up is paid per round trip.
/// Setting the flag (from another thread) stops it: its next wait fails with
/// `ConnectionAborted`, which ends [`send_stop_and_wait`].
#[derive(Debug)]
pub struct SpinPort(pub std::net::UdpSocket, pub Arc<AtomicBool>);

impl DatagramPort for SpinPort {
    async fn send(&mut self, datagram: &[u8]) -> io::Result<usize> {
        loop {
            match self.0.send(datagram) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                other => return other,
            }
        }
    }

    async fn recv_until(&mut self, buf: &mut [u8], deadline: Instant) -> Option<io::Result<usize>> {
        loop {
            match self.0.recv(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.1.load(Ordering::Relaxed) {
                        return Some(Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            "stopped: the server is gone",
                        )));
                    }
                    if Instant::now() >= deadline {
                        return None;
                    }
                    std::hint::spin_loop();
                }
                other => return Some(other),
            }
        }
    }

    fn connected(&self) -> bool {
        self.0.peer_addr().is_ok()
    }
}

/// Stop-and-wait: one datagram in flight, retransmitted on timeout until acknowledged. With a
/// `stop_at` deadline (a timed session) it stops at the first acknowledgement after it, when nothing
/// is in flight.
pub async fn send_stop_and_wait<P: DatagramPort>(
    port: &mut P,
    session: u32,
    (total_bytes, stop_at): (u64, Option<Instant>),
    msg_size: u32,
    rto: RtoPolicy,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> Result<SendTally> {
    let mut sender = StopAndWaitSender::new(total_bytes, msg_size, rto);
    let mut datagram = vec![0u8; HEADER_LEN + msg_size as usize];
    let mut ack = [0u8; 64];
    let mut tally = SendTally::default();
    let mut failures = 0u32;
    let started = Instant::now();
    loop {
        while let Some(tx) = sender.poll_transmit(Instant::now()) {
            Header {
                kind: Kind::Data,
                retransmit: tx.retransmit,
                session,
                seq: tx.seq,
            }
            .write_to(&mut datagram)
            .context("datagram buffer too small")?;
            datagram::write_timestamp(
                &mut datagram[HEADER_LEN..HEADER_LEN + tx.len as usize],
                micros_since(started),
            );
            tally.send_calls += 1;
            match port.send(&datagram[..HEADER_LEN + tx.len as usize]).await {
                Ok(_) => tally.datagrams += 1,
                Err(e) if port.connected() && port_closed(&e) => {
                    return Err(e).context(PORT_CLOSED);
                }
                // The timer will retransmit it; the error is counted, not hidden.
                Err(_) => tally.send_errors += 1,
            }
        }
        if sender.is_done() {
            break;
        }
        let Some(deadline) = sender.poll_timeout() else {
            bail!("stop-and-wait sender has nothing outstanding but is not done");
        };
        match port.recv_until(&mut ack, deadline).await {
            Some(Ok(n)) => {
                let Ok(h) = Header::decode(&ack[..n]) else {
                    continue;
                };
                if h.kind != Kind::Ack || h.session != session {
                    continue;
                }
                let now = Instant::now();
                if let AckOutcome::Acked { rtt } = sender.handle_ack(h.seq, now) {
                    failures = 0;
                    progress.store(sender.bytes_acked(), Ordering::Relaxed);
                    if let Some(rtt) = rtt {
                        rtt_ns.saturating_record(duration_ns(rtt));
                    }
                    if stop_at.is_some_and(|d| now >= d) {
                        break;
                    }
                }
            }
            // ICMP "port unreachable" from an earlier datagram surfaces here on a connected
            // socket: the server's port is closed.
            Some(Err(e)) if port.connected() && port_closed(&e) => {
                return Err(e).context(PORT_CLOSED);
            }
            Some(Err(e)) if e.kind() == io::ErrorKind::ConnectionAborted => {
                return Err(e).context("stop-and-wait stopped");
            }
            Some(Err(e)) => {
                tally.send_errors += 1;
                failures += 1;
                if failures >= MAX_CONSECUTIVE_FAILURES {
                    return Err(e).context("the server does not answer UDP");
                }
            }
            None => {
                sender.handle_timeout(Instant::now());
                failures += 1;
                if failures >= MAX_CONSECUTIVE_FAILURES {
                    bail!(
                        "no acknowledgement after {failures} timeouts in a row (message {} of {}); is the path dropping everything?",
                        sender.messages_acked() + 1,
                        message_count(total_bytes, msg_size)
                    );
                }
            }
        }
    }
    tally.messages = sender.messages_acked();
    tally.bytes = sender.bytes_acked();
    tally.retransmissions = sender.retransmissions();
    tally.timeouts = sender.timeouts();
    Ok(tally)
}

/// Microseconds since `t`, modulo 2^32: the timestamp data datagrams carry.
fn micros_since(t: Instant) -> u32 {
    // Truncation is the point: the receiver only takes differences of consecutive stamps.
    t.elapsed().as_micros() as u32
}

/// What a sender says when the server's UDP port turned out closed.
const PORT_CLOSED: &str = "the server is gone: its UDP port is closed (ICMP port unreachable)";

/// Whether `e` is the kernel's report of an ICMP port unreachable on a connected socket.
fn port_closed(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ECONNREFUSED)
}

/// Whether a send failed because the kernel will not segment this batch (a datagram larger
/// than the path MTU, or no offload on the device).
fn refuses_segmentation(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMSGSIZE) | Some(libc::EINVAL) | Some(libc::EIO)
    )
}

/// Turns path-MTU discovery off on `socket`, so the kernel fragments datagrams larger than
/// the path MTU instead of refusing them (Linux; elsewhere the OS default stays).
#[cfg(target_os = "linux")]
fn allow_fragmentation(socket: &UdpSocket, ipv6: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (level, name, value) = if ipv6 {
        (
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU_DISCOVER,
            libc::IPV6_PMTUDISC_DONT,
        )
    } else {
        (
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DONT,
        )
    };
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a valid c_int for the duration
    // of the call, on a descriptor this socket owns.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn allow_fragmentation(_: &UdpSocket, _: bool) -> io::Result<()> {
    Ok(())
}

/// Sleeps until sending `bytes_sent` at `rate` since `from` (time, bytes then) is due; when
/// more than [`most_catch_up`] behind, counts from now minus that instead.
async fn pace(from: &mut (Instant, u64), bytes_sent: u64, rate: BitRate) {
    let (since, base) = *from;
    let due = Duration::from_secs_f64(bytes_sent.saturating_sub(base) as f64 * 8.0 / rate.0 as f64);
    let at = since + due;
    let now = Instant::now();
    if at > now {
        tokio::time::sleep_until(at.into()).await;
    } else {
        let catch_up = most_catch_up(rate.0);
        if now.duration_since(at) > catch_up {
            *from = (now.checked_sub(catch_up).unwrap_or(now), bytes_sent);
        }
    }
}
