//! Stored responsiveness (`wirebench rpm`) campaigns and the figures their views need beyond
//! the test's own result (`wirebench_core::machine::responsiveness::RpmResult`): loaded-latency
//! percentiles over the probes' round trips, the per-interval time series the report charts,
//! and the comparison of two campaigns (RPM, loaded p99, Mann–Whitney U on the round trips).
//! Owns these records and their arithmetic; must not know how they are stored or drawn.

use serde::{Deserialize, Serialize};

use super::lifecycle::{CampaignKind, SweepInfo, SweepPlan};
use crate::machine::responsiveness::{LoadDirection, Rating, RpmResult};
use crate::vocab::stats::nearest_rank;
use crate::vocab::stats::{MannWhitney, Summary};

/// Significance level of [`RpmComparison`]: a difference counts when p is below this.
pub const ALPHA: f64 = super::comparison::ALPHA;

/// What is known about a stored `wirebench rpm` campaign when it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewRpmCampaign {
    /// Start time, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// The server as named (or `embedded ADDR`, with the relay's description under --impair).
    pub server: String,
    /// Direction of the load.
    pub direction: LoadDirection,
    /// Transport of the load and the probes (`tcp`).
    pub protocol: String,
    /// Most load flows per direction (MNP).
    pub max_flows: u32,
    /// Interval between ramp decisions (ID), nanoseconds.
    pub interval_ns: u64,
    /// Longest load phase, nanoseconds.
    pub max_load_ns: u64,
    /// Tests planned.
    pub planned_results: u64,
    /// The host it ran on.
    pub host_name: Option<String>,
    /// The wirebench that ran it.
    pub wirebench_version: String,
}

impl SweepPlan for NewRpmCampaign {
    const KIND: CampaignKind = CampaignKind::Rpm;
}

/// Version of [`RpmCampaignDocument`] (`wirebench report --rpm --format json`).
pub const DOCUMENT_VERSION: u32 = 1;

/// A stored rpm campaign as one JSON document: the campaign and each test, every test with its
/// loaded-latency figures beside the result `wirebench rpm --json` printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmCampaignDocument {
    /// [`DOCUMENT_VERSION`].
    pub schema_version: u32,
    /// The campaign.
    pub campaign: SweepInfo<NewRpmCampaign>,
    /// Its tests, in run order.
    pub results: Vec<RpmReportEntry>,
}

/// One test of [`RpmCampaignDocument`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmReportEntry {
    /// The test, as `wirebench rpm --json` printed it.
    #[serde(flatten)]
    pub result: RpmResult,
    /// Its loaded latency over the whole load phase.
    pub loaded_latency: LoadedLatency,
}

impl RpmCampaignDocument {
    /// The document of `campaign` and its tests.
    pub fn new(
        campaign: SweepInfo<NewRpmCampaign>,
        results: Vec<RpmResult>,
    ) -> RpmCampaignDocument {
        RpmCampaignDocument {
            schema_version: DOCUMENT_VERSION,
            campaign,
            results: results
                .into_iter()
                .map(|result| RpmReportEntry {
                    loaded_latency: loaded_latency(&result),
                    result,
                })
                .collect(),
        }
    }
}

/// Percentiles of a set of round trips, nanoseconds (nearest rank: the p-th percentile is the
/// smallest sample with at least p % of the samples at or below it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyFigures {
    /// Samples.
    pub samples: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl LatencyFigures {
    /// The percentiles of `samples`; `None` for none.
    pub fn of(samples: impl IntoIterator<Item = u64>) -> Option<LatencyFigures> {
        let mut v: Vec<u64> = samples.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        let rank = |per_mille: usize| nearest_rank(&v, per_mille).unwrap_or(0);
        Some(LatencyFigures {
            samples: n as u64,
            p50_ns: rank(500),
            p90_ns: rank(900),
            p99_ns: rank(990),
            max_ns: v[n - 1],
        })
    }
}

/// The loaded-latency figures of one test: the request round trips of the probes that
/// completed during the load phase (foreign probes on new connections, self probes on the
/// persistent one, and both together).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadedLatency {
    /// Foreign and self request round trips together.
    pub all: Option<LatencyFigures>,
    /// Foreign probes' request round trips (http_f).
    pub foreign: Option<LatencyFigures>,
    /// Self probes' request round trips (http_l).
    pub own: Option<LatencyFigures>,
}

/// The loaded latency of `r`, over every interval.
pub fn loaded_latency(r: &RpmResult) -> LoadedLatency {
    let i = &r.intervals;
    LoadedLatency {
        all: LatencyFigures::of(loaded_samples_ns(r)),
        foreign: LatencyFigures::of(i.iter().flat_map(|x| x.foreign_request_rtt_ns.clone())),
        own: LatencyFigures::of(i.iter().flat_map(|x| x.self_request_rtt_ns.clone())),
    }
}

/// Every loaded request round trip of `r`, nanoseconds, interval by interval (foreign then self
/// within an interval): the samples `compare` tests.
pub fn loaded_samples_ns(r: &RpmResult) -> Vec<u64> {
    r.intervals
        .iter()
        .flat_map(|i| i.loaded_request_rtts_ns())
        .collect()
}

/// One interval of a test on the shared time axis of the report's chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalPoint {
    /// Interval number from 0.
    pub index: u32,
    /// Start, seconds since the load started.
    pub start_s: f64,
    /// End, seconds since the load started.
    pub end_s: f64,
    /// Load flows open during it (per direction).
    pub flows: u32,
    /// Goodput the server sent in it, bit/s.
    pub download_bps: f64,
    /// Goodput the client sent in it, bit/s.
    pub upload_bps: f64,
    /// RPM over the last MAD intervals' probes, as the test computed it.
    pub rpm: Option<f64>,
    /// The loaded latency of the probes that completed in it.
    pub latency: LoadedLatency,
}

/// The time series of `r`: one point per interval, in order.
pub fn timeline(r: &RpmResult) -> Vec<IntervalPoint> {
    let secs = r.parameters.interval_ns as f64 / 1e9;
    r.intervals
        .iter()
        .map(|i| IntervalPoint {
            index: i.index,
            start_s: f64::from(i.index) * secs,
            end_s: f64::from(i.index + 1) * secs,
            flows: i.flows,
            download_bps: i.download_goodput_bps,
            upload_bps: i.upload_goodput_bps,
            rpm: i.rpm,
            latency: LoadedLatency {
                all: LatencyFigures::of(i.loaded_request_rtts_ns()),
                foreign: LatencyFigures::of(i.foreign_request_rtt_ns.iter().copied()),
                own: LatencyFigures::of(i.self_request_rtt_ns.iter().copied()),
            },
        })
        .collect()
}

/// Two stored rpm campaigns side by side: RPM (the median over each campaign's tests), the
/// loaded p99, the sample counts, and a two-sided Mann–Whitney U test of the loaded round trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmComparison {
    /// The baseline campaign.
    pub a: i64,
    /// The campaign compared with it.
    pub b: i64,
    /// Tests with an RPM in A and in B.
    pub results: (usize, usize),
    /// Median RPM over the tests of A and of B.
    pub rpm: (Option<f64>, Option<f64>),
    /// The draft's rating of each median RPM.
    pub rating: (Option<Rating>, Option<Rating>),
    /// Loaded latency of A and of B, all their tests' probes pooled.
    pub loaded: (Option<LatencyFigures>, Option<LatencyFigures>),
    /// Mann–Whitney U test of A's loaded round trips against B's; `None` when a side has none.
    pub test: Option<MannWhitney>,
}

impl RpmComparison {
    /// B's RPM against A's, percent (−20: B has a fifth fewer round trips per minute).
    pub fn rpm_change_pct(&self) -> Option<f64> {
        match self.rpm {
            (Some(a), Some(b)) if a > 0.0 => Some((b / a - 1.0) * 100.0),
            _ => None,
        }
    }

    /// B's loaded p99 against A's, percent (+50: B's p99 is half as long again).
    pub fn p99_change_pct(&self) -> Option<f64> {
        match self.loaded {
            (Some(a), Some(b)) if a.p99_ns > 0 => {
                Some((b.p99_ns as f64 / a.p99_ns as f64 - 1.0) * 100.0)
            }
            _ => None,
        }
    }

    /// Whether the loaded round trips differ significantly at [`ALPHA`].
    pub fn significant(&self) -> bool {
        self.test.is_some_and(|t| t.p_value < ALPHA)
    }

    /// Whether B is significantly worse than A beyond `pct`: its round trips significantly
    /// longer (U of A below its mean), and its RPM lower by more than `pct` % or its loaded
    /// p99 higher by more than `pct` %.
    pub fn is_regression(&self, pct: f64) -> bool {
        let slower = self.test.is_some_and(|t| t.p_value < ALPHA && t.z < 0.0);
        slower
            && (self.rpm_change_pct().is_some_and(|c| c < -pct)
                || self.p99_change_pct().is_some_and(|c| c > pct))
    }
}

/// Compares the tests of campaign `a` with those of campaign `b`.
pub fn compare(a: (i64, &[RpmResult]), b: (i64, &[RpmResult])) -> RpmComparison {
    let median_rpm = |rs: &[RpmResult]| {
        let v: Vec<f64> = rs.iter().filter_map(|r| r.rpm).collect();
        (v.len(), Summary::of(&v).map(|s| s.median))
    };
    let samples =
        |rs: &[RpmResult]| -> Vec<u64> { rs.iter().flat_map(loaded_samples_ns).collect() };
    let (na, rpm_a) = median_rpm(a.1);
    let (nb, rpm_b) = median_rpm(b.1);
    let (sa, sb) = (samples(a.1), samples(b.1));
    let as_f64 = |v: &[u64]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    RpmComparison {
        a: a.0,
        b: b.0,
        results: (na, nb),
        rpm: (rpm_a, rpm_b),
        rating: (rpm_a.map(Rating::of), rpm_b.map(Rating::of)),
        loaded: (
            LatencyFigures::of(sa.iter().copied()),
            LatencyFigures::of(sb.iter().copied()),
        ),
        test: MannWhitney::test(&as_f64(&sa), &as_f64(&sb)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::responsiveness::{
        Confidence, IntervalRecord, Parameters, RPM_SCHEMA_VERSION,
    };

    fn result(rpm: f64, foreign: Vec<Vec<u64>>, own: Vec<Vec<u64>>) -> RpmResult {
        RpmResult {
            schema_version: RPM_SCHEMA_VERSION,
            draft: "draft-ietf-ippm-responsiveness-08".into(),
            server: "s".into(),
            protocol: "tcp".into(),
            direction: LoadDirection::Download,
            rpm: Some(rpm),
            rating: Some(Rating::of(rpm)),
            rpm_confidence: Confidence::High,
            goodput_confidence: Confidence::High,
            components: None,
            idle: None,
            download_goodput_bps: 1e6,
            upload_goodput_bps: 0.0,
            load_flows: 1,
            goodput_stable: true,
            rpm_stable: true,
            duration_ns: 2_000_000_000,
            failed_probes: 0,
            parameters: Parameters {
                interval_ns: 500_000_000,
                ..Parameters::draft()
            },
            intervals: foreign
                .into_iter()
                .zip(own)
                .enumerate()
                .map(|(i, (f, o))| IntervalRecord {
                    index: i as u32,
                    flows: 1,
                    download_goodput_bps: 8e6,
                    foreign_probes: f.len() as u32,
                    self_probes: o.len() as u32,
                    foreign_tcp_handshake_rtt_ns: vec![1; f.len()],
                    foreign_request_rtt_ns: f,
                    self_request_rtt_ns: o,
                    ..IntervalRecord::default()
                })
                .collect(),
            differences: vec![],
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        // 1..=100: p50 = 50th value, p90 = 90th, p99 = 99th, max 100.
        let f = LatencyFigures::of(1..=100).unwrap();
        assert_eq!(
            (f.samples, f.p50_ns, f.p90_ns, f.p99_ns, f.max_ns),
            (100, 50, 90, 99, 100)
        );
        // 1..=10: ceil(0.5 × 10) = 5th, ceil(0.9 × 10) = 9th, ceil(0.99 × 10) = 10th.
        let f = LatencyFigures::of((1..=10).rev()).unwrap();
        assert_eq!((f.p50_ns, f.p90_ns, f.p99_ns), (5, 9, 10));
        // One sample is every percentile; none has none.
        let f = LatencyFigures::of([7]).unwrap();
        assert_eq!((f.p50_ns, f.p99_ns, f.max_ns), (7, 7, 7));
        assert_eq!(LatencyFigures::of(Vec::new()), None);
    }

    #[test]
    fn timeline_puts_each_interval_on_the_load_time_axis() {
        let r = result(
            1000.0,
            vec![vec![10, 30], vec![], vec![50]],
            vec![vec![20], vec![40], vec![]],
        );
        let t = timeline(&r);
        assert_eq!(t.len(), 3);
        // Interval 500 ms: 0–0.5 s, 0.5–1 s, 1–1.5 s.
        assert_eq!((t[1].start_s, t[1].end_s), (0.5, 1.0));
        // Interval 0: foreign 10, 30 and self 20 → p50 = 2nd of 3 = 20, p99 = 30.
        let all = t[0].latency.all.unwrap();
        assert_eq!((all.samples, all.p50_ns, all.p99_ns), (3, 20, 30));
        // Interval 1 has only a self probe; interval 2 only a foreign one.
        assert_eq!(t[1].latency.foreign, None);
        assert_eq!(t[1].latency.own.unwrap().p50_ns, 40);
        assert_eq!(t[2].latency.own, None);
        // The whole test: 10, 20, 30, 40, 50.
        let l = loaded_latency(&r);
        assert_eq!(l.all.unwrap().samples, 5);
        assert_eq!(l.all.unwrap().p50_ns, 30);
        assert_eq!(l.foreign.unwrap().samples, 3);
        assert_eq!(loaded_samples_ns(&r), vec![10, 30, 20, 40, 50]);
    }

    #[test]
    fn comparison_of_a_slower_campaign_is_a_regression() {
        // A: 40 round trips of 10..=49 ms; B: the same shifted by 40 ms (every B longer).
        let ms = |v: std::ops::RangeInclusive<u64>| v.map(|x| x * 1_000_000).collect::<Vec<_>>();
        let a = result(3000.0, vec![ms(10..=29)], vec![ms(30..=49)]);
        let b = result(1000.0, vec![ms(50..=69)], vec![ms(70..=89)]);
        let c = compare((1, std::slice::from_ref(&a)), (2, std::slice::from_ref(&b)));
        assert_eq!(c.results, (1, 1));
        assert_eq!(c.rpm, (Some(3000.0), Some(1000.0)));
        assert_eq!(c.rating, (Some(Rating::Good), Some(Rating::Good)));
        // p99 of 40 samples = ceil(39.6) = 40th: 49 ms and 89 ms.
        assert_eq!(c.loaded.0.unwrap().p99_ns, 49_000_000);
        assert_eq!(c.loaded.1.unwrap().p99_ns, 89_000_000);
        let rpm_change = c.rpm_change_pct().unwrap();
        assert!((rpm_change + 66.666).abs() < 0.01, "{rpm_change}");
        let p99_change = c.p99_change_pct().unwrap();
        assert!((p99_change - 81.63).abs() < 0.01, "{p99_change}");
        // Complete separation: U of A = 0, far below its mean of 800: significant, A faster.
        let t = c.test.unwrap();
        assert_eq!(t.u, 0.0);
        assert!(t.p_value < 1e-6 && t.z < 0.0);
        assert!(c.significant());
        assert!(c.is_regression(10.0));
        assert!(!c.is_regression(90.0), "neither change exceeds 90 %");
        // The other way round B → A is an improvement, never a regression.
        let back = compare((2, std::slice::from_ref(&b)), (1, std::slice::from_ref(&a)));
        assert!(back.significant() && !back.is_regression(10.0));
        // Identical campaigns: no difference.
        let same = compare((1, std::slice::from_ref(&a)), (3, std::slice::from_ref(&a)));
        assert!(!same.significant());
        assert_eq!(same.rpm_change_pct(), Some(0.0));
    }

    #[test]
    fn a_campaign_without_samples_has_no_test() {
        let empty = result(500.0, vec![], vec![]);
        let a = result(3000.0, vec![vec![1, 2]], vec![vec![3]]);
        let c = compare((1, &[a]), (2, &[empty]));
        assert_eq!(c.test, None);
        assert_eq!(c.loaded.1, None);
        assert_eq!(c.p99_change_pct(), None);
        assert!(!c.is_regression(0.0));
        // No test at all: no results on a side.
        let c = compare((1, &[]), (2, &[]));
        assert_eq!((c.results, c.rpm), ((0, 0), (None, None)));
    }
}
