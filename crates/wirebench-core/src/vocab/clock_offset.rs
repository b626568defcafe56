//! The offset and drift between two hosts' clocks, with an honest bound, from timed exchanges
//! (NTP's four timestamps): owns the arithmetic; must not read a clock or decide what is shown.
//!
//! Each exchange brackets the server's clock: its request cannot arrive before it left, nor its
//! answer before it was sent, so the offset θ (server clock − client clock) lies between
//! `server_sent − client_received` and `server_received − client_sent` — an interval as wide as
//! the exchange's round trip less the server's time. With the clocks drifting apart linearly,
//! θ(t) = a + b·t, every exchange is two linear constraints on (a, b); every (a, b) that meets
//! them all (and a drift within [`MAX_DRIFT`]) is possible, and the bound at a time `t` is the
//! range of a + b·t over that feasible polygon. Nothing is assumed about how the round trip is
//! split between the directions: the bound is what the exchanges prove, no narrower.
//!
//! Where both hosts say something about their clocks (one kernel's clock; both synchronized
//! within an error), that claim is one more pair of constraints, and it is checked: a claim the
//! exchanges contradict is reported and not used.

use serde::{Deserialize, Serialize};

/// The fastest two clocks are taken to drift apart: 500 parts per million, the most a Linux
/// kernel's frequency correction allows (a free crystal is within ~100).
pub const MAX_DRIFT: f64 = 500e-6;

/// At most this many windows of exchanges set the bound (the tightest exchange of each side per
/// window): the polygon stays small whatever the number of exchanges.
const WINDOWS: usize = 24;

/// Tolerance of the feasibility checks, in nanoseconds (floating point on values near 1e10).
const SLACK_NS: f64 = 0.5;

/// One timed exchange, each time in nanoseconds since the Unix epoch on its own host's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// The request left the client (client clock).
    pub client_sent: i64,
    /// The request reached the server (server clock).
    pub server_received: i64,
    /// The answer left the server (server clock).
    pub server_sent: i64,
    /// The answer reached the client (client clock).
    pub client_received: i64,
}

/// The latest time a stamp may say (ns since the Unix epoch, about the year 2096): far enough
/// that the offsets and round trips of any two stamps below it fit an `i64`.
pub const MAX_STAMP_NS: i64 = 4_000_000_000_000_000_000;

impl Exchange {
    /// An exchange from the client's two times and the server's stamps (a peer's figures),
    /// checked: every time from the epoch to [`MAX_STAMP_NS`], and each side's second time not
    /// before its first. None for stamps no clock could give (a broken or hostile server).
    pub fn checked(
        (client_sent, client_received): (i64, i64),
        (server_received, server_sent): (i64, i64),
    ) -> Option<Exchange> {
        let times = [client_sent, client_received, server_received, server_sent];
        let sane = times.iter().all(|t| (0..=MAX_STAMP_NS).contains(t))
            && client_received >= client_sent
            && server_sent >= server_received;
        sane.then_some(Exchange {
            client_sent,
            server_received,
            server_sent,
            client_received,
        })
    }

    /// The smallest offset this exchange allows: the answer took no time at all.
    pub fn lowest_offset(&self) -> i64 {
        self.server_sent.saturating_sub(self.client_received)
    }

    /// The largest offset this exchange allows: the request took no time at all.
    pub fn highest_offset(&self) -> i64 {
        self.server_received.saturating_sub(self.client_sent)
    }

    /// Its round trip less the server's time (ns): the width of the offsets it allows.
    pub fn round_trip(&self) -> i64 {
        self.highest_offset().saturating_sub(self.lowest_offset())
    }

    /// When it happened, on the client's clock: the midpoint of send and receive.
    pub fn at(&self) -> i64 {
        self.client_sent + (self.client_received - self.client_sent) / 2
    }
}

/// What the two hosts said about their clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockClaim {
    /// Nothing usable: the offset comes from the exchanges alone.
    None,
    /// Both ends read one kernel's clock (the same boot), up to `error_ns` of reading it.
    SameClock {
        /// How far apart two reads of the one clock may be taken to be (ns).
        error_ns: u64,
    },
    /// Both hosts' kernels say their clocks are synchronized, within these summed errors.
    Synchronized {
        /// The two kernels' estimated errors, summed (ns).
        error_ns: u64,
    },
}

impl ClockClaim {
    /// The offset the claim allows: within ±error of 0; None when there is no claim.
    fn error_ns(&self) -> Option<u64> {
        match self {
            ClockClaim::None => None,
            ClockClaim::SameClock { error_ns } | ClockClaim::Synchronized { error_ns } => {
                Some(*error_ns)
            }
        }
    }
}

/// What one host's kernel says of its clock, as a server announces it in `accepted`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ClockInfo {
    /// The kernel's boot id: two ends with the same one read the same clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The kernel's estimated error of its clock (ns), when it says the clock is synchronized
    /// (`adjtimex`: not `TIME_ERROR`, `STA_UNSYNC` clear); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_error_ns: Option<u64>,
}

impl ClockInfo {
    /// What `local` and `remote` together claim: one clock when their boot ids match (up to
    /// `read_error_ns`, how far apart the client's two clock readings may be); both
    /// synchronized when both kernels say so; else nothing.
    pub fn claim(local: &ClockInfo, remote: &ClockInfo, read_error_ns: u64) -> ClockClaim {
        match (&local.boot_id, &remote.boot_id) {
            (Some(a), Some(b)) if !a.is_empty() && a == b => {
                return ClockClaim::SameClock {
                    error_ns: read_error_ns,
                }
            }
            _ => {}
        }
        match (local.sync_error_ns, remote.sync_error_ns) {
            (Some(a), Some(b)) => ClockClaim::Synchronized {
                error_ns: a.saturating_add(b).saturating_add(read_error_ns),
            },
            _ => ClockClaim::None,
        }
    }
}

/// A line a + b·x = c that bounds the feasible polygon from one side: `sign` +1 keeps
/// a + b·x ≤ c, −1 keeps a + b·x ≥ c. A slope limit is x = ∞, written as (coef_a 0, coef_b 1).
#[derive(Debug, Clone, Copy)]
struct Constraint {
    coef_a: f64,
    coef_b: f64,
    c: f64,
    sign: f64,
}

impl Constraint {
    fn holds(&self, a: f64, b: f64) -> bool {
        // A slope limit is in parts of one, an exchange's line in nanoseconds.
        let slack = if self.coef_a == 0.0 { 1e-12 } else { SLACK_NS };
        self.sign * (self.coef_a * a + self.coef_b * b - self.c) <= slack
    }
}

/// Where the exchanges put the offset: the feasible (offset, drift) polygon's corners, in
/// coordinates relative to `origin_x` (client ns) and `origin_offset` (ns), so floating point
/// keeps nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct OffsetEstimate {
    origin_x: i64,
    origin_offset: i64,
    /// (a, b): the offset at `origin_x` relative to `origin_offset`, and the drift.
    corners: Vec<(f64, f64)>,
    /// The claim held: it is part of the polygon.
    pub claim_used: bool,
    /// A claim was made and the exchanges contradict it (then it is left out).
    pub claim_contradicted: bool,
    /// Exchanges that went into the estimate.
    pub exchanges: usize,
}

impl OffsetEstimate {
    /// The offset at client time `x` (ns): the middle of what is possible, and the half-width
    /// of that range (the bound, ns).
    pub fn offset_at(&self, x: i64) -> (i64, u64) {
        let dx = (x - self.origin_x) as f64;
        let (lo, hi) = self
            .corners
            .iter()
            .map(|(a, b)| a + b * dx)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(v), hi.max(v))
            });
        let mid = (lo + hi) / 2.0;
        (
            self.origin_offset + mid.round() as i64,
            ((hi - lo) / 2.0).ceil().max(0.0) as u64,
        )
    }

    /// The drift (parts per million, server clock faster positive) and its half-range.
    pub fn drift_ppm(&self) -> (f64, f64) {
        let (lo, hi) = self
            .corners
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, b)| {
                (lo.min(*b), hi.max(*b))
            });
        ((lo + hi) / 2.0 * 1e6, (hi - lo) / 2.0 * 1e6)
    }
}

/// Why no offset could be estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoEstimate {
    /// No exchange was timed.
    NoExchanges,
    /// No offset and drift within [`MAX_DRIFT`] fits every exchange: a clock was stepped (set)
    /// during the run, or a host's timestamps are wrong.
    Inconsistent,
}

/// Estimates the offset from `exchanges` (any order), using `claim` where the exchanges agree
/// with it.
pub fn estimate(exchanges: &[Exchange], claim: ClockClaim) -> Result<OffsetEstimate, NoEstimate> {
    let exchanges = &plausible(exchanges);
    let Some(first) = exchanges.iter().min_by_key(|e| e.at()) else {
        return Err(NoEstimate::NoExchanges);
    };
    let (origin_x, origin_offset) = (first.at(), first.lowest_offset() + first.round_trip() / 2);
    let mut constraints = window_constraints(exchanges, origin_x, origin_offset);
    constraints.push(slope_limit(1.0));
    constraints.push(slope_limit(-1.0));
    let measured = corners(&constraints);
    if measured.is_empty() {
        return Err(NoEstimate::Inconsistent);
    }
    let base = OffsetEstimate {
        origin_x,
        origin_offset,
        corners: measured,
        claim_used: false,
        claim_contradicted: false,
        exchanges: exchanges.len(),
    };
    let Some(error) = claim.error_ns() else {
        return Ok(base);
    };
    // The claim: |θ| ≤ error over the whole run, i.e. at its first and last exchange.
    let last_x = exchanges.iter().map(Exchange::at).max().unwrap_or(origin_x);
    for x in [origin_x, last_x] {
        let dx = (x - origin_x) as f64;
        let rel = |v: f64| v - origin_offset as f64;
        constraints.push(at_most(dx, rel(error as f64)));
        constraints.push(at_least(dx, rel(-(error as f64))));
    }
    let claimed = corners(&constraints);
    if claimed.is_empty() {
        return Ok(OffsetEstimate {
            claim_contradicted: true,
            ..base
        });
    }
    Ok(OffsetEstimate {
        corners: claimed,
        claim_used: true,
        ..base
    })
}

/// The exchanges whose offsets are within reach of the median one: as far as the largest
/// drift takes a clock over the run, plus a median round trip. One exchange stamped far off (a
/// server that answered from a stale buffer, a clock set mid-run) would otherwise leave no
/// offset possible at all; those left out show as delays outside the bound.
fn plausible(exchanges: &[Exchange]) -> Vec<Exchange> {
    let mut mids: Vec<i64> = exchanges
        .iter()
        .map(|e| e.lowest_offset() + e.round_trip() / 2)
        .collect();
    let mut trips: Vec<i64> = exchanges.iter().map(Exchange::round_trip).collect();
    mids.sort_unstable();
    trips.sort_unstable();
    let (Some(&mid), Some(&trip)) = (mids.get(mids.len() / 2), trips.get(trips.len() / 2)) else {
        return Vec::new();
    };
    let times = exchanges.iter().map(Exchange::at);
    let span = times.clone().max().unwrap_or(0) - times.min().unwrap_or(0);
    let reach = (MAX_DRIFT * span as f64) as i64 + trip.max(0);
    exchanges
        .iter()
        .filter(|e| e.lowest_offset() <= mid + reach && e.highest_offset() >= mid - reach)
        .copied()
        .collect()
}

/// The tightest lower and upper constraint of each window of exchanges (in time order).
fn window_constraints(exchanges: &[Exchange], origin_x: i64, origin: i64) -> Vec<Constraint> {
    let mut sorted: Vec<&Exchange> = exchanges.iter().collect();
    sorted.sort_by_key(|e| e.at());
    let per_window = sorted.len().div_ceil(WINDOWS).max(1);
    let mut out = Vec::new();
    for window in sorted.chunks(per_window) {
        let dx = |e: &Exchange| (e.at() - origin_x) as f64;
        if let Some(low) = window.iter().max_by_key(|e| e.lowest_offset()) {
            out.push(at_least(dx(low), (low.lowest_offset() - origin) as f64));
        }
        if let Some(high) = window.iter().min_by_key(|e| e.highest_offset()) {
            out.push(at_most(dx(high), (high.highest_offset() - origin) as f64));
        }
    }
    out
}

fn at_least(dx: f64, c: f64) -> Constraint {
    Constraint {
        coef_a: 1.0,
        coef_b: dx,
        c,
        sign: -1.0,
    }
}

fn at_most(dx: f64, c: f64) -> Constraint {
    Constraint {
        coef_a: 1.0,
        coef_b: dx,
        c,
        sign: 1.0,
    }
}

/// b ≤ MAX_DRIFT (`sign` 1) or b ≥ −MAX_DRIFT (`sign` −1).
fn slope_limit(sign: f64) -> Constraint {
    Constraint {
        coef_a: 0.0,
        coef_b: 1.0,
        c: sign * MAX_DRIFT,
        sign,
    }
}

/// The corners of the polygon the constraints leave (empty when they leave nothing): every
/// crossing of two boundary lines that meets all the constraints.
fn corners(constraints: &[Constraint]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (i, p) in constraints.iter().enumerate() {
        for q in &constraints[i + 1..] {
            let det = p.coef_a * q.coef_b - q.coef_a * p.coef_b;
            if det.abs() < 1e-12 {
                continue;
            }
            let a = (p.c * q.coef_b - q.c * p.coef_b) / det;
            let b = (p.coef_a * q.c - q.coef_a * p.c) / det;
            if constraints.iter().all(|k| k.holds(a, b)) {
                out.push((a, b));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exchanges every `gap` ns from `start` with the given one-way delays (ns) and a server
    /// clock `offset` ns ahead, drifting `drift` (fraction).
    fn exchanges(n: usize, up: i64, down: i64, offset: i64, drift: f64) -> Vec<Exchange> {
        let start = 1_800_000_000_000_000_000i64;
        (0..n as i64)
            .map(|i| {
                let sent = start + i * 10_000_000;
                let server = |t: i64| t + offset + ((t - start) as f64 * drift) as i64;
                let arrive = sent + up + (i % 7) * 1_000;
                let leave = arrive + 2_000;
                Exchange {
                    client_sent: sent,
                    server_received: server(arrive),
                    server_sent: server(leave),
                    client_received: leave + down + (i % 5) * 1_000,
                }
            })
            .collect()
    }

    #[test]
    fn a_symmetric_path_recovers_the_offset_within_half_the_round_trip() {
        let offset = 2_500_000_000;
        let e = exchanges(200, 20_000, 20_000, offset, 0.0);
        let est = estimate(&e, ClockClaim::None).unwrap();
        let (mid, bound) = est.offset_at(e[100].at());
        assert!((mid - offset).unsigned_abs() <= bound, "{mid} ± {bound}");
        // The best exchanges' round trip is 40 µs: the bound cannot be wider than half of it
        // plus what the drift allowance adds over 2 s.
        assert!(bound <= 25_000, "{bound}");
        assert!(!est.claim_used && !est.claim_contradicted);
    }

    #[test]
    fn an_asymmetric_path_stays_inside_the_bound() {
        let offset = -7_000_000;
        let e = exchanges(50, 5_000_000, 20_000_000, offset, 0.0);
        let est = estimate(&e, ClockClaim::None).unwrap();
        for x in e.iter().map(Exchange::at) {
            let (mid, bound) = est.offset_at(x);
            assert!((mid - offset).unsigned_abs() <= bound, "{mid} ± {bound}");
        }
    }

    #[test]
    fn drift_is_found_and_the_offset_follows_it() {
        let drift = 40e-6;
        let e = exchanges(600, 30_000, 30_000, 1_000_000, drift);
        let est = estimate(&e, ClockClaim::None).unwrap();
        let (ppm, spread) = est.drift_ppm();
        assert!((ppm - 40.0).abs() <= spread + 1e-9, "{ppm} ± {spread}");
        assert!(spread < 20.0, "{spread}");
        let last = e.last().unwrap();
        let truth = last.server_received - (last.client_sent + 30_000 + 599 % 7 * 1_000);
        let (mid, bound) = est.offset_at(last.client_sent);
        assert!(
            (mid - truth).unsigned_abs() <= bound + 1,
            "{mid} ± {bound} vs {truth}"
        );
    }

    #[test]
    fn a_true_claim_narrows_the_bound_and_a_false_one_is_refused() {
        let e = exchanges(100, 5_000_000, 20_000_000, 0, 0.0);
        let alone = estimate(&e, ClockClaim::None).unwrap();
        let same = estimate(&e, ClockClaim::SameClock { error_ns: 100 }).unwrap();
        assert!(same.claim_used);
        let x = e[50].at();
        assert!(same.offset_at(x).1 <= 100, "{:?}", same.offset_at(x));
        assert!(
            alone.offset_at(x).1 >= 7_000_000,
            "{:?}",
            alone.offset_at(x)
        );
        let shifted = exchanges(100, 5_000_000, 20_000_000, 50_000_000, 0.0);
        let refused = estimate(&shifted, ClockClaim::SameClock { error_ns: 100 }).unwrap();
        assert!(refused.claim_contradicted && !refused.claim_used);
        let (mid, bound) = refused.offset_at(x);
        assert!((mid - 50_000_000).unsigned_abs() <= bound);
    }

    #[test]
    fn far_off_stamps_are_left_out_clocks_that_fit_no_line_give_nothing() {
        let mut e = exchanges(100, 20_000, 20_000, 0, 0.0);
        for x in &mut e[50..] {
            x.server_received += 1_000_000_000;
            x.server_sent += 1_000_000_000;
        }
        // The half stamped a second off is left out; the other half sets the offset.
        let est = estimate(&e[..60], ClockClaim::None).unwrap();
        assert_eq!(est.exchanges, 50);
        let (mid, bound) = est.offset_at(e[45].at());
        assert!(mid.unsigned_abs() <= bound, "{mid} ± {bound}");
        // Two clocks a few drifts apart inside the reach fit no line.
        let mut e = exchanges(100, 20_000, 20_000, 0, 0.0);
        for (i, x) in e.iter_mut().enumerate() {
            let step = if i % 2 == 0 { 200_000 } else { 0 };
            x.server_received += step;
            x.server_sent += step;
        }
        assert_eq!(
            estimate(&e, ClockClaim::None),
            Err(NoEstimate::Inconsistent)
        );
        assert_eq!(
            estimate(&[], ClockClaim::None),
            Err(NoEstimate::NoExchanges)
        );
    }

    #[test]
    fn one_exchange_bounds_the_offset_by_its_round_trip() {
        let e = exchanges(1, 10_000, 30_000, 123_456, 0.0);
        let est = estimate(&e, ClockClaim::None).unwrap();
        let (mid, bound) = est.offset_at(e[0].at());
        assert_eq!(bound, (e[0].round_trip() as u64).div_ceil(2));
        assert!((mid - 123_456).unsigned_abs() <= bound);
    }

    #[test]
    fn a_claim_is_one_boot_or_two_synchronized_kernels() {
        let host = |boot: &str, sync: Option<u64>| ClockInfo {
            boot_id: Some(boot.to_string()),
            sync_error_ns: sync,
        };
        assert_eq!(
            ClockInfo::claim(&host("a", None), &host("a", None), 30),
            ClockClaim::SameClock { error_ns: 30 }
        );
        assert_eq!(
            ClockInfo::claim(&host("a", Some(1_000)), &host("b", Some(2_000)), 30),
            ClockClaim::Synchronized { error_ns: 3_030 }
        );
        assert_eq!(
            ClockInfo::claim(&host("a", Some(1_000)), &host("b", None), 30),
            ClockClaim::None
        );
        assert_eq!(
            ClockInfo::claim(&host("", None), &host("", None), 30),
            ClockClaim::None
        );
    }

    #[test]
    fn stamps_no_clock_could_give_are_refused() {
        let t = 1_800_000_000_000_000_000;
        assert!(Exchange::checked((t, t + 50), (t + 10, t + 20)).is_some());
        // The answer leaves before the request arrives; a stamp before the epoch; past the cap.
        assert!(Exchange::checked((t, t + 50), (t + 20, t + 10)).is_none());
        assert!(Exchange::checked((t, t + 50), (-5, 10)).is_none());
        assert!(Exchange::checked((t, t + 50), (i64::MAX - 1, i64::MAX)).is_none());
        assert!(Exchange::checked((t + 50, t), (t + 10, t + 20)).is_none());
    }
}
