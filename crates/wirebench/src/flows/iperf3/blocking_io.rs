//! What the iperf3 client's and server's TCP stream threads share: a socket made blocking with
//! calls that give up every [`LOOK_EVERY`] to look at the test's stop, the stop itself, and the
//! payload. A stream on a thread of its own with blocking calls is what iperf3 3.16+ does and
//! what wirebench's own TCP sessions do; on the runtime every stream of a test shared its
//! worker's CPU.

use std::io;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wirebench_core::vocab::plan::Mechanism;

use crate::engine::stream;

/// How long a blocking read, write or pacing sleep lasts at most before it looks at the stop.
pub(super) const LOOK_EVERY: Duration = Duration::from_millis(5);

/// Whether the test stopped (or was dropped, taking its stop with it).
pub(super) fn stopped(stop: &watch::Receiver<bool>) -> bool {
    stop.has_changed().is_err() || *stop.borrow()
}

/// Whether an I/O error only says that the blocking call's time ran out.
pub(super) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Makes the socket blocking, each read and write giving up after [`LOOK_EVERY`].
pub(super) fn make_blocking(s: &TcpStream) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(LOOK_EVERY))?;
    s.set_write_timeout(Some(LOOK_EVERY))
}

/// Sleeps until `until`, looking at the stop every [`LOOK_EVERY`]; false if the test stopped.
pub(super) fn sleep_unless_stopped(until: Instant, stop: &watch::Receiver<bool>) -> bool {
    loop {
        if stopped(stop) {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(LOOK_EVERY));
    }
}

/// A block of `len` bytes that is not all zeros, so compressing links do not flatter the
/// figures.
pub(super) fn payload(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
        .collect()
}

/// What one read of a TCP stream of `len`-byte blocks asks for: what wirebench's own streaming
/// receiver reads ([`stream::receive_buffer_len`]: one 64 KiB segment for iperf3's 128 KiB
/// blocks and other large ones), at most [`MAX_STREAM_READ`].
pub(super) fn tcp_read_len(len: usize) -> usize {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    stream::receive_buffer_len(Mechanism::Stream, len).min(MAX_STREAM_READ)
}

/// The largest read buffer of one iperf3 stream: a test may run 128 streams, each with a
/// buffer of its own.
const MAX_STREAM_READ: usize = 128 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_blocks_are_read_a_segment_at_a_time() {
        assert_eq!(tcp_read_len(128 * 1024), 64 * 1024);
        assert_eq!(tcp_read_len(64 * 1024), 64 * 1024);
        assert_eq!(tcp_read_len(64 * 1024 - 1), 128 * 1024);
        assert_eq!(tcp_read_len(1024), 128 * 1024);
    }

    #[test]
    fn a_dropped_test_counts_as_stopped() {
        let (tx, rx) = watch::channel(false);
        assert!(!stopped(&rx));
        drop(tx);
        assert!(stopped(&rx));
    }

    #[test]
    fn a_pacing_sleep_ends_early_when_the_test_stops() {
        let (tx, rx) = watch::channel(false);
        let _ = tx.send(true);
        let started = Instant::now();
        assert!(!sleep_unless_stopped(
            started + Duration::from_secs(60),
            &rx
        ));
        assert!(started.elapsed() < Duration::from_secs(30));
    }
}
