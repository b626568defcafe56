//! The result record of a responsiveness test: its components, its intervals (with their probes'
//! round trips), the idle latency and the RPM, versioned by [`RPM_SCHEMA_VERSION`].

use super::figures::{Components, Confidence, Rating, RpmFigures};
use super::parameters::Parameters;

use serde::{Deserialize, Serialize};

/// Version of [`RpmResult`]'s JSON shape. Version 2: every interval carries its probes' round
/// trips (the samples the stored report charts and `compare` tests); version 1 documents read
/// as version 2 with no samples.
pub const RPM_SCHEMA_VERSION: u32 = 2;

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
