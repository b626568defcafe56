//! The wall clock of the commands: seconds since the Unix epoch for the store's timestamps and
//! the lines that carry them. Below every command module, so each reads it without importing
//! another command.

/// Milliseconds since the Unix epoch (iperf3's `timestamp.timemillisecs`; 0 before 1970).
pub fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch, for the store's timestamps (0 if the clock is before 1970).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
