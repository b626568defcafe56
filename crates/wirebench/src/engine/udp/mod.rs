//! The UDP client data path: one message per datagram behind our 16-byte header. Streaming
//! sends batches with GSO through `quinn::udp` (one `sendmsg` carries up to 64 datagrams);
//! stop-and-wait is `engine::udp::saw`'s.
//!
//! Every send error is counted; none is swallowed. On a connected socket (the client's),
//! ECONNREFUSED — the kernel's report of an ICMP port unreachable — means the server's port is
//! closed: the server is gone, and the sender stops at once instead of retrying.
//!
//! Everything else of UDP's data path is a submodule here: the client's address validation
//! (`hello`), the server's receive lanes (`lanes`) and their batched receives (`recv`), a
//! session's receiving side (`receiver`), the client's side of a reversed session (`reverse`)
//! and stop-and-wait's sender (`saw`).

pub mod batch_recv;
pub mod hello;
pub mod lanes;
pub mod nap;
pub mod own_socket;
pub mod receiver;
pub mod reverse;
pub mod saw;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use quinn::udp::{Transmit, UdpSocketState};
use socket2::SockRef;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use wirebench_core::machine::pacing::most_catch_up;
use wirebench_core::vocab::plan::Messages;
use wirebench_core::vocab::units::BitRate;
use wirebench_core::wire::datagram::{self, Header, Kind, HEADER_LEN};
use wirebench_core::wire::proto::DataPathInfo;

use super::SendTally;

pub use crate::transport::net::UDP_SOCKET_BUFFER;

/// Largest UDP payload one GSO `sendmsg` may carry in total (IPv4 limit, the smaller one).
const GSO_MAX_BYTES: usize = datagram::MAX_UDP_PAYLOAD_V4;

/// After a receive error on a server's blocking UDP socket (no timeout, signals retried, a stop
/// wakes it empty: an error is a datagram socket's one-off, an allocation that failed), sleeps
/// 1 ms per such error in a row, at most 100 ms, so that one that repeats cannot spin the
/// receiving thread. `failures` counts them; a good receive sets it back to 0.
pub fn back_off(failures: &mut u32) {
    *failures = failures.saturating_add(1);
    std::thread::sleep(Duration::from_millis(u64::from((*failures).min(100))));
}

/// Consecutive errors or timeouts after which the client gives up on the server.
pub(super) const MAX_CONSECUTIVE_FAILURES: u32 = 20;

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
        // IP layer fragment what does not fit, unless --dont-fragment asks it not to.
        crate::transport::net::set_fragmentation(
            &socket,
            server.is_ipv6(),
            crate::transport::net::client_may_fragment(),
        )
        .context("while setting IP fragmentation on the UDP socket")?;
        // Best effort: without it a dropped batch looks sent and counts as the path's loss.
        let _ = report_host_drops(&socket, server.is_ipv6());
        Ok(UdpClient {
            socket,
            state,
            server,
        })
    }

    /// What this socket runs with: buffers, and the most datagrams one `sendmsg` may carry
    /// (1 without GSO). Busy-poll, the caller's choice, is left for it to set.
    pub fn data_path(&self) -> DataPathInfo {
        let socket = SockRef::from(&self.socket);
        let (recv, send) = crate::transport::net::buffer_sizes(&socket);
        DataPathInfo {
            recv_buffer: recv as u64,
            send_buffer: send as u64,
            local_addr: crate::transport::net::local_addr(&socket),
            gso_segments: u32::try_from(self.state.max_gso_segments()).unwrap_or(u32::MAX),
            ..DataPathInfo::default()
        }
    }

    /// Streaming: sends every message once, as fast as the socket allows or paced to `rate`;
    /// with a `deadline` (a timed session), no batch after it.
    pub async fn send_stream(
        &self,
        session: u32,
        (plan, deadline): (Messages, Option<Instant>),
        rate: Option<BitRate>,
        progress: &AtomicU64,
    ) -> Result<SendTally> {
        let to = DatagramSender {
            socket: SendSocket::Runtime(&self.socket),
            state: &self.state,
            destination: self.server,
        };
        to.send_stream(session, (plan, deadline), rate, progress)
            .await
    }

    /// The async socket (stop-and-wait).
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// The socket taken off the runtime, for a data-path thread of its own (busy-poll
    /// stop-and-wait spins on it; ping makes it blocking); it is still non-blocking.
    pub fn into_std(self) -> io::Result<std::net::UdpSocket> {
        // Those threads read with a plain `recv`, so the receive metadata quinn::udp asked for
        // (destination address, TOS) is never read; asked for, the kernel still prepares it
        // for every datagram: about 0.1 µs of a round trip.
        let _ = drop_receive_metadata(&self.socket, self.server.is_ipv6());
        self.socket.into_std()
    }

    /// The GSO/GRO state of the socket.
    pub fn state(&self) -> &UdpSocketState {
        &self.state
    }

    /// The socket taken off the runtime and made blocking, for streaming on a thread of its
    /// own ([`SendSocket::Blocking`]).
    pub fn into_blocking(self) -> io::Result<BlockingUdpClient> {
        let (state, server) = (self.state, self.server);
        let _ = drop_receive_metadata(&self.socket, server.is_ipv6());
        let socket = self.socket.into_std()?;
        socket.set_nonblocking(false)?;
        Ok(BlockingUdpClient {
            socket,
            state,
            server,
        })
    }
}

/// The client's connected UDP socket, blocking, for a streaming sender on a thread of its own.
#[derive(Debug)]
pub struct BlockingUdpClient {
    socket: std::net::UdpSocket,
    state: UdpSocketState,
    server: SocketAddr,
}

impl BlockingUdpClient {
    /// Its sender: [`DatagramSender::send_stream`] driven on this thread (`engine::stream::blocking::
    /// block_on`), whose sends block and whose pacing sleeps the thread.
    pub fn sender(&self) -> DatagramSender<'_> {
        DatagramSender {
            socket: SendSocket::Blocking(&self.socket),
            state: &self.state,
            destination: self.server,
        }
    }

    /// A second handle on the socket, to stop the sender: shutting it down fails its next send.
    pub fn stopper(&self) -> io::Result<std::net::UdpSocket> {
        self.socket.try_clone()
    }
}

/// The socket a [`DatagramSender`] sends on.
#[derive(Debug, Clone, Copy)]
pub enum SendSocket<'a> {
    /// The runtime's, waited on for writability (the server's shared socket).
    Runtime(&'a UdpSocket),
    /// A blocking one on a thread of its own (the client's streaming socket of a run's only
    /// flow): a full send buffer sleeps the `sendmsg` in the kernel, and no runtime worker is
    /// woken each time the buffer drains. On 2 vCPUs, 1472 B unpaced for 3 s: the client's
    /// CPU per GB 0.25 → 0.14-0.16 s (iperf3 3.21 --gsro: 0.17), goodput 0.79 → 1.03-1.22 of
    /// iperf3 --gsro's (bench/compare.py udp1472_P1, three runs).
    Blocking(&'a std::net::UdpSocket),
}

impl SendSocket<'_> {
    /// Whether the socket is connected (only then are its errors about its one peer).
    fn connected(&self) -> bool {
        match self {
            SendSocket::Runtime(s) => s.peer_addr().is_ok(),
            SendSocket::Blocking(s) => s.peer_addr().is_ok(),
        }
    }
}

/// A UDP socket with `quinn::udp`'s GSO-capable state and where its datagrams go: the client's
/// connected socket, or the server's shared socket sending to a reversed session's client.
#[derive(Debug, Clone, Copy)]
pub struct DatagramSender<'a> {
    /// The socket.
    pub socket: SendSocket<'a>,
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
        (plan, deadline): (Messages, Option<Instant>),
        rate: Option<BitRate>,
        progress: &AtomicU64,
    ) -> Result<SendTally> {
        let msg_size = plan.msg_size;
        let segment = HEADER_LEN + msg_size as usize;
        let most_per_call = (GSO_MAX_BYTES / segment).max(1);
        // One buffer for the whole run: headers are rewritten in place, payload stays zero.
        let mut batch =
            vec![0u8; segment * most_per_call.min(self.state.max_gso_segments().max(1))];
        let count = plan.count();
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
        let connected = self.socket.connected();
        // Where pacing counts from: (time, bytes sent by then).
        let mut pace_from = (started, 0u64);
        while next < count {
            let per_call = most_per_call
                .min(gso_cap)
                .min(self.state.max_gso_segments())
                .max(1)
                .min(batch.len() / segment);
            let n = (count - next).min(per_call as u64);
            // One clock read per batch: the datagrams of one sendmsg leave together.
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                break;
            }
            let sent_us = now.duration_since(started).as_micros() as u32;
            let (len, payload) = fill_batch(&mut batch, (session, next, n), plan, sent_us)?;
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
                // The host dropped the batch (its device queue was full; IP_RECVERR makes the
                // kernel say so instead of counting it in SndbufErrors alone): numbered, not
                // sent, and not sent again (the queue drops as much as ever).
                Err(e) if host_dropped(&e) => {
                    failures = 0;
                    tally.send_errors += 1;
                    tally.not_sent += n;
                    tally.messages += n;
                    tally.bytes += payload;
                    progress.store(tally.bytes, Ordering::Relaxed);
                    next += n;
                }
                Err(e) if n > 1 && refuses_segmentation(&e) => {
                    tally.send_errors += 1;
                    gso_cap = 1;
                }
                // One datagram larger than the path MTU, with fragmenting forbidden
                // (--dont-fragment): sending it again cannot help.
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    return Err(e).context(crate::transport::net::too_large_for_the_path(
                        msg_size, HEADER_LEN,
                    ));
                }
                Err(e) => {
                    // Counted, then the same batch is tried again: a refused send is not a sent datagram.
                    tally.send_errors += 1;
                    failures += 1;
                    if failures >= MAX_CONSECUTIVE_FAILURES {
                        return Err(e).context("UDP sends keep failing");
                    }
                    match self.socket {
                        SendSocket::Runtime(_) => tokio::task::yield_now().await,
                        SendSocket::Blocking(_) => std::thread::yield_now(),
                    }
                }
            }
            if let Some(rate) = rate {
                let blocking = matches!(self.socket, SendSocket::Blocking(_));
                pace(&mut pace_from, tally.bytes, rate, blocking).await;
            }
        }
        Ok(tally)
    }

    /// Sends one (possibly segmented) transmit, waiting for writability; returns real errors
    /// (`try_send`, unlike quinn's `send`, swallows none).
    async fn send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        match self.socket {
            SendSocket::Runtime(socket) => {
                socket
                    .async_io(Interest::WRITABLE, || {
                        self.state.try_send(socket.into(), transmit)
                    })
                    .await
            }
            SendSocket::Blocking(socket) => loop {
                match self.state.try_send(socket.into(), transmit) {
                    // Only if the socket were non-blocking after all: give the CPU away.
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                    done => return done,
                }
            },
        }
    }
}

/// What a sender says when the server's UDP port turned out closed.
pub(super) const PORT_CLOSED: &str =
    "the server is gone: its UDP port is closed (ICMP port unreachable)";

/// Writes messages `next` .. `next + n` of session `session` into `batch`, one segment each,
/// stamped `sent_us`: their header and timestamp (the rest of each stays as it was). Returns
/// the bytes the batch spans and the payload it carries.
fn fill_batch(
    batch: &mut [u8],
    (session, next, n): (u32, u64, u64),
    plan: Messages,
    sent_us: u32,
) -> Result<(usize, u64)> {
    let segment = HEADER_LEN + plan.msg_size as usize;
    let (mut len, mut payload) = (0usize, 0u64);
    for k in 0..n {
        let seq = next + k;
        let msg_len = plan.len_of(seq) as usize;
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
    Ok((len, payload))
}

/// Whether a send failed because the host dropped what it was given (a full device queue):
/// Linux says so only to a socket with IP_RECVERR set (see [`report_host_drops`]).
fn host_dropped(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Whether `e` is the kernel's report of an ICMP port unreachable on a connected socket.
pub(super) fn port_closed(e: &io::Error) -> bool {
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

/// Asks the kernel to report a datagram its host dropped on the way out (a full device
/// queue) as a send error, `ENOBUFS`, instead of counting it in `SndbufErrors` alone and
/// saying it was sent (IP_RECVERR; it also reports ICMP errors, which a connected socket's
/// sends see anyway). Linux; elsewhere nothing changes.
#[cfg(target_os = "linux")]
fn report_host_drops(socket: &UdpSocket, ipv6: bool) -> io::Result<()> {
    let (level, name) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
    } else {
        (libc::IPPROTO_IP, libc::IP_RECVERR)
    };
    crate::transport::net::set_int_option(socket, level, name, 1)
}

/// Undoes the receive metadata `UdpSocketState::new` turns on: the destination address
/// (`IP_PKTINFO`) and the TOS byte (`IP_RECVTOS`), and their IPv6 forms. Linux; elsewhere
/// nothing changes.
#[cfg(target_os = "linux")]
fn drop_receive_metadata(socket: &UdpSocket, ipv6: bool) -> io::Result<()> {
    use crate::transport::net::set_int_option;
    let options: &[(libc::c_int, libc::c_int)] = if ipv6 {
        &[
            (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO),
            (libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS),
        ]
    } else {
        &[
            (libc::IPPROTO_IP, libc::IP_PKTINFO),
            (libc::IPPROTO_IP, libc::IP_RECVTOS),
        ]
    };
    options
        .iter()
        .try_for_each(|&(level, name)| set_int_option(socket, level, name, 0))
}

#[cfg(not(target_os = "linux"))]
fn drop_receive_metadata(_: &UdpSocket, _: bool) -> io::Result<()> {
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn report_host_drops(_: &UdpSocket, _: bool) -> io::Result<()> {
    Ok(())
}

/// Sleeps until sending `bytes_sent` at `rate` since `from` (time, bytes then) is due (the
/// thread itself when `blocking`, the task otherwise); when more than [`most_catch_up`]
/// behind, counts from now minus that instead.
async fn pace(from: &mut (Instant, u64), bytes_sent: u64, rate: BitRate, blocking: bool) {
    let (since, base) = *from;
    let due = Duration::from_secs_f64(bytes_sent.saturating_sub(base) as f64 * 8.0 / rate.0 as f64);
    let at = since + due;
    let now = Instant::now();
    if at > now && blocking {
        std::thread::sleep(at - now);
    } else if at > now {
        tokio::time::sleep_until(at.into()).await;
    } else {
        let catch_up = most_catch_up(rate.0);
        if now.duration_since(at) > catch_up {
            *from = (now.checked_sub(catch_up).unwrap_or(now), bytes_sent);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// An integer socket option, read back.
    fn int_option(socket: &impl AsRawFd, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut value: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes into `value` and says how many.
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                level,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "getsockopt: {}", io::Error::last_os_error());
        value
    }

    #[tokio::test]
    async fn a_socket_taken_off_the_runtime_asks_for_no_receive_metadata() {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let client = UdpClient::connect(server.local_addr().unwrap(), None)
            .await
            .unwrap();
        // quinn::udp asked for both, so the test below can fail.
        assert_eq!(
            int_option(&client.socket, libc::IPPROTO_IP, libc::IP_PKTINFO),
            1
        );
        assert_eq!(
            int_option(&client.socket, libc::IPPROTO_IP, libc::IP_RECVTOS),
            1
        );
        let socket = client.into_std().unwrap();
        assert_eq!(int_option(&socket, libc::IPPROTO_IP, libc::IP_PKTINFO), 0);
        assert_eq!(int_option(&socket, libc::IPPROTO_IP, libc::IP_RECVTOS), 0);
        // Still connected: a datagram goes to the server.
        socket.send(b"x").unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(server.recv(&mut buf).unwrap(), 1);
    }
}
