//! When a TCP sender's data was delivered: the moment the receiver's acknowledgement of the
//! last byte written reached the sender's kernel, read from TCP_INFO rather than from any
//! message of the peer, so that neither host's scheduling moves it (a busy machine delays the
//! programs, not the kernel's acknowledgement processing), and the receiver's part in it:
//! acknowledging its last byte at once. Owns that one reading; the transfer time built on it
//! is defined in `wirebench_core::record::headline`.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Shortest pause between two looks at TCP_INFO (a loopback round trip is a few µs; the
/// sleep itself takes about this long).
const MIN_POLL: Duration = Duration::from_micros(50);

/// Longest pause between two looks: the date of an acknowledgement is never more than this
/// late when the watching thread runs on time (and the kernel's own date corrects it when it
/// does not).
const MAX_POLL: Duration = Duration::from_millis(1);

/// What a sender's peer will have acknowledged once every byte written so far has arrived (a
/// count of `tcpi_bytes_acked`), and when that was read: the last byte cannot have been
/// acknowledged much before its write returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckTarget {
    bytes: u64,
    written_at: Instant,
}

/// The target of everything written on `socket` so far: the bytes acknowledged plus the bytes
/// still queued (sent or not, SIOCOUTQ), read until no acknowledgement slipped in between the
/// two readings. Call it once the last write returned and before any shutdown: a FIN takes a
/// sequence number of its own and is acknowledged on the receiver's schedule, not on the
/// arrival of the data. `None` where the OS does not say.
#[cfg(target_os = "linux")]
pub fn ack_target(socket: &impl AsRawFd) -> Option<AckTarget> {
    let written_at = Instant::now();
    for _ in 0..16 {
        let before = tcp_info(socket)?.tcpi_bytes_acked;
        let queued = send_queue_bytes(socket)?;
        let after = tcp_info(socket)?.tcpi_bytes_acked;
        if before == after {
            return Some(AckTarget {
                bytes: before + queued,
                written_at,
            });
        }
    }
    None
}

/// TCP_INFO is Linux's; elsewhere the caller times by the server's report.
#[cfg(not(target_os = "linux"))]
pub fn ack_target(_socket: &impl AsRawFd) -> Option<AckTarget> {
    None
}

/// Blocks until the peer has acknowledged `target`, looking at TCP_INFO every
/// [`MIN_POLL`]–[`MAX_POLL`] (an eighth of the smoothed round trip), and returns when that
/// acknowledgement arrived: the kernel's date of the last acknowledgement received
/// (`tcpi_last_ack_recv`, in its ticks of 1–10 ms, so a look delayed by a busy machine is
/// corrected), never earlier than the last look that had not yet seen it (nor than the
/// target's reading: the kernel's tick is coarse). `None` when `stop` is raised first, the
/// connection is closed, or the OS does not say.
#[cfg(target_os = "linux")]
pub fn wait_acknowledged(
    socket: &impl AsRawFd,
    target: AckTarget,
    stop: &AtomicBool,
) -> Option<Instant> {
    // The last moment at which the acknowledgement had not yet arrived (as far as we know).
    let mut floor = target.written_at;
    loop {
        let looked = Instant::now();
        let info = tcp_info(socket)?;
        let seen = Instant::now();
        if info.tcpi_bytes_acked >= target.bytes {
            // The kernel dates it in whole ticks (1–10 ms), right within one: the date corrects
            // a late look, the looks bound it when they came on time.
            let age = Duration::from_millis(u64::from(info.tcpi_last_ack_recv));
            let at = seen.checked_sub(age).unwrap_or(seen);
            return Some(at.max(floor));
        }
        if info.tcpi_state == TCP_CLOSE || stop.load(Ordering::Relaxed) {
            return None;
        }
        floor = looked;
        let pause = Duration::from_micros(u64::from(info.tcpi_rtt) / 8);
        std::thread::sleep(pause.clamp(MIN_POLL, MAX_POLL));
    }
}

/// TCP_INFO is Linux's; elsewhere there is nothing to wait for.
#[cfg(not(target_os = "linux"))]
pub fn wait_acknowledged(
    _socket: &impl AsRawFd,
    _target: AckTarget,
    _stop: &AtomicBool,
) -> Option<Instant> {
    None
}

/// [`wait_acknowledged`] on a blocking thread of its own, for an async caller; dropping it
/// (or its [`Acknowledged::at`] future) stops the thread at its next look.
#[derive(Debug)]
pub struct Acknowledged {
    waiting: tokio::task::JoinHandle<Option<Instant>>,
    stop: Arc<AtomicBool>,
}

impl Acknowledged {
    /// Starts watching `socket` (a handle of the sending socket) for `target`.
    pub fn watch(socket: std::net::TcpStream, target: AckTarget) -> Acknowledged {
        let stop = Arc::new(AtomicBool::new(false));
        let raised = Arc::clone(&stop);
        let waiting =
            tokio::task::spawn_blocking(move || wait_acknowledged(&socket, target, &raised));
        Acknowledged { waiting, stop }
    }

    /// When the target was acknowledged; `None` if that cannot be said.
    pub async fn at(mut self) -> Option<Instant> {
        (&mut self.waiting).await.ok().flatten()
    }
}

impl Drop for Acknowledged {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The receiver's part: acknowledges at once whatever it has read and not yet acknowledged
/// (TCP_QUICKACK), so the acknowledgement of the last byte leaves when the receiver has it,
/// not at its delayed-ACK timer (40 ms or more), which would stop the sender's clock late.
/// Best effort: where the OS refuses, the sender's clock stops at the report instead.
pub fn acknowledge_now(socket: &std::net::TcpStream) {
    #[cfg(target_os = "linux")]
    let _ = socket2::SockRef::from(socket).set_quickack(true);
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}

/// Linux's `TCP_CLOSE` state (include/net/tcp_states.h): the connection is gone.
#[cfg(target_os = "linux")]
const TCP_CLOSE: u8 = 7;

/// The kernel's TCP_INFO of `socket`, when it fills the fields used here (Linux 4.6).
#[cfg(target_os = "linux")]
fn tcp_info(socket: &impl AsRawFd) -> Option<libc::tcp_info> {
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    super::counters::tcp_info_filled_to(socket, needed)
}

/// Bytes written on `socket` and not yet acknowledged (SIOCOUTQ, which is TIOCOUTQ's number).
#[cfg(target_os = "linux")]
fn send_queue_bytes(socket: &impl AsRawFd) -> Option<u64> {
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int through the pointer, which points at `queued`.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (rc == 0).then(|| u64::try_from(queued).ok()).flatten()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn the_acknowledgement_of_the_last_byte_is_dated_between_the_write_and_its_reading() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        let mut sender =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connects");
        let (mut receiver, _) = listener.accept().expect("accepts");
        let nothing_yet = ack_target(&sender).expect("a target");
        let data = vec![7u8; 3 << 20];
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; data.len()];
            receiver.read_exact(&mut got).map(|_| got.len())
        });
        let wrote = Instant::now();
        sender.write_all(&vec![7u8; 3 << 20]).expect("writes");
        let target = ack_target(&sender).expect("a target");
        assert_eq!(
            target.bytes - nothing_yet.bytes,
            3 << 20,
            "every byte written is counted once"
        );
        let stop = AtomicBool::new(false);
        let first_look = Instant::now();
        let acked = wait_acknowledged(&sender, target, &stop).expect("acknowledged");
        let first_took = first_look.elapsed();
        let read = reader.join().expect("reader").expect("reads");
        assert_eq!(read, 3 << 20);
        assert!(wrote <= acked && acked <= Instant::now());
        assert!(target.written_at <= acked);
        // Nothing more to acknowledge: the answer comes at the first look, with the same date
        // within the kernel's tick (at most 10 ms), and within however long either look was
        // kept from the CPU on a busy machine (each date is read inside its call; failed once
        // with the lib tests beside a build).
        let second_look = Instant::now();
        let again = wait_acknowledged(&sender, target, &stop).expect("acknowledged");
        let slack = first_took + second_look.elapsed();
        assert!(
            again.saturating_duration_since(acked) <= Duration::from_millis(10) + slack,
            "{:?} after the first date, the looks took {slack:?}",
            again.saturating_duration_since(acked)
        );
    }

    #[test]
    fn a_raised_stop_ends_the_wait_for_bytes_never_sent() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        let sender =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connects");
        let _receiver = listener.accept().expect("accepts");
        let now = ack_target(&sender).expect("a target");
        let never = AckTarget {
            bytes: now.bytes + 1,
            ..now
        };
        let stop = AtomicBool::new(true);
        assert_eq!(wait_acknowledged(&sender, never, &stop), None);
    }
}
