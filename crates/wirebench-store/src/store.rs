//! The store handle: one connection to an SQLite file or a PostgreSQL database, its schema
//! brought up to date, a busy store waited for (up to a bound), and the queries and
//! transactions every kind's file runs through it. Opening for a command (spool, interrupted
//! writers) is `open.rs`, above the files that need this handle.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rusqlite::Connection;
use wirebench_core::vocab::error::UsageError;

use crate::location::{check_regular_file, Location};
use crate::merged::Replayed;
use crate::sql::{fault_of, Conn, Fault, Row, Value};
use crate::{pg, sqlite};

/// How long a write waits for a busy store (another process holding it) before the result
/// goes to the spool instead, unless `$WIREBENCH_STORE_WAIT` says otherwise.
pub const DEFAULT_BUSY_WAIT: Duration = Duration::from_secs(30);

/// The environment variable that sets how long to wait for a busy store (`10s`, `2m`, `0s`).
pub const BUSY_WAIT_ENV: &str = "WIREBENCH_STORE_WAIT";

/// The open connection, of one backend or the other.
enum Backend {
    Sqlite(Connection),
    Postgres(pg::Pg),
}

/// Told once per operation that found the store busy, with how long it will wait at most.
pub type BusyNotice = Box<dyn Fn(Duration) + Send>;

/// An open results database.
pub struct Store {
    // The `postgres` client needs `&mut` even to read; the store's readers take `&self`.
    db: RefCell<Backend>,
    location: Location,
    busy_wait: Duration,
    on_busy: Option<BusyNotice>,
    /// Set when the command is asked to stop: a busy store is then not waited for.
    give_up: Option<Arc<AtomicBool>>,
    pub(crate) replayed: Vec<Replayed>,
}

/// How long to wait for a busy store: `$WIREBENCH_STORE_WAIT`, else [`DEFAULT_BUSY_WAIT`].
pub fn busy_wait_from_env() -> Result<Duration> {
    match std::env::var(BUSY_WAIT_ENV) {
        Ok(text) if !text.trim().is_empty() => {
            wirebench_core::vocab::units::parse_duration(text.trim()).map_err(|e| {
                UsageError(format!(
                    "${BUSY_WAIT_ENV}={text:?}: {e}; expected how long to wait for a busy \
                     results store, e.g. 30s"
                ))
                .into()
            })
        }
        _ => Ok(DEFAULT_BUSY_WAIT),
    }
}

impl Store {
    /// Connects to the database at `location` and brings its schema up to date (an SQLite
    /// file and its directory are created if needed); [`Store::open`] then brings in the
    /// spool and marks interrupted campaigns.
    pub(crate) fn connect(location: Location, on_busy: Option<BusyNotice>) -> Result<Store> {
        let busy_wait = busy_wait_from_env()?;
        let failed = format!("cannot open results database {}", location.display());
        let what = || failed.clone();
        let backend = match &location {
            Location::File(path) => {
                // A usage error, said as it is (not behind "cannot open").
                check_regular_file(path)?;
                Backend::Sqlite(open_file(path).with_context(what)?)
            }
            Location::Postgres(url) => Backend::Postgres(pg::Pg::connect(url).with_context(what)?),
        };
        let store = Store {
            db: RefCell::new(backend),
            location,
            busy_wait,
            on_busy,
            give_up: None,
            replayed: Vec::new(),
        };
        store
            .patiently(|db| match db {
                Backend::Sqlite(conn) => sqlite::prepare(conn),
                Backend::Postgres(pg) => pg.prepare(),
            })
            .with_context(what)?;
        Ok(store)
    }

    /// Where the database lives.
    pub fn path(&self) -> &Location {
        &self.location
    }

    /// Stops waiting for a busy store once `flag` is set (a stop signal: what the store does
    /// not take at once then goes to the spool, and the command ends without delay).
    pub fn give_up_when(&mut self, flag: Arc<AtomicBool>) {
        self.give_up = Some(flag);
    }

    /// The spool files the open brought in (or could not), for the command to say so.
    pub fn replayed(&self) -> &[Replayed] {
        &self.replayed
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<u32> {
        self.patiently(|db| match db {
            Backend::Sqlite(conn) => sqlite::schema_version(conn),
            Backend::Postgres(pg) => pg.schema_version(),
        })
    }

    /// Runs `op` until it is not refused for a busy store, for at most [`Store::busy_wait`]
    /// (telling `on_busy` the first time it waits); the error of the last try when the
    /// store stays busy, saying how long it waited.
    fn patiently<R>(&self, mut op: impl FnMut(&mut Backend) -> Result<R>) -> Result<R> {
        let start = Instant::now();
        let mut told = false;
        loop {
            let out = op(&mut self.db.borrow_mut());
            match out {
                Err(e) if fault_of(&e) == Fault::Busy => {
                    if self
                        .give_up
                        .as_ref()
                        .is_some_and(|f| f.load(Ordering::Relaxed))
                    {
                        return Err(e.context(
                            "the results store is busy (another process holds it), and a stop \
                             signal came: not waiting for it",
                        ));
                    }
                    if start.elapsed() >= self.busy_wait {
                        return Err(e.context(format!(
                            "the results store stayed busy (another process holds it) for {:.0} s",
                            start.elapsed().as_secs_f64()
                        )));
                    }
                    if !told {
                        told = true;
                        if let Some(notice) = &self.on_busy {
                            notice(self.busy_wait);
                        }
                    }
                    // Each try already waited up to a second for the lock; a short pause keeps
                    // a store that refuses at once (a deadlock) from being hammered.
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    /// Runs `f` on the connection, outside a transaction (one statement commits by itself).
    pub(crate) fn with<R>(&self, mut f: impl FnMut(&mut dyn Conn) -> Result<R>) -> Result<R> {
        self.patiently(|db| match db {
            Backend::Sqlite(conn) => f(&mut sqlite::Sqlite(conn)),
            Backend::Postgres(pg) => f(&mut pg.conn()?),
        })
    }

    /// Runs `f` in one transaction, committed when it returns `Ok`, rolled back otherwise; a
    /// transaction refused because the store is busy is tried again, whole.
    pub(crate) fn transaction<R>(
        &self,
        mut f: impl FnMut(&mut dyn Conn) -> Result<R>,
    ) -> Result<R> {
        self.patiently(|db| match db {
            Backend::Sqlite(conn) => sqlite::transaction(conn, &mut f),
            Backend::Postgres(pg) => pg.transaction(&mut f),
        })
    }

    /// One statement; the number of rows it changed.
    pub(crate) fn execute(&self, sql: &str, args: &[Value]) -> Result<u64> {
        self.with(|c| c.execute(sql, args))
    }

    /// Every row of one query.
    pub(crate) fn query(&self, sql: &str, args: &[Value]) -> Result<Vec<Row>> {
        self.with(|c| c.query(sql, args))
    }

    /// The first row of one query, if any.
    pub(crate) fn query_opt(&self, sql: &str, args: &[Value]) -> Result<Option<Row>> {
        self.with(|c| c.query_opt(sql, args))
    }

    /// The one row of an aggregate query.
    pub(crate) fn query_one(&self, sql: &str, args: &[Value]) -> Result<Row> {
        self.with(|c| c.query_one(sql, args))
    }
}

/// Opens (creating it and its directory if needed) an SQLite store.
fn open_file(path: &std::path::Path) -> Result<Connection> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create the directory of results database {}",
                dir.display()
            )
        })?;
    }
    sqlite::open(path)
}
