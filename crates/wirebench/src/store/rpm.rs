//! `wirebench rpm` campaigns in the results store (schema version 8: `rpm_campaign`,
//! `rpm_result`): begin, commit each test as it finishes, finish, and read back. Owns only the
//! SQL of those two tables (plain SQL, nothing SQLite-only); the records are
//! `wirebench_core::record::rpm` and `wirebench_core::responsiveness::RpmResult`.

use anyhow::{bail, Context, Result};
use rusqlite::{params, OptionalExtension, TransactionBehavior};

use wirebench_core::record::rpm::{NewRpmCampaign, RpmCampaignInfo};
use wirebench_core::record::Status;
use wirebench_core::responsiveness::{LoadDirection, RpmResult};

use super::Store;

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Store {
    /// Records an rpm campaign that is starting (status `running`); returns its id.
    pub fn begin_rpm_campaign(&mut self, c: &NewRpmCampaign) -> Result<i64> {
        self.conn
            .execute(
                "INSERT INTO rpm_campaign (started_at_unix_s, status, server, direction, protocol,
                 max_flows, interval_ns, max_load_ns, planned_results, host_name, wirebench_version)
                 VALUES (?1, 'running', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    c.started_at_unix_s,
                    c.server,
                    c.direction.as_str(),
                    c.protocol,
                    c.max_flows,
                    as_i64(c.interval_ns),
                    as_i64(c.max_load_ns),
                    as_i64(c.planned_results),
                    c.host_name,
                    c.wirebench_version
                ],
            )
            .context("while recording the rpm campaign")?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Commits one finished test of `campaign` (1-based `position` in run order), in one
    /// transaction.
    pub fn add_rpm_result(&mut self, campaign: i64, position: u64, r: &RpmResult) -> Result<()> {
        let json = serde_json::to_string(r).context("while encoding an rpm result")?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        tx.execute(
            "INSERT INTO rpm_result (campaign_id, position, rpm, load_flows, intervals, result_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                campaign,
                as_i64(position),
                r.rpm,
                r.load_flows,
                as_i64(r.intervals.len() as u64),
                json
            ],
        )
        .context("while storing an rpm result")?;
        tx.commit().context("while committing an rpm result")?;
        Ok(())
    }

    /// Marks an rpm campaign as ended.
    pub fn finish_rpm_campaign(
        &mut self,
        campaign: i64,
        status: Status,
        finished_at_unix_s: i64,
    ) -> Result<()> {
        let changed = self.conn.execute(
            "UPDATE rpm_campaign SET status = ?1, finished_at_unix_s = ?2 WHERE id = ?3",
            params![status.as_str(), finished_at_unix_s, campaign],
        )?;
        if changed != 1 {
            bail!("rpm campaign {campaign} is not in the results database");
        }
        Ok(())
    }

    /// One rpm campaign, `None` when there is no such id.
    pub fn rpm_campaign(&self, id: i64) -> Result<Option<RpmCampaignInfo>> {
        let row = self
            .conn
            .query_row(
                "SELECT id, started_at_unix_s, finished_at_unix_s, status, server, direction,
                 protocol, max_flows, interval_ns, max_load_ns, planned_results, host_name,
                 wirebench_version FROM rpm_campaign WHERE id = ?1",
                params![id],
                |row| {
                    let unsigned = |i: usize| -> rusqlite::Result<u64> {
                        Ok(u64::try_from(row.get::<_, i64>(i)?).unwrap_or(0))
                    };
                    Ok((
                        RpmCampaignInfo {
                            id: row.get(0)?,
                            finished_at_unix_s: row.get(2)?,
                            status: Status::Running,
                            campaign: NewRpmCampaign {
                                started_at_unix_s: row.get(1)?,
                                server: row.get(4)?,
                                direction: LoadDirection::Download,
                                protocol: row.get(6)?,
                                max_flows: row.get(7)?,
                                interval_ns: unsigned(8)?,
                                max_load_ns: unsigned(9)?,
                                planned_results: unsigned(10)?,
                                host_name: row.get(11)?,
                                wirebench_version: row.get(12)?,
                            },
                        },
                        row.get::<_, String>(3)?,
                        row.get::<_, String>(5)?,
                    ))
                },
            )
            .optional()?;
        match row {
            None => Ok(None),
            Some((mut info, status, direction)) => {
                info.status = Status::from_name(&status).with_context(|| {
                    format!("rpm campaign {} has an unknown status {status:?}", info.id)
                })?;
                info.campaign.direction =
                    LoadDirection::from_name(&direction).with_context(|| {
                        format!(
                            "rpm campaign {} has an unknown direction {direction:?}",
                            info.id
                        )
                    })?;
                Ok(Some(info))
            }
        }
    }

    /// Every rpm campaign with the number of tests stored, oldest first.
    pub fn rpm_campaigns(&self) -> Result<Vec<(RpmCampaignInfo, u64)>> {
        let mut out = Vec::new();
        for (id, stored) in self.ids_with_results("rpm_campaign", "rpm_result")? {
            if let Some(info) = self.rpm_campaign(id)? {
                out.push((info, stored));
            }
        }
        Ok(out)
    }

    /// The newest rpm campaign's id.
    pub fn last_rpm_campaign_id(&self) -> Result<Option<i64>> {
        Ok(self
            .conn
            .query_row("SELECT max(id) FROM rpm_campaign", [], |row| row.get(0))?)
    }

    /// The RPM of each test of an rpm campaign, in run order (`None` for a test that measured
    /// none), without decoding the results: what `wirebench runs` lists.
    pub fn rpm_figures(&self, campaign: i64) -> Result<Vec<Option<f64>>> {
        let mut stmt = self
            .conn
            .prepare("SELECT rpm FROM rpm_result WHERE campaign_id = ?1 ORDER BY position")?;
        let rows = stmt.query_map(params![campaign], |row| row.get::<_, Option<f64>>(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The tests of an rpm campaign, in run order.
    pub fn rpm_results(&self, campaign: i64) -> Result<Vec<RpmResult>> {
        let mut stmt = self.conn.prepare(
            "SELECT result_json FROM rpm_result WHERE campaign_id = ?1 ORDER BY position",
        )?;
        let rows = stmt.query_map(params![campaign], |row| row.get::<_, String>(0))?;
        rows.map(|json| {
            let json = json?;
            serde_json::from_str(&json).context("a stored rpm result does not decode")
        })
        .collect()
    }
}
