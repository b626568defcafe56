//! Executes a run plan: every protocol × mechanism combination in the configured order, each
//! repeated `--repeat` times, one session at a time. Each finished run is handed to the caller
//! before the next starts, so nothing finished is lost if a later run fails.

use std::net::SocketAddr;
use std::sync::Arc;

use wirebench_core::metrics::{Cumulative, IntervalSample};
use wirebench_core::plan::Combination;
use wirebench_core::proto::SessionParams;

use crate::client::{self, SessionOutcome};
use crate::config::{RunConfig, Target};
use crate::interval::{self, Progress};
use crate::parallel;

/// One finished run.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// Which combination it was.
    pub combination: Combination,
    /// 0-based repeat index within the combination.
    pub repeat_index: u32,
    /// What was asked of the server.
    pub params: SessionParams,
    /// Both sides' figures (with -P, summed over the flows).
    pub outcome: SessionOutcome,
    /// With -P N > 1, each flow's figures in flow order; empty for a single flow.
    pub flows: Vec<SessionOutcome>,
}

/// Everything a campaign produced.
#[derive(Debug, Clone, Default)]
pub struct Campaign {
    /// Finished runs, in the order they ran.
    pub runs: Vec<RunRecord>,
    /// The error that stopped the campaign early, if any.
    pub failure: Option<String>,
}

/// The session parameters for one combination of a run configuration.
pub fn session_params(cfg: &RunConfig, combination: Combination) -> SessionParams {
    SessionParams {
        protocol: combination.protocol,
        mechanism: combination.mechanism,
        msg_size: cfg.msg_size,
        total_bytes: cfg.total_bytes,
        rto_us: cfg
            .rto
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        rate_bps: cfg.rate.map(|r| r.0),
        grace_us: u64::try_from(cfg.grace.as_micros()).unwrap_or(u64::MAX),
        options: cfg.options.clone(),
        interval_us: cfg
            .interval
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        reverse: cfg.reverse,
    }
}

/// Number of runs the plan holds.
pub fn planned_runs(cfg: &RunConfig) -> usize {
    cfg.combinations.len() * cfg.repeat as usize
}

/// Runs the plan against `server`; `on_run` sees each run as soon as it finishes, with its
/// 1-based position and the plan size; with `-i`, `on_interval` sees each interval of the
/// client's sending (all flows together) as it closes. Stops at the first failed run.
pub async fn run_campaign(
    cfg: &RunConfig,
    server: SocketAddr,
    mut on_run: impl FnMut(usize, usize, &RunRecord),
    mut on_interval: impl FnMut(&IntervalSample),
) -> Campaign {
    let total = planned_runs(cfg);
    let mut campaign = Campaign::default();
    for &combination in &cfg.combinations {
        let params = session_params(cfg, combination);
        for repeat_index in 0..cfg.repeat {
            let progress: Vec<Arc<Progress>> = (0..cfg.parallel).map(|_| Progress::new()).collect();
            crate::inflight::publish(&progress);
            let work = async {
                if cfg.parallel > 1 {
                    parallel::run_flows_auth(server, &params, &progress, cfg.psk.as_deref()).await
                } else {
                    client::run_session_auth(server, &params, &progress[0], cfg.psk.as_deref())
                        .await
                        .map(|o| (o, Vec::new()))
                }
            };
            let sent_so_far = || {
                progress
                    .iter()
                    .map(|p| p.read())
                    .fold(Cumulative::default(), |a, b| Cumulative {
                        bytes: a.bytes + b.bytes,
                        lost: None,
                        retransmitted: match (a.retransmitted, b.retransmitted) {
                            (Some(x), Some(y)) => Some(x + y),
                            (x, y) => x.or(y),
                        },
                    })
            };
            let (result, intervals) =
                interval::sampled(work, cfg.interval, sent_so_far, &mut on_interval).await;
            match result {
                Ok((mut outcome, mut flows)) => {
                    outcome.client.intervals = intervals;
                    if matches!(cfg.target, Target::Embedded(_)) {
                        outcome.mark_shared_process();
                        flows
                            .iter_mut()
                            .for_each(SessionOutcome::mark_shared_process);
                    }
                    let record = RunRecord {
                        combination,
                        repeat_index,
                        params: params.clone(),
                        outcome,
                        flows,
                    };
                    on_run(campaign.runs.len() + 1, total, &record);
                    campaign.runs.push(record);
                }
                Err(e) => {
                    campaign.failure = Some(format!(
                        "{} {} run {} of {} failed: {e:#}",
                        combination.protocol,
                        combination.mechanism,
                        repeat_index + 1,
                        cfg.repeat
                    ));
                    return campaign;
                }
            }
        }
    }
    campaign
}
