//! `wirebench rr` and `wirebench ping` sweeps in the store (schema version 7: `rr_campaign`,
//! `rr_result`; version 9: `command` says which): two [`Kind`]s over one pair of tables, and
//! the functions `rr`, `report --rr` and the exporter have always called. Owns only the layout
//! of those two tables; the records are `wirebench_core::record::rr`.

use anyhow::{Context, Result};

use wirebench_core::record::lifecycle::{CampaignKind, Lifecycle};
use wirebench_core::record::rr::{NewRrCampaign, RrCampaignInfo, RrResult};
use wirebench_core::record::Status;

use super::kind::{int, Kind};
use super::sql::{Row, Value};
use super::Store;

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
        }
    };
}
rr_like!(Rr, CampaignKind::Rr);
rr_like!(Ping, CampaignKind::Ping);

/// An rr or ping sweep's lifecycle and plan as the views read it.
pub fn rr_info(kind: CampaignKind, life: Lifecycle, campaign: NewRrCampaign) -> RrCampaignInfo {
    RrCampaignInfo {
        id: life.id,
        finished_at_unix_s: life.finished_at_unix_s,
        status: life.status,
        campaign,
        kind,
    }
}

impl Store {
    /// Records an rr sweep that is starting (status `running`); returns its id.
    pub fn begin_rr_campaign(&mut self, c: &NewRrCampaign) -> Result<i64> {
        Ok(self.begin::<Rr>(c)?.id)
    }

    /// Commits one finished result of `campaign` (1-based `position` in run order), in one
    /// transaction.
    pub fn add_rr_result(&mut self, campaign: i64, position: u64, r: &RrResult) -> Result<()> {
        self.record::<Rr>(campaign, position, r)
    }

    /// Marks an rr (or ping) sweep as ended.
    pub fn finish_rr_campaign(
        &mut self,
        campaign: i64,
        status: Status,
        finished_at_unix_s: i64,
    ) -> Result<()> {
        self.finish::<Rr>(campaign, status, finished_at_unix_s, None)
    }

    /// One rr or ping sweep, `None` when there is no such id.
    pub fn rr_campaign(&self, id: i64) -> Result<Option<RrCampaignInfo>> {
        if let Some((life, plan)) = self.get::<Rr>(id)? {
            return Ok(Some(rr_info(CampaignKind::Rr, life, plan)));
        }
        Ok(self
            .get::<Ping>(id)?
            .map(|(life, plan)| rr_info(CampaignKind::Ping, life, plan)))
    }

    /// Every rr and ping sweep with the number of results stored, oldest first.
    pub fn rr_campaigns(&self) -> Result<Vec<(RrCampaignInfo, u64)>> {
        let mut all: Vec<(RrCampaignInfo, u64)> = Vec::new();
        for (kind, list) in [
            (CampaignKind::Rr, self.list::<Rr>()?),
            (CampaignKind::Ping, self.list::<Ping>()?),
        ] {
            for (life, plan) in list {
                let stored = life.stored;
                all.push((rr_info(kind, life, plan), stored));
            }
        }
        all.sort_by_key(|(info, _)| info.id);
        Ok(all)
    }

    /// The newest rr or ping sweep's id.
    pub fn last_rr_campaign_id(&self) -> Result<Option<i64>> {
        Ok(self.last_id::<Rr>()?.max(self.last_id::<Ping>()?))
    }

    /// The results of an rr or ping sweep, in run order.
    pub fn rr_results(&self, campaign: i64) -> Result<Vec<RrResult>> {
        Ok(self
            .results::<Rr>(campaign)?
            .into_iter()
            .map(|r| r.result)
            .collect())
    }
}
