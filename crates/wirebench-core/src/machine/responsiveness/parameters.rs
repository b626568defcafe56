//! The draft's test parameters (MAD, ID, TMP, SDT, MNP, MPS, PTC) with its defaults, and what a
//! probe costs the path, from which the probe rate a measured goodput allows follows.

use serde::{Deserialize, Serialize};

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
