//! Copying history from one store into another (`wirebench store copy`): every throughput
//! campaign with its finished and aborted runs, every DNS campaign, rr sweep and rpm
//! campaign, each
//! in one transaction of the destination, new ids given by the destination. A campaign the
//! destination already holds (same start, host and plan) is skipped, so copying twice
//! duplicates nothing. Must not print.

use anyhow::{Context, Result};
use wirebench_core::record::NewCampaign;

use super::dns::{insert_dns_campaign, insert_dns_result};
use super::rpm::{insert_rpm_campaign, insert_rpm_result};
use super::rr::{insert_rr_campaign, insert_rr_result};
use super::sql::args;
use super::{insert_aborted, insert_campaign, insert_run, int, Store};

/// What a copy did, per kind: copied, and skipped as already there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyCounts {
    /// Throughput campaigns copied.
    pub campaigns: u64,
    /// Their runs copied (finished and aborted).
    pub runs: u64,
    /// DNS campaigns copied.
    pub dns: u64,
    /// rr sweeps copied.
    pub rr: u64,
    /// rpm campaigns copied.
    pub rpm: u64,
    /// Campaigns and sweeps of any kind the destination already held.
    pub skipped: u64,
}

impl Store {
    /// Copies everything in `from` that this store does not hold yet.
    pub fn copy_from(&mut self, from: &Store) -> Result<CopyCounts> {
        let mut n = CopyCounts::default();
        for info in from.campaigns()? {
            if self.same_campaign(&info)?.is_some() {
                n.skipped += 1;
                continue;
            }
            let runs = from.runs(info.id)?;
            let aborted = from.aborted_runs(info.id)?;
            let details = from.aborted_details(info.id)?;
            self.transaction(|tx| {
                let id = insert_campaign(
                    tx,
                    &NewCampaign {
                        started_at_unix_s: info.started_at_unix_s,
                        parameters: info.parameters.clone(),
                        planned_runs: info.planned_runs,
                        msg_sizes: info.msg_sizes.clone(),
                        totals: info.totals.clone(),
                        environment: info.environment.clone(),
                    },
                    info.status,
                    info.finished_at_unix_s,
                    info.error.as_deref(),
                    &info.origin,
                )?;
                // Positions are kept: a run's place in the plan, gaps and all.
                for (position, (point, run)) in
                    from_positions(from, info.id)?.into_iter().zip(&runs)
                {
                    insert_run(tx, id, position, *point, run)?;
                }
                for run in &aborted {
                    let detail = details.iter().find(|d| d.position == run.position);
                    let figures = match detail.and_then(|d| d.so_far) {
                        Some(s) => Some((
                            int(s.messages, "messages")?,
                            int(s.bytes, "bytes")?,
                            int(
                                u64::try_from(s.elapsed.as_nanos()).unwrap_or(u64::MAX),
                                "elapsed ns",
                            )?,
                        )),
                        None => None,
                    };
                    let reason = detail.and_then(|d| d.reason.as_deref());
                    insert_aborted(tx, id, run, reason, figures)?;
                }
                Ok(())
            })
            .with_context(|| format!("while copying campaign {}", info.id))?;
            n.campaigns += 1;
            n.runs += (runs.len() + aborted.len()) as u64;
        }
        for (info, _) in from.dns_campaigns()? {
            let c = &info.campaign;
            let there = self
                .query_one(
                    "SELECT count(*) FROM dns_campaign WHERE started_at_unix_s = ?1
                     AND resolver = ?2 AND name = ?3 AND host_name IS NOT DISTINCT FROM ?4
                     AND planned_results = ?5",
                    args![
                        c.started_at_unix_s,
                        &c.resolver,
                        &c.name,
                        &c.host_name,
                        int(c.planned_results, "planned results")?
                    ],
                )?
                .i64(0)?;
            if there > 0 {
                n.skipped += 1;
                continue;
            }
            let results = from.dns_results(info.id)?;
            self.transaction(|tx| {
                let id = insert_dns_campaign(tx, c, info.status, info.finished_at_unix_s)?;
                for (i, r) in results.iter().enumerate() {
                    insert_dns_result(tx, id, i as u64 + 1, r)?;
                }
                Ok(())
            })
            .with_context(|| format!("while copying DNS campaign {}", info.id))?;
            n.dns += 1;
        }
        for (info, _) in from.rr_campaigns()? {
            let c = &info.campaign;
            let there = self
                .query_one(
                    "SELECT count(*) FROM rr_campaign WHERE started_at_unix_s = ?1
                     AND server = ?2 AND protocols = ?3 AND host_name IS NOT DISTINCT FROM ?4
                     AND planned_results = ?5",
                    args![
                        c.started_at_unix_s,
                        &c.server,
                        &c.protocols,
                        &c.host_name,
                        int(c.planned_results, "planned results")?
                    ],
                )?
                .i64(0)?;
            if there > 0 {
                n.skipped += 1;
                continue;
            }
            let results = from.rr_results(info.id)?;
            self.transaction(|tx| {
                let id = insert_rr_campaign(tx, c, info.status, info.finished_at_unix_s)?;
                for (i, r) in results.iter().enumerate() {
                    insert_rr_result(tx, id, i as u64 + 1, r)?;
                }
                Ok(())
            })
            .with_context(|| format!("while copying rr sweep {}", info.id))?;
            n.rr += 1;
        }
        for (info, _) in from.rpm_campaigns()? {
            let c = &info.campaign;
            let there = self
                .query_one(
                    "SELECT count(*) FROM rpm_campaign WHERE started_at_unix_s = ?1
                     AND server = ?2 AND direction = ?3 AND host_name IS NOT DISTINCT FROM ?4
                     AND planned_results = ?5",
                    args![
                        c.started_at_unix_s,
                        &c.server,
                        c.direction.as_str(),
                        &c.host_name,
                        int(c.planned_results, "planned results")?
                    ],
                )?
                .i64(0)?;
            if there > 0 {
                n.skipped += 1;
                continue;
            }
            let results = from.rpm_results(info.id)?;
            self.transaction(|tx| {
                let id = insert_rpm_campaign(tx, c, info.status, info.finished_at_unix_s)?;
                for (i, r) in results.iter().enumerate() {
                    insert_rpm_result(tx, id, i as u64 + 1, r)?;
                }
                Ok(())
            })
            .with_context(|| format!("while copying rpm campaign {}", info.id))?;
            n.rpm += 1;
        }
        Ok(n)
    }
}

/// The plan positions of a campaign's finished runs, in the order [`Store::runs`] gives them.
fn from_positions(from: &Store, campaign: i64) -> Result<Vec<u64>> {
    from.query(
        "SELECT position FROM run WHERE campaign_id = ?1 AND status = 'complete'
         ORDER BY position",
        args![campaign],
    )?
    .iter()
    .map(|row| row.count(0))
    .collect()
}
