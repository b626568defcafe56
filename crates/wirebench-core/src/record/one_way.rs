//! One-way delay per direction (`ping` today): the clock offset the timed exchanges allow, and
//! each direction's delays with that bound. A delay that falls outside its bound is counted and
//! said, never shown as a figure. Owns the record and its arithmetic; must not time anything
//! (the flows do) or render.

use serde::{Deserialize, Serialize};

use crate::vocab::clock_offset::{estimate, ClockClaim, Exchange, NoEstimate, OffsetEstimate};
use crate::vocab::stats::nearest_rank;

/// What the exchanges of one run say about each direction's delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneWayDelay {
    /// Exchanges timed at both ends (answered at the first try).
    pub exchanges: u64,
    /// The clock offset used and its bound; absent when none could be estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockFigures>,
    /// Why there are no one-way figures, in words for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Client → server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<DelayFigures>,
    /// Server → client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<DelayFigures>,
    /// Exchanges whose delays fall outside the bound (a negative delay beyond it): counted,
    /// left out of `up` and `down`.
    pub outside_bound: u64,
    /// Every exchange, in sending order, when asked for (`ping --per-probe`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<OneWayProbe>,
}

/// One timed exchange's figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OneWayProbe {
    /// When the request left, on the client's wall clock (ns since the Unix epoch).
    pub sent_unix_ns: i64,
    /// Its round trip (ns), the server's time included.
    pub rtt_ns: i64,
    /// Client → server delay (ns, ± the bound); absent when outside the bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_ns: Option<i64>,
    /// Server → client delay (ns, ± the bound); absent when outside the bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_ns: Option<i64>,
}

/// Where the offset between the clocks comes from, and how far it can be off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockFigures {
    /// What set the bound.
    pub source: ClockSource,
    /// Server clock − client clock at the run's middle exchange (ns).
    pub offset_ns: i64,
    /// The most any exchange's offset may be off (ns): every one-way figure is ± this.
    pub bound_ns: u64,
    /// How fast the server's clock gains on the client's (parts per million) and ± how much.
    pub drift_ppm: f64,
    /// Half the range of drifts the exchanges allow (ppm).
    pub drift_bound_ppm: f64,
    /// A claim both hosts made that the exchanges contradict (so it was not used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contradicted: Option<ClockSource>,
}

/// What bounds the offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The exchanges alone: the bound is half the best round trips (path asymmetry cannot be
    /// seen without a shared clock).
    Exchanges,
    /// Both ends read one kernel's clock (the same boot): the offset is 0.
    SameClock,
    /// Both kernels said their clocks were synchronized, within their summed estimated error.
    Synchronized,
}

impl ClockSource {
    /// How a view names it.
    pub fn label(self) -> &'static str {
        match self {
            ClockSource::Exchanges => "estimated from the exchanges",
            ClockSource::SameClock => "one clock (same host)",
            ClockSource::Synchronized => "both clocks synchronized",
        }
    }

    fn of(claim: ClockClaim) -> Option<ClockSource> {
        match claim {
            ClockClaim::None => None,
            ClockClaim::SameClock { .. } => Some(ClockSource::SameClock),
            ClockClaim::Synchronized { .. } => Some(ClockSource::Synchronized),
        }
    }
}

/// Delays of one direction (ns; a figure within the bound of 0 may be slightly negative).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DelayFigures {
    /// Smallest.
    pub min_ns: i64,
    /// Median (nearest rank).
    pub p50_ns: i64,
    /// 99th percentile (nearest rank).
    pub p99_ns: i64,
    /// Largest.
    pub max_ns: i64,
}

impl DelayFigures {
    fn of(mut values: Vec<i64>) -> Option<DelayFigures> {
        values.sort_unstable();
        Some(DelayFigures {
            min_ns: *values.first()?,
            p50_ns: nearest_rank(&values, 500)?,
            p99_ns: nearest_rank(&values, 990)?,
            max_ns: *values.last()?,
        })
    }
}

/// The clock fit of a run: the offset the exchanges (of every phase) allow, with the claim
/// used where they agree with it. One fit, then each phase's delays within it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockFit {
    estimate: Result<OffsetEstimate, NoEstimate>,
    claim: ClockClaim,
}

impl ClockFit {
    /// Fits the offset to `exchanges`, with `claim` where they agree with it.
    pub fn of(exchanges: &[Exchange], claim: ClockClaim) -> ClockFit {
        ClockFit {
            estimate: estimate(exchanges, claim),
            claim,
        }
    }

    /// One exchange's (up, down) delays (ns) and their bound; None without an estimate or when
    /// a delay falls outside the bound.
    pub fn split(&self, e: &Exchange) -> Option<(i64, i64, u64)> {
        let est = self.estimate.as_ref().ok()?;
        let (offset, bound) = est.offset_at(e.at());
        let to_server = e.highest_offset() - offset;
        let to_client = offset - e.lowest_offset();
        let reach = i64::try_from(bound).unwrap_or(i64::MAX);
        if to_server.saturating_add(reach) < 0 || to_client.saturating_add(reach) < 0 {
            return None;
        }
        Some((to_server, to_client, bound))
    }

    /// The clock's figures over `exchanges` (the offset at their middle one, the largest bound
    /// among them); None without an estimate.
    fn figures(&self, exchanges: &[Exchange]) -> Option<ClockFigures> {
        let est = self.estimate.as_ref().ok()?;
        let mut times: Vec<i64> = exchanges.iter().map(Exchange::at).collect();
        times.sort_unstable();
        let middle = times.get(times.len() / 2).copied().unwrap_or(0);
        let bound_ns = times.iter().map(|&x| est.offset_at(x).1).max().unwrap_or(0);
        let (drift_ppm, drift_bound_ppm) = est.drift_ppm();
        let source = if est.claim_used {
            ClockSource::of(self.claim).unwrap_or(ClockSource::Exchanges)
        } else {
            ClockSource::Exchanges
        };
        Some(ClockFigures {
            source,
            offset_ns: est.offset_at(middle).0,
            bound_ns,
            drift_ppm,
            drift_bound_ppm,
            contradicted: if est.claim_contradicted {
                ClockSource::of(self.claim)
            } else {
                None
            },
        })
    }

    /// Why there is no estimate, in words for the user.
    fn why_not(&self) -> &'static str {
        match self.estimate {
            Err(NoEstimate::Inconsistent) => {
                "the timestamps fit no steady clock offset: a clock was set during the run"
            }
            _ => "no request was answered at its first try",
        }
    }
}

impl OneWayDelay {
    /// No figures, for `reason` (e.g. the server does not stamp its answers).
    pub fn unavailable(exchanges: u64, reason: impl Into<String>) -> OneWayDelay {
        OneWayDelay {
            exchanges,
            clock: None,
            unavailable: Some(reason.into()),
            up: None,
            down: None,
            outside_bound: 0,
            probes: Vec::new(),
        }
    }

    /// The same figures with every exchange listed, in sending order (`ping --per-probe`).
    pub fn with_probes(mut self, fit: &ClockFit, exchanges: &[Exchange]) -> OneWayDelay {
        let mut sorted: Vec<&Exchange> = exchanges.iter().collect();
        sorted.sort_by_key(|e| e.client_sent);
        self.probes = sorted
            .into_iter()
            .map(|e| {
                let split = fit.split(e);
                OneWayProbe {
                    sent_unix_ns: e.client_sent,
                    rtt_ns: e.client_received.saturating_sub(e.client_sent),
                    up_ns: split.map(|(up, _, _)| up),
                    down_ns: split.map(|(_, down, _)| down),
                }
            })
            .collect();
        self
    }

    /// Each direction's delays from `exchanges`, the offset bounded by them and by `claim`
    /// where they agree with it.
    pub fn of(exchanges: &[Exchange], claim: ClockClaim) -> OneWayDelay {
        OneWayDelay::within(&ClockFit::of(exchanges, claim), exchanges)
    }

    /// Each direction's delays over `exchanges` (one phase of a run) with the run's `fit`.
    pub fn within(fit: &ClockFit, exchanges: &[Exchange]) -> OneWayDelay {
        let n = exchanges.len() as u64;
        let Some(clock) = fit.figures(exchanges).filter(|_| !exchanges.is_empty()) else {
            return OneWayDelay::unavailable(n, fit.why_not());
        };
        let (mut up, mut down) = (Vec::new(), Vec::new());
        for (to_server, to_client, _) in exchanges.iter().filter_map(|e| fit.split(e)) {
            up.push(to_server);
            down.push(to_client);
        }
        OneWayDelay {
            exchanges: n,
            clock: Some(clock),
            unavailable: None,
            outside_bound: n - up.len() as u64,
            up: DelayFigures::of(up),
            down: DelayFigures::of(down),
            probes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` exchanges 1 ms apart on a path of `up` and `down` ns, the server `offset` ns ahead.
    fn path(n: i64, up: i64, down: i64, offset: i64) -> Vec<Exchange> {
        (0..n)
            .map(|i| {
                let sent = 1_800_000_000_000_000_000 + i * 1_000_000;
                let jitter = (i % 3) * 500;
                Exchange {
                    client_sent: sent,
                    server_received: sent + up + jitter + offset,
                    server_sent: sent + up + jitter + 1_000 + offset,
                    client_received: sent + up + jitter + 1_000 + down,
                }
            })
            .collect()
    }

    #[test]
    fn one_clock_gives_each_direction_exactly() {
        let w = OneWayDelay::of(
            &path(100, 5_000_000, 20_000_000, 0),
            ClockClaim::SameClock { error_ns: 50 },
        );
        let clock = w.clock.as_ref().unwrap();
        assert_eq!(clock.source, ClockSource::SameClock);
        assert!(clock.bound_ns <= 50, "{clock:?}");
        let (up, down) = (w.up.unwrap(), w.down.unwrap());
        assert!((up.min_ns - 5_000_000).abs() <= 50, "{up:?}");
        assert!((up.max_ns - 5_001_000).abs() <= 50, "{up:?}");
        assert!((down.p50_ns - 20_000_000).abs() <= 50, "{down:?}");
        assert_eq!(w.outside_bound, 0);
    }

    #[test]
    fn without_a_shared_clock_the_bound_covers_the_asymmetry() {
        let w = OneWayDelay::of(
            &path(100, 5_000_000, 20_000_000, 3_000_000_000),
            ClockClaim::None,
        );
        let clock = w.clock.as_ref().unwrap();
        assert_eq!(clock.source, ClockSource::Exchanges);
        let (up, down) = (w.up.unwrap(), w.down.unwrap());
        let bound = clock.bound_ns as i64;
        assert!((up.min_ns - 5_000_000).abs() <= bound, "{up:?} ± {bound}");
        assert!(
            (down.min_ns - 20_000_000).abs() <= bound,
            "{down:?} ± {bound}"
        );
        assert!((clock.offset_ns - 3_000_000_000).abs() <= bound);
    }

    #[test]
    fn a_contradicted_claim_is_named_and_not_used() {
        let w = OneWayDelay::of(
            &path(20, 10_000, 10_000, 2_500_000_000),
            ClockClaim::SameClock { error_ns: 50 },
        );
        let clock = w.clock.unwrap();
        assert_eq!(clock.source, ClockSource::Exchanges);
        assert_eq!(clock.contradicted, Some(ClockSource::SameClock));
        assert!((clock.offset_ns - 2_500_000_000).unsigned_abs() <= clock.bound_ns);
    }

    #[test]
    fn a_delay_outside_its_bound_is_counted_not_shown() {
        let mut e = path(50, 100_000, 100_000, 0);
        // One exchange whose server stamps are a second early: its request "arrived" before
        // it left, by far more than any bound.
        e[10].server_received -= 1_000_000_000;
        e[10].server_sent -= 1_000_000_000;
        let w = OneWayDelay::of(&e, ClockClaim::SameClock { error_ns: 50 });
        assert_eq!(w.outside_bound, 1, "{w:?}");
        assert!(w.up.unwrap().min_ns >= 100_000 - 50);
    }

    #[test]
    fn every_probe_is_listed_when_asked_in_sending_order() {
        let mut e = path(5, 5_000, 20_000, 0);
        e.reverse();
        let claim = ClockClaim::SameClock { error_ns: 10 };
        let fit = ClockFit::of(&e, claim);
        let w = OneWayDelay::within(&fit, &e).with_probes(&fit, &e);
        assert_eq!(w.probes.len(), 5);
        assert!(w
            .probes
            .windows(2)
            .all(|p| p[0].sent_unix_ns < p[1].sent_unix_ns));
        let first = w.probes[0];
        assert!((first.up_ns.unwrap() - 5_000).abs() <= 10, "{first:?}");
        assert!((first.down_ns.unwrap() - 20_000).abs() <= 10, "{first:?}");
        assert_eq!(first.rtt_ns, 26_000);
        assert!(OneWayDelay::of(&e, claim).probes.is_empty());
    }
}
