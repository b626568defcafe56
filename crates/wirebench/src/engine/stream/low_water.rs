//! Batches a fast TCP receiver's wake-ups: once a stream has shown that it runs at a gigabit
//! or more, a blocking read sleeps until [`BATCH`] bytes wait (SO_RCVLOWAT) instead of waking
//! at every segment.
//!
//! Why: a receiver that keeps up sleeps between segments, and each wake-up costs the *sender*
//! (whose CPU delivers loopback segments, and on a VM sends the interrupt that wakes the
//! receiver's CPU). The sender is the busy end of a stream, so fewer wake-ups move more bytes.
//! Measured on 2 vCPUs (kernel 6.18, ends on two CPUs, `-t 3`): 128 KiB messages +15–20 %,
//! iperf3's client against our server +10–14 %, our `-R` client against `iperf3 -s` +15 %.
//!
//! Why it stops when the reader falls behind: see [`LowWater::after_read`]; why not when the
//! reader shares its CPU with its test's other streams: see [`LowWater::by_turns`].
//!
//! Why only once fast: a batch holds its first bytes back until the rest arrives. At a gigabit
//! a batch is about a millisecond, so the first byte's time (read before batching starts), the
//! interval counts and the last byte's time ([`LowWater::before_read`] ends batching for a
//! tail shorter than two batches) stay as exact as without it; a slow link never batches.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::transport::net;

/// How many bytes a batched read waits for: two loopback (or GRO) segments.
pub const BATCH: usize = 128 * 1024;

/// Bytes left queued after a batched read that say the reader has fallen behind the stream:
/// batching then ends for good (see [`LowWater::after_read`]).
const BEHIND: usize = 8 * BATCH;

/// How much of the stream one look at its speed covers.
const PROBE_BYTES: u64 = 1 << 20;

/// The longest [`PROBE_BYTES`] may take for the stream to count as fast: 1 MiB in 8 ms is
/// about a gigabit, where a batch waits about a millisecond at most.
const PROBE_TIME: Duration = Duration::from_millis(8);

/// One receiving socket's batching: off, watching the stream's speed, or batching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LowWater {
    /// Reads wake at the first byte (the socket's default), and stay so.
    Off,
    /// Reads wake at the first byte; `bytes` arrived since `since`, the start of this look.
    Probing {
        /// When this look began (None: before the first read).
        since: Option<Instant>,
        /// Bytes read since then.
        bytes: u64,
        /// Batching, once it starts, is [`LowWater::BatchingByTurns`].
        by_turns: bool,
    },
    /// Reads wait for [`BATCH`] bytes, until the reader falls behind.
    Batching,
    /// Reads wait for [`BATCH`] bytes, however far behind the reader is ([`LowWater::by_turns`]).
    BatchingByTurns,
}

impl LowWater {
    /// Batching that starts once the stream is fast, if `enabled`; never, if not.
    pub fn new(enabled: bool) -> LowWater {
        if enabled {
            LowWater::Probing {
                since: None,
                bytes: 0,
                by_turns: false,
            }
        } else {
            LowWater::Off
        }
    }

    /// Batching that starts once the stream is fast and goes on when the reader falls behind:
    /// for a reader that shares its CPU with other receiving streams of its test (an iperf3
    /// test's `-P N` on our server). Such a reader is behind by turns — its queue fills while
    /// the others read — which the check of [`LowWater::after_read`] cannot tell from a reader
    /// that stays behind, and fewer wake-ups save most where one CPU serves several readers.
    /// Measured on 2 vCPUs (iperf3 3.21 `-P 4` against `server --iperf3`, ends on two CPUs,
    /// `bench/compare.py iperf3_server_P4`, 3 pairs each): 0.62–0.68 of iperf3's own server
    /// with the check (four runs), 0.83–1.07 without it (four runs).
    pub fn by_turns() -> LowWater {
        LowWater::Probing {
            since: None,
            bytes: 0,
            by_turns: true,
        }
    }

    /// Call before a read that may take at most `left` more bytes of the stream: a batch that
    /// could not fill would wait for bytes that never come, so batching ends here for good.
    /// A read may copy almost a batch before it sleeps, and the kernel wakes it only when a
    /// whole batch *more* waits, so the stream must still hold two batches.
    pub fn before_read(&mut self, socket: &impl AsRawFd, left: usize) {
        if left < 2 * BATCH {
            self.stop(socket);
        }
    }

    /// Call after a read that returned `n` bytes: a stream found fast starts batching, and a
    /// batching reader that has fallen behind stops. The clock is read only while the stream's
    /// speed is being looked at.
    ///
    /// Why stop: a read waiting in the kernel for a batch holds the socket, so segments that
    /// arrive meanwhile go to its backlog and the *receiving* CPU processes them when the read
    /// lets go. Where the receiver has CPU to spare that is the better split (session 12's VM:
    /// +15–20 %), but a receiver that falls behind then stays behind with its queue full: on
    /// session 15's VM, 128 KiB messages ran at 34 Gbit/s batching against 49 without, the
    /// server's receive queue full (2.5 of 2.7 MB) against empty. More than [`BEHIND`] still
    /// queued after a read says so (one `FIONREAD` a batched read, a 128 KiB read's cost
    /// against a copy of 128 KiB).
    pub fn after_read(&mut self, socket: &impl AsRawFd, n: usize) {
        self.after_read_within(socket, n, BEHIND);
    }

    /// [`LowWater::after_read`], with more than `behind` bytes still queued meaning behind.
    fn after_read_within(&mut self, socket: &impl AsRawFd, n: usize, behind: usize) {
        match self {
            LowWater::Probing { .. } => self.after_read_at(socket, n, Instant::now()),
            LowWater::Batching => self.stop_if_behind(socket, behind),
            LowWater::BatchingByTurns | LowWater::Off => {}
        }
    }

    /// Ends batching for good if more than `behind` bytes are still queued on `socket`.
    fn stop_if_behind(&mut self, socket: &impl AsRawFd, behind: usize) {
        if net::bytes_queued(socket).is_some_and(|queued| queued > behind) {
            self.stop(socket);
        }
    }

    /// [`LowWater::after_read`] for a read that returned at `now`.
    fn after_read_at(&mut self, socket: &impl AsRawFd, n: usize, now: Instant) {
        let LowWater::Probing {
            since,
            bytes,
            by_turns,
        } = self
        else {
            return;
        };
        let Some(start) = *since else {
            // The first read wakes at its first byte, so the stream's first-byte time is
            // exact; the look at its speed starts here.
            *since = Some(now);
            return;
        };
        *bytes += n as u64;
        if *bytes < PROBE_BYTES {
            return;
        }
        if now.saturating_duration_since(start) <= PROBE_TIME {
            // A socket that refuses (another system) keeps waking at the first byte.
            *self = match net::set_receive_low_water(socket, BATCH) {
                Ok(()) if *by_turns => LowWater::BatchingByTurns,
                Ok(()) => LowWater::Batching,
                Err(_) => LowWater::Off,
            };
        } else {
            *self = LowWater::Probing {
                since: Some(now),
                bytes: 0,
                by_turns: *by_turns,
            };
        }
    }

    /// Batching from the first read, whatever the stream's speed: for tests of the readers'
    /// ends, which must not depend on how fast the test machine is.
    #[cfg(test)]
    pub fn batching_now(socket: &impl AsRawFd) -> LowWater {
        match net::set_receive_low_water(socket, BATCH) {
            Ok(()) => LowWater::Batching,
            Err(e) => panic!("SO_RCVLOWAT refused: {e}"),
        }
    }

    /// Ends batching for good (a stream about to end, or one being drained after its test).
    pub fn stop(&mut self, socket: &impl AsRawFd) {
        if matches!(self, LowWater::Batching | LowWater::BatchingByTurns) {
            // Failing to go back to 1 leaves reads that time out or end at the stream's end
            // anyway; nothing else waits on it.
            let _ = net::set_receive_low_water(socket, 1);
        }
        *self = LowWater::Off;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// The fall-behind bound of the tests below: a test machine's socket buffers may hold less
    /// than [`BEHIND`].
    const BOUND: usize = 16 * 1024;

    /// A connected loopback pair: (the receiving end, the sending end).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (receiver, _) = listener.accept().unwrap();
        (receiver, sender)
    }

    /// The socket's SO_RCVLOWAT, as the kernel holds it.
    fn low_water(s: &TcpStream) -> libc::c_int {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `v`, a live c_int.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        v
    }

    /// `w` after a fast stream's first MiB (16 reads of 64 KiB, 100 µs apart: 1 MiB in 1.6 ms),
    /// which set the socket's low water to a batch.
    fn after_a_fast_mib(mut w: LowWater, rx: &TcpStream) -> LowWater {
        feed(
            &mut w,
            rx,
            Instant::now(),
            Duration::from_micros(100),
            PROBE_BYTES,
        );
        assert_eq!(low_water(rx), BATCH as libc::c_int);
        w
    }

    /// Sends 64 KiB on `tx`, reads `buf`'s worth of it on `rx` (less than 4 KiB), and waits
    /// until the rest, 60 KiB or more, is queued on `rx`.
    fn leave_queued(tx: &mut TcpStream, rx: &mut TcpStream, buf: &mut [u8]) {
        use std::io::{Read, Write};
        tx.write_all(&[1u8; 64 * 1024]).unwrap();
        rx.read_exact(buf).unwrap();
        let give_up = Instant::now() + Duration::from_secs(10);
        while net::bytes_queued(&*rx).unwrap() < 60 * 1024 {
            assert!(Instant::now() < give_up, "the data never arrived");
            std::thread::yield_now();
        }
    }

    /// Feeds reads of 64 KiB, `gap` apart, until `total` bytes were read after the first.
    fn feed(w: &mut LowWater, s: &TcpStream, start: Instant, gap: Duration, total: u64) {
        let mut now = start;
        w.after_read_at(s, 65536, now);
        let mut read = 0;
        while read < total {
            now += gap;
            w.after_read_at(s, 65536, now);
            read += 65536;
        }
    }

    #[test]
    fn a_fast_stream_batches_and_its_tail_does_not() {
        let (rx, _tx) = pair();
        let mut w = after_a_fast_mib(LowWater::new(true), &rx);
        assert_eq!(w, LowWater::Batching);
        // A read that may take two batches or more keeps batching; the tail ends it.
        w.before_read(&rx, 2 * BATCH);
        assert_eq!(w, LowWater::Batching);
        w.before_read(&rx, 2 * BATCH - 1);
        assert_eq!(w, LowWater::Off);
        assert_eq!(low_water(&rx), 1);
    }

    /// A batching reader that finds more than its bound still queued after a read stops
    /// batching for good; one that keeps up batches on ([`BOUND`]).
    #[test]
    fn a_batching_reader_that_falls_behind_stops_batching() {
        use std::io::{Read, Write};
        let (mut rx, mut tx) = pair();
        rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut w = LowWater::batching_now(&rx);
        let mut buf = [0u8; 4096];
        tx.write_all(&buf).unwrap();
        rx.read_exact(&mut buf).unwrap();
        w.stop_if_behind(&rx, BOUND);
        assert_eq!(w, LowWater::Batching);
        // 64 KiB more arrive; the reader takes 4 KiB of them.
        leave_queued(&mut tx, &mut rx, &mut buf);
        w.stop_if_behind(&rx, BOUND);
        assert_eq!(w, LowWater::Off);
        assert_eq!(low_water(&rx), 1);
    }

    /// A reader that batches by turns keeps batching however much is still queued, where one
    /// that batches alone stops ([`BOUND`]); its tail still ends the batching.
    #[test]
    fn a_reader_batching_by_turns_batches_on_when_behind() {
        let (mut rx, mut tx) = pair();
        rx.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut w = after_a_fast_mib(LowWater::by_turns(), &rx);
        assert_eq!(w, LowWater::BatchingByTurns);
        // More than a batching reader's bound is queued after a read of 4 KiB.
        let mut buf = [0u8; 4096];
        leave_queued(&mut tx, &mut rx, &mut buf);
        w.after_read_within(&rx, buf.len(), BOUND);
        assert_eq!(w, LowWater::BatchingByTurns);
        let mut alone = LowWater::Batching;
        alone.after_read_within(&rx, buf.len(), BOUND);
        assert_eq!(alone, LowWater::Off);
        // (`alone` set the socket's low water back to 1: the by-turns reader's is reset.)
        net::set_receive_low_water(&rx, BATCH).unwrap();
        w.before_read(&rx, 2 * BATCH - 1);
        assert_eq!(w, LowWater::Off);
        assert_eq!(low_water(&rx), 1);
    }

    #[test]
    fn a_slow_stream_never_batches() {
        let (rx, _tx) = pair();
        let mut w = LowWater::new(true);
        // 1 MiB in 16 ms, again and again: half a gigabit.
        feed(
            &mut w,
            &rx,
            Instant::now(),
            Duration::from_millis(1),
            8 * PROBE_BYTES,
        );
        assert!(matches!(w, LowWater::Probing { .. }));
        assert_eq!(low_water(&rx), 1);
    }

    #[test]
    fn a_stream_that_speeds_up_batches_from_then_on() {
        let (rx, _tx) = pair();
        let mut w = LowWater::new(true);
        let start = Instant::now();
        feed(
            &mut w,
            &rx,
            start,
            Duration::from_millis(1),
            2 * PROBE_BYTES,
        );
        assert!(matches!(w, LowWater::Probing { .. }));
        feed(
            &mut w,
            &rx,
            start + Duration::from_secs(1),
            Duration::from_micros(50),
            2 * PROBE_BYTES,
        );
        assert_eq!(w, LowWater::Batching);
    }

    #[test]
    fn disabled_or_stopped_it_stays_off() {
        let (rx, _tx) = pair();
        let mut w = LowWater::new(false);
        feed(
            &mut w,
            &rx,
            Instant::now(),
            Duration::from_micros(1),
            4 * PROBE_BYTES,
        );
        assert_eq!(w, LowWater::Off);
        let mut w = LowWater::new(true);
        w.stop(&rx);
        feed(
            &mut w,
            &rx,
            Instant::now(),
            Duration::from_micros(1),
            4 * PROBE_BYTES,
        );
        assert_eq!(w, LowWater::Off);
        assert_eq!(low_water(&rx), 1);
    }
}
