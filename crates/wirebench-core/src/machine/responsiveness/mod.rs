//! Responsiveness under working conditions (draft-ietf-ippm-responsiveness): owns the draft's
//! aggregation — the single-sided trimmed mean, the moving-average stability test over the last
//! MAD intervals, the RPM formula, the confidence and rating words — the ramp decisions of the
//! test (`ramp.rs`: one more load flow per interval, when goodput and then responsiveness are
//! stable) and the result record (`record.rs`); must not open sockets or read clocks: intervals
//! and samples are handed in.
//!
//! The draft text used is draft-ietf-ippm-responsiveness-08 (October 2025, the current
//! datatracker revision) checked against the editors' copy of -09: MAD = 4, TMP = 95 %,
//! SDT = 5 %, INP = INC = 1, MNP = 16, MPS = 100 probes per second, PTC = 5 % of capacity.
//! ID is 1 s as in -08; -09 raises it to 5 s "pending further investigation" (see
//! [`Parameters::draft`]).

use serde::{Deserialize, Serialize};

mod ramp;
pub use ramp::*;
mod record;
pub use record::*;

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

#[cfg(test)]
mod tests;
