//! Responsiveness under working conditions (draft-ietf-ippm-responsiveness): owns the draft's
//! aggregation — the single-sided trimmed mean, the moving-average stability test over the last
//! MAD intervals, the RPM formula, the confidence and rating words — the ramp decisions of the
//! test (one more load flow per interval, when goodput and then responsiveness are stable) and
//! the result record; must not open sockets or read clocks: intervals and samples are handed in.
//!
//! The draft text used is draft-ietf-ippm-responsiveness-08 (October 2025, the current
//! datatracker revision) checked against the editors' copy of -09: MAD = 4, TMP = 95 %,
//! SDT = 5 %, INP = INC = 1, MNP = 16, MPS = 100 probes per second, PTC = 5 % of capacity.
//! ID is 1 s as in -08; -09 raises it to 5 s "pending further investigation" (see
//! [`Parameters::draft`]).

use serde::{Deserialize, Serialize};

/// Version of [`RpmResult`]'s JSON shape. Version 2: every interval carries its probes' round
/// trips (the samples the stored report charts and `compare` tests); version 1 documents read
/// as version 2 with no samples.
pub const RPM_SCHEMA_VERSION: u32 = 2;

/// Bytes one foreign probe exchanges, as the draft estimates it (TCP and TLS overhead included).
pub const FOREIGN_PROBE_BYTES: u64 = 5000;

/// Bytes one self probe exchanges, as the draft estimates it.
pub const SELF_PROBE_BYTES: u64 = 1000;

/// The draft's test parameters.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Parameters {
    /// MAD: intervals a moving average spans.
    pub moving_average_distance: u32,
    /// ID: interval length, nanoseconds.
    pub interval_ns: u64,
    /// TMP: the percentile the trimmed mean keeps (95 = the highest 5 % are dropped).
    pub trimmed_mean_percent: f64,
    /// SDT: stability when the standard deviation is within this percentage of the latest
    /// moving average.
    pub stddev_tolerance_percent: f64,
    /// MNP: most load-generating flows.
    pub max_flows: u32,
    /// MPS: most probe pairs (one foreign, one self) launched per second.
    pub max_probes_per_second: u32,
    /// PTC: most of the measured goodput the probes may use, percent.
    pub probe_capacity_percent: f64,
}

impl Parameters {
    /// The draft's defaults, with ID = 1 s (draft -08; -09 has 5 s, which with MAD = 4 cannot
    /// finish in 20 s).
    pub fn draft() -> Parameters {
        Parameters {
            moving_average_distance: 4,
            interval_ns: 1_000_000_000,
            trimmed_mean_percent: 95.0,
            stddev_tolerance_percent: 5.0,
            max_flows: 16,
            max_probes_per_second: 100,
            probe_capacity_percent: 5.0,
        }
    }

    /// Probe pairs per second allowed with `goodput_bps` measured: at most MPS, and the pairs'
    /// bytes ([`FOREIGN_PROBE_BYTES`] + [`SELF_PROBE_BYTES`]) at most PTC of the goodput; at
    /// least one per second so the test always measures something.
    pub fn probe_rate(&self, goodput_bps: f64) -> f64 {
        let pair_bits = ((FOREIGN_PROBE_BYTES + SELF_PROBE_BYTES) * 8) as f64;
        let by_capacity = goodput_bps.max(0.0) * self.probe_capacity_percent / 100.0 / pair_bits;
        by_capacity.clamp(1.0, f64::from(self.max_probes_per_second.max(1)))
    }
}

/// Single-sided trimmed mean: the mean of the values at or below the `percent` percentile —
/// the highest `floor(n × (100 − percent) / 100)` values are dropped (with 95 %: one value in
/// every 20, none below 20 samples). `None` for no values; NaNs are ignored.
pub fn trimmed_mean(values: &[f64], percent: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let drop_fraction = ((100.0 - percent) / 100.0).clamp(0.0, 1.0);
    // Values are counted exactly: 20 × 0.05 must drop exactly one, not 0.999…
    let drop = ((v.len() as f64 * drop_fraction) + 1e-9).floor() as usize;
    let keep = (v.len() - drop.min(v.len() - 1)).max(1);
    Some(v[..keep].iter().sum::<f64>() / keep as f64)
}

/// Population standard deviation (divided by n) of `values`; 0 for fewer than two.
pub fn stddev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt()
}

/// The draft's stability test on a series of moving averages (oldest first): stable when there
/// are at least `mad` of them and the standard deviation of the last `mad` is less than
/// `tolerance_percent` of the most recent one.
pub fn is_stable(moving_averages: &[f64], mad: usize, tolerance_percent: f64) -> bool {
    if mad == 0 || moving_averages.len() < mad {
        return false;
    }
    let last = &moving_averages[moving_averages.len() - mad..];
    let current = last[mad - 1];
    current.is_finite() && stddev(last) < tolerance_percent / 100.0 * current.abs()
}

/// The moving-average aggregate goodput at the last interval: the bytes of the last `mad`
/// intervals × 8 over `mad × interval`, bit/s. `None` before `mad` intervals have run.
pub fn moving_average_goodput_bps(
    bytes_per_interval: &[u64],
    mad: usize,
    interval_ns: u64,
) -> Option<f64> {
    if mad == 0 || bytes_per_interval.len() < mad || interval_ns == 0 {
        return None;
    }
    let bytes: u64 = bytes_per_interval[bytes_per_interval.len() - mad..]
        .iter()
        .sum();
    Some(bytes as f64 * 8.0 / (mad as f64 * interval_ns as f64 / 1e9))
}

/// The trimmed means of one window of probes, milliseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Components {
    /// TM(tcp_f): TCP handshake of foreign probes.
    pub foreign_tcp_ms: f64,
    /// TM(tls_f): TLS handshake of foreign probes normalised to one round trip; `None` without TLS.
    pub foreign_tls_ms: Option<f64>,
    /// TM(http_f): request → response on a foreign probe's new connection.
    pub foreign_request_ms: f64,
    /// TM(http_l): request → response of self probes.
    pub self_request_ms: f64,
}

/// RPM from its components, the draft's way.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct RpmFigures {
    /// 60000 / mean of the foreign components (three with TLS, two without).
    pub foreign_rpm: f64,
    /// 60000 / TM(http_l).
    pub self_rpm: f64,
    /// (foreign + self) / 2.
    pub rpm: f64,
}

/// The draft's formula: `Foreign = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3)`, or
/// `/ 2` over TCP and HTTP alone without TLS; `Loaded = 60000 / TM(http_l)`;
/// `RPM = (Foreign + Loaded) / 2`. `None` when a component is not positive.
pub fn rpm(c: &Components) -> Option<RpmFigures> {
    let foreign_ms = match c.foreign_tls_ms {
        Some(tls) => (c.foreign_tcp_ms + tls + c.foreign_request_ms) / 3.0,
        None => (c.foreign_tcp_ms + c.foreign_request_ms) / 2.0,
    };
    if !(foreign_ms > 0.0 && c.self_request_ms > 0.0) {
        return None;
    }
    let foreign_rpm = 60_000.0 / foreign_ms;
    let self_rpm = 60_000.0 / c.self_request_ms;
    Some(RpmFigures {
        foreign_rpm,
        self_rpm,
        rpm: (foreign_rpm + self_rpm) / 2.0,
    })
}

/// The draft's confidence in one stage's figure.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Fewer than MAD intervals of the stage ran: the moving average never spanned its window.
    Low,
    /// At least MAD intervals ran, but the figure never became stable.
    Medium,
    /// The figure became stable within the tolerance.
    High,
}

impl Confidence {
    /// Confidence of a stage that ran `intervals` moving averages (out of `mad` needed) and
    /// did or did not reach stability.
    pub fn of(intervals: usize, mad: usize, stable: bool) -> Confidence {
        if stable {
            Confidence::High
        } else if intervals >= mad {
            Confidence::Medium
        } else {
            Confidence::Low
        }
    }

    /// The draft's word.
    pub fn word(self) -> &'static str {
        match self {
            Confidence::Low => "Low",
            Confidence::Medium => "Medium",
            Confidence::High => "High",
        }
    }
}

/// The draft's four classes of responsiveness.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Rating {
    /// Below 300 RPM (above 200 ms).
    Poor,
    /// 300 to 1000 RPM (200 to 60 ms).
    Fair,
    /// 1000 to 6000 RPM (60 to 10 ms).
    Good,
    /// 6000 RPM or more (10 ms or less).
    Excellent,
}

impl Rating {
    /// The class of `rpm`: a boundary value belongs to the better class.
    pub fn of(rpm: f64) -> Rating {
        if rpm >= 6000.0 {
            Rating::Excellent
        } else if rpm >= 1000.0 {
            Rating::Good
        } else if rpm >= 300.0 {
            Rating::Fair
        } else {
            Rating::Poor
        }
    }

    /// The draft's words.
    pub fn word(self) -> &'static str {
        match self {
            Rating::Poor => "Poor",
            Rating::Fair => "Fair",
            Rating::Good => "Good",
            Rating::Excellent => "Excellent",
        }
    }
}

/// The probes that completed in one interval, milliseconds each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalProbes {
    /// tcp_f samples.
    pub foreign_tcp_ms: Vec<f64>,
    /// tls_f samples (empty without TLS).
    pub foreign_tls_ms: Vec<f64>,
    /// http_f samples.
    pub foreign_request_ms: Vec<f64>,
    /// http_l samples.
    pub self_request_ms: Vec<f64>,
}

/// What the test should do after an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Open one more load-generating flow.
    pub add_flow: bool,
    /// Goodput was declared saturated at this interval.
    pub goodput_saturated_now: bool,
    /// Responsiveness is stable: the test is done.
    pub done: bool,
}

/// The test's decisions over intervals: one more flow per interval up to MNP, the goodput
/// stability test, then the responsiveness stability test; time enters as interval ends.
#[derive(Debug, Clone)]
pub struct RampMachine {
    params: Parameters,
    flows: u32,
    bytes: Vec<u64>,
    goodput_ma: Vec<f64>,
    goodput_saturated_at: Option<usize>,
    probes: Vec<IntervalProbes>,
    responsiveness: Vec<f64>,
    /// Responsiveness values computed since goodput saturation (the stage's intervals).
    responsiveness_stage: Vec<f64>,
    stable: bool,
}

impl RampMachine {
    /// A test starting with INP = 1 flow.
    pub fn new(params: Parameters) -> RampMachine {
        RampMachine {
            params,
            flows: 1,
            bytes: Vec::new(),
            goodput_ma: Vec::new(),
            goodput_saturated_at: None,
            probes: Vec::new(),
            responsiveness: Vec::new(),
            responsiveness_stage: Vec::new(),
            stable: false,
        }
    }

    /// Flows the test has asked for so far.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// Records that a flow asked for could not be opened (the server refused it): the ramp
    /// stays at `open` flows and stops growing.
    pub fn flows_capped(&mut self, open: u32) {
        self.flows = open.max(1);
        self.params.max_flows = self.flows;
    }

    /// One interval has ended: `bytes` of goodput moved in it (all flows, both directions),
    /// and these probes completed in it.
    pub fn handle_interval(&mut self, bytes: u64, probes: IntervalProbes) -> Step {
        let mad = self.params.moving_average_distance as usize;
        self.bytes.push(bytes);
        self.probes.push(probes);
        let mut step = Step {
            add_flow: false,
            goodput_saturated_now: false,
            done: false,
        };
        if let Some(ma) = moving_average_goodput_bps(&self.bytes, mad, self.params.interval_ns) {
            self.goodput_ma.push(ma);
        }
        let current = self.current_figures().map(|f| f.rpm);
        self.responsiveness.push(current.unwrap_or(f64::NAN));
        if self.goodput_saturated_at.is_none() {
            if is_stable(&self.goodput_ma, mad, self.params.stddev_tolerance_percent) {
                self.goodput_saturated_at = Some(self.bytes.len() - 1);
                step.goodput_saturated_now = true;
            }
        } else if !self.stable {
            self.responsiveness_stage.push(current.unwrap_or(f64::NAN));
            let values = &self.responsiveness_stage;
            if is_stable(values, mad, self.params.stddev_tolerance_percent) {
                self.stable = true;
                step.done = true;
            }
        }
        if !step.done && self.flows < self.params.max_flows {
            self.flows += 1;
            step.add_flow = true;
        }
        step
    }

    /// The trimmed-mean components over the probes of the last MAD intervals.
    pub fn current_components(&self) -> Option<Components> {
        let mad = self.params.moving_average_distance as usize;
        let window = &self.probes[self.probes.len().saturating_sub(mad)..];
        let gather = |f: fn(&IntervalProbes) -> &Vec<f64>| -> Vec<f64> {
            window.iter().flat_map(|p| f(p).iter().copied()).collect()
        };
        let tmp = self.params.trimmed_mean_percent;
        let tls = gather(|p| &p.foreign_tls_ms);
        Some(Components {
            foreign_tcp_ms: trimmed_mean(&gather(|p| &p.foreign_tcp_ms), tmp)?,
            foreign_tls_ms: trimmed_mean(&tls, tmp),
            foreign_request_ms: trimmed_mean(&gather(|p| &p.foreign_request_ms), tmp)?,
            self_request_ms: trimmed_mean(&gather(|p| &p.self_request_ms), tmp)?,
        })
    }

    /// RPM over the probes of the last MAD intervals.
    pub fn current_figures(&self) -> Option<RpmFigures> {
        rpm(&self.current_components()?)
    }

    /// The moving-average goodput after each interval (from the MAD-th on), bit/s.
    pub fn goodput_moving_averages_bps(&self) -> &[f64] {
        &self.goodput_ma
    }

    /// RPM after each interval (NaN where probes were missing).
    pub fn responsiveness_series(&self) -> &[f64] {
        &self.responsiveness
    }

    /// Whether goodput was declared saturated.
    pub fn goodput_saturated(&self) -> bool {
        self.goodput_saturated_at.is_some()
    }

    /// Whether responsiveness became stable.
    pub fn responsiveness_stable(&self) -> bool {
        self.stable
    }

    /// Confidence in the goodput figure: how many moving averages the goodput stage computed.
    pub fn goodput_confidence(&self) -> Confidence {
        let mad = self.params.moving_average_distance as usize;
        let stage = match self.goodput_saturated_at {
            Some(at) => at + 1,
            None => self.bytes.len(),
        };
        // A moving average needs MAD intervals; the stage's count is of its moving averages.
        Confidence::of(
            stage.saturating_sub(mad.saturating_sub(1)),
            mad,
            self.goodput_saturated(),
        )
    }

    /// Confidence in the RPM figure: how many intervals the responsiveness stage ran.
    pub fn responsiveness_confidence(&self) -> Confidence {
        let mad = self.params.moving_average_distance as usize;
        Confidence::of(self.responsiveness_stage.len(), mad, self.stable)
    }
}

/// Which way the load goes.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LoadDirection {
    /// The server sends.
    Download,
    /// The client sends.
    Upload,
    /// Both at once (the draft's concurrent test; one score).
    Both,
}

impl LoadDirection {
    /// The name stored and printed: `download`, `upload` or `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadDirection::Download => "download",
            LoadDirection::Upload => "upload",
            LoadDirection::Both => "both",
        }
    }

    /// The direction named `s` (as [`LoadDirection::as_str`] names it).
    pub fn from_name(s: &str) -> Option<LoadDirection> {
        Some(match s {
            "download" => LoadDirection::Download,
            "upload" => LoadDirection::Upload,
            "both" => LoadDirection::Both,
            _ => return None,
        })
    }

    /// Whether the server sends load.
    pub fn downloads(self) -> bool {
        matches!(self, LoadDirection::Download | LoadDirection::Both)
    }

    /// Whether the client sends load.
    pub fn uploads(self) -> bool {
        matches!(self, LoadDirection::Upload | LoadDirection::Both)
    }
}

/// Trimmed means of the probe components, nanoseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct ComponentRecord {
    /// TM(tcp_f): TCP connect of a new connection.
    pub foreign_tcp_handshake_rtt_ns: u64,
    /// TM(tls_f): TLS handshake per round trip; absent without TLS.
    pub foreign_tls_handshake_rtt_ns: Option<u64>,
    /// TM(http_f): request → response on the new connection.
    pub foreign_request_rtt_ns: u64,
    /// TM(http_l): request → response of self probes.
    pub self_request_rtt_ns: u64,
    /// 60000 / mean of the foreign components.
    pub foreign_rpm: f64,
    /// 60000 / TM(http_l).
    pub self_rpm: f64,
}

impl ComponentRecord {
    /// The record of `c` and its figures.
    pub fn of(c: &Components, f: &RpmFigures) -> ComponentRecord {
        let ns = |ms: f64| (ms * 1e6).round().max(0.0) as u64;
        ComponentRecord {
            foreign_tcp_handshake_rtt_ns: ns(c.foreign_tcp_ms),
            foreign_tls_handshake_rtt_ns: c.foreign_tls_ms.map(ns),
            foreign_request_rtt_ns: ns(c.foreign_request_ms),
            self_request_rtt_ns: ns(c.self_request_ms),
            foreign_rpm: f.foreign_rpm,
            self_rpm: f.self_rpm,
        }
    }
}

/// One interval of the test.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct IntervalRecord {
    /// Interval number from 0.
    pub index: u32,
    /// Load flows open during it.
    pub flows: u32,
    /// Goodput the server sent, bit/s.
    pub download_goodput_bps: f64,
    /// Goodput the client sent, bit/s.
    pub upload_goodput_bps: f64,
    /// Moving-average aggregate goodput (from the MAD-th interval on), bit/s.
    pub moving_average_goodput_bps: Option<f64>,
    /// RPM over the last MAD intervals' probes.
    pub rpm: Option<f64>,
    /// Foreign probes that completed in it.
    pub foreign_probes: u32,
    /// Self probes that completed in it.
    pub self_probes: u32,
    /// tcp_f of each foreign probe that completed in it, nanoseconds, in completion order.
    #[serde(default)]
    pub foreign_tcp_handshake_rtt_ns: Vec<u64>,
    /// http_f of each foreign probe that completed in it, nanoseconds, in completion order.
    #[serde(default)]
    pub foreign_request_rtt_ns: Vec<u64>,
    /// http_l of each self probe that completed in it, nanoseconds, in completion order.
    #[serde(default)]
    pub self_request_rtt_ns: Vec<u64>,
}

impl IntervalRecord {
    /// The request round trips of the probes that completed in this interval, foreign (on a
    /// new connection) then self (on the persistent one): the loaded latency samples.
    pub fn loaded_request_rtts_ns(&self) -> impl Iterator<Item = u64> + '_ {
        self.foreign_request_rtt_ns
            .iter()
            .chain(self.self_request_rtt_ns.iter())
            .copied()
    }
}

/// Idle latency, measured before the load starts, nanoseconds (trimmed means).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct IdleRecord {
    /// Probes measured.
    pub probes: u32,
    /// TCP connect of a new connection.
    pub tcp_handshake_rtt_ns: u64,
    /// Request → response on a new connection.
    pub foreign_request_rtt_ns: u64,
    /// Request → response on the persistent probe connection.
    pub self_request_rtt_ns: u64,
}

/// A finished responsiveness test.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct RpmResult {
    /// [`RPM_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The draft revision the test follows.
    pub draft: String,
    /// Where the test ran against.
    pub server: String,
    /// Transport of the load and the probes.
    pub protocol: String,
    /// Direction of the load.
    pub direction: LoadDirection,
    /// Round trips per minute; absent when no probe completed.
    pub rpm: Option<f64>,
    /// The draft's rating word of `rpm`.
    pub rating: Option<Rating>,
    /// Confidence in `rpm`.
    pub rpm_confidence: Confidence,
    /// Confidence in the goodput figures.
    pub goodput_confidence: Confidence,
    /// The components `rpm` was computed from (last MAD intervals).
    pub components: Option<ComponentRecord>,
    /// Latency before the load.
    pub idle: Option<IdleRecord>,
    /// Moving-average goodput the server sent at the end, bit/s.
    pub download_goodput_bps: f64,
    /// Moving-average goodput the client sent at the end, bit/s.
    pub upload_goodput_bps: f64,
    /// Load flows open at the end.
    pub load_flows: u32,
    /// Goodput was declared saturated.
    pub goodput_stable: bool,
    /// Responsiveness became stable (the test ended early).
    pub rpm_stable: bool,
    /// Load phase length, nanoseconds.
    pub duration_ns: u64,
    /// Probes that failed (connection refused, timed out); they are not in the figures.
    pub failed_probes: u64,
    /// The parameters used.
    pub parameters: Parameters,
    /// Every interval.
    pub intervals: Vec<IntervalRecord>,
    /// Where this test differs from the draft.
    pub differences: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn trimmed_mean_drops_the_top_five_percent() {
        // 1..=20 ms: floor(20 × 0.05) = 1 value dropped (20); mean of 1..=19 = 190 / 19 = 10.
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(trimmed_mean(&v, 95.0), Some(10.0));
        // 1..=40 with the two largest replaced by outliers 1000 and 5000: floor(40 × 0.05) = 2
        // dropped, exactly the outliers; mean of 1..=38 = 741 / 38 = 19.5.
        let mut v: Vec<f64> = (1..=38).map(f64::from).collect();
        v.extend([5000.0, 1000.0]);
        assert_eq!(trimmed_mean(&v, 95.0), Some(19.5));
        // 19 values: floor(19 × 0.05) = 0 dropped; mean of 1..=19 = 10.
        let v: Vec<f64> = (1..=19).map(f64::from).collect();
        assert_eq!(trimmed_mean(&v, 95.0), Some(10.0));
        // One value is its own mean; nothing gives nothing.
        assert_eq!(trimmed_mean(&[7.0], 95.0), Some(7.0));
        assert_eq!(trimmed_mean(&[], 95.0), None);
        // Order does not matter: the trim is of the largest, not the last.
        assert_eq!(
            trimmed_mean(
                &[
                    30.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0,
                    14.0, 15.0, 16.0, 17.0, 18.0, 19.0
                ],
                95.0
            ),
            Some(10.0)
        );
    }

    #[test]
    fn rpm_formula_tcp_only_and_with_tls() {
        // TCP only: foreign = 60000 / ((10 + 30) / 2) = 60000 / 20 = 3000;
        // self = 60000 / 40 = 1500; RPM = (3000 + 1500) / 2 = 2250.
        let c = Components {
            foreign_tcp_ms: 10.0,
            foreign_tls_ms: None,
            foreign_request_ms: 30.0,
            self_request_ms: 40.0,
        };
        let f = rpm(&c).unwrap();
        assert!(close(f.foreign_rpm, 3000.0));
        assert!(close(f.self_rpm, 1500.0));
        assert!(close(f.rpm, 2250.0));
        // With TLS 20 ms: foreign = 60000 / ((10 + 20 + 30) / 3) = 60000 / 20 = 3000, same.
        // With TLS 50 ms: 60000 / (90 / 3) = 2000; RPM = (2000 + 1500) / 2 = 1750.
        let f = rpm(&Components {
            foreign_tls_ms: Some(50.0),
            ..c
        })
        .unwrap();
        assert!(close(f.foreign_rpm, 2000.0));
        assert!(close(f.rpm, 1750.0));
        // A zero component has no RPM.
        assert_eq!(
            rpm(&Components {
                self_request_ms: 0.0,
                ..c
            }),
            None
        );
    }

    #[test]
    fn stability_over_the_last_mad_moving_averages() {
        // Last four 100, 102, 98, 100: mean 100, deviations 0, 2, -2, 0, population variance
        // (0 + 4 + 4 + 0) / 4 = 2, σ = 1.414 < 5 % × 100 = 5: stable.
        assert!(is_stable(&[10.0, 100.0, 102.0, 98.0, 100.0], 4, 5.0));
        // 90, 100, 110, 100: variance (100 + 0 + 100 + 0) / 4 = 50, σ = 7.07 ≥ 5: not stable.
        assert!(!is_stable(&[90.0, 100.0, 110.0, 100.0], 4, 5.0));
        // Only three moving averages: never stable, whatever their spread.
        assert!(!is_stable(&[100.0, 100.0, 100.0], 4, 5.0));
        // Judged against the most recent value: 95, 105, 95, 105 has σ = 5 < 5 % × 105 = 5.25,
        // stable; 95, 105, 105, 95 has the same σ = 5 but 5 % × 95 = 4.75: not stable.
        assert!(is_stable(&[95.0, 105.0, 95.0, 105.0], 4, 5.0));
        assert!(!is_stable(&[95.0, 105.0, 105.0, 95.0], 4, 5.0));
    }

    #[test]
    fn moving_average_goodput_spans_mad_intervals() {
        // Intervals of 1 s with 1, 2, 3, 4, 5 MB: the last four hold 14 MB over 4 s:
        // 14e6 × 8 / 4 = 28 Mbit/s.
        let bytes = [1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000];
        assert_eq!(
            moving_average_goodput_bps(&bytes, 4, 1_000_000_000),
            Some(28e6)
        );
        assert_eq!(
            moving_average_goodput_bps(&bytes[..3], 4, 1_000_000_000),
            None
        );
    }

    #[test]
    fn confidence_and_rating_words() {
        assert_eq!(Confidence::of(3, 4, false), Confidence::Low);
        assert_eq!(Confidence::of(4, 4, false), Confidence::Medium);
        assert_eq!(Confidence::of(2, 4, true), Confidence::High);
        // 60000 / 200 ms = 300 RPM is the Poor/Fair line, 60 ms = 1000, 10 ms = 6000.
        assert_eq!(Rating::of(299.9), Rating::Poor);
        assert_eq!(Rating::of(300.0), Rating::Fair);
        assert_eq!(Rating::of(999.0), Rating::Fair);
        assert_eq!(Rating::of(1000.0), Rating::Good);
        assert_eq!(Rating::of(5999.0), Rating::Good);
        assert_eq!(Rating::of(6000.0), Rating::Excellent);
        assert_eq!(Rating::Excellent.word(), "Excellent");
    }

    #[test]
    fn probe_rate_respects_mps_and_ptc() {
        let p = Parameters::draft();
        // 1 Gbit/s: 5 % = 50 Mbit/s over 48000 bits per pair = 1041 pairs/s, capped at 100.
        assert_eq!(p.probe_rate(1e9), 100.0);
        // 9.6 Mbit/s: 5 % = 480 kbit/s / 48000 = 10 pairs/s.
        assert!(close(p.probe_rate(9.6e6), 10.0));
        // 100 kbit/s: 0.104 pairs/s, raised to the floor of one per second.
        assert_eq!(p.probe_rate(1e5), 1.0);
    }

    fn probes(tcp: f64, request: f64, own: f64, n: usize) -> IntervalProbes {
        IntervalProbes {
            foreign_tcp_ms: vec![tcp; n],
            foreign_tls_ms: Vec::new(),
            foreign_request_ms: vec![request; n],
            self_request_ms: vec![own; n],
        }
    }

    #[test]
    fn ramp_adds_a_flow_per_interval_then_saturates_and_stabilises() {
        let p = Parameters::draft();
        let mut m = RampMachine::new(p);
        // Goodput 10 MB per interval from the start: the moving average exists from interval 3
        // (the 4th), and the 4th moving average (interval 6) completes a window of four
        // identical values, σ = 0 < 5 %: saturated at interval 6, after 7 intervals.
        let mut saturated_at = None;
        let mut done_at = None;
        for i in 0..16 {
            // Probes: tcp 2 ms, request 4 ms, self 6 ms → foreign 60000 / 3 = 20000,
            // self 10000, RPM 15000.
            let step = m.handle_interval(10_000_000, probes(2.0, 4.0, 6.0, 10));
            if step.goodput_saturated_now {
                saturated_at = Some(i);
            }
            if step.done {
                done_at = Some(i);
                break;
            }
            assert!(
                step.add_flow,
                "a flow is added at every interval before the end"
            );
        }
        assert_eq!(saturated_at, Some(6));
        // Responsiveness needs four values after saturation: intervals 7, 8, 9, 10.
        assert_eq!(done_at, Some(10));
        assert_eq!(m.flows(), 11, "INP 1 + one per interval 0..=9");
        assert_eq!(m.goodput_confidence(), Confidence::High);
        assert_eq!(m.responsiveness_confidence(), Confidence::High);
        let f = m.current_figures().unwrap();
        assert!(close(f.rpm, 15000.0));
        // 10 MB per 1 s interval = 80 Mbit/s.
        assert_eq!(m.goodput_moving_averages_bps().last(), Some(&80e6));
    }

    #[test]
    fn ramp_without_stability_has_low_then_medium_confidence() {
        let mut m = RampMachine::new(Parameters::draft());
        // Goodput doubling every interval never stabilises.
        for i in 0..5 {
            m.handle_interval(1 << i, probes(1.0, 1.0, 1.0, 1));
        }
        // 5 intervals → 2 moving averages < MAD: Low.
        assert_eq!(m.goodput_confidence(), Confidence::Low);
        for i in 5..8 {
            m.handle_interval(1 << i, probes(1.0, 1.0, 1.0, 1));
        }
        // 8 intervals → 5 moving averages ≥ MAD, never stable: Medium; RPM stage never ran.
        assert_eq!(m.goodput_confidence(), Confidence::Medium);
        assert_eq!(m.responsiveness_confidence(), Confidence::Low);
        // Flows stop at MNP.
        for _ in 8..30 {
            m.handle_interval(1, probes(1.0, 1.0, 1.0, 1));
        }
        assert_eq!(m.flows(), 16);
    }

    #[test]
    fn a_refused_flow_stops_the_ramp() {
        let mut m = RampMachine::new(Parameters::draft());
        assert!(m.handle_interval(1, probes(1.0, 1.0, 1.0, 1)).add_flow);
        // The second flow was refused: the ramp stays at one flow and asks for no more.
        m.flows_capped(1);
        for _ in 0..5 {
            assert!(!m.handle_interval(1, probes(1.0, 1.0, 1.0, 1)).add_flow);
        }
        assert_eq!(m.flows(), 1);
    }

    #[test]
    fn components_cover_only_the_last_mad_intervals() {
        let mut m = RampMachine::new(Parameters::draft());
        // An old interval with 100 ms probes, then four with 10 ms: only the four count.
        m.handle_interval(1, probes(100.0, 100.0, 100.0, 5));
        for _ in 0..4 {
            m.handle_interval(1, probes(10.0, 10.0, 10.0, 5));
        }
        let c = m.current_components().unwrap();
        assert_eq!(c.foreign_request_ms, 10.0);
        // 60000 / 10 = 6000 for both halves.
        assert!(close(m.current_figures().unwrap().rpm, 6000.0));
    }
}
