//! `wirebench dns` campaigns in the store (schema version 5: `dns_campaign`, `dns_result`) as a
//! [`Kind`]. Owns only the layout of those two tables; the records are
//! `wirebench_core::record::dns`.

use anyhow::{Context, Result};

use wirebench_core::record::dns::{DnsResult, NewDnsCampaign};
use wirebench_core::record::lifecycle::{CampaignKind, Lifecycle, SweepInfo};

use super::kind::{int, Kind};
use super::sql::{Row, Value};

/// `wirebench dns` campaigns.
pub struct Dns;

impl Kind for Dns {
    const KIND: CampaignKind = CampaignKind::Dns;
    type Plan = NewDnsCampaign;
    type Result = DnsResult;
    type Info = SweepInfo<NewDnsCampaign>;

    const PLAN_COLUMNS: &'static [&'static str] = &[
        "started_at_unix_s",
        "resolver",
        "name",
        "record_type",
        "transports",
        "concurrency",
        "planned_results",
        "host_name",
        "wirebench_version",
    ];
    const IDENTITY: &'static [&'static str] = &["resolver", "name", "host_name"];
    const RESULT_COLUMNS: &'static [&'static str] = &[
        "transport",
        "concurrency",
        "sent",
        "answered",
        "timeouts",
        "result_json",
    ];

    fn plan_values(c: &NewDnsCampaign) -> Result<Vec<Value>> {
        Ok(vec![
            c.started_at_unix_s.into(),
            (&c.resolver).into(),
            (&c.name).into(),
            (&c.record_type).into(),
            (&c.transports).into(),
            (&c.concurrency).into(),
            int(c.planned_results, "planned results")?.into(),
            (&c.host_name).into(),
            (&c.wirebench_version).into(),
        ])
    }

    fn read_plan(row: &Row, at: usize) -> Result<NewDnsCampaign> {
        Ok(NewDnsCampaign {
            started_at_unix_s: row.i64(at)?,
            resolver: row.text(at + 1)?,
            name: row.text(at + 2)?,
            record_type: row.text(at + 3)?,
            transports: row.text(at + 4)?,
            concurrency: row.text(at + 5)?,
            planned_results: row.count(at + 6)?,
            host_name: row.opt_text(at + 7)?,
            wirebench_version: row.text(at + 8)?,
        })
    }

    fn started_at(plan: &NewDnsCampaign) -> i64 {
        plan.started_at_unix_s
    }

    fn planned(plan: &NewDnsCampaign) -> u64 {
        plan.planned_results
    }

    fn result_values(r: &DnsResult) -> Result<Vec<Value>> {
        Ok(vec![
            r.transport.name().into(),
            r.concurrency.into(),
            int(r.counts.sent, "queries sent")?.into(),
            int(r.counts.answered, "queries answered")?.into(),
            int(r.counts.timeouts, "timeouts")?.into(),
            serde_json::to_string(r)
                .context("while encoding a DNS result")?
                .into(),
        ])
    }

    fn read_result(row: &Row, at: usize, _position: u64) -> Result<DnsResult> {
        Ok(serde_json::from_str(&row.text(at + 5)?)?)
    }

    fn info(life: Lifecycle, plan: NewDnsCampaign) -> SweepInfo<NewDnsCampaign> {
        SweepInfo::new(Self::KIND, life, plan)
    }
}
