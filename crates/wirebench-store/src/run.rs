//! Throughput campaigns (`wirebench run`) in the store: the `campaign` and `run` tables as a
//! [`Kind`] (a plan is a [`NewCampaign`], a result a finished or aborted run), and the views
//! only runs have (the finished runs with their points, the aborted ones with why). Owns only
//! the layout of those two tables; the lifecycle is `lifecycle.rs`'s.

use anyhow::{Context, Result};
use wirebench_core::record::campaign::{AbortedDetail, SoFar};
use wirebench_core::record::lifecycle::{CampaignKind, Lifecycle, StoredRun};
use wirebench_core::record::{AbortedRun, CampaignInfo, NewCampaign, Parameters, RunRecord};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::duration_ns;

use super::kind::{int, Kind};
use super::sql::{Row, Value};
use crate::store::Store;

/// The throughput kind.
pub struct Run;

impl Kind for Run {
    const KIND: CampaignKind = CampaignKind::Run;
    type Plan = NewCampaign;
    type Result = StoredRun;
    type Info = CampaignInfo;

    const PLAN_COLUMNS: &'static [&'static str] = &[
        "started_at_unix_s",
        "server",
        "protocols",
        "mechanisms",
        "msg_size",
        "total_bytes",
        "repeat",
        "planned_runs",
        "parameters_json",
        "host_name",
        "kernel",
        "cpu_model",
        "wirebench_version",
        "rmem_max_bytes",
        "wmem_max_bytes",
        "msg_sizes",
        "totals",
    ];
    const IDENTITY: &'static [&'static str] = &["parameters_json", "host_name"];
    const RESULT_COLUMNS: &'static [&'static str] = &[
        "status",
        "protocol",
        "mechanism",
        "msg_size",
        "total_bytes",
        "repeat_index",
        "session",
        "client_messages",
        "client_bytes",
        "client_elapsed_ns",
        "server_messages",
        "server_bytes",
        "server_elapsed_ns",
        "run_json",
        "params_json",
        "abort_reason",
        // UDP loss and where it went (schema version 10): queryable beside run_json.
        "udp_lost",
        "udp_lost_receiving_host",
        "udp_lost_sending_host",
        "udp_lost_path",
    ];

    fn plan_values(c: &NewCampaign) -> Result<Vec<Value>> {
        let p = &c.parameters;
        let env = &c.environment;
        Ok(vec![
            c.started_at_unix_s.into(),
            (&p.server).into(),
            join(&p.protocols).into(),
            join(&p.mechanisms).into(),
            p.msg_size.into(),
            int(p.total_bytes, "total bytes")?.into(),
            p.repeat.into(),
            int(c.planned_runs, "planned runs")?.into(),
            serde_json::to_string(p)?.into(),
            (&env.host_name).into(),
            (&env.kernel).into(),
            (&env.cpu_model).into(),
            (&env.wirebench_version).into(),
            env.rmem_max_bytes
                .map(|v| int(v, "rmem_max"))
                .transpose()?
                .into(),
            env.wmem_max_bytes
                .map(|v| int(v, "wmem_max"))
                .transpose()?
                .into(),
            join(&c.msg_sizes).into(),
            join(&c.totals).into(),
        ])
    }

    fn read_plan(row: &Row, at: usize) -> Result<NewCampaign> {
        let parameters: Parameters =
            serde_json::from_str(&row.text(at + 8)?).context("its parameters are not readable")?;
        // NULL for campaigns from before schema version 3: their one size and total.
        let msg_sizes =
            split_list(row.opt_text(at + 15)?.as_deref())?.unwrap_or(vec![parameters.msg_size]);
        let totals =
            split_list(row.opt_text(at + 16)?.as_deref())?.unwrap_or(vec![parameters.total_bytes]);
        Ok(NewCampaign {
            started_at_unix_s: row.i64(at)?,
            planned_runs: row.count(at + 7)?,
            environment: wirebench_core::record::Environment {
                host_name: row.opt_text(at + 9)?,
                kernel: row.opt_text(at + 10)?,
                cpu_model: row.opt_text(at + 11)?,
                wirebench_version: row.text(at + 12)?,
                rmem_max_bytes: row.opt_i64(at + 13)?.and_then(|v| u64::try_from(v).ok()),
                wmem_max_bytes: row.opt_i64(at + 14)?.and_then(|v| u64::try_from(v).ok()),
            },
            parameters,
            msg_sizes,
            totals,
        })
    }

    fn started_at(plan: &NewCampaign) -> i64 {
        plan.started_at_unix_s
    }

    fn planned(plan: &NewCampaign) -> u64 {
        plan.planned_runs
    }

    fn stopped_in_flight(result: &StoredRun) -> bool {
        match result {
            StoredRun::Aborted { .. } => true,
            StoredRun::Finished { run, .. } => run.server.aborted,
        }
    }

    fn check_result(result: &StoredRun) -> std::result::Result<(), String> {
        wirebench_core::record::plausibility::stored::check_stored_run(result)
    }

    fn result_values(result: &StoredRun) -> Result<Vec<Value>> {
        Ok(match result {
            StoredRun::Finished { point, run } => vec![
                "complete".into(),
                run.protocol.as_str().into(),
                run.mechanism.as_str().into(),
                point.msg_size.into(),
                int(point.total_bytes, "total bytes")?.into(),
                run.repeat_index.into(),
                run.session.into(),
                int(run.client.messages, "messages")?.into(),
                int(run.client.bytes, "bytes")?.into(),
                int(run.client.elapsed_ns, "elapsed ns")?.into(),
                int(run.server.messages, "messages")?.into(),
                int(run.server.bytes, "bytes")?.into(),
                int(run.server.elapsed_ns, "elapsed ns")?.into(),
                serde_json::to_string(run)?.into(),
                Value::Null,
                Value::Null,
            ]
            .into_iter()
            .chain(udp_loss_values(run)?)
            .collect(),
            StoredRun::Aborted {
                run,
                reason,
                so_far,
            } => {
                let p = &run.params;
                let so_far = so_far
                    .map(|s| -> Result<_> {
                        Ok([
                            int(s.messages, "messages")?,
                            int(s.bytes, "bytes")?,
                            int(duration_ns(s.elapsed), "elapsed ns")?,
                        ])
                    })
                    .transpose()?;
                vec![
                    "aborted".into(),
                    p.protocol.as_str().into(),
                    p.mechanism.as_str().into(),
                    p.msg_size.into(),
                    int(p.total_bytes, "total bytes")?.into(),
                    run.repeat_index.into(),
                    Value::Null,
                    so_far.map(|f| f[0]).into(),
                    so_far.map(|f| f[1]).into(),
                    so_far.map(|f| f[2]).into(),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    serde_json::to_string(p)?.into(),
                    reason.as_deref().into(),
                    Value::Null,
                    Value::Null,
                    Value::Null,
                    Value::Null,
                ]
            }
        })
    }

    fn read_result(row: &Row, at: usize, position: u64) -> Result<StoredRun> {
        if row.text(at)? == "complete" {
            let run: RunRecord = serde_json::from_str(&row.text(at + 13)?)?;
            return Ok(StoredRun::Finished {
                point: Point {
                    msg_size: row.u32(at + 3)?,
                    total_bytes: row.count(at + 4)?,
                },
                run: Box::new(run),
            });
        }
        let params = serde_json::from_str(row.opt_text(at + 14)?.as_deref().unwrap_or(""))?;
        let so_far = match (
            row.opt_i64(at + 7)?,
            row.opt_i64(at + 8)?,
            row.opt_i64(at + 9)?,
        ) {
            (Some(m), Some(b), Some(e)) => Some(SoFar {
                messages: u64::try_from(m).unwrap_or(0),
                bytes: u64::try_from(b).unwrap_or(0),
                elapsed: std::time::Duration::from_nanos(u64::try_from(e).unwrap_or(0)),
            }),
            _ => None,
        };
        Ok(StoredRun::Aborted {
            run: Box::new(AbortedRun {
                position,
                repeat_index: row.u32(at + 5)?,
                params,
            }),
            reason: row.opt_text(at + 15)?,
            so_far,
        })
    }

    fn info(life: Lifecycle, plan: NewCampaign) -> CampaignInfo {
        campaign_info(life, plan)
    }
}

/// A finished run's UDP loss and its three shares (`record::loss`), NULL where they do not
/// apply or were not measured.
fn udp_loss_values(run: &RunRecord) -> Result<[Value; 4]> {
    let delivery = run.headline().delivery;
    let split = delivery.and_then(|d| d.loss_split);
    let count = |n: Option<u64>| -> Result<Value> {
        Ok(n.map(|n| int(n, "lost messages")).transpose()?.into())
    };
    Ok([
        count(delivery.map(|d| d.lost))?,
        count(split.map(|s| s.receiving_host))?,
        count(split.map(|s| s.sending_host))?,
        count(split.map(|s| s.path))?,
    ])
}

/// A throughput campaign's lifecycle and plan as the views read it.
pub fn campaign_info(life: Lifecycle, plan: NewCampaign) -> CampaignInfo {
    CampaignInfo {
        id: life.id,
        started_at_unix_s: life.started_at_unix_s,
        finished_at_unix_s: life.finished_at_unix_s,
        status: life.status,
        error: life.error,
        origin: life.origin,
        parameters: plan.parameters,
        planned_runs: life.planned,
        stored_runs: life.stored,
        aborted_runs: life.aborted,
        msg_sizes: plan.msg_sizes,
        totals: plan.totals,
        environment: plan.environment,
    }
}

impl Store {
    /// The finished runs of one campaign with their message size and total, in the order they
    /// ran (aborted runs are left out: see [`Store::aborted_runs`]).
    pub fn runs(&self, campaign: i64) -> Result<Vec<(Point, RunRecord)>> {
        // Runs stored before each record said its direction take the campaign's.
        let reverse = self
            .campaign::<Run>(campaign)?
            .is_some_and(|c| c.parameters.reverse);
        Ok(self
            .results::<Run>(campaign)?
            .into_iter()
            .filter_map(|r| match r.result {
                StoredRun::Finished { point, mut run } => {
                    run.reverse |= reverse;
                    Some((point, *run))
                }
                StoredRun::Aborted { .. } => None,
            })
            .collect())
    }

    /// The runs of one campaign stored as aborted, in plan order.
    pub fn aborted_runs(&self, campaign: i64) -> Result<Vec<AbortedRun>> {
        Ok(self
            .aborted_details_and_runs(campaign)?
            .into_iter()
            .map(|(run, _)| run)
            .collect())
    }

    /// Why each aborted run of `campaign` stopped and what its client had done, in plan order.
    pub fn aborted_details(&self, campaign: i64) -> Result<Vec<AbortedDetail>> {
        Ok(self
            .aborted_details_and_runs(campaign)?
            .into_iter()
            .map(|(_, detail)| detail)
            .collect())
    }

    fn aborted_details_and_runs(&self, campaign: i64) -> Result<Vec<(AbortedRun, AbortedDetail)>> {
        Ok(self
            .results::<Run>(campaign)?
            .into_iter()
            .filter_map(|r| match r.result {
                StoredRun::Aborted {
                    run,
                    reason,
                    so_far,
                } => {
                    let detail = AbortedDetail {
                        position: r.position,
                        reason,
                        so_far,
                    };
                    Some((*run, detail))
                }
                StoredRun::Finished { .. } => None,
            })
            .collect())
    }
}

/// A stored comma list (`None` for campaigns from before schema version 3).
fn split_list<T: std::str::FromStr>(text: Option<&str>) -> Result<Option<Vec<T>>> {
    let Some(text) = text else { return Ok(None) };
    text.split(',')
        .map(|v| {
            v.parse::<T>()
                .map_err(|_| anyhow::anyhow!("its size list {text:?} is unreadable"))
        })
        .collect::<Result<Vec<T>>>()
        .map(Some)
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
