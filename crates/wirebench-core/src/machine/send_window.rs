//! How much stream data a QUIC sender keeps unacknowledged (quinn's send window): enough for
//! the path, never so much that quinn's per-write bookkeeping becomes the bottleneck.
//!
//! quinn keeps every application write as one segment of the stream's send buffer, and for each
//! STREAM frame it builds it walks the unacknowledged segments from the oldest one (0.11 and
//! its main branch alike). A packet's cost therefore grows with the writes in flight, not with
//! the bytes: with 1 KiB messages and 4 MiB in flight (loopback fills any window, the queue
//! sitting in the receiver's socket buffer) that walk took 42% of the sender's CPU. Measured on
//! loopback, 512 MiB streamed, medians of 3: 1 KiB messages at a 4 MiB window 3.9 Gbit/s and
//! 2.2 CPU s/GiB, at 512 KiB 8.9 Gbit/s and 1.0 s/GiB; 100-byte messages at 4 MiB 0.69 Gbit/s,
//! at 64 KiB 1.57 Gbit/s.
//!
//! So a sender starts with a window that holds [`WRITES_IN_FLIGHT`] messages (clamped to
//! [`MIN_WINDOW`]..=[`START_MAX`]) and doubles it, up to its maximum, whenever the path could
//! carry more: when twice the delivery rate times the path's minimum round trip (its
//! bandwidth-delay product, which a queue does not inflate) exceeds the window. On loopback and
//! LANs that product is tens of kilobytes, so the window stays where it started; on a long path
//! a window-limited sender delivers about a window per round trip and the window doubles each
//! sample until the congestion window, not this one, is the limit.

use std::time::{Duration, Instant};

/// Messages a window holds at the start (and at least, unless [`START_MAX`] is smaller).
pub const WRITES_IN_FLIGHT: u64 = 512;

/// The smallest window: tiny messages still get this many bytes in flight.
pub const MIN_WINDOW: u64 = 64 << 10;

/// The largest starting window, whatever the message size; growth takes it further.
pub const START_MAX: u64 = 4 << 20;

/// The shortest time between two samples: long enough to average a loopback path's bursts.
pub const MIN_SAMPLE_INTERVAL: Duration = Duration::from_millis(20);

/// Round trips between two samples: a window-limited sender's rate settles within a few.
const SAMPLE_RTTS: u32 = 4;

/// The send window of one sending stream, as it grows.
#[derive(Debug, Clone)]
pub struct SendWindow {
    /// Bytes that may be unacknowledged now.
    bytes: u64,
    /// The most it may grow to.
    max: u64,
    /// The previous sample: when, and how many bytes had been written by then.
    mark: Option<(Instant, u64)>,
}

impl SendWindow {
    /// The starting window for messages of `msg_size` bytes, growing to at most `max`.
    pub fn for_messages(msg_size: u32, max: u64) -> SendWindow {
        let start = (u64::from(msg_size) * WRITES_IN_FLIGHT).clamp(MIN_WINDOW, START_MAX);
        SendWindow {
            bytes: start.min(max),
            max,
            mark: None,
        }
    }

    /// Bytes that may be unacknowledged now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// How long after a sample the next one is due, for a path with smoothed RTT `srtt`.
    pub fn sample_interval(srtt: Duration) -> Duration {
        (srtt * SAMPLE_RTTS).max(MIN_SAMPLE_INTERVAL)
    }

    /// A sample at `now`: `written` bytes handed to the stream since it opened, and the path's
    /// minimum RTT so far. Returns the new window when it grows. The first sample only marks
    /// the start.
    pub fn on_sample(&mut self, now: Instant, written: u64, min_rtt: Duration) -> Option<u64> {
        let previous = self.mark.replace((now, written));
        let (then, before) = previous?;
        let elapsed = now.saturating_duration_since(then);
        if elapsed.is_zero() || self.bytes >= self.max {
            return None;
        }
        // Bytes per RTT at the rate of this sample: (bytes / elapsed) × min_rtt.
        let moved = u128::from(written.saturating_sub(before));
        let bdp = moved * min_rtt.as_nanos() / elapsed.as_nanos();
        if 2 * bdp <= u128::from(self.bytes) {
            return None;
        }
        self.bytes = self.bytes.saturating_mul(2).min(self.max);
        Some(self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 32 << 20;

    #[test]
    fn the_start_holds_512_messages_within_its_bounds() {
        assert_eq!(SendWindow::for_messages(1024, MAX).bytes(), 512 << 10);
        assert_eq!(SendWindow::for_messages(100, MAX).bytes(), MIN_WINDOW);
        assert_eq!(SendWindow::for_messages(4096, MAX).bytes(), 2 << 20);
        assert_eq!(SendWindow::for_messages(131_072, MAX).bytes(), START_MAX);
        // Never above the maximum.
        assert_eq!(SendWindow::for_messages(131_072, 1 << 20).bytes(), 1 << 20);
    }

    #[test]
    fn samples_are_four_round_trips_apart_and_at_least_20_ms() {
        let ms = Duration::from_millis;
        assert_eq!(SendWindow::sample_interval(ms(50)), ms(200));
        assert_eq!(
            SendWindow::sample_interval(Duration::from_micros(80)),
            ms(20)
        );
    }

    /// Loopback: 7 Gbit/s (875 MB/s) with a 50 µs minimum RTT is a 44 KB product; a 512 KiB
    /// window is plenty, however long the queue made the smoothed RTT.
    #[test]
    fn a_short_path_keeps_the_starting_window() {
        let mut w = SendWindow::for_messages(1024, MAX);
        let t0 = Instant::now();
        let min_rtt = Duration::from_micros(50);
        assert_eq!(w.on_sample(t0, 0, min_rtt), None, "the first sample marks");
        for i in 1..=50u64 {
            let at = t0 + Duration::from_millis(20 * i);
            assert_eq!(w.on_sample(at, 875_000 * 20 * i, min_rtt), None);
        }
        assert_eq!(w.bytes(), 512 << 10);
    }

    /// A 50 ms path that would carry 1 Gbit/s: window-limited, the sender delivers a window
    /// per round trip, so each sample (200 ms apart) doubles the window until twice the
    /// product (12.5 MB) is covered: 512 KiB → 1 → 2 → 4 → 8 → 16 MiB, then the congestion
    /// window holds the rate at 125 MB/s and the window stays.
    #[test]
    fn a_long_path_doubles_the_window_until_it_covers_twice_the_product() {
        let mut w = SendWindow::for_messages(1024, MAX);
        let rtt = Duration::from_millis(50);
        let line_rate = 125_000_000u64; // bytes per second
        let mut now = Instant::now();
        let mut written = 0u64;
        assert_eq!(w.on_sample(now, written, rtt), None);
        let mut windows = vec![w.bytes()];
        for _ in 0..12 {
            let interval = SendWindow::sample_interval(rtt);
            // The rate is the window per RTT, or the line rate, whichever is lower.
            let rate = (w.bytes() * 1_000 / 50).min(line_rate);
            written += rate * interval.as_millis() as u64 / 1_000;
            now += interval;
            if let Some(grown) = w.on_sample(now, written, rtt) {
                windows.push(grown);
            }
        }
        assert_eq!(
            windows,
            [512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20]
        );
    }

    #[test]
    fn growth_stops_at_the_maximum() {
        let mut w = SendWindow::for_messages(131_072, 8 << 20);
        let t0 = Instant::now();
        let rtt = Duration::from_millis(100);
        w.on_sample(t0, 0, rtt);
        // 1 GB in 400 ms would need far more than 8 MiB.
        assert_eq!(
            w.on_sample(t0 + Duration::from_millis(400), 1 << 30, rtt),
            Some(8 << 20)
        );
        assert_eq!(
            w.on_sample(t0 + Duration::from_millis(800), 2 << 30, rtt),
            None
        );
        assert_eq!(w.bytes(), 8 << 20);
    }

    #[test]
    fn a_sample_at_the_same_instant_changes_nothing() {
        let mut w = SendWindow::for_messages(1024, MAX);
        let t0 = Instant::now();
        w.on_sample(t0, 0, Duration::from_millis(10));
        assert_eq!(w.on_sample(t0, 1 << 30, Duration::from_millis(10)), None);
    }
}
