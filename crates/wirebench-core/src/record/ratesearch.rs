//! The record of a highest-loss-free-rate search (`run --rate max`): what was searched, each
//! trial's offered rate, goodput and loss, how the search ended and how long it took.

use serde::{Deserialize, Serialize};

use crate::machine::ratesearch::{EarlyEnd, SearchOutcome, TrialKind};

/// A finished rate search: each run measured at a rate found carries the search that found it
/// (`runs[].rate_search` in the `run --json` document, and in the store); a search that found
/// no rate is the document's own `rate_search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateSearchRecord {
    /// "found", "below_low" or "unstable".
    pub outcome: String,
    /// The rate found and confirmed, bit/s; null unless `outcome` is "found". The transfer
    /// that follows runs at it.
    pub rate_bps: Option<u64>,
    /// Payload bytes of each datagram searched with (the point's message size); 0 in records
    /// made before it was kept.
    #[serde(default)]
    pub msg_size: u32,
    /// Lowest rate the search would try, bit/s.
    pub low_bps: u64,
    /// Highest rate the search would try, bit/s.
    pub high_bps: u64,
    /// The search stopped when passing and failing rates were this close, % of the passing rate.
    pub resolution_pct: f64,
    /// Largest share of messages a passing trial may lose, %.
    pub max_loss_pct: f64,
    /// Planned length of each trial, ns (its volume is rate × this).
    pub trial_ns: u64,
    /// The server's grace for late datagrams in each trial, µs.
    pub trial_grace_us: u64,
    /// Wall-clock time of the whole search, every trial and its setup, ns.
    pub elapsed_ns: u64,
    /// Every trial, in the order run; the last is the confirming trial when one was found.
    pub trials: Vec<TrialEntry>,
}

/// One trial of a rate search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrialEntry {
    /// "probe" (a search step) or "confirm" (the check of the rate found).
    pub kind: TrialKindName,
    /// The offered (paced) rate, bit/s.
    pub rate_bps: u64,
    /// Messages sent.
    pub sent_messages: u64,
    /// Unique messages the receiver got.
    pub received_messages: u64,
    /// `sent_messages` − `received_messages`, as % of `sent_messages` (the run's `lost_pct`).
    pub lost_pct: f64,
    /// What the receiver got, bit/s (the run's goodput); null when too short to time.
    pub goodput_bps: Option<f64>,
    /// The rate the sender reached over its own span (first to last datagram sent), bit/s:
    /// below `rate_bps` when the sender could not keep up; null when too short to time.
    pub sent_bps: Option<f64>,
    /// The trial's transfer time, ns.
    pub transfer_ns: u64,
    /// Whether its loss was within the allowance.
    pub passed: bool,
    /// Messages the whole trial would have sent (0 in records made before it was kept).
    #[serde(default)]
    pub planned_messages: u64,
    /// Why the trial ended before its planned volume, decided by the server's receive counts
    /// on the control connection ("loss") or the sender's lag ("sender"); absent when it ran
    /// its whole length. A trial ended early failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_early: Option<EarlyEndName>,
}

/// Why a trial ended early, as written in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EarlyEndName {
    /// Its missing messages already exceeded what the whole trial could lose.
    Loss,
    /// Its sender was too far behind the offered rate to reach 95% of it.
    Sender,
}

impl From<EarlyEnd> for EarlyEndName {
    fn from(e: EarlyEnd) -> Self {
        match e {
            EarlyEnd::Loss => EarlyEndName::Loss,
            EarlyEnd::Sender => EarlyEndName::Sender,
        }
    }
}

/// The kind of a trial, as written in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialKindName {
    /// A step of the search.
    Probe,
    /// The final check of the rate found.
    Confirm,
}

impl From<TrialKind> for TrialKindName {
    fn from(k: TrialKind) -> Self {
        match k {
            TrialKind::Probe => TrialKindName::Probe,
            TrialKind::Confirm => TrialKindName::Confirm,
        }
    }
}

/// The JSON name of an outcome and the rate it found.
pub fn outcome_name(outcome: &SearchOutcome) -> (&'static str, Option<u64>) {
    match outcome {
        SearchOutcome::Found { rate_bps } => ("found", Some(*rate_bps)),
        SearchOutcome::BelowLow => ("below_low", None),
        SearchOutcome::Unstable { .. } => ("unstable", None),
    }
}

impl RateSearchRecord {
    /// Number of trials run.
    pub fn trial_count(&self) -> usize {
        self.trials.len()
    }

    /// The search's wall-clock time in seconds.
    pub fn seconds(&self) -> f64 {
        self.elapsed_ns as f64 / 1e9
    }

    /// The confirming trial that passed, if the rate was found.
    pub fn confirmation(&self) -> Option<&TrialEntry> {
        self.trials
            .iter()
            .rev()
            .find(|t| t.kind == TrialKindName::Confirm && t.passed)
            .filter(|_| self.rate_bps.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A confirming trial at `rate_bps` that `passed`.
    fn confirm(rate_bps: u64, passed: bool) -> TrialEntry {
        TrialEntry {
            kind: TrialKindName::Confirm,
            rate_bps,
            sent_messages: 10,
            received_messages: 10,
            lost_pct: 0.0,
            goodput_bps: None,
            sent_bps: None,
            transfer_ns: 200_000_000,
            passed,
            planned_messages: 0,
            ended_early: None,
        }
    }

    #[test]
    fn the_confirmation_is_the_last_passing_confirm_of_a_found_rate() {
        let pass = confirm(5, true);
        let mut r = RateSearchRecord {
            outcome: "found".into(),
            rate_bps: Some(5),
            msg_size: 1000,
            low_bps: 1,
            high_bps: 10,
            resolution_pct: 1.0,
            max_loss_pct: 0.0,
            trial_ns: 1,
            trial_grace_us: 1,
            elapsed_ns: 2_500_000_000,
            trials: vec![confirm(5, false), pass],
        };
        assert_eq!(r.confirmation(), Some(&pass));
        assert_eq!(r.seconds(), 2.5);
        assert_eq!(outcome_name(&SearchOutcome::BelowLow), ("below_low", None));
        r.rate_bps = None;
        assert_eq!(r.confirmation(), None);
    }
}
