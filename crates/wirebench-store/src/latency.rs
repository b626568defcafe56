//! `wirebench latency` campaigns in the store (schema version 11: `latency_campaign`,
//! `latency_result`) as a [`Kind`]. Owns only the layout of those two tables; the records are
//! `wirebench_core::record::load_phases`.

use anyhow::{Context, Result};

use wirebench_core::record::lifecycle::{CampaignKind, Lifecycle, SweepInfo};
use wirebench_core::record::load_phases::{LoadPhasesResult, NewLatencyCampaign};

use super::kind::{int, Kind};
use super::sql::{Row, Value};

/// `wirebench latency` campaigns.
pub struct Latency;

impl Kind for Latency {
    const KIND: CampaignKind = CampaignKind::Latency;
    type Plan = NewLatencyCampaign;
    type Result = LoadPhasesResult;
    type Info = SweepInfo<NewLatencyCampaign>;

    const PLAN_COLUMNS: &'static [&'static str] = &[
        "started_at_unix_s",
        "server",
        "phases",
        "plan_json",
        "planned_results",
        "host_name",
        "wirebench_version",
    ];
    const IDENTITY: &'static [&'static str] = &["server", "phases", "host_name"];
    const RESULT_COLUMNS: &'static [&'static str] = &["phases", "clock_bound_ns", "result_json"];

    fn plan_values(c: &NewLatencyCampaign) -> Result<Vec<Value>> {
        Ok(vec![
            c.started_at_unix_s.into(),
            (&c.server).into(),
            (&c.phases).into(),
            serde_json::to_string(&c.plan)
                .context("while encoding a latency plan")?
                .into(),
            int(c.planned_results, "planned tests")?.into(),
            (&c.host_name).into(),
            (&c.wirebench_version).into(),
        ])
    }

    fn read_plan(row: &Row, at: usize) -> Result<NewLatencyCampaign> {
        Ok(NewLatencyCampaign {
            started_at_unix_s: row.i64(at)?,
            server: row.text(at + 1)?,
            phases: row.text(at + 2)?,
            plan: serde_json::from_str(&row.text(at + 3)?)
                .context("a latency campaign's plan is unreadable")?,
            planned_results: row.count(at + 4)?,
            host_name: row.opt_text(at + 5)?,
            wirebench_version: row.text(at + 6)?,
        })
    }

    fn started_at(plan: &NewLatencyCampaign) -> i64 {
        plan.started_at_unix_s
    }

    fn planned(plan: &NewLatencyCampaign) -> u64 {
        plan.planned_results
    }

    fn result_values(r: &LoadPhasesResult) -> Result<Vec<Value>> {
        let bound = match &r.clock {
            Some(c) => Some(int(c.bound_ns, "clock bound")?),
            None => None,
        };
        Ok(vec![
            int(r.phases.len() as u64, "phases")?.into(),
            bound.into(),
            serde_json::to_string(r)
                .context("while encoding a latency result")?
                .into(),
        ])
    }

    fn read_result(row: &Row, at: usize, _position: u64) -> Result<LoadPhasesResult> {
        Ok(serde_json::from_str(&row.text(at + 2)?)?)
    }

    fn info(life: Lifecycle, plan: NewLatencyCampaign) -> SweepInfo<NewLatencyCampaign> {
        SweepInfo::new(Self::KIND, life, plan)
    }
}
