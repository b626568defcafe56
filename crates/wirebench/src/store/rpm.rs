//! `wirebench rpm` campaigns in the results store (schema version 8: `rpm_campaign`,
//! `rpm_result`): begin, commit each test as it finishes, finish, and read back. Owns only the
//! SQL of those two tables (written once for both backends, see `store/mod.rs`); the records
//! are `wirebench_core::record::rpm` and `wirebench_core::machine::responsiveness::RpmResult`.

use anyhow::{Context, Result};

use wirebench_core::machine::responsiveness::{LoadDirection, RpmResult};
use wirebench_core::record::rpm::{NewRpmCampaign, RpmCampaignInfo};
use wirebench_core::record::Status;

use super::sql::{args, Conn, Row};
use super::Store;

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    /// Records an rpm campaign that is starting (status `running`); returns its id.
    pub fn begin_rpm_campaign(&mut self, c: &NewRpmCampaign) -> Result<i64> {
        self.transaction(|tx| insert_rpm_campaign(tx, c, Status::Running, None))
    }

    /// Commits one finished test of `campaign` (1-based `position` in run order), in one
    /// transaction.
    pub fn add_rpm_result(&mut self, campaign: i64, position: u64, r: &RpmResult) -> Result<()> {
        self.transaction(|tx| insert_rpm_result(tx, campaign, position, r))
    }

    /// Marks an rpm campaign as ended.
    pub fn finish_rpm_campaign(
        &mut self,
        campaign: i64,
        status: Status,
        finished_at_unix_s: i64,
    ) -> Result<()> {
        self.finish_sweep(
            "rpm_campaign",
            "rpm campaign",
            campaign,
            status,
            finished_at_unix_s,
        )
    }

    /// One rpm campaign, `None` when there is no such id.
    pub fn rpm_campaign(&self, id: i64) -> Result<Option<RpmCampaignInfo>> {
        let Some(row) = self.query_opt(
            "SELECT id, started_at_unix_s, finished_at_unix_s, status, server, direction,
             protocol, max_flows, interval_ns, max_load_ns, planned_results, host_name,
             wirebench_version FROM rpm_campaign WHERE id = ?1",
            args![id],
        )?
        else {
            return Ok(None);
        };
        let status = row.text(3)?;
        Ok(Some(RpmCampaignInfo {
            id: row.i64(0)?,
            finished_at_unix_s: row.opt_i64(2)?,
            status: Status::from_name(&status)
                .with_context(|| format!("rpm campaign {id} has an unknown status {status:?}"))?,
            campaign: rpm_campaign_row(&row)?,
        }))
    }

    /// Every rpm campaign with the number of tests stored, oldest first.
    pub fn rpm_campaigns(&self) -> Result<Vec<(RpmCampaignInfo, u64)>> {
        self.sweeps_with_counts("rpm_campaign", "rpm_result", Self::rpm_campaign)
    }

    /// The newest rpm campaign's id.
    pub fn last_rpm_campaign_id(&self) -> Result<Option<i64>> {
        self.last_sweep_id("rpm_campaign")
    }

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

    /// The tests of an rpm campaign, in run order.
    pub fn rpm_results(&self, campaign: i64) -> Result<Vec<RpmResult>> {
        self.sweep_results("rpm_result", "rpm result", campaign)
    }
}

fn rpm_campaign_row(row: &Row) -> Result<NewRpmCampaign> {
    let direction = row.text(5)?;
    Ok(NewRpmCampaign {
        started_at_unix_s: row.i64(1)?,
        server: row.text(4)?,
        direction: LoadDirection::from_name(&direction)
            .with_context(|| format!("an rpm campaign has an unknown direction {direction:?}"))?,
        protocol: row.text(6)?,
        max_flows: row.u32(7)?,
        interval_ns: row.count(8)?,
        max_load_ns: row.count(9)?,
        planned_results: row.count(10)?,
        host_name: row.opt_text(11)?,
        wirebench_version: row.text(12)?,
    })
}

/// Stores an rpm campaign row as `status` (ended at `finished`, if it has); returns its id.
pub(super) fn insert_rpm_campaign(
    tx: &mut dyn Conn,
    c: &NewRpmCampaign,
    status: Status,
    finished: Option<i64>,
) -> Result<i64> {
    tx.insert(
        "INSERT INTO rpm_campaign (started_at_unix_s, status, finished_at_unix_s, server,
         direction, protocol, max_flows, interval_ns, max_load_ns, planned_results, host_name,
         wirebench_version)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         RETURNING id",
        args![
            c.started_at_unix_s,
            status.as_str(),
            finished,
            &c.server,
            c.direction.as_str(),
            &c.protocol,
            c.max_flows,
            as_i64(c.interval_ns),
            as_i64(c.max_load_ns),
            as_i64(c.planned_results),
            &c.host_name,
            &c.wirebench_version,
        ],
    )
    .context("while recording the rpm campaign")
}

/// Stores one test of `campaign`.
pub(super) fn insert_rpm_result(
    tx: &mut dyn Conn,
    campaign: i64,
    position: u64,
    r: &RpmResult,
) -> Result<()> {
    let json = serde_json::to_string(r).context("while encoding an rpm result")?;
    tx.execute(
        "INSERT INTO rpm_result (campaign_id, position, rpm, load_flows, intervals, result_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        args![
            campaign,
            as_i64(position),
            r.rpm,
            r.load_flows,
            as_i64(r.intervals.len() as u64),
            json
        ],
    )
    .context("while storing an rpm result")?;
    Ok(())
}
