//! The results store: one SQLite file holding every campaign and every finished run. Owns
//! opening, migrating (`PRAGMA user_version`), inserting and querying; must not run anything,
//! print anything or know about report formats. Each write is one transaction, so a crash or
//! Ctrl-C never leaves a half-written run.

pub mod dns;
pub mod liveness;
pub mod rpm;
pub mod rr;
pub mod schema;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use wirebench_core::error::UsageError;
use wirebench_core::record::{
    AbortedRun, CampaignInfo, Environment, NewCampaign, Parameters, RunRecord, Status,
};
use wirebench_core::sweep::Point;

/// The file name of the default database, under `$XDG_DATA_HOME/wirebench/`.
pub const DEFAULT_FILE: &str = "results.sqlite3";

/// The default database path: `$XDG_DATA_HOME/wirebench/results.sqlite3`, falling back to
/// `~/.local/share/wirebench/results.sqlite3`.
pub fn default_path() -> Result<PathBuf> {
    let data_home = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local").join("share"),
            None => bail!(
                "cannot find a place for the results database: neither XDG_DATA_HOME nor HOME is set; \
                 pass --db PATH or --no-store"
            ),
        },
    };
    Ok(data_home.join("wirebench").join(DEFAULT_FILE))
}

/// An open results database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens (creating it and its directory if needed) the database at `path` and brings its
    /// schema up to date. A file that is not a wirebench database, or one written by a newer
    /// wirebench, is refused without being changed.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| {
                format!(
                    "cannot create the directory of results database {}",
                    dir.display()
                )
            })?;
        }
        let conn = Connection::open(path)
            .with_context(|| format!("cannot open results database {}", path.display()))?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        store
            .prepare()
            .with_context(|| format!("cannot open results database {}", path.display()))?;
        Ok(store)
    }

    /// Opens an existing database for the commands that only read it: a missing file is an
    /// error that says how one is made, and nothing is created.
    pub fn open_existing(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(UsageError(format!(
                "there is no results database at {} yet: `wirebench run` creates it (or pass --db PATH)",
                path.display()
            ))
            .into());
        }
        Store::open(path)
    }

    /// Where the database lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<u32> {
        Ok(self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))?)
    }

    /// Records a campaign that is starting (status `running`); returns its id.
    pub fn begin_campaign(&mut self, c: &NewCampaign) -> Result<i64> {
        self.insert_campaign(c, Status::Running, None, None, "run")
    }

    /// Commits one finished run of `campaign` (its 1-based `position` in the plan, run with
    /// `point`'s message size and total), in one transaction.
    pub fn add_run(
        &mut self,
        campaign: i64,
        position: u64,
        point: Point,
        run: &RunRecord,
    ) -> Result<()> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        insert_run(&tx, campaign, position, point, run)?;
        tx.commit().context("while committing a run")?;
        Ok(())
    }

    /// Commits the run that was in flight when `campaign` was interrupted, as `aborted`: its
    /// parameters only, no figures (reports and comparisons leave it out).
    pub fn add_aborted_run(&mut self, campaign: i64, run: &AbortedRun) -> Result<()> {
        let p = &run.params;
        self.conn
            .execute(
                "INSERT INTO run (campaign_id, position, protocol, mechanism, msg_size, total_bytes,
                     repeat_index, status, params_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'aborted', ?8)",
                params![
                    campaign,
                    int(run.position, "run position")?,
                    p.protocol.as_str(),
                    p.mechanism.as_str(),
                    p.msg_size,
                    int(p.total_bytes, "total bytes")?,
                    run.repeat_index,
                    serde_json::to_string(p)?,
                ],
            )
            .with_context(|| {
                format!(
                    "while storing aborted run {} of campaign {campaign}",
                    run.position
                )
            })?;
        Ok(())
    }

    /// The runs of one campaign stored as aborted, in plan order.
    pub fn aborted_runs(&self, campaign: i64) -> Result<Vec<AbortedRun>> {
        let mut stmt = self.conn.prepare(
            "SELECT position, repeat_index, params_json FROM run
             WHERE campaign_id = ?1 AND status = 'aborted' ORDER BY position",
        )?;
        let rows = stmt.query_map([campaign], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, u32>(1)?,
                row.get::<_, Option<String>>(2)?,
            ))
        })?;
        rows.map(|r| {
            let (position, repeat_index, text) = r?;
            let params =
                serde_json::from_str(text.as_deref().unwrap_or("")).with_context(|| {
                    format!("aborted run {position} of campaign {campaign} is not readable")
                })?;
            Ok(AbortedRun {
                position: u64::try_from(position).unwrap_or(0),
                repeat_index,
                params,
            })
        })
        .collect()
    }

    /// Marks a campaign as ended.
    pub fn finish_campaign(
        &mut self,
        campaign: i64,
        status: Status,
        finished_at_unix_s: i64,
        error: Option<&str>,
    ) -> Result<()> {
        let changed = self.conn.execute(
            "UPDATE campaign SET status = ?1, finished_at_unix_s = ?2, error = ?3 WHERE id = ?4",
            params![status.as_str(), finished_at_unix_s, error, campaign],
        )?;
        if changed != 1 {
            bail!("campaign {campaign} is not in the results database");
        }
        Ok(())
    }

    /// Stores a whole campaign read from a file, runs and all, in one transaction; returns its
    /// new id. Nothing is stored when anything is wrong.
    pub fn import(&mut self, info: &CampaignInfo, runs: &[(Point, RunRecord)]) -> Result<i64> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id = insert_campaign(
            &tx,
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
            "import",
        )?;
        for (i, (point, run)) in runs.iter().enumerate() {
            insert_run(&tx, id, i as u64 + 1, *point, run)?;
        }
        tx.commit().context("while committing the import")?;
        Ok(id)
    }

    /// A stored campaign that is the same as `info` (same start time, parameters, host and
    /// plan): what importing one export twice would duplicate. `None` when there is none.
    pub fn same_campaign(&self, info: &CampaignInfo) -> Result<Option<i64>> {
        Ok(self
            .conn
            .query_row(
                "SELECT min(id) FROM campaign WHERE started_at_unix_s = ?1 AND parameters_json = ?2
                     AND host_name IS ?3 AND planned_runs = ?4",
                params![
                    info.started_at_unix_s,
                    serde_json::to_string(&info.parameters)?,
                    info.environment.host_name,
                    int(info.planned_runs, "planned runs")?,
                ],
                |row| row.get(0),
            )
            .optional()?
            .flatten())
    }

    /// Every id of a sweep table (`dns_campaign`, `rr_campaign`) with the number of results its
    /// result table holds for it, oldest first. The names are ours, never the user's.
    pub(crate) fn ids_with_results(&self, sweeps: &str, results: &str) -> Result<Vec<(i64, u64)>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT c.id, (SELECT count(*) FROM {results} r WHERE r.campaign_id = c.id)
             FROM {sweeps} c ORDER BY c.id"
        ))?;
        let rows = stmt
            .query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows
            .into_iter()
            .map(|(id, n)| (id, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    /// Every campaign, oldest first.
    pub fn campaigns(&self) -> Result<Vec<CampaignInfo>> {
        let mut stmt = self
            .conn
            .prepare(&format!("{CAMPAIGN_SELECT} ORDER BY c.id"))?;
        let rows = stmt.query_map([], campaign_row)?;
        rows.map(|r| r?.into_info()).collect()
    }

    /// One campaign, `None` when there is no such id.
    pub fn campaign(&self, id: i64) -> Result<Option<CampaignInfo>> {
        let mut stmt = self
            .conn
            .prepare(&format!("{CAMPAIGN_SELECT} WHERE c.id = ?1"))?;
        stmt.query_row([id], campaign_row)
            .optional()?
            .map(RawCampaign::into_info)
            .transpose()
    }

    /// The id of the newest campaign, `None` when the store is empty.
    pub fn last_campaign_id(&self) -> Result<Option<i64>> {
        Ok(self
            .conn
            .query_row("SELECT max(id) FROM campaign", [], |row| row.get(0))?)
    }

    /// The finished runs of one campaign with their message size and total, in the order they
    /// ran (aborted runs are left out: see [`Store::aborted_runs`]).
    pub fn runs(&self, campaign: i64) -> Result<Vec<(Point, RunRecord)>> {
        // Runs stored before each record said its direction take the campaign's.
        let reverse = self
            .campaign(campaign)?
            .is_some_and(|c| c.parameters.reverse);
        let mut stmt = self.conn.prepare(
            "SELECT position, msg_size, total_bytes, run_json FROM run
             WHERE campaign_id = ?1 AND status = 'complete' ORDER BY position",
        )?;
        let rows = stmt.query_map([campaign], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, u32>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, String>(3)?,
            ))
        })?;
        rows.map(|r| {
            let (position, msg_size, total, text) = r?;
            let mut run: RunRecord = serde_json::from_str(&text).with_context(|| {
                format!("run {position} of campaign {campaign} is not readable")
            })?;
            run.reverse |= reverse;
            let point = Point {
                msg_size,
                total_bytes: u64::try_from(total).unwrap_or(0),
            };
            Ok((point, run))
        })
        .collect()
    }

    fn insert_campaign(
        &mut self,
        c: &NewCampaign,
        status: Status,
        finished: Option<i64>,
        error: Option<&str>,
        origin: &str,
    ) -> Result<i64> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id = insert_campaign(&tx, c, status, finished, error, origin)?;
        tx.commit()?;
        Ok(id)
    }

    /// Sets up the connection and applies missing migrations.
    fn prepare(&mut self) -> Result<()> {
        self.conn.busy_timeout(std::time::Duration::from_secs(5))?;
        self.conn.pragma_update(None, "foreign_keys", true)?;
        let version = self.schema_version()?;
        if version > schema::CURRENT_VERSION {
            bail!(
                "its schema version {version} is newer than this wirebench understands ({}); \
                 use a newer wirebench or another --db",
                schema::CURRENT_VERSION
            );
        }
        if version == 0 {
            // A non-empty database without our version mark belongs to someone else.
            let tables: i64 = self.conn.query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |row| row.get(0),
            )?;
            if tables > 0 {
                bail!(
                    "it is an SQLite database but not a wirebench results store; pass another --db"
                );
            }
        }
        // Off while migrating (it cannot change inside a transaction): a migration that
        // rebuilds a parent table must not cascade its DROP to the children (schema V6).
        self.conn.pragma_update(None, "foreign_keys", false)?;
        for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Exclusive)?;
            tx.execute_batch(sql)
                .with_context(|| format!("while migrating to schema version {}", i + 1))?;
            liveness::check_foreign_keys(&tx)
                .with_context(|| format!("while migrating to schema version {}", i + 1))?;
            tx.pragma_update(None, "user_version", (i + 1) as u32)?;
            tx.commit()?;
        }
        self.conn.pragma_update(None, "foreign_keys", true)?;
        // Campaigns whose writer died without a word are marked `interrupted`. Best effort:
        // a store we cannot update now is still readable, and the next open tries again.
        let _ = self.mark_interrupted(&liveness::this_process());
        Ok(())
    }
}

const CAMPAIGN_SELECT: &str = "
SELECT c.id, c.started_at_unix_s, c.finished_at_unix_s, c.status, c.error, c.origin,
       c.parameters_json, c.planned_runs,
       (SELECT count(*) FROM run r WHERE r.campaign_id = c.id AND r.status = 'complete'),
       c.host_name, c.kernel, c.cpu_model, c.wirebench_version, c.rmem_max_bytes, c.wmem_max_bytes,
       c.msg_sizes, c.totals,
       (SELECT count(*) FROM run r WHERE r.campaign_id = c.id AND r.status = 'aborted')
FROM campaign c";

struct RawCampaign {
    id: i64,
    started: i64,
    finished: Option<i64>,
    status: String,
    error: Option<String>,
    origin: String,
    parameters_json: String,
    planned: i64,
    stored: i64,
    aborted: i64,
    msg_sizes: Option<String>,
    totals: Option<String>,
    environment: Environment,
}

impl RawCampaign {
    fn into_info(self) -> Result<CampaignInfo> {
        let parameters: Parameters = serde_json::from_str(&self.parameters_json)
            .with_context(|| format!("the parameters of campaign {} are not readable", self.id))?;
        let msg_sizes = split_list(self.msg_sizes.as_deref(), self.id)?
            .unwrap_or_else(|| vec![parameters.msg_size]);
        let totals = split_list(self.totals.as_deref(), self.id)?
            .unwrap_or_else(|| vec![parameters.total_bytes]);
        Ok(CampaignInfo {
            id: self.id,
            started_at_unix_s: self.started,
            finished_at_unix_s: self.finished,
            status: Status::from_name(&self.status).with_context(|| {
                format!(
                    "campaign {} has an unknown status {:?} in the results database",
                    self.id, self.status
                )
            })?,
            error: self.error,
            origin: self.origin,
            parameters,
            planned_runs: u64::try_from(self.planned).unwrap_or(0),
            stored_runs: u64::try_from(self.stored).unwrap_or(0),
            aborted_runs: u64::try_from(self.aborted).unwrap_or(0),
            msg_sizes,
            totals,
            environment: self.environment,
        })
    }
}

fn campaign_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawCampaign> {
    Ok(RawCampaign {
        id: row.get(0)?,
        started: row.get(1)?,
        finished: row.get(2)?,
        status: row.get(3)?,
        error: row.get(4)?,
        origin: row.get(5)?,
        parameters_json: row.get(6)?,
        planned: row.get(7)?,
        stored: row.get(8)?,
        aborted: row.get(17)?,
        msg_sizes: row.get(15)?,
        totals: row.get(16)?,
        environment: Environment {
            host_name: row.get(9)?,
            kernel: row.get(10)?,
            cpu_model: row.get(11)?,
            wirebench_version: row.get(12)?,
            rmem_max_bytes: row
                .get::<_, Option<i64>>(13)?
                .and_then(|v| u64::try_from(v).ok()),
            wmem_max_bytes: row
                .get::<_, Option<i64>>(14)?
                .and_then(|v| u64::try_from(v).ok()),
        },
    })
}

/// A stored comma list (`None` for campaigns from before schema version 3).
fn split_list<T: std::str::FromStr>(text: Option<&str>, campaign: i64) -> Result<Option<Vec<T>>> {
    let Some(text) = text else { return Ok(None) };
    text.split(',')
        .map(|v| {
            v.parse::<T>().map_err(|_| {
                anyhow::anyhow!("campaign {campaign} has an unreadable size list {text:?}")
            })
        })
        .collect::<Result<Vec<T>>>()
        .map(Some)
}

/// SQLite integers are signed 64-bit; counts beyond that are refused rather than wrapped.
fn int(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v).with_context(|| format!("{what} {v} is too large to store"))
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn insert_campaign(
    tx: &rusqlite::Transaction<'_>,
    c: &NewCampaign,
    status: Status,
    finished: Option<i64>,
    error: Option<&str>,
    origin: &str,
) -> Result<i64> {
    let p = &c.parameters;
    let env = &c.environment;
    tx.execute(
        "INSERT INTO campaign (started_at_unix_s, finished_at_unix_s, status, error, server,
             protocols, mechanisms, msg_size, total_bytes, repeat, planned_runs, parameters_json,
             host_name, kernel, cpu_model, wirebench_version, rmem_max_bytes, wmem_max_bytes, origin,
             msg_sizes, totals)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
        params![
            c.started_at_unix_s,
            finished,
            status.as_str(),
            error,
            p.server,
            join(&p.protocols),
            join(&p.mechanisms),
            p.msg_size,
            int(p.total_bytes, "total bytes")?,
            p.repeat,
            int(c.planned_runs, "planned runs")?,
            serde_json::to_string(p)?,
            env.host_name,
            env.kernel,
            env.cpu_model,
            env.wirebench_version,
            env.rmem_max_bytes.map(|v| int(v, "rmem_max")).transpose()?,
            env.wmem_max_bytes.map(|v| int(v, "wmem_max")).transpose()?,
            origin,
            join(&c.msg_sizes),
            join(&c.totals),
        ],
    )
    .context("while storing the campaign")?;
    Ok(tx.last_insert_rowid())
}

fn insert_run(
    tx: &rusqlite::Transaction<'_>,
    campaign: i64,
    position: u64,
    point: Point,
    run: &RunRecord,
) -> Result<()> {
    let (msg_size, total_bytes) = (point.msg_size, int(point.total_bytes, "total bytes")?);
    tx.execute(
        "INSERT INTO run (campaign_id, position, protocol, mechanism, msg_size, total_bytes,
             repeat_index, session, client_messages, client_bytes, client_elapsed_ns,
             server_messages, server_bytes, server_elapsed_ns, run_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        params![
            campaign,
            int(position, "run position")?,
            run.protocol.as_str(),
            run.mechanism.as_str(),
            msg_size,
            total_bytes,
            run.repeat_index,
            run.session,
            int(run.client.messages, "messages")?,
            int(run.client.bytes, "bytes")?,
            int(run.client.elapsed_ns, "elapsed ns")?,
            int(run.server.messages, "messages")?,
            int(run.server.bytes, "bytes")?,
            int(run.server.elapsed_ns, "elapsed ns")?,
            serde_json::to_string(run)?,
        ],
    )
    .with_context(|| format!("while storing run {position} of campaign {campaign}"))?;
    Ok(())
}
