//! `wirebench rr` and `wirebench ping` sweeps in the store (schema version 7: `rr_campaign`,
//! `rr_result`; version 9: `command` says which): two [`Kind`]s over one pair of tables. Owns
//! only the layout of those two tables; the records are `wirebench_core::record::rr`.

use anyhow::{Context, Result};

use wirebench_core::record::lifecycle::{CampaignKind, Lifecycle, SweepInfo};
use wirebench_core::record::rr::{NewRrCampaign, RrResult};

use super::kind::{int, Kind};
use super::sql::{Row, Value};

/// `wirebench rr` sweeps.
pub struct Rr;

/// `wirebench ping`, stored as an rr-like sweep (`report --rr ID` renders it).
pub struct Ping;

const PLAN_COLUMNS: &[&str] = &[
    "started_at_unix_s",
    "server",
    "protocols",
    "concurrency",
    "request_bytes",
    "response_bytes",
    "flows",
    "planned_results",
    "host_name",
    "wirebench_version",
];
const IDENTITY: &[&str] = &["server", "protocols", "host_name"];
const RESULT_COLUMNS: &[&str] = &[
    "protocol",
    "concurrency",
    "sent",
    "answered",
    "lost",
    "result_json",
];

fn plan_values(c: &NewRrCampaign) -> Result<Vec<Value>> {
    Ok(vec![
        c.started_at_unix_s.into(),
        (&c.server).into(),
        (&c.protocols).into(),
        (&c.concurrency).into(),
        c.request_bytes.into(),
        c.response_bytes.into(),
        c.flows.into(),
        int(c.planned_results, "planned results")?.into(),
        (&c.host_name).into(),
        (&c.wirebench_version).into(),
    ])
}

fn read_plan(row: &Row, at: usize) -> Result<NewRrCampaign> {
    Ok(NewRrCampaign {
        started_at_unix_s: row.i64(at)?,
        server: row.text(at + 1)?,
        protocols: row.text(at + 2)?,
        concurrency: row.text(at + 3)?,
        request_bytes: row.u32(at + 4)?,
        response_bytes: row.u32(at + 5)?,
        flows: row.u32(at + 6)?,
        planned_results: row.count(at + 7)?,
        host_name: row.opt_text(at + 8)?,
        wirebench_version: row.text(at + 9)?,
    })
}

fn result_values(r: &RrResult) -> Result<Vec<Value>> {
    Ok(vec![
        r.protocol.as_str().into(),
        r.concurrency.into(),
        int(r.sent, "requests sent")?.into(),
        int(r.answered, "requests answered")?.into(),
        int(r.lost, "requests lost")?.into(),
        serde_json::to_string(r)
            .context("while encoding an rr result")?
            .into(),
    ])
}

fn read_result(row: &Row, at: usize) -> Result<RrResult> {
    Ok(serde_json::from_str(&row.text(at + 5)?)?)
}

macro_rules! rr_like {
    ($kind:ty, $which:expr) => {
        impl Kind for $kind {
            const KIND: CampaignKind = $which;
            type Plan = NewRrCampaign;
            type Result = RrResult;
            type Info = SweepInfo<NewRrCampaign>;
            const PLAN_COLUMNS: &'static [&'static str] = PLAN_COLUMNS;
            const IDENTITY: &'static [&'static str] = IDENTITY;
            const RESULT_COLUMNS: &'static [&'static str] = RESULT_COLUMNS;

            fn plan_values(plan: &NewRrCampaign) -> Result<Vec<Value>> {
                plan_values(plan)
            }
            fn read_plan(row: &Row, at: usize) -> Result<NewRrCampaign> {
                read_plan(row, at)
            }
            fn started_at(plan: &NewRrCampaign) -> i64 {
                plan.started_at_unix_s
            }
            fn planned(plan: &NewRrCampaign) -> u64 {
                plan.planned_results
            }
            fn result_values(r: &RrResult) -> Result<Vec<Value>> {
                result_values(r)
            }
            fn read_result(row: &Row, at: usize, _position: u64) -> Result<RrResult> {
                read_result(row, at)
            }
            fn info(life: Lifecycle, plan: NewRrCampaign) -> SweepInfo<NewRrCampaign> {
                SweepInfo::new(Self::KIND, life, plan)
            }
        }
    };
}
rr_like!(Rr, CampaignKind::Rr);
rr_like!(Ping, CampaignKind::Ping);
