//! How fast bytes moved: bits per second over a transfer's time, and the shortest transfer
//! timed at all (below it a rate says more about the clock than about the network).

/// Below this transfer time a run is too short to time: its rate would say more about the
/// clock and one control round trip than about the network, so goodput is not given (1 ms).
pub const MIN_TIMED_NS: u64 = 1_000_000;

/// Bits per second for `bytes` over `seconds`; 0 when no time passed.
pub fn bits_per_second(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}
