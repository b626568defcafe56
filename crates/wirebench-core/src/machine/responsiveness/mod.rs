//! Responsiveness under working conditions (draft-ietf-ippm-responsiveness): owns the draft's
//! aggregation (`aggregation.rs`: the single-sided trimmed mean, the moving-average stability
//! test over the last MAD intervals), its parameters (`parameters.rs`), the RPM formula and the
//! confidence and rating words (`figures.rs`), the ramp decisions of the test (`ramp.rs`: one
//! more load flow per interval, when goodput and then responsiveness are stable) and the result
//! record (`record.rs`); must not open sockets or read clocks: intervals and samples are
//! handed in.
//!
//! The draft text used is draft-ietf-ippm-responsiveness-08 (October 2025, the current
//! datatracker revision) checked against the editors' copy of -09: MAD = 4, TMP = 95 %,
//! SDT = 5 %, INP = INC = 1, MNP = 16, MPS = 100 probes per second, PTC = 5 % of capacity.
//! ID is 1 s as in -08; -09 raises it to 5 s "pending further investigation" (see
//! [`Parameters::draft`]).

mod aggregation;
pub use aggregation::*;
mod figures;
pub use figures::*;
mod parameters;
pub use parameters::*;
mod ramp;
pub use ramp::*;
mod record;
pub use record::*;

#[cfg(test)]
mod tests;
