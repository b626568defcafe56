//! `wirebench rpm` campaigns in the store (schema version 8: `rpm_campaign`, `rpm_result`) as a
//! [`Kind`], and the RPM figures `runs` lists without decoding the results. Owns only the layout
//! of those two tables; the records are
//! `wirebench_core::record::rpm` and `wirebench_core::machine::responsiveness::RpmResult`.

use anyhow::{Context, Result};

use wirebench_core::machine::responsiveness::{LoadDirection, RpmResult};
use wirebench_core::record::lifecycle::{CampaignKind, Lifecycle, SweepInfo};
use wirebench_core::record::rpm::NewRpmCampaign;

use super::kind::{int, Kind};
use super::sql::{args, Row, Value};
use crate::store::Store;

/// `wirebench rpm` campaigns.
pub struct Rpm;

impl Kind for Rpm {
    const KIND: CampaignKind = CampaignKind::Rpm;
    type Plan = NewRpmCampaign;
    type Result = RpmResult;
    type Info = SweepInfo<NewRpmCampaign>;

    const PLAN_COLUMNS: &'static [&'static str] = &[
        "started_at_unix_s",
        "server",
        "direction",
        "protocol",
        "max_flows",
        "interval_ns",
        "max_load_ns",
        "planned_results",
        "host_name",
        "wirebench_version",
    ];
    const IDENTITY: &'static [&'static str] = &["server", "direction", "host_name"];
    const RESULT_COLUMNS: &'static [&'static str] =
        &["rpm", "load_flows", "intervals", "result_json"];

    fn plan_values(c: &NewRpmCampaign) -> Result<Vec<Value>> {
        Ok(vec![
            c.started_at_unix_s.into(),
            (&c.server).into(),
            c.direction.as_str().into(),
            (&c.protocol).into(),
            c.max_flows.into(),
            int(c.interval_ns, "interval ns")?.into(),
            int(c.max_load_ns, "load ns")?.into(),
            int(c.planned_results, "planned tests")?.into(),
            (&c.host_name).into(),
            (&c.wirebench_version).into(),
        ])
    }

    fn read_plan(row: &Row, at: usize) -> Result<NewRpmCampaign> {
        let direction = row.text(at + 2)?;
        Ok(NewRpmCampaign {
            started_at_unix_s: row.i64(at)?,
            server: row.text(at + 1)?,
            direction: LoadDirection::from_name(&direction).with_context(|| {
                format!("an rpm campaign has an unknown direction {direction:?}")
            })?,
            protocol: row.text(at + 3)?,
            max_flows: row.u32(at + 4)?,
            interval_ns: row.count(at + 5)?,
            max_load_ns: row.count(at + 6)?,
            planned_results: row.count(at + 7)?,
            host_name: row.opt_text(at + 8)?,
            wirebench_version: row.text(at + 9)?,
        })
    }

    fn started_at(plan: &NewRpmCampaign) -> i64 {
        plan.started_at_unix_s
    }

    fn planned(plan: &NewRpmCampaign) -> u64 {
        plan.planned_results
    }

    fn result_values(r: &RpmResult) -> Result<Vec<Value>> {
        Ok(vec![
            r.rpm.into(),
            r.load_flows.into(),
            int(r.intervals.len() as u64, "intervals")?.into(),
            serde_json::to_string(r)
                .context("while encoding an rpm result")?
                .into(),
        ])
    }

    fn read_result(row: &Row, at: usize, _position: u64) -> Result<RpmResult> {
        Ok(serde_json::from_str(&row.text(at + 3)?)?)
    }

    fn info(life: Lifecycle, plan: NewRpmCampaign) -> SweepInfo<NewRpmCampaign> {
        SweepInfo::new(Self::KIND, life, plan)
    }
}

impl Store {
    /// The RPM of each test of an rpm campaign, in run order (`None` for a test that measured
    /// none), without decoding the results: what `wirebench runs` lists.
    pub fn rpm_figures(&self, campaign: i64) -> Result<Vec<Option<f64>>> {
        self.query(
            "SELECT rpm FROM rpm_result WHERE campaign_id = ?1 ORDER BY position",
            args![campaign],
        )?
        .iter()
        .map(|row| row.opt_f64(0))
        .collect()
    }
}
