//! `wirebench rr` sweeps in the results store (schema version 7: `rr_campaign`, `rr_result`):
//! begin, commit each result as it finishes, finish, and read back. Owns only the SQL of those
//! two tables; the records are `wirebench_core::record::rr`.

use anyhow::{Context, Result};

use wirebench_core::record::rr::{NewRrCampaign, RrCampaignInfo, RrResult};
use wirebench_core::record::Status;

use super::sql::{args, Conn, Row};
use super::Store;

impl Store {
    /// Records an rr sweep that is starting (status `running`); returns its id.
    pub fn begin_rr_campaign(&mut self, c: &NewRrCampaign) -> Result<i64> {
        self.transaction(|tx| insert_rr_campaign(tx, c, Status::Running, None))
    }

    /// Commits one finished result of `campaign` (1-based `position` in run order), in one
    /// transaction.
    pub fn add_rr_result(&mut self, campaign: i64, position: u64, r: &RrResult) -> Result<()> {
        self.transaction(|tx| insert_rr_result(tx, campaign, position, r))
    }

    /// Marks an rr sweep as ended.
    pub fn finish_rr_campaign(
        &mut self,
        campaign: i64,
        status: Status,
        finished_at_unix_s: i64,
    ) -> Result<()> {
        self.finish_sweep(
            "rr_campaign",
            "rr campaign",
            campaign,
            status,
            finished_at_unix_s,
        )
    }

    /// One rr sweep, `None` when there is no such id.
    pub fn rr_campaign(&self, id: i64) -> Result<Option<RrCampaignInfo>> {
        let Some(row) = self.query_opt(
            "SELECT id, started_at_unix_s, finished_at_unix_s, status, server, protocols,
             concurrency, request_bytes, response_bytes, flows, planned_results, host_name,
             wirebench_version FROM rr_campaign WHERE id = ?1",
            args![id],
        )?
        else {
            return Ok(None);
        };
        let status = row.text(3)?;
        Ok(Some(RrCampaignInfo {
            id: row.i64(0)?,
            finished_at_unix_s: row.opt_i64(2)?,
            status: Status::from_name(&status)
                .with_context(|| format!("rr campaign {id} has an unknown status {status:?}"))?,
            campaign: rr_campaign_row(&row)?,
        }))
    }

    /// Every rr sweep with the number of results stored, oldest first.
    pub fn rr_campaigns(&self) -> Result<Vec<(RrCampaignInfo, u64)>> {
        self.sweeps_with_counts("rr_campaign", "rr_result", Self::rr_campaign)
    }

    /// The newest rr sweep's id.
    pub fn last_rr_campaign_id(&self) -> Result<Option<i64>> {
        self.last_sweep_id("rr_campaign")
    }

    /// The results of an rr sweep, in run order.
    pub fn rr_results(&self, campaign: i64) -> Result<Vec<RrResult>> {
        self.sweep_results("rr_result", "rr result", campaign)
    }
}

fn rr_campaign_row(row: &Row) -> Result<NewRrCampaign> {
    Ok(NewRrCampaign {
        started_at_unix_s: row.i64(1)?,
        server: row.text(4)?,
        protocols: row.text(5)?,
        concurrency: row.text(6)?,
        request_bytes: row.u32(7)?,
        response_bytes: row.u32(8)?,
        flows: row.u32(9)?,
        planned_results: row.count(10)?,
        host_name: row.opt_text(11)?,
        wirebench_version: row.text(12)?,
    })
}

/// Stores a rr campaign row as `status` (ended at `finished`, if it has); returns its id.
pub(super) fn insert_rr_campaign(
    tx: &mut dyn Conn,
    c: &NewRrCampaign,
    status: Status,
    finished: Option<i64>,
) -> Result<i64> {
    tx.insert(
        "INSERT INTO rr_campaign (started_at_unix_s, status, finished_at_unix_s, server, protocols, concurrency, request_bytes, response_bytes, flows, planned_results, host_name, wirebench_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         RETURNING id",
        args![
            c.started_at_unix_s,
            status.as_str(),
            finished,
            &c.server,
            &c.protocols,
            &c.concurrency,
            c.request_bytes,
            c.response_bytes,
            c.flows,
            i64::try_from(c.planned_results).unwrap_or(i64::MAX),
            &c.host_name,
            &c.wirebench_version,
        ],
    )
    .context("while recording the rr campaign")
}

/// Stores one result of `campaign`.
pub(super) fn insert_rr_result(
    tx: &mut dyn Conn,
    campaign: i64,
    position: u64,
    r: &RrResult,
) -> Result<()> {
    let json = serde_json::to_string(r).context("while encoding an rr result")?;
    let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    tx.execute(
        "INSERT INTO rr_result (campaign_id, position, protocol, concurrency, sent, answered,
             lost, result_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        args![
            campaign,
            as_i64(position),
            r.protocol.as_str(),
            r.concurrency,
            as_i64(r.sent),
            as_i64(r.answered),
            as_i64(r.lost),
            json
        ],
    )
    .context("while storing an rr result")?;
    Ok(())
}
