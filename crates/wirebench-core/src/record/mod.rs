//! The result model: every record wirebench measures, stores, prints and reports — a run's
//! client and server figures, round trips, UDP receipt, request-response and DNS results,
//! relay counts, campaigns — and the figures derived from them (each run's headline, the
//! summaries over repeats, comparisons), computed here once. Text, JSON, the store, reports and
//! `compare` render these records; none derives a figure of its own. Pure: no I/O, no clocks.

pub mod campaign;
pub mod comparison;
pub mod dns;
pub mod document;
pub mod headline;
pub mod iperf3_test;
pub mod lifecycle;
pub mod load_phases;
pub mod loaded_latency;
pub mod loss;
pub mod one_way;
pub mod plausibility;
pub mod rate;
pub mod ratesearch;
pub mod relay;
pub mod rpm;
pub mod rr;
pub mod run;
pub mod service;
pub mod summary;

pub use campaign::{AbortedRun, CampaignInfo, Environment, NewCampaign, Status};
pub use headline::{session_headline, transfer_span_ns, Delivery, DirectionHeadlines, Headline};
pub use loaded_latency::LoadedLatency;
pub use loss::LossSplit;
pub use rate::{bits_per_second, MIN_TIMED_NS};
pub use relay::RelayCounts;
pub use run::{
    ClientRecord, CpuRecord, DirectionRecord, EndMetrics, EndedBy, FlowRecord, IntervalRecord,
    Parameters, RttFigures, RunRecord, ServerRecord, SessionLine, TransportRecord, UdpReceipt,
};
pub use summary::{summarise, ConfigurationKey, ConfigurationSummary};

/// A run's total as views name it: its size (`100 MiB`), or `timed (-t)` for the upper bound
/// a time-based run carries ([`crate::wire::proto::UNBOUNDED_TOTAL`]).
pub fn total_label(total_bytes: u64) -> String {
    if total_bytes == crate::wire::proto::UNBOUNDED_TOTAL {
        "timed (-t)".to_string()
    } else {
        crate::vocab::units::ByteSize(total_bytes).to_string()
    }
}

/// "1 run", "3 runs": a count with its noun in the right number.
pub fn count_of(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_total_is_named_by_its_limit() {
        assert_eq!(total_label(100 << 20), "104857600 B (100 MiB)");
        assert_eq!(
            total_label(crate::wire::proto::UNBOUNDED_TOTAL),
            "timed (-t)"
        );
    }
}
