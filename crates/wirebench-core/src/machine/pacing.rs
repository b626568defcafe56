//! Rate caps: how long a sender or reader must pause so that the bytes it has moved stay within
//! a bit rate. Pure arithmetic on elapsed time passed in; no clocks, no sleeping.

use std::time::Duration;

/// The most a paced UDP sender that fell behind catches up at once, in time (see
/// [`most_catch_up`]); the time lost beyond it is lost, and the run's sent rate says so.
pub const MOST_CATCH_UP: Duration = Duration::from_millis(5);

/// The most a paced UDP sender that fell behind catches up at once, in bytes (see
/// [`most_catch_up`]).
pub const MOST_CATCH_UP_BYTES: u64 = 64 * 1024;

/// The most a sender paced at `rate_bps` that fell behind (its process stalled) catches up at
/// once: [`MOST_CATCH_UP`], or the time of [`MOST_CATCH_UP_BYTES`] at that rate if longer. A
/// catch-up is a burst, and what a bottleneck queue must fit is its bytes: at high rates 5 ms
/// bounds it (6 MB at 10 Gbit/s would overflow any queue), at low ones 5 ms would be a few
/// datagrams (6 KB at 10 Mbit/s), and a stall of a busy host of a few tens of milliseconds
/// would cost a low-rate sender its rate for good.
pub fn most_catch_up(rate_bps: u64) -> Duration {
    let bytes_time = pause_for(rate_bps, MOST_CATCH_UP_BYTES, Duration::ZERO);
    MOST_CATCH_UP.max(bytes_time)
}

/// How long to pause after moving `bytes` in `elapsed`, so that the average since the start
/// does not exceed `rate_bps` (bit/s, above 0). Zero when already within the rate.
pub fn pause_for(rate_bps: u64, bytes: u64, elapsed: Duration) -> Duration {
    if rate_bps == 0 {
        return Duration::ZERO;
    }
    // Exact in integers: the time at which `bytes` is due, in nanoseconds (u128: no overflow).
    let due_ns = u128::from(bytes) * 8 * 1_000_000_000 / u128::from(rate_bps);
    let due = Duration::from_nanos(u64::try_from(due_ns).unwrap_or(u64::MAX));
    due.saturating_sub(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_until_the_bytes_are_due() {
        // 1 MB at 8 Mbit/s is due after exactly 1 s.
        assert_eq!(
            pause_for(8_000_000, 1_000_000, Duration::from_millis(250)),
            Duration::from_millis(750)
        );
        assert_eq!(
            pause_for(8_000_000, 1_000_000, Duration::from_secs(2)),
            Duration::ZERO
        );
    }

    #[test]
    fn a_stalled_sender_catches_up_5_ms_or_64_kib_whichever_is_longer() {
        // 10 Gbit/s: 64 KiB is 52 µs, so 5 ms.
        assert_eq!(most_catch_up(10_000_000_000), Duration::from_millis(5));
        // 10 Mbit/s: 64 KiB is 52.4288 ms.
        assert_eq!(most_catch_up(10_000_000), Duration::from_nanos(52_428_800));
        // Exactly 5 ms at 104.8576 Mbit/s.
        assert_eq!(most_catch_up(104_857_600), Duration::from_millis(5));
    }

    #[test]
    fn zero_rate_and_huge_counts_are_safe() {
        assert_eq!(pause_for(0, 123, Duration::ZERO), Duration::ZERO);
        assert_eq!(
            pause_for(1, u64::MAX, Duration::ZERO),
            Duration::from_nanos(u64::MAX)
        );
    }
}
