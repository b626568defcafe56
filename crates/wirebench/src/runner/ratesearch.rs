//! `--rate max`: runs the trials of the core rate search ([`wirebench_core::machine::ratesearch`]) as
//! paced UDP streaming sessions against the server, one after another, and records them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use wirebench_core::machine::ratesearch::{
    Next, RateSearch, ReceivedSoFar, SearchConfig, TrialCounts, TrialSoFar,
};
use wirebench_core::record::ratesearch::{outcome_name, RateSearchRecord, TrialEntry};
use wirebench_core::vocab::plan::{Combination, Mechanism, Protocol};
use wirebench_core::vocab::units::format_bitrate;

use super::finished::FinishedRun;
use crate::engine::interval::Progress;
use crate::flows::client::SessionRequest;
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::SessionParams;

pub use wirebench_core::machine::ratesearch::SENDER_SHORTFALL;

/// How often the server reports its receive counts during a trial, so a failed trial ends
/// early: a few dozen receipts in a 200 ms trial, each one small control frame.
pub const RECEIPT_PERIOD: Duration = Duration::from_millis(20);

/// Default length of a trial: long enough for a few hundred datagrams at most rates, short
/// enough that a dozen trials take a few seconds.
pub const DEFAULT_TRIAL: Duration = Duration::from_millis(200);

/// Default server grace per trial: the datagrams still in flight on a LAN or loopback arrive
/// within it, and a dozen trials do not each wait the run's 250 ms.
pub const DEFAULT_TRIAL_GRACE: Duration = Duration::from_millis(30);

/// A trial sends at least this many datagrams, however low its rate, so one lost datagram is
/// at most 0.4% and a loss allowance of 0.1% or more can pass or fail on counts.
pub const MIN_TRIAL_MESSAGES: u64 = 250;

/// What `--rate max` searches, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchPlan {
    /// Bounds, resolution and loss allowance of the core search.
    pub config: SearchConfig,
    /// Planned length of a trial: its volume is rate × this (at least [`MIN_TRIAL_MESSAGES`]).
    pub trial: Duration,
    /// The server's grace for late datagrams after each trial.
    pub trial_grace: Duration,
}

/// The messages and payload bytes of a trial at `rate_bps`: rate × trial time in whole
/// messages, at least [`MIN_TRIAL_MESSAGES`].
pub fn trial_size(rate_bps: u64, trial: Duration, msg_size: u32) -> (u64, u64) {
    let by_time = (rate_bps as f64 / 8.0 * trial.as_secs_f64()) as u64;
    let messages = by_time
        .div_ceil(u64::from(msg_size.max(1)))
        .max(MIN_TRIAL_MESSAGES);
    (messages, messages.saturating_mul(u64::from(msg_size)))
}

/// Runs the search from `base` (UDP streaming at the point's message size) against `server`,
/// with `psk`; `shared_process`: the server runs in this process. `on_trial` sees each trial as
/// it ends (for its line). A trial that fails to run ends the search with its error.
pub async fn search(
    base: SessionParams,
    psk: Option<&Psk>,
    shared_process: bool,
    plan: &SearchPlan,
    server: SocketAddr,
    mut on_trial: impl FnMut(usize, &TrialEntry),
) -> Result<RateSearchRecord> {
    let started = Instant::now();
    let mut machine = RateSearch::new(plan.config)?;
    let combination = Combination {
        protocol: Protocol::Udp,
        mechanism: Mechanism::Stream,
    };
    let msg_size = base.msg_size;
    let mut trials = Vec::new();
    let outcome = loop {
        let trial = match machine.poll_trial() {
            Next::Done(outcome) => break outcome,
            Next::Run(trial) => trial,
        };
        let mut params = base.clone();
        params.rate_bps = Some(trial.rate_bps);
        let (planned_messages, trial_bytes) = trial_size(trial.rate_bps, plan.trial, msg_size);
        params.total_bytes = trial_bytes;
        params.grace_us = u64::try_from(plan.trial_grace.as_micros()).unwrap_or(u64::MAX);
        params.interval_us = None;
        params.options.receipt_us = Some(u64::try_from(RECEIPT_PERIOD.as_micros()).unwrap_or(0));
        // The server's receipts decide a failing trial before its end (passing needs it all).
        let mut ended_early = None;
        let mut judge = |received: ReceivedSoFar, sent_bytes: u64, elapsed: Duration| {
            ended_early = machine.decide_early(&TrialSoFar {
                rate_bps: trial.rate_bps,
                planned_messages,
                planned_bytes: params.total_bytes,
                elapsed_ns: duration_ns(elapsed),
                sent_bytes,
                received,
            });
            ended_early.is_some()
        };
        let trial_request = SessionRequest {
            server,
            params: params.clone(),
            progress: Progress::new(),
            psk: psk.cloned(),
            judge: Some(&mut judge),
            sole: true,
        };
        let mut outcome = trial_request.run().await.with_context(|| {
            format!(
                "rate search: the trial at {} failed",
                format_bitrate(trial.rate_bps as f64)
            )
        })?;
        if shared_process {
            outcome.mark_shared_process();
        }
        let record = FinishedRun {
            combination,
            repeat_index: 0,
            params,
            outcome,
            flows: Vec::new(),
            latency: None,
            back: None,
            rate_search: None,
        }
        .record();
        let mut entry = TrialEntry::of(trial.kind, trial.rate_bps, &record, false);
        let counts = TrialCounts {
            sent: entry.sent_messages,
            received: entry.received_messages,
        };
        // A sender that could not offer the rate (the host stalled it, or it cannot go that
        // fast) has not shown that the path carries it: the trial fails, whatever arrived.
        // Judged by its own rate, over its own span (first to last datagram sent): the
        // receiver's span (a bottleneck queue draining, a busy receiver) says nothing of it.
        let kept_up = entry
            .sent_bps
            .is_some_and(|sent| sent >= trial.rate_bps as f64 * SENDER_SHORTFALL);
        entry.passed = ended_early.is_none() && kept_up && machine.passes(counts);
        entry.planned_messages = planned_messages;
        entry.ended_early = ended_early.map(Into::into);
        if ended_early.is_some() {
            machine.handle_ended_early(counts);
        } else if kept_up {
            machine.handle_result(counts);
        } else {
            machine.handle_shortfall(counts);
        }
        on_trial(trials.len() + 1, &entry);
        trials.push(entry);
    };
    let (name, rate_bps) = outcome_name(&outcome);
    Ok(RateSearchRecord {
        outcome: name.to_string(),
        rate_bps,
        msg_size,
        low_bps: plan.config.low_bps,
        high_bps: plan.config.high_bps,
        resolution_pct: plan.config.resolution * 100.0,
        max_loss_pct: plan.config.max_loss * 100.0,
        trial_ns: duration_ns(plan.trial),
        trial_grace_us: u64::try_from(plan.trial_grace.as_micros()).unwrap_or(u64::MAX),
        elapsed_ns: duration_ns(started.elapsed()),
        trials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trial_is_rate_times_time_in_whole_messages_and_never_tiny() {
        // 1 Gbit/s for 200 ms: 25 MB, in 1472 B messages rounded up.
        let (m, b) = trial_size(1_000_000_000, Duration::from_millis(200), 1472);
        assert_eq!(b, m * 1472);
        assert!((25_000_000..25_000_000 + 1472).contains(&b), "{b}");
        // 1 Mbit/s for 200 ms would be 17 datagrams: at least 250.
        assert_eq!(
            trial_size(1_000_000, Duration::from_millis(200), 1472),
            (250, 250 * 1472)
        );
    }
}
