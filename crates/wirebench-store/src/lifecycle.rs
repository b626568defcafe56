//! One campaign lifecycle for every kind, written once over [`Kind`]: begin (status `running`,
//! a new uid, this process its writer), record each result as it finishes, finish (or abort,
//! or fail, with why), read back (one campaign, every campaign, the newest, the results, the
//! whole [`CampaignDocument`]) and merge a campaign from elsewhere — a file, another store, a
//! spool — adding what this store lacks and bringing an unfinished campaign up to date when
//! its finished version arrives. The kinds' old names (`begin_rr_campaign`, …) call these.

use std::collections::BTreeSet;

use anyhow::{bail, Context, Result};
use wirebench_core::record::campaign::{Status, Writer};
use wirebench_core::record::lifecycle::{CampaignDocument, Lifecycle, Positioned};

use super::kind::{campaign_select, int, new_uid, Kind, Tables, LIFECYCLE_WIDTH};
use super::sql::{args, Conn, Row, Value};
use crate::store::Store;

pub use crate::merged::Merged;

/// A campaign that has begun: its id in this store and the uid that follows it elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begun {
    /// Its id in this store.
    pub id: i64,
    /// Its uid.
    pub uid: String,
}

/// The lifecycle columns of a campaign row being inserted.
pub(super) struct RowLife<'a> {
    pub status: Status,
    pub finished: Option<i64>,
    pub error: Option<&'a str>,
    pub origin: &'a str,
    pub uid: Option<&'a str>,
    pub writer: Option<&'a Writer>,
}

/// Inserts a campaign row of kind `K`: its plan's columns and the lifecycle's; its new id.
pub(super) fn insert_campaign<K: Kind>(
    tx: &mut dyn Conn,
    plan: &K::Plan,
    life: &RowLife<'_>,
) -> Result<i64> {
    let t = Tables::of(K::KIND);
    let mut names: Vec<&str> = K::PLAN_COLUMNS.to_vec();
    let mut values = K::plan_values(plan)?;
    names.extend([
        "status",
        "finished_at_unix_s",
        "error",
        "origin",
        "uid",
        "writer_pid",
        "writer_host",
        "writer_boot_id",
    ]);
    values.extend([
        Value::from(life.status.as_str()),
        Value::from(life.finished),
        Value::from(life.error),
        Value::from(life.origin),
        Value::from(life.uid),
        Value::from(life.writer.map(|w| w.pid)),
        Value::from(life.writer.and_then(|w| w.host.clone())),
        Value::from(life.writer.and_then(|w| w.boot_id.clone())),
    ]);
    if let Some(command) = t.command {
        names.push("command");
        values.push(Value::from(command));
    }
    let marks: Vec<String> = (1..=values.len()).map(|i| format!("?{i}")).collect();
    tx.insert(
        &format!(
            "INSERT INTO {} ({}) VALUES ({}) RETURNING id",
            t.campaigns,
            names.join(", "),
            marks.join(", ")
        ),
        &values,
    )
    .with_context(|| format!("while storing the {}", K::KIND.noun()))
}

/// Inserts one result of campaign `campaign` at `position`.
pub(super) fn insert_result<K: Kind>(
    tx: &mut dyn Conn,
    campaign: i64,
    position: u64,
    result: &K::Result,
) -> Result<()> {
    let t = Tables::of(K::KIND);
    let mut values = vec![
        Value::from(campaign),
        Value::from(int(position, "position")?),
    ];
    values.extend(K::result_values(result)?);
    let marks: Vec<String> = (1..=values.len()).map(|i| format!("?{i}")).collect();
    tx.execute(
        &format!(
            "INSERT INTO {} (campaign_id, position, {}) VALUES ({})",
            t.results,
            K::RESULT_COLUMNS.join(", "),
            marks.join(", ")
        ),
        &values,
    )
    .with_context(|| {
        format!(
            "while storing {} {position} of {} {campaign}",
            K::KIND.result_noun(),
            K::KIND.noun()
        )
    })?;
    Ok(())
}

/// A campaign row of [`campaign_select`] as its lifecycle and plan.
fn read_campaign<K: Kind>(row: &Row) -> Result<(Lifecycle, K::Plan)> {
    let id = row.i64(0)?;
    let status = row.text(4)?;
    let life = Lifecycle {
        id,
        uid: row.opt_text(1)?,
        started_at_unix_s: row.i64(2)?,
        finished_at_unix_s: row.opt_i64(3)?,
        status: Status::from_name(&status).with_context(|| {
            format!(
                "{} {id} has an unknown status {status:?} in the results database",
                K::KIND.noun()
            )
        })?,
        error: row.opt_text(5)?,
        origin: row.text(6)?,
        planned: row.count(7)?,
        stored: row.count(8)?,
        aborted: row.count(9)?,
    };
    let plan = K::read_plan(row, LIFECYCLE_WIDTH)
        .with_context(|| format!("{} {id} is not readable", K::KIND.noun()))?;
    Ok((life, plan))
}

/// The results of campaign `id`, in run order.
fn read_results<K: Kind>(conn: &mut dyn Conn, id: i64) -> Result<Vec<Positioned<K::Result>>> {
    let t = Tables::of(K::KIND);
    let rows = conn.query(
        &format!(
            "SELECT position, {} FROM {} WHERE campaign_id = ?1 ORDER BY position",
            K::RESULT_COLUMNS.join(", "),
            t.results
        ),
        args![id],
    )?;
    rows.iter()
        .map(|row| {
            let position = row.count(0)?;
            let result = K::read_result(row, 1, position).with_context(|| {
                format!(
                    "{} {position} of {} {id} is not readable",
                    K::KIND.result_noun(),
                    K::KIND.noun()
                )
            })?;
            Ok(Positioned { position, result })
        })
        .collect()
}

impl Store {
    /// Begins a campaign of kind `K` (status `running`, a new uid, this process its writer,
    /// so a later open can tell if it died without a word).
    pub fn begin<K: Kind>(&self, plan: &K::Plan) -> Result<Begun> {
        let uid = new_uid();
        let writer = super::writer::this_process();
        let id = self.transaction(|tx| {
            let life = RowLife {
                status: Status::Running,
                finished: None,
                error: None,
                origin: "run",
                uid: Some(&uid),
                writer: Some(&writer),
            };
            insert_campaign::<K>(tx, plan, &life)
        })?;
        Ok(Begun { id, uid })
    }

    /// Commits one finished result of `campaign` at its 1-based `position`, in one transaction.
    pub fn record<K: Kind>(&self, campaign: i64, position: u64, result: &K::Result) -> Result<()> {
        self.transaction(|tx| insert_result::<K>(tx, campaign, position, result))
    }

    /// Marks a campaign as ended: `status`, when, and why when it stopped early.
    pub fn finish<K: Kind>(
        &self,
        campaign: i64,
        status: Status,
        finished_at_unix_s: i64,
        error: Option<&str>,
    ) -> Result<()> {
        let t = Tables::of(K::KIND);
        let changed = self.execute(
            &format!(
                "UPDATE {} SET status = ?1, finished_at_unix_s = ?2, error = ?3 WHERE id = ?4",
                t.campaigns
            ),
            args![status.as_str(), finished_at_unix_s, error, campaign],
        )?;
        if changed != 1 {
            bail!(
                "{} {campaign} is not in the results database",
                K::KIND.noun()
            );
        }
        Ok(())
    }

    /// One campaign of kind `K` (its lifecycle and plan), `None` when there is no such id.
    pub fn get<K: Kind>(&self, id: i64) -> Result<Option<(Lifecycle, K::Plan)>> {
        self.query_opt(
            &format!("{} AND c.id = ?1", campaign_select::<K>()),
            args![id],
        )?
        .map(|row| read_campaign::<K>(&row))
        .transpose()
    }

    /// Every campaign of kind `K`, oldest first.
    pub fn list<K: Kind>(&self) -> Result<Vec<(Lifecycle, K::Plan)>> {
        self.query(&format!("{} ORDER BY c.id", campaign_select::<K>()), &[])?
            .iter()
            .map(read_campaign::<K>)
            .collect()
    }

    /// One campaign of kind `K` as the views read it, `None` when there is no such id.
    pub fn campaign<K: Kind>(&self, id: i64) -> Result<Option<K::Info>> {
        Ok(self.get::<K>(id)?.map(|(life, plan)| K::info(life, plan)))
    }

    /// Every campaign of kind `K` as the views read it, with its number of stored results,
    /// oldest first.
    pub fn campaigns<K: Kind>(&self) -> Result<Vec<(K::Info, u64)>> {
        Ok(self
            .list::<K>()?
            .into_iter()
            .map(|(life, plan)| {
                let stored = life.stored;
                (K::info(life, plan), stored)
            })
            .collect())
    }

    /// The newest campaign of kind `K`, `None` when there is none.
    pub fn last_id<K: Kind>(&self) -> Result<Option<i64>> {
        let t = Tables::of(K::KIND);
        self.query_one(
            &format!(
                "SELECT max(c.id) FROM {} c WHERE 1 = 1{}",
                t.campaigns,
                t.scope()
            ),
            &[],
        )?
        .opt_i64(0)
    }

    /// The results of campaign `id` of kind `K`, in run order.
    pub fn results<K: Kind>(&self, id: i64) -> Result<Vec<Positioned<K::Result>>> {
        self.with(|c| read_results::<K>(c, id))
    }

    /// Campaign `id` of kind `K` whole, as `export` prints it and `import` reads it.
    pub fn document<K: Kind>(
        &self,
        id: i64,
    ) -> Result<Option<CampaignDocument<K::Plan, K::Result>>> {
        let Some((life, plan)) = self.get::<K>(id)? else {
            return Ok(None);
        };
        let results = self.results::<K>(id)?;
        Ok(Some(CampaignDocument::new(
            env!("CARGO_PKG_VERSION"),
            K::KIND,
            life,
            plan,
            results,
        )))
    }

    /// Stores a campaign from elsewhere in one transaction: whole when this store does not
    /// hold it (as `origin`, or the origin it had); otherwise the results it lacks and, when
    /// it is still running or interrupted here, the status and end it brings. It is found by
    /// its uid, or for a campaign stored before uids, by its start, plan size and identity
    /// columns. With `again`, it is stored as a new campaign (with a uid of its own) even when
    /// it is there.
    pub fn merge<K: Kind>(
        &self,
        doc: &CampaignDocument<K::Plan, K::Result>,
        origin: Option<&str>,
        again: bool,
    ) -> Result<Merged> {
        if doc.kind != K::KIND {
            bail!("a {} document is not a {}", doc.kind.name(), K::KIND.noun());
        }
        believable::<K>(doc)?;
        self.transaction(|tx| merge_in::<K>(tx, doc, origin, again))
    }
}

/// What a file brings is checked before anything of it is stored: its lifecycle against its
/// plan and results, each result as its kind checks it. An import of figures that cannot be
/// true (a server reading 10x what its client sent, a negative time) is refused whole.
fn believable<K: Kind>(doc: &CampaignDocument<K::Plan, K::Result>) -> Result<()> {
    use wirebench_core::record::plausibility::stored::check_lifecycle;
    let results = doc
        .results
        .iter()
        .map(|r| (r.position, K::stopped_in_flight(&r.result)));
    check_lifecycle(&doc.campaign, K::planned(&doc.plan), results)
        .map_err(|why| anyhow::anyhow!("the {} cannot be true: {why}", K::KIND.noun()))?;
    for r in &doc.results {
        K::check_result(&r.result).map_err(|why| {
            anyhow::anyhow!(
                "the {} cannot be true: its {} at position {}: {why}",
                K::KIND.noun(),
                K::KIND.result_noun(),
                r.position
            )
        })?;
    }
    Ok(())
}

/// [`Store::merge`] inside its transaction.
fn merge_in<K: Kind>(
    tx: &mut dyn Conn,
    doc: &CampaignDocument<K::Plan, K::Result>,
    origin: Option<&str>,
    again: bool,
) -> Result<Merged> {
    let life = &doc.campaign;
    let found = if again { None } else { find::<K>(tx, doc)? };
    let Some((id, status)) = found else {
        let fresh = again.then(new_uid);
        let row = RowLife {
            status: life.status,
            finished: life.finished_at_unix_s,
            error: life.error.as_deref(),
            origin: origin.unwrap_or(&life.origin),
            uid: fresh.as_deref().or(life.uid.as_deref()),
            writer: None,
        };
        let id = insert_campaign::<K>(tx, &doc.plan, &row)?;
        for r in &doc.results {
            insert_result::<K>(tx, id, r.position, &r.result)?;
        }
        return Ok(Merged::New(id));
    };
    let t = Tables::of(K::KIND);
    let have: BTreeSet<u64> = tx
        .query(
            &format!("SELECT position FROM {} WHERE campaign_id = ?1", t.results),
            args![id],
        )?
        .iter()
        .map(|row| row.count(0))
        .collect::<Result<_>>()?;
    let mut added = 0;
    for r in doc.results.iter().filter(|r| !have.contains(&r.position)) {
        insert_result::<K>(tx, id, r.position, &r.result)?;
        added += 1;
    }
    let awaiting = matches!(status, Status::Running | Status::Interrupted);
    let ended = (awaiting && !life.awaits_its_end()).then_some(life.status);
    if ended.is_some() {
        tx.execute(
            &format!(
                "UPDATE {} SET status = ?1, finished_at_unix_s = ?2, error = ?3 WHERE id = ?4",
                t.campaigns
            ),
            args![
                life.status.as_str(),
                life.finished_at_unix_s,
                life.error.as_deref(),
                id
            ],
        )?;
    }
    Ok(if added == 0 && ended.is_none() {
        Merged::AlreadyThere(id)
    } else {
        Merged::Updated { id, added, ended }
    })
}

/// The campaign of this store that `doc` is a version of, with its status: by uid, or for
/// a document without one, by the start, plan size and identity columns of its plan.
fn find<K: Kind>(
    tx: &mut dyn Conn,
    doc: &CampaignDocument<K::Plan, K::Result>,
) -> Result<Option<(i64, Status)>> {
    let t = Tables::of(K::KIND);
    let row = match &doc.campaign.uid {
        Some(uid) => tx.query_opt(
            &format!(
                "SELECT c.id, c.status FROM {} c WHERE c.uid = ?1{}",
                t.campaigns,
                t.scope()
            ),
            args![uid],
        )?,
        None => {
            let values = K::plan_values(&doc.plan)?;
            let mut conditions = vec![
                "c.started_at_unix_s = ?1".to_string(),
                format!("c.{} = ?2", t.planned),
            ];
            let mut bound = vec![
                Value::from(K::started_at(&doc.plan)),
                Value::from(int(K::planned(&doc.plan), "planned count")?),
            ];
            for name in K::IDENTITY {
                let at = K::PLAN_COLUMNS
                    .iter()
                    .position(|c| c == name)
                    .with_context(|| format!("{name} is not a plan column"))?;
                bound.push(values[at].clone());
                conditions.push(format!("c.{name} IS NOT DISTINCT FROM ?{}", bound.len()));
            }
            tx.query_opt(
                &format!(
                    "SELECT c.id, c.status FROM {} c WHERE {}{} ORDER BY c.id",
                    t.campaigns,
                    conditions.join(" AND "),
                    t.scope()
                ),
                &bound,
            )?
        }
    };
    row.map(|row| {
        let status = row.text(1)?;
        Ok((
            row.i64(0)?,
            Status::from_name(&status)
                .with_context(|| format!("unknown status {status:?} in the results database"))?,
        ))
    })
    .transpose()
}
