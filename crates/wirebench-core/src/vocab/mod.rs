//! The vocabulary every layer shares: units, plan names and the run matrix, sweep lists, limits,
//! the usage error, statistics over repeats, clock offsets between hosts, the transport counters each end reports and peer
//! text made safe to show.

pub mod clock_offset;
pub mod counters;
pub mod error;
pub mod limits;
pub mod plan;
pub mod stats;
pub mod sweep;
pub mod text;
pub mod units;
