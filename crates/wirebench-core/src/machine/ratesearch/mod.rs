//! The highest loss-free rate (RFC 2544 §26.1 style): a binary search over offered rates
//! between a low and a high bound, each step a trial whose receiver loss decides pass or fail,
//! ended by a confirming trial at the rate found. A sans-IO machine: it says which trial to run
//! next ([`RateSearch::poll_trial`]) and takes each trial's counts ([`RateSearch::handle_result`]);
//! running trials, clocks and sockets belong to the caller.

use std::fmt;

/// What the search looks for and how finely.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchConfig {
    /// Lowest rate tried, bit/s (above 0). If it loses too much, no rate is found.
    pub low_bps: u64,
    /// Highest rate tried, bit/s (at least `low_bps`). If it passes, it is the answer.
    pub high_bps: u64,
    /// Stop when the gap between the highest passing and the lowest failing rate is at most
    /// this share of the passing rate (0.01: within 1%). Between 0 and 1, exclusive.
    pub resolution: f64,
    /// The largest share of messages a passing trial may lose (0.0: none; 0.001: 0.1%).
    /// At least 0, below 1.
    pub max_loss: f64,
    /// Confirming trials that may fail (the path was noisier than one trial showed) before
    /// the search gives up as unstable.
    pub max_confirm_failures: u32,
}

impl SearchConfig {
    /// A search between `low_bps` and `high_bps` within 1%, at most `max_loss` lost, up to
    /// 3 failed confirmations.
    pub fn new(low_bps: u64, high_bps: u64, max_loss: f64) -> SearchConfig {
        SearchConfig {
            low_bps,
            high_bps,
            resolution: 0.01,
            max_loss,
            max_confirm_failures: 3,
        }
    }
}

/// Why a search configuration is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    /// The bounds are empty or reversed.
    #[error("the rate search needs 0 < low <= high, got low {low} bit/s and high {high} bit/s")]
    Bounds {
        /// The low bound given.
        low: u64,
        /// The high bound given.
        high: u64,
    },
    /// The resolution is not a share between 0 and 1.
    #[error("the rate search resolution must be above 0% and below 100%, got {0}")]
    Resolution(f64),
    /// The loss allowance is not a share in [0, 1).
    #[error("the allowed loss must be at least 0% and below 100%, got {0}")]
    MaxLoss(f64),
}

/// Why a trial is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrialKind {
    /// A step of the search.
    Probe,
    /// The final check of the rate found.
    Confirm,
}

/// One trial to run: offer `rate_bps` and count what the receiver got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trial {
    /// The offered rate, bit/s.
    pub rate_bps: u64,
    /// Probe or confirmation.
    pub kind: TrialKind,
}

/// A trial passes only if its sender offered at least this share of the trial's rate: below
/// it, the sender (not the path) was the limit, and the rate is not shown to pass.
pub const SENDER_SHORTFALL: f64 = 0.95;

/// Missing messages a trial in flight still expects to arrive late (reordered, or queued
/// behind the highest one received), as a share of its planned messages, before any of them
/// counts as lost when deciding early ([`RateSearch::decide_early`]).
pub const LATE_ALLOWANCE: f64 = 0.01;

/// The least missing messages expected late, whatever the trial's size.
pub const MIN_LATE_ALLOWANCE: u64 = 16;

/// What the receiver has counted at one moment of a trial (the server's receipt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReceivedSoFar {
    /// Unique messages received.
    pub messages: u64,
    /// One above the highest sequence number received (0: none yet).
    pub next_seq: u64,
}

impl ReceivedSoFar {
    /// Messages below the highest one received that have not arrived: lost, or late.
    pub fn missing(&self) -> u64 {
        self.next_seq.saturating_sub(self.messages)
    }
}

/// A trial in flight, as the client sees it when a receipt arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrialSoFar {
    /// The trial's offered rate, bit/s.
    pub rate_bps: u64,
    /// Messages the whole trial would send.
    pub planned_messages: u64,
    /// Payload bytes the whole trial would send.
    pub planned_bytes: u64,
    /// Time since the trial's sender started, ns.
    pub elapsed_ns: u64,
    /// Payload bytes the sender has sent so far.
    pub sent_bytes: u64,
    /// What the receiver has counted.
    pub received: ReceivedSoFar,
}

/// Why a trial was decided before its end (it failed: passing needs the whole trial).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyEnd {
    /// The messages already lost exceed what the whole trial may lose.
    Loss,
    /// The sender is so far behind the offered rate that even sending at that rate from now
    /// on it would end below [`SENDER_SHORTFALL`] of it.
    Sender,
}

/// The missing messages of a trial of `planned` messages that may still arrive late: 1% of
/// them, at least [`MIN_LATE_ALLOWANCE`].
pub fn late_allowance(planned: u64) -> u64 {
    ((planned as f64 * LATE_ALLOWANCE) as u64).max(MIN_LATE_ALLOWANCE)
}

/// What one trial moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrialCounts {
    /// Messages the sender sent.
    pub sent: u64,
    /// Messages the receiver got (duplicates not counted).
    pub received: u64,
}

impl TrialCounts {
    /// Messages lost.
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }

    /// The share of messages lost, 0 when nothing was sent.
    pub fn loss(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.lost() as f64 / self.sent as f64
        }
    }
}

/// A trial that ran, and what it decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialRecord {
    /// The trial.
    pub trial: Trial,
    /// Its counts.
    pub counts: TrialCounts,
    /// Whether its loss was within the allowance.
    pub passed: bool,
}

/// How a search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SearchOutcome {
    /// The highest rate that passed, confirmed by a final trial.
    Found {
        /// The rate, bit/s.
        rate_bps: u64,
    },
    /// Even the low bound did not pass (it lost more than allowed, or its sender fell short).
    BelowLow,
    /// Confirmations kept failing: the path's loss changes from trial to trial.
    Unstable {
        /// The last rate that passed a probe before the search gave up, if any.
        last_passed_bps: Option<u64>,
    },
}

impl fmt::Display for SearchOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SearchOutcome::Found { rate_bps } => write!(f, "found {rate_bps} bit/s"),
            SearchOutcome::BelowLow => write!(f, "even the low bound lost too much"),
            SearchOutcome::Unstable { .. } => {
                write!(f, "unstable: confirming trials kept failing")
            }
        }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Run this trial, then hand its counts to [`RateSearch::handle_result`].
    Run(Trial),
    /// The search is over.
    Done(SearchOutcome),
}

/// The search machine.
#[derive(Debug, Clone)]
pub struct RateSearch {
    cfg: SearchConfig,
    /// Highest rate known to pass (probes since the last failed confirmation).
    passing: Option<u64>,
    /// Lowest rate known to fail.
    failing: Option<u64>,
    next: Next,
    confirm_failures: u32,
    history: Vec<TrialRecord>,
}

impl RateSearch {
    /// A search with `cfg`; its first trial is at the high bound (a path that carries it needs
    /// no search).
    pub fn new(cfg: SearchConfig) -> Result<RateSearch, SearchError> {
        if cfg.low_bps == 0 || cfg.low_bps > cfg.high_bps {
            return Err(SearchError::Bounds {
                low: cfg.low_bps,
                high: cfg.high_bps,
            });
        }
        if !(cfg.resolution > 0.0 && cfg.resolution < 1.0) {
            return Err(SearchError::Resolution(cfg.resolution));
        }
        if !(cfg.max_loss >= 0.0 && cfg.max_loss < 1.0) {
            return Err(SearchError::MaxLoss(cfg.max_loss));
        }
        Ok(RateSearch {
            cfg,
            passing: None,
            failing: None,
            next: Next::Run(Trial {
                rate_bps: cfg.high_bps,
                kind: TrialKind::Probe,
            }),
            confirm_failures: 0,
            history: Vec::new(),
        })
    }

    /// The trial to run now, or the outcome.
    pub fn poll_trial(&self) -> Next {
        self.next
    }

    /// Whether a trial of `planned` messages that has lost `lost_so_far` already fails,
    /// whatever the rest does: it may end early.
    pub fn fails_already(&self, planned: u64, lost_so_far: u64) -> bool {
        lost_so_far as f64 > self.cfg.max_loss * planned as f64
    }

    /// Whether the trial in flight `t` has already failed, and why; `None` while it could
    /// still pass (passing needs the whole trial). Loss: the missing messages beyond
    /// [`late_allowance`] already exceed what the whole trial may lose. Sender: even at the
    /// offered rate from now on, the sender's rate over the trial (payload bytes over the time
    /// since it started, less the pacer's [`crate::machine::pacing::most_catch_up`]) would end below
    /// [`SENDER_SHORTFALL`] of the offered rate.
    pub fn decide_early(&self, t: &TrialSoFar) -> Option<EarlyEnd> {
        let lost = t
            .received
            .missing()
            .saturating_sub(late_allowance(t.planned_messages));
        if self.fails_already(t.planned_messages, lost) {
            return Some(EarlyEnd::Loss);
        }
        if t.rate_bps > 0 && t.planned_bytes > t.sent_bytes {
            let rate = t.rate_bps as f64;
            let left_s = (t.planned_bytes - t.sent_bytes) as f64 * 8.0 / rate;
            // The pacer may still win back up to its catch-up of the time it lost.
            let catch_up_s = crate::machine::pacing::most_catch_up(t.rate_bps).as_secs_f64();
            let best_s = (t.elapsed_ns as f64 / 1e9 + left_s - catch_up_s).max(f64::MIN_POSITIVE);
            let best_bps = t.planned_bytes as f64 * 8.0 / best_s;
            if best_bps < rate * SENDER_SHORTFALL {
                return Some(EarlyEnd::Sender);
            }
        }
        None
    }

    /// Whether `counts` pass: loss within the allowance.
    pub fn passes(&self, counts: TrialCounts) -> bool {
        counts.sent > 0 && counts.lost() as f64 <= self.cfg.max_loss * counts.sent as f64
    }

    /// Takes the counts of the trial [`RateSearch::poll_trial`] asked for and decides the next
    /// step. Ignored once the search is done.
    pub fn handle_result(&mut self, counts: TrialCounts) {
        let passed = self.passes(counts);
        self.settle(counts, passed);
    }

    /// Takes the counts of a trial whose sender could not offer the rate asked for (it sent
    /// markedly slower): whatever was lost, the rate was not shown to pass, so it fails.
    pub fn handle_shortfall(&mut self, counts: TrialCounts) {
        self.settle(counts, false);
    }

    /// Takes the counts of a trial ended early because [`RateSearch::decide_early`] decided
    /// it failed: it fails, whatever the late arrivals made of its counts.
    pub fn handle_ended_early(&mut self, counts: TrialCounts) {
        self.settle(counts, false);
    }

    fn settle(&mut self, counts: TrialCounts, passed: bool) {
        let Next::Run(trial) = self.next else {
            return;
        };
        self.history.push(TrialRecord {
            trial,
            counts,
            passed,
        });
        let rate = trial.rate_bps;
        match (trial.kind, passed) {
            (TrialKind::Confirm, true) => {
                self.next = Next::Done(SearchOutcome::Found { rate_bps: rate });
                return;
            }
            (TrialKind::Confirm, false) => {
                self.confirm_failures += 1;
                if self.confirm_failures > self.cfg.max_confirm_failures {
                    self.next = Next::Done(SearchOutcome::Unstable {
                        last_passed_bps: Some(rate),
                    });
                    return;
                }
                // The rate did not hold: it fails from now on, and the search goes on below
                // it from the low bound, which must pass again too.
                self.failing = Some(rate);
                self.passing = None;
            }
            (TrialKind::Probe, true) => {
                self.passing = Some(self.passing.map_or(rate, |p| p.max(rate)));
            }
            (TrialKind::Probe, false) => {
                self.failing = Some(self.failing.map_or(rate, |f| f.min(rate)));
            }
        }
        self.next = self.step();
    }

    /// Every trial so far, in the order run.
    pub fn history(&self) -> &[TrialRecord] {
        &self.history
    }

    /// The next trial from the known passing and failing rates.
    fn step(&self) -> Next {
        let probe = |rate_bps| {
            Next::Run(Trial {
                rate_bps,
                kind: TrialKind::Probe,
            })
        };
        let confirm = |rate_bps| {
            Next::Run(Trial {
                rate_bps,
                kind: TrialKind::Confirm,
            })
        };
        match (self.passing, self.failing) {
            // Nothing fails up to the high bound: confirm it.
            (Some(pass), None) => confirm(pass),
            (None, None) => probe(self.cfg.high_bps),
            (None, Some(fail)) if fail <= self.cfg.low_bps => Next::Done(SearchOutcome::BelowLow),
            // Something fails; is the low bound good?
            (None, Some(_)) => probe(self.cfg.low_bps),
            (Some(pass), Some(fail)) => {
                let gap = fail.saturating_sub(pass);
                if gap as f64 <= self.cfg.resolution * pass as f64 || gap <= 1 {
                    confirm(pass)
                } else {
                    probe(pass + gap / 2)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
