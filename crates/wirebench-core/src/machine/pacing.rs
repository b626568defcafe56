//! Rate caps: how long a sender or reader must pause so that the bytes it has moved stay within
//! a bit rate. Pure arithmetic on elapsed time passed in; no clocks, no sleeping.

use std::time::Duration;

/// The most a paced UDP sender that fell behind catches up at once (a burst a bottleneck queue
/// fits); the time lost beyond it is lost, and the run's sent rate says so.
pub const MOST_CATCH_UP: Duration = Duration::from_millis(5);

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
    fn zero_rate_and_huge_counts_are_safe() {
        assert_eq!(pause_for(0, 123, Duration::ZERO), Duration::ZERO);
        assert_eq!(
            pause_for(1, u64::MAX, Duration::ZERO),
            Duration::from_nanos(u64::MAX)
        );
    }
}
