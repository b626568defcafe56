//! `wirebench dns` campaigns in the results store (schema version 5: `dns_campaign`,
//! `dns_result`): begin, commit each result as it finishes, finish, and read back. Owns only
//! the SQL of those two tables; the records are `wirebench_core::record::dns`.

use anyhow::{Context, Result};

use wirebench_core::record::dns::{DnsCampaignInfo, DnsResult, NewDnsCampaign};
use wirebench_core::record::Status;

use super::sql::{args, Conn, Row};
use super::Store;

impl Store {
    /// Records a DNS campaign that is starting (status `running`); returns its id.
    pub fn begin_dns_campaign(&mut self, c: &NewDnsCampaign) -> Result<i64> {
        self.transaction(|tx| insert_dns_campaign(tx, c, Status::Running, None))
    }

    /// Commits one finished result of `campaign` (1-based `position` in run order), in one
    /// transaction.
    pub fn add_dns_result(&mut self, campaign: i64, position: u64, r: &DnsResult) -> Result<()> {
        self.transaction(|tx| insert_dns_result(tx, campaign, position, r))
    }

    /// Marks a DNS campaign as ended.
    pub fn finish_dns_campaign(
        &mut self,
        campaign: i64,
        status: Status,
        finished_at_unix_s: i64,
    ) -> Result<()> {
        self.finish_sweep(
            "dns_campaign",
            "DNS campaign",
            campaign,
            status,
            finished_at_unix_s,
        )
    }

    /// One DNS campaign, `None` when there is no such id.
    pub fn dns_campaign(&self, id: i64) -> Result<Option<DnsCampaignInfo>> {
        let Some(row) = self.query_opt(
            "SELECT id, started_at_unix_s, finished_at_unix_s, status, resolver, name,
             record_type, transports, concurrency, planned_results, host_name,
             wirebench_version FROM dns_campaign WHERE id = ?1",
            args![id],
        )?
        else {
            return Ok(None);
        };
        let status = row.text(3)?;
        Ok(Some(DnsCampaignInfo {
            id: row.i64(0)?,
            finished_at_unix_s: row.opt_i64(2)?,
            status: Status::from_name(&status)
                .with_context(|| format!("DNS campaign {id} has an unknown status {status:?}"))?,
            campaign: dns_campaign_row(&row)?,
        }))
    }

    /// Every DNS campaign with the number of results stored, oldest first.
    pub fn dns_campaigns(&self) -> Result<Vec<(DnsCampaignInfo, u64)>> {
        self.sweeps_with_counts("dns_campaign", "dns_result", Self::dns_campaign)
    }

    /// The newest DNS campaign's id.
    pub fn last_dns_campaign_id(&self) -> Result<Option<i64>> {
        self.last_sweep_id("dns_campaign")
    }

    /// The results of a DNS campaign, in run order.
    pub fn dns_results(&self, campaign: i64) -> Result<Vec<DnsResult>> {
        self.sweep_results("dns_result", "DNS result", campaign)
    }
}

fn dns_campaign_row(row: &Row) -> Result<NewDnsCampaign> {
    Ok(NewDnsCampaign {
        started_at_unix_s: row.i64(1)?,
        resolver: row.text(4)?,
        name: row.text(5)?,
        record_type: row.text(6)?,
        transports: row.text(7)?,
        concurrency: row.text(8)?,
        planned_results: row.count(9)?,
        host_name: row.opt_text(10)?,
        wirebench_version: row.text(11)?,
    })
}

/// Stores a DNS campaign row as `status` (ended at `finished`, if it has); returns its id.
pub(super) fn insert_dns_campaign(
    tx: &mut dyn Conn,
    c: &NewDnsCampaign,
    status: Status,
    finished: Option<i64>,
) -> Result<i64> {
    tx.insert(
        "INSERT INTO dns_campaign (started_at_unix_s, status, finished_at_unix_s, resolver, name, record_type, transports, concurrency, planned_results, host_name, wirebench_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         RETURNING id",
        args![
            c.started_at_unix_s,
            status.as_str(),
            finished,
            &c.resolver,
            &c.name,
            &c.record_type,
            &c.transports,
            &c.concurrency,
            i64::try_from(c.planned_results).unwrap_or(i64::MAX),
            &c.host_name,
            &c.wirebench_version,
        ],
    )
    .context("while recording the DNS campaign")
}

/// Stores one result of `campaign`.
pub(super) fn insert_dns_result(
    tx: &mut dyn Conn,
    campaign: i64,
    position: u64,
    r: &DnsResult,
) -> Result<()> {
    let json = serde_json::to_string(r).context("while encoding a DNS result")?;
    let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    tx.execute(
        "INSERT INTO dns_result (campaign_id, position, transport, concurrency, sent,
             answered, timeouts, result_json) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        args![
            campaign,
            as_i64(position),
            r.transport.name(),
            r.concurrency,
            as_i64(r.counts.sent),
            as_i64(r.counts.answered),
            as_i64(r.counts.timeouts),
            json
        ],
    )
    .context("while storing a DNS result")?;
    Ok(())
}
