//! The wall clock of one-way delays: nanoseconds since the Unix epoch for the server's stamps,
//! an anchor that turns the client's monotonic readings into the same scale, the log of timed
//! exchanges a flow keeps, and what this host's kernel says of its clock (boot id,
//! synchronization). Reads clocks and the kernel; never estimates (core's `clock_offset` does).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use wirebench_core::vocab::clock_offset::{ClockInfo, Exchange};
use wirebench_core::wire::datagram::read_stamps;

/// This host's wall clock now, nanoseconds since the Unix epoch (0 before 1970).
pub fn unix_now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// A wall-clock reading taken between two monotonic ones: monotonic instants convert to the
/// wall clock's scale without reading it again (one clock read per timestamp on the data path)
/// and without a step of the wall clock during the run showing up in the figures.
#[derive(Debug, Clone, Copy)]
pub struct WallAnchor {
    instant: Instant,
    unix_ns: i64,
    /// Half the time between the two monotonic readings around the wall-clock one (ns): how far
    /// the pairing may be off.
    pub read_error_ns: u64,
}

impl WallAnchor {
    /// The tightest of a few pairings made now.
    pub fn now() -> WallAnchor {
        let mut best: Option<WallAnchor> = None;
        for _ in 0..5 {
            let before = Instant::now();
            let unix_ns = unix_now_ns();
            let after = Instant::now();
            let gap = after.duration_since(before);
            let candidate = WallAnchor {
                instant: before + gap / 2,
                unix_ns,
                read_error_ns: u64::try_from(gap.as_nanos().div_ceil(2)).unwrap_or(u64::MAX),
            };
            if best.is_none_or(|b| candidate.read_error_ns < b.read_error_ns) {
                best = Some(candidate);
            }
        }
        best.unwrap_or(WallAnchor {
            instant: Instant::now(),
            unix_ns: unix_now_ns(),
            read_error_ns: 0,
        })
    }

    /// `at` on the wall clock's scale (ns since the Unix epoch).
    pub fn unix_ns(&self, at: Instant) -> i64 {
        let signed = |d: std::time::Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        match at.checked_duration_since(self.instant) {
            Some(later) => self.unix_ns.saturating_add(signed(later)),
            None => self
                .unix_ns
                .saturating_sub(signed(self.instant.duration_since(at))),
        }
    }
}

/// The timed exchanges of one flow: each answer answered at its first try, with the server's
/// stamps from its payload.
#[derive(Debug, Clone)]
pub struct ExchangeLog {
    anchor: WallAnchor,
    /// What was timed, in order.
    pub exchanges: Vec<Exchange>,
}

impl ExchangeLog {
    /// An empty log converting instants with `anchor`.
    pub fn new(anchor: WallAnchor) -> ExchangeLog {
        ExchangeLog {
            anchor,
            exchanges: Vec::new(),
        }
    }

    /// Notes the exchange of a request sent at `sent` whose answer, read at `received`, carries
    /// `payload` (the server's stamps first); an answer without stamps, or with stamps no clock
    /// could give ([`Exchange::checked`]), is skipped.
    pub fn note(&mut self, sent: Instant, received: Instant, payload: &[u8]) {
        let client = (self.anchor.unix_ns(sent), self.anchor.unix_ns(received));
        if let Some(e) = read_stamps(payload).and_then(|server| Exchange::checked(client, server)) {
            self.exchanges.push(e);
        }
    }
}

/// What this host's kernel says of its clock: its boot id, and its estimated error when it
/// says the clock is synchronized. Either is absent where it cannot be read (a service whose
/// system calls exclude `adjtimex`, as the packaged unit's `ProtectClock=` does).
pub fn local_clock_info() -> ClockInfo {
    // The boot id cannot change while this process runs: read once, not per session.
    static BOOT_ID: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let boot_id = BOOT_ID.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty() && s.len() <= 64)
    });
    ClockInfo {
        boot_id: boot_id.clone(),
        sync_error_ns: sync_error_ns(),
    }
}

/// The kernel's estimated clock error (ns) when it says the clock is synchronized.
#[cfg(target_os = "linux")]
fn sync_error_ns() -> Option<u64> {
    // SAFETY: a zeroed `timex` with `modes` 0 only reads the kernel's state into it.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, writable `timex` for the call's duration.
    let state = unsafe { libc::adjtimex(&mut tx) };
    let unsynchronized =
        state < 0 || state == libc::TIME_ERROR || tx.status & libc::STA_UNSYNC != 0;
    if unsynchronized {
        return None;
    }
    u64::try_from(tx.esterror)
        .ok()
        .map(|us| us.saturating_mul(1_000))
}

#[cfg(not(target_os = "linux"))]
fn sync_error_ns() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchor_maps_instants_onto_the_wall_clock() {
        let anchor = WallAnchor::now();
        let later = Instant::now();
        let mapped = anchor.unix_ns(later);
        let wall = unix_now_ns();
        // Mapped before the wall read, so not after it (up to the pairing's error).
        assert!(
            mapped <= wall + anchor.read_error_ns as i64,
            "{mapped} {wall}"
        );
        let earlier = anchor.unix_ns(anchor.instant - std::time::Duration::from_millis(5));
        assert_eq!(anchor.unix_ns(anchor.instant) - earlier, 5_000_000);
    }

    #[test]
    fn this_host_names_its_boot() {
        let info = local_clock_info();
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id");
        assert_eq!(info.boot_id, boot.ok().map(|s| s.trim().to_string()));
    }
}
