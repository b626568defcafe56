//! UDP stop-and-wait, the sender's side: one datagram in flight, retransmitted on timeout
//! until acknowledged, driving the core `StopAndWaitSender` machine with real time, over a
//! [`DatagramPort`]: a client's socket on a thread of its own, sleeping in `recv`
//! ([`BlockingPort`]) or spinning on it (`--busy-poll`, [`SpinPort`]), or a reversed session's
//! shared server socket. Every send error is counted, none swallowed.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use wirebench_core::machine::saw::{AckOutcome, RtoPolicy, StopAndWaitSender};
use wirebench_core::vocab::plan::Messages;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::datagram::{self, Header, Kind, HEADER_LEN};

use super::{port_closed, MAX_CONSECUTIVE_FAILURES, PORT_CLOSED};
use crate::engine::alarm::RecvAlarm;
use crate::engine::SendTally;
use crate::transport::syscall;

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
    /// Between round trips, outside the time any of them is measured over: the next wait's
    /// deadline will be no earlier than `earliest`, so a port can get its timer ready now.
    fn ready_for(&mut self, _earliest: Instant) -> io::Result<()> {
        Ok(())
    }
}

/// The busy-poll port: a non-blocking std socket spun on in a thread of its own (driven with
/// `engine::stream::blocking::block_on`); it never sleeps, so no wake-up is paid per round trip.
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

/// The sleeping port: a blocking std socket on a thread of its own (driven with
/// `engine::stream::blocking::block_on`), which waits in `recv` itself and wakes when the
/// acknowledgement lands, one wake-up per round trip and no hop through the runtime, as
/// sockperf waits; the receive has no kernel timeout, a [`RecvAlarm`] keeps the deadline.
/// [`BlockingPort::stopper`] gives what stops it from another thread: its
/// wait then fails with `ConnectionAborted`, which ends [`send_stop_and_wait`].
#[derive(Debug)]
pub struct BlockingPort {
    socket: std::net::UdpSocket,
    halt: Arc<AtomicBool>,
    /// Interrupts the receive at its deadline; made by the thread that receives, at its first
    /// receive.
    alarm: Option<RecvAlarm>,
}

impl BlockingPort {
    /// Makes `socket` (connected to the server) blocking.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<BlockingPort> {
        socket.set_nonblocking(false)?;
        Ok(BlockingPort {
            socket,
            halt: Arc::new(AtomicBool::new(false)),
            alarm: None,
        })
    }

    /// What stops the port from another thread: it raises the flag and shuts the socket's
    /// receiving side, which wakes a `recv` at once.
    pub fn stopper(&self) -> io::Result<impl Fn() + Send + 'static> {
        let (halt, socket) = (Arc::clone(&self.halt), self.socket.try_clone()?);
        Ok(move || {
            halt.store(true, Ordering::Relaxed);
            crate::transport::net::wake_reader(&socket);
        })
    }
}

/// The error that ends a wait once the port's stopper has run.
fn stopped(halt: &AtomicBool) -> Option<io::Result<usize>> {
    halt.load(Ordering::Relaxed).then(|| {
        Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "stopped: the server is gone",
        ))
    })
}

impl DatagramPort for BlockingPort {
    async fn send(&mut self, datagram: &[u8]) -> io::Result<usize> {
        syscall::send_through_signals(&self.socket, datagram, 0)
    }

    async fn recv_until(&mut self, buf: &mut [u8], deadline: Instant) -> Option<io::Result<usize>> {
        let alarm = match &mut self.alarm {
            Some(alarm) => alarm,
            slot => match RecvAlarm::for_this_thread() {
                Ok(alarm) => slot.insert(alarm),
                Err(e) => return Some(Err(e)),
            },
        };
        // The deadline stays set after the wait: the next wait, microseconds later, moves it
        // later, which usually leaves the timer where it is. (Clearing it would cost a system
        // call now and another at the next wait.)
        if let Err(e) = alarm.set(Some(deadline)) {
            return Some(Err(e));
        }
        // The first receive starts without a look at the clock: it would be a clock read
        // inside the round trip being timed, and the deadline (a retransmission timeout, 2 ms
        // or more after the send) is the alarm's to catch. After an interruption the clock
        // says whether it was the deadline.
        let mut again = false;
        loop {
            if let Some(stopped) = stopped(&self.halt) {
                return Some(stopped);
            }
            if again {
                let now = Instant::now();
                // The timer fired: at this deadline, or short of it (the exchange paused),
                // and then the set below moves it there.
                alarm.interrupted(now);
                if now >= deadline {
                    return None;
                }
                if let Err(e) = alarm.set(Some(deadline)) {
                    return Some(Err(e));
                }
            }
            again = true;
            match syscall::recv(&self.socket, buf, 0) {
                // A shut-down socket reads 0 bytes: look at the flag.
                Ok(0) if self.halt.load(Ordering::Relaxed) => {}
                // The alarm (or another signal): look at the deadline.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                other => return Some(other),
            }
        }
    }

    fn connected(&self) -> bool {
        self.socket.peer_addr().is_ok()
    }

    fn ready_for(&mut self, earliest: Instant) -> io::Result<()> {
        // The timer set a little before the next deadline: the wait's own `set` then finds it
        // in place and makes no system call inside the round trip it times.
        match &mut self.alarm {
            Some(alarm) => alarm.set(Some(earliest)),
            None => Ok(()),
        }
    }
}

/// Stop-and-wait: one datagram in flight, retransmitted on timeout until acknowledged. With a
/// `stop_at` deadline (a timed session) it stops at the first acknowledgement after it, when nothing
/// is in flight.
pub async fn send_stop_and_wait<P: DatagramPort>(
    port: &mut P,
    session: u32,
    (plan, stop_at): (Messages, Option<Instant>),
    rto: RtoPolicy,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> Result<SendTally> {
    let mut sender = StopAndWaitSender::new(plan.total_bytes, plan.msg_size, rto);
    let mut datagram = vec![0u8; HEADER_LEN + plan.msg_size as usize];
    let mut ack = [0u8; 64];
    let mut tally = SendTally::default();
    let mut failures = 0u32;
    let started = Instant::now();
    loop {
        // One clock read serves the timer check and the datagram's send stamp.
        let now = Instant::now();
        while let Some(tx) = sender.poll_transmit(now) {
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
                micros_between(started, now),
            );
            tally.send_calls += 1;
            match port.send(&datagram[..HEADER_LEN + tx.len as usize]).await {
                Ok(_) => tally.datagrams += 1,
                Err(e) if port.connected() && port_closed(&e) => {
                    return Err(e).context(PORT_CLOSED);
                }
                // Larger than the path MTU under --dont-fragment: no retransmission fits.
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    return Err(e).context(crate::transport::net::too_large_for_the_path(
                        tx.len, HEADER_LEN,
                    ));
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
                    // The next send comes after this clock read and keeps this timeout.
                    if !sender.is_done() {
                        port.ready_for(now + sender.current_rto())
                            .context("setting the retransmission timer")?;
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
                        plan.count()
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
fn micros_between(start: Instant, now: Instant) -> u32 {
    // Truncation is the point: the receiver only takes differences of consecutive stamps.
    now.saturating_duration_since(start).as_micros() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A port stopped from another thread while it waits for an acknowledgement that never
    /// comes returns at once with `ConnectionAborted`, long before its deadline.
    #[test]
    fn a_stopped_port_wakes_at_once() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(silent.local_addr().unwrap()).unwrap();
        let mut port = BlockingPort::new(socket).unwrap();
        let stop = port.stopper().unwrap();
        let waiter = std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            let started = Instant::now();
            let got = crate::engine::stream::blocking::block_on(
                port.recv_until(&mut buf, started + Duration::from_secs(60)),
            );
            (got.map(|r| r.map_err(|e| e.kind())), started.elapsed())
        });
        stop();
        let (got, waited) = waiter.join().unwrap();
        assert_eq!(got, Some(Err(io::ErrorKind::ConnectionAborted)));
        assert!(waited < Duration::from_secs(30), "{waited:?}");
    }

    /// A wait for an acknowledgement that never comes ends at its deadline, to well under the
    /// kernel's 4 ms tick (the receive has no kernel timeout), and a later wait still gets its
    /// datagram.
    #[test]
    fn a_wait_ends_at_its_deadline() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(peer.local_addr().unwrap()).unwrap();
        // A backstop that bounds the test if the alarm fails (the bound below then fails it).
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let to = socket.local_addr().unwrap();
        let mut port = BlockingPort::new(socket).unwrap();
        let mut buf = [0u8; 64];
        for wait in [Duration::from_micros(500), Duration::from_millis(30)] {
            let started = Instant::now();
            let got = crate::engine::stream::blocking::block_on(
                port.recv_until(&mut buf, started + wait),
            );
            let waited = started.elapsed();
            assert!(got.is_none(), "{got:?}");
            assert!(waited >= wait, "{waited:?} < {wait:?}");
            assert!(waited < wait + Duration::from_secs(2), "{waited:?}");
        }
        peer.send_to(b"ack", to).unwrap();
        let got = crate::engine::stream::blocking::block_on(
            port.recv_until(&mut buf, Instant::now() + Duration::from_secs(60)),
        );
        assert_eq!(got.map(|r| r.map_err(|e| e.kind())), Some(Ok(3)));
    }
}
