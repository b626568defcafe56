//! Latency under load (`run --latency-probe`): round trips of small probes sent on a flow of
//! their own beside a run — idle before the load, then every interval during it — summarised
//! here once (nearest-rank percentiles, the increase over idle: the bufferbloat figure). Owns
//! the record and its arithmetic; must not measure (the probe flow does) or render.

use serde::{Deserialize, Serialize};

use crate::record::one_way::{ClockFit, OneWayDelay};
use crate::vocab::clock_offset::{ClockClaim, Exchange};
use crate::vocab::plan::Protocol;
use crate::vocab::stats::nearest_rank;

/// The latency probes of one run: one entry per probe flow (e.g. UDP and the protocol under
/// test), in the order they were configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedLatency {
    /// Each probe flow's figures.
    pub probes: Vec<ProbeFlowRecord>,
}

/// One probe flow beside a run: what it measured before the load and during it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeFlowRecord {
    /// The probe's transport (a UDP datagram, or a small request on a TCP connection or QUIC
    /// stream of its own, answered by the server's request-response handling).
    pub protocol: Protocol,
    /// Spacing of the probes (ns); each leaves on schedule whatever the earlier ones do.
    pub interval_ns: u64,
    /// A probe unanswered this long (ns) counts as lost.
    pub timeout_ns: u64,
    /// Before the load.
    pub idle: ProbePhase,
    /// While the load ran.
    pub loaded: ProbePhase,
    /// Loaded minus idle: the queueing the load added; absent without answers in both phases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub increase: Option<LatencyIncrease>,
    /// Every answered probe of the loaded phase, in sending order.
    pub series: Vec<ProbeSample>,
    /// Probes answered with the server's stamps: each direction's delay, idle and loaded,
    /// within one clock fit over both phases; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<ProbeOneWay>,
}

/// Each direction's delay in the two phases of a probe flow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeOneWay {
    /// Before the load.
    pub idle: OneWayDelay,
    /// While the load ran: the queue the load built shows in the direction it loaded.
    pub loaded: OneWayDelay,
}

/// The probes of one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbePhase {
    /// Probes sent: `sent = answered + lost` (those in flight when the sending stopped were
    /// waited for, up to the timeout).
    pub sent: u64,
    /// Probes answered within the timeout.
    pub answered: u64,
    /// Probes not answered within the timeout (or whose send failed).
    pub lost: u64,
    /// How long probes were sent for (ns): idle, until the last was sent; loaded, until the
    /// load ended.
    pub duration_ns: u64,
    /// Round-trip summary of the answered probes; absent when none was answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt: Option<ProbeRtt>,
}

/// Round-trip times of a phase's answered probes (ns), nearest-rank percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeRtt {
    /// Smallest.
    pub min_ns: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Largest.
    pub max_ns: u64,
    /// Arithmetic mean.
    pub mean_ns: f64,
}

/// How much the load raised the round trip over the idle median (ns; negative when the loaded
/// figure is lower, e.g. by noise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyIncrease {
    /// Loaded median − idle median.
    pub p50_ns: i64,
    /// Loaded 99th percentile − idle median.
    pub p99_ns: i64,
}

/// One answered probe of the loaded phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSample {
    /// When it was sent, since the load began (ns).
    pub t_ns: u64,
    /// Its round trip (ns).
    pub rtt_ns: u64,
    /// Client → server delay (ns, ± the flow's clock bound); absent when not stamped or
    /// outside the bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_ns: Option<i64>,
    /// Server → client delay (ns), likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_ns: Option<i64>,
}

/// What a probe flow saw in one phase, as measured: answered probes and the lost count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseSamples {
    /// Answered probes in sending order.
    pub answered: Vec<ProbeSample>,
    /// Probes lost (timed out or not sent).
    pub lost: u64,
    /// How long the phase lasted (ns).
    pub duration_ns: u64,
    /// With stamped answers, the exchange of each answered probe (same order as `answered`;
    /// None for one answered after a retry); empty without stamps.
    pub exchanges: Vec<Option<Exchange>>,
}

impl PhaseSamples {
    /// The phase's timed exchanges.
    fn timed(&self) -> Vec<Exchange> {
        self.exchanges.iter().flatten().copied().collect()
    }
}

impl ProbeRtt {
    /// Summarises round trips (ns); `None` for none.
    pub fn of(rtts_ns: &[u64]) -> Option<ProbeRtt> {
        let mut sorted = rtts_ns.to_vec();
        sorted.sort_unstable();
        let (&min_ns, &max_ns) = (sorted.first()?, sorted.last()?);
        let sum: u128 = sorted.iter().map(|&v| u128::from(v)).sum();
        Some(ProbeRtt {
            min_ns,
            p50_ns: nearest_rank(&sorted, 500)?,
            p90_ns: nearest_rank(&sorted, 900)?,
            p99_ns: nearest_rank(&sorted, 990)?,
            max_ns,
            mean_ns: sum as f64 / sorted.len() as f64,
        })
    }
}

impl ProbePhase {
    /// The phase's counts and summary from what was measured.
    pub fn of(samples: &PhaseSamples) -> ProbePhase {
        let rtts: Vec<u64> = samples.answered.iter().map(|s| s.rtt_ns).collect();
        let answered = rtts.len() as u64;
        ProbePhase {
            sent: answered + samples.lost,
            answered,
            lost: samples.lost,
            duration_ns: samples.duration_ns,
            rtt: ProbeRtt::of(&rtts),
        }
    }
}

impl LatencyIncrease {
    /// Loaded median and 99th percentile over the idle median.
    pub fn of(idle: &ProbeRtt, loaded: &ProbeRtt) -> LatencyIncrease {
        let diff = |a: u64, b: u64| {
            let d = i128::from(a) - i128::from(b);
            i64::try_from(d).unwrap_or(if d < 0 { i64::MIN } else { i64::MAX })
        };
        LatencyIncrease {
            p50_ns: diff(loaded.p50_ns, idle.p50_ns),
            p99_ns: diff(loaded.p99_ns, idle.p50_ns),
        }
    }
}

impl ProbeFlowRecord {
    /// The record of one probe flow from its two phases; `clock` is what both hosts claim of
    /// their clocks when the probes were stamped (None: no one-way delays).
    pub fn of(
        protocol: Protocol,
        (interval_ns, timeout_ns): (u64, u64),
        idle: &PhaseSamples,
        loaded: &PhaseSamples,
        clock: Option<ClockClaim>,
    ) -> ProbeFlowRecord {
        let (idle_phase, loaded_phase) = (ProbePhase::of(idle), ProbePhase::of(loaded));
        let increase = idle_phase
            .rtt
            .zip(loaded_phase.rtt)
            .map(|(i, l)| LatencyIncrease::of(&i, &l));
        ProbeFlowRecord {
            protocol,
            interval_ns,
            timeout_ns,
            idle: idle_phase,
            loaded: loaded_phase,
            increase,
            series: loaded.answered.clone(),
            one_way: None,
        }
        .with_one_way(idle, loaded, clock)
    }

    /// Adds each direction's delays: one clock fit over both phases' exchanges, each phase
    /// and each loaded sample within it.
    fn with_one_way(
        mut self,
        idle: &PhaseSamples,
        loaded: &PhaseSamples,
        clock: Option<ClockClaim>,
    ) -> ProbeFlowRecord {
        let Some(claim) = clock else {
            return self;
        };
        let (idle_timed, loaded_timed) = (idle.timed(), loaded.timed());
        let all: Vec<Exchange> = idle_timed.iter().chain(&loaded_timed).copied().collect();
        let fit = ClockFit::of(&all, claim);
        for (sample, exchange) in self.series.iter_mut().zip(&loaded.exchanges) {
            if let Some((up, down, _)) = exchange.as_ref().and_then(|e| fit.split(e)) {
                (sample.up_ns, sample.down_ns) = (Some(up), Some(down));
            }
        }
        self.one_way = Some(ProbeOneWay {
            idle: OneWayDelay::within(&fit, &idle_timed),
            loaded: OneWayDelay::within(&fit, &loaded_timed),
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rtts_ms: &[u64], lost: u64) -> PhaseSamples {
        PhaseSamples {
            answered: rtts_ms
                .iter()
                .enumerate()
                .map(|(i, &ms)| ProbeSample {
                    t_ns: i as u64 * 100_000_000,
                    rtt_ns: ms * 1_000_000,
                    up_ns: None,
                    down_ns: None,
                })
                .collect(),
            lost,
            duration_ns: 1_000_000_000,
            exchanges: Vec::new(),
        }
    }

    #[test]
    fn nearest_rank_percentiles_by_hand() {
        // 1..=10: p50 = rank ceil(5) = 5; p90 = rank 9; p99 = rank ceil(9.9) = 10.
        let v: Vec<u64> = (1..=10).collect();
        let r = ProbeRtt::of(&v).unwrap();
        assert_eq!(
            (r.min_ns, r.p50_ns, r.p90_ns, r.p99_ns, r.max_ns),
            (1, 5, 9, 10, 10)
        );
        assert_eq!(r.mean_ns, 5.5);
        // Unsorted input, 4 values [40, 10, 30, 20]: p50 = rank 2 = 20, p90 = rank ceil(3.6) =
        // 4 = 40.
        let r = ProbeRtt::of(&[40, 10, 30, 20]).unwrap();
        assert_eq!((r.p50_ns, r.p90_ns, r.p99_ns), (20, 40, 40));
        // One value is every percentile.
        let r = ProbeRtt::of(&[7]).unwrap();
        assert_eq!((r.min_ns, r.p50_ns, r.p99_ns, r.max_ns), (7, 7, 7, 7));
        assert_eq!(ProbeRtt::of(&[]), None);
    }

    #[test]
    fn the_increase_is_loaded_over_the_idle_median() {
        // Idle 1, 2, 3 ms (median 2); loaded 10..=109 ms (median rank 50 = 59 ms, p99 rank 99 =
        // 108 ms): +57 ms at the median, +106 ms at p99.
        let idle = samples(&[3, 1, 2], 0);
        let loaded_ms: Vec<u64> = (10..110).collect();
        let loaded = samples(&loaded_ms, 4);
        let r = ProbeFlowRecord::of(
            Protocol::Udp,
            (100_000_000, 2_000_000_000),
            &idle,
            &loaded,
            None,
        );
        assert_eq!(r.idle.rtt.unwrap().p50_ns, 2_000_000);
        let l = r.loaded.rtt.unwrap();
        assert_eq!(
            (l.p50_ns, l.p90_ns, l.p99_ns),
            (59_000_000, 99_000_000, 108_000_000)
        );
        assert_eq!(
            r.increase,
            Some(LatencyIncrease {
                p50_ns: 57_000_000,
                p99_ns: 106_000_000
            })
        );
        assert_eq!(
            (r.loaded.sent, r.loaded.answered, r.loaded.lost),
            (104, 100, 4)
        );
        assert_eq!(r.series.len(), 100);
        assert_eq!(r.series[1].t_ns, 100_000_000);
    }

    #[test]
    fn a_lower_loaded_figure_is_a_negative_increase_and_no_answers_no_increase() {
        let r = ProbeFlowRecord::of(
            Protocol::Tcp,
            (1, 1),
            &samples(&[5], 0),
            &samples(&[4], 0),
            None,
        );
        assert_eq!(r.increase.unwrap().p50_ns, -1_000_000);
        let r = ProbeFlowRecord::of(
            Protocol::Tcp,
            (1, 1),
            &samples(&[5], 0),
            &samples(&[], 3),
            None,
        );
        assert_eq!(r.increase, None);
        assert_eq!((r.loaded.sent, r.loaded.answered, r.loaded.lost), (3, 0, 3));
        assert_eq!(r.loaded.rtt, None);
    }

    #[test]
    fn the_record_round_trips_through_json() {
        let r = LoadedLatency {
            probes: vec![ProbeFlowRecord::of(
                Protocol::Udp,
                (100, 200),
                &samples(&[1, 2], 1),
                &samples(&[3], 0),
                None,
            )],
        };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<LoadedLatency>(&json).unwrap(), r);
    }

    /// Stamped probes on one clock: 5 ms up and 20 ms down idle; the load queues 30 ms more
    /// in the up direction only, and each loaded sample carries its own split.
    #[test]
    fn the_loaded_direction_shows_the_queue() {
        let phase = |start: i64, n: i64, up: i64, down: i64| {
            let mut p = PhaseSamples::default();
            for i in 0..n {
                let sent = 1_800_000_000_000_000_000 + start + i * 100_000_000;
                let e = Exchange {
                    client_sent: sent,
                    server_received: sent + up,
                    server_sent: sent + up + 10_000,
                    client_received: sent + up + 10_000 + down,
                };
                p.answered.push(ProbeSample {
                    t_ns: (i * 100_000_000) as u64,
                    rtt_ns: (up + down + 10_000) as u64,
                    up_ns: None,
                    down_ns: None,
                });
                p.exchanges.push(Some(e));
            }
            p
        };
        let idle = phase(0, 10, 5_000_000, 20_000_000);
        let loaded = phase(2_000_000_000, 30, 35_000_000, 20_000_000);
        let r = ProbeFlowRecord::of(
            Protocol::Udp,
            (100_000_000, 2_000_000_000),
            &idle,
            &loaded,
            Some(ClockClaim::SameClock { error_ns: 100 }),
        );
        let w = r.one_way.unwrap();
        let near = |a: i64, b: i64| (a - b).abs() <= 100;
        assert!(near(w.idle.up.unwrap().p50_ns, 5_000_000), "{w:?}");
        assert!(near(w.loaded.up.unwrap().p50_ns, 35_000_000), "{w:?}");
        assert!(near(w.loaded.down.unwrap().p50_ns, 20_000_000), "{w:?}");
        assert!(r
            .series
            .iter()
            .all(|s| s.up_ns.is_some_and(|u| near(u, 35_000_000))));
        let none = ProbeFlowRecord::of(Protocol::Udp, (1, 1), &idle, &loaded, None);
        assert!(none.one_way.is_none() && none.series[0].up_ns.is_none());
    }
}
