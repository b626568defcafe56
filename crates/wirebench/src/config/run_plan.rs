//! The plan of a validated `run` as a value ([`Plan`]), built once: points outer, then
//! combinations, then repeats, each point's warm-ups before its measured runs, every run with
//! the session plan it asks of the server (one per combination and point, shared by its repeats).

use std::sync::Arc;

use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::plan::{message_count, split_flows, Combination};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::wire::proto::SessionParams;

use crate::runner::{session_params, Plan, PlannedRun, RunConfig, SessionPlan};

use super::error::usage;

/// Every run of `cfg`, in the order it runs.
pub(super) fn build(cfg: &RunConfig) -> Result<Plan, UsageError> {
    let mut runs = Vec::new();
    let mut position = 0;
    for (point_index, &point) in cfg.points.iter().enumerate() {
        let sessions = cfg
            .combinations
            .iter()
            .map(|&c| Ok((c, Arc::new(session_plan(cfg, point, c)?))))
            .collect::<Result<Vec<_>, UsageError>>()?;
        for (warmup, repeats) in [(true, cfg.warmup), (false, cfg.repeat)] {
            for (combination, session) in &sessions {
                for repeat_index in 0..repeats {
                    if !warmup {
                        position += 1;
                    }
                    runs.push(PlannedRun {
                        position: if warmup { 0 } else { position },
                        warmup,
                        point_index,
                        point,
                        combination: *combination,
                        repeat_index,
                        repeats,
                        session: Arc::clone(session),
                    });
                }
            }
        }
    }
    Ok(Plan::new(runs))
}

/// What every run of `combination` at `point` asks of the server: the total split across `-P`
/// flows by whole messages (so they add up exactly); `--bidir`'s `-n` (or `-t`) is per
/// direction, each split across its own flows.
fn session_plan(
    cfg: &RunConfig,
    point: Point,
    combination: Combination,
) -> Result<SessionPlan, UsageError> {
    let params = session_params(cfg, point, combination);
    let split = |reverse: bool| {
        let p = SessionParams {
            reverse,
            ..params.clone()
        };
        // Checked with the flags already: every point has a message per flow.
        let totals = split_flows(p.total_bytes, p.msg_size, cfg.parallel).ok_or_else(|| {
            usage(format!(
                "cannot split {} B of {} B messages into {} flows",
                p.total_bytes, p.msg_size, cfg.parallel
            ))
        })?;
        Ok::<_, UsageError>(
            totals
                .into_iter()
                .map(|total_bytes| SessionParams {
                    total_bytes,
                    ..p.clone()
                })
                .collect::<Vec<_>>(),
        )
    };
    let (flows, back) = if cfg.bidir {
        (split(false)?, split(true)?)
    } else {
        (split(params.reverse)?, Vec::new())
    };
    Ok(SessionPlan {
        messages: message_count(params.total_bytes, params.msg_size),
        params,
        flows,
        back,
    })
}
