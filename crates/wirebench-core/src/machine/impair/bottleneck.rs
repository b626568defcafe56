//! A bottleneck link shared by many flows: owns one FIFO of bounded size drained at a fixed
//! rate, so every byte offered waits behind every byte queued before it, whatever flow it
//! belongs to; must not read clocks or touch sockets (time comes in as `now`).
//!
//! A full queue adds `queue / rate` of delay: that is the physics the responsiveness test
//! measures. Packets (UDP) are tail-dropped when they do not fit; a byte stream (TCP) asks
//! [`Bottleneck::room_in`] how long to stop reading instead, since it cannot lose bytes.

use std::time::{Duration, Instant};

use crate::vocab::units::{BitRate, ByteSize};

/// One direction's bottleneck: a rate and a queue of bounded bytes.
#[derive(Debug, Clone)]
pub struct Bottleneck {
    rate: BitRate,
    limit: ByteSize,
    /// When the link has sent everything queued so far.
    free_at: Option<Instant>,
    drops: u64,
}

impl Bottleneck {
    /// A link of `rate` whose queue holds `limit` bytes (at least one byte, and a rate of at
    /// least 1 bit/s, are assumed).
    pub fn new(rate: BitRate, limit: ByteSize) -> Bottleneck {
        Bottleneck {
            rate: BitRate(rate.0.max(1)),
            limit: ByteSize(limit.0.max(1)),
            free_at: None,
            drops: 0,
        }
    }

    /// Bytes waiting at `now` (those not yet serialised).
    pub fn queued_bytes(&self, now: Instant) -> u64 {
        let wait = self.queue_delay(now);
        u64::try_from(wait.as_nanos() * u128::from(self.rate.0) / 8 / 1_000_000_000)
            .unwrap_or(u64::MAX)
    }

    /// How long a byte offered at `now` waits before it starts on the link: queued bytes / rate.
    pub fn queue_delay(&self, now: Instant) -> Duration {
        self.free_at
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now))
    }

    /// Offers a packet of `len` bytes at `now`: when its last bit leaves the link, or `None`
    /// when it does not fit in the queue (tail drop). A packet always fits an empty queue.
    pub fn offer(&mut self, now: Instant, len: usize) -> Option<Instant> {
        let queued = self.queued_bytes(now);
        if queued > 0 && queued.saturating_add(len as u64) > self.limit.0 {
            self.drops += 1;
            return None;
        }
        Some(self.push(now, len))
    }

    /// Appends `len` bytes of a stream at `now` without a drop (the caller waited for room
    /// with [`Bottleneck::room_in`]); returns when they have left the link.
    pub fn push(&mut self, now: Instant, len: usize) -> Instant {
        let start = self.free_at.map_or(now, |t| t.max(now));
        let tx = (len as u128 * 8 * 1_000_000_000).div_ceil(u128::from(self.rate.0));
        let done = start + Duration::from_nanos(u64::try_from(tx).unwrap_or(u64::MAX));
        self.free_at = Some(done);
        done
    }

    /// How long from `now` until `len` more bytes fit in the queue (zero: they fit now).
    pub fn room_in(&self, now: Instant, len: usize) -> Duration {
        let queued = self.queued_bytes(now);
        if queued == 0 || queued.saturating_add(len as u64) <= self.limit.0 {
            return Duration::ZERO;
        }
        let excess = queued.saturating_add(len as u64) - self.limit.0;
        let nanos = (u128::from(excess) * 8 * 1_000_000_000).div_ceil(u128::from(self.rate.0));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The queue's size in bytes.
    pub fn limit(&self) -> ByteSize {
        self.limit
    }

    /// Packets dropped because the queue was full.
    pub fn drops(&self) -> u64 {
        self.drops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 Mbit/s = 1 byte per microsecond, which makes the arithmetic readable.
    fn link(limit: u64) -> Bottleneck {
        Bottleneck::new(BitRate(8_000_000), ByteSize(limit))
    }

    #[test]
    fn a_full_queue_delays_by_queue_over_rate() {
        let t0 = Instant::now();
        let mut b = link(64 * 1024);
        // Fill it: 64 packets of 1 KiB at t0; the i-th leaves at (i + 1) × 1024 µs.
        for i in 0..64u64 {
            let done = b.offer(t0, 1024).unwrap();
            assert_eq!(done - t0, Duration::from_micros((i + 1) * 1024));
        }
        assert_eq!(b.queued_bytes(t0), 65536);
        // The queue delay is queue / rate: 65536 B at 1 B/µs = 65.536 ms.
        assert_eq!(b.queue_delay(t0), Duration::from_micros(65536));
        // Full: the next packet is tail-dropped.
        assert_eq!(b.offer(t0, 100), None);
        assert_eq!(b.drops(), 1);
        // 10 ms later 10000 bytes have left: 55536 queued, room for a 100-byte probe, which
        // waits behind them: 55536 + 100 µs.
        let t1 = t0 + Duration::from_millis(10);
        assert_eq!(b.queued_bytes(t1), 55536);
        let done = b.offer(t1, 100).unwrap();
        assert_eq!(done - t1, Duration::from_micros(55636));
    }

    #[test]
    fn a_shallow_queue_adds_little_delay() {
        let t0 = Instant::now();
        let mut b = link(4096);
        let mut accepted = 0;
        for _ in 0..100 {
            if b.offer(t0, 1000).is_some() {
                accepted += 1;
            }
        }
        // 4 × 1000 B fit in 4096 B; the rest is dropped: at most 4 ms of queue.
        assert_eq!(accepted, 4);
        assert_eq!(b.queue_delay(t0), Duration::from_micros(4000));
        // An empty queue always takes a packet, even one larger than the queue.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(b.queued_bytes(later), 0);
        assert!(b.offer(later, 10_000).is_some());
    }

    #[test]
    fn a_stream_waits_for_room_instead_of_dropping() {
        let t0 = Instant::now();
        let mut b = link(8192);
        b.push(t0, 8192);
        // 8192 queued; 1000 more fit once 1000 have left: 1000 µs.
        assert_eq!(b.room_in(t0, 1000), Duration::from_micros(1000));
        let t1 = t0 + Duration::from_micros(1000);
        assert_eq!(b.room_in(t1, 1000), Duration::ZERO);
        // Pushed then, they leave after the 7192 still queued and themselves: 8192 µs.
        assert_eq!(b.push(t1, 1000) - t1, Duration::from_micros(8192));
    }
}
