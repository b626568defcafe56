//! Copying history from one store into another (`wirebench store copy`): every throughput
//! campaign with its finished and aborted runs, every DNS campaign, rr sweep and rpm
//! campaign, each in one transaction of the destination, new ids given by the destination. A campaign the
//! destination already holds (same start, host and plan) is skipped, so copying twice
//! duplicates nothing. Must not print.

use anyhow::{Context, Result};

use super::dns::{insert_dns_campaign, insert_dns_result};
use super::rpm::{insert_rpm_campaign, insert_rpm_result};
use super::rr::{insert_rr_campaign, insert_rr_result};
use super::sql::{args, Conn, Value};
use super::{insert_aborted, insert_campaign_as, insert_run, int, Store};

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
                let id = insert_campaign_as(tx, &info, &info.origin)?;
                // Positions are kept: a run's place in the plan, gaps and all.
                for (position, (point, run)) in
                    from_positions(from, info.id)?.into_iter().zip(&runs)
                {
                    insert_run(tx, id, position, *point, run)?;
                }
                for run in &aborted {
                    let detail = details.iter().find(|d| d.position == run.position);
                    let reason = detail.and_then(|d| d.reason.as_deref());
                    insert_aborted(tx, id, run, reason, detail.and_then(|d| d.so_far))?;
                }
                Ok(())
            })
            .with_context(|| format!("while copying campaign {}", info.id))?;
            n.campaigns += 1;
            n.runs += (runs.len() + aborted.len()) as u64;
        }
        for (info, _) in from.dns_campaigns()? {
            let c = &info.campaign;
            let copied = self
                .copy_sweep(
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
                    || from.dns_results(info.id),
                    |tx| insert_dns_campaign(tx, c, info.status, info.finished_at_unix_s),
                    insert_dns_result,
                )
                .with_context(|| format!("while copying DNS campaign {}", info.id))?;
            n.count(copied, |n| &mut n.dns);
        }
        for (info, _) in from.rr_campaigns()? {
            let c = &info.campaign;
            let copied = self
                .copy_sweep(
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
                    || from.rr_results(info.id),
                    |tx| insert_rr_campaign(tx, c, info.status, info.finished_at_unix_s),
                    insert_rr_result,
                )
                .with_context(|| format!("while copying rr sweep {}", info.id))?;
            n.count(copied, |n| &mut n.rr);
        }
        for (info, _) in from.rpm_campaigns()? {
            let c = &info.campaign;
            let copied = self
                .copy_sweep(
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
                    || from.rpm_results(info.id),
                    |tx| insert_rpm_campaign(tx, c, info.status, info.finished_at_unix_s),
                    insert_rpm_result,
                )
                .with_context(|| format!("while copying rpm campaign {}", info.id))?;
            n.count(copied, |n| &mut n.rpm);
        }
        Ok(n)
    }

    /// Copies one DNS campaign, rr sweep or rpm campaign unless this store already holds it
    /// (`held`: a count of rows with its key columns): its campaign row (`insert_campaign`)
    /// and its `results` in run order, in one transaction. Whether it was copied.
    fn copy_sweep<R>(
        &mut self,
        held: &str,
        key: &[Value],
        results: impl FnOnce() -> Result<Vec<R>>,
        insert_campaign: impl FnOnce(&mut dyn Conn) -> Result<i64>,
        insert_result: fn(&mut dyn Conn, i64, u64, &R) -> Result<()>,
    ) -> Result<bool> {
        if self.query_one(held, key)?.i64(0)? > 0 {
            return Ok(false);
        }
        let results = results()?;
        self.transaction(|tx| {
            let id = insert_campaign(tx)?;
            for (i, r) in results.iter().enumerate() {
                insert_result(tx, id, i as u64 + 1, r)?;
            }
            Ok(())
        })?;
        Ok(true)
    }
}

impl CopyCounts {
    /// Counts one sweep in the counter `kind` picks if it was copied, else as skipped.
    fn count(&mut self, copied: bool, kind: impl FnOnce(&mut Self) -> &mut u64) {
        *(if copied {
            kind(self)
        } else {
            &mut self.skipped
        }) += 1;
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
