//! The SQLite backend of the store (the embedded default): [`Conn`] over a rusqlite
//! connection or transaction, its errors as [`DbError`]s with their [`Fault`], its schema
//! version (`PRAGMA user_version`) and its migration runner, which migrates a new file once
//! however many processes open it at the same moment. Must not know any table but through
//! `schema`.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use super::schema;
use super::sql::{Conn, DbError, Fault, Row, Value};

/// How long one statement waits for another connection's lock before it reports the store
/// busy; the store's own loop (`Store::busy_wait`) decides how long to keep trying.
pub const LOCK_WAIT: Duration = Duration::from_secs(1);

/// A connection, or a transaction (which derefs to one).
pub struct Sqlite<'a>(pub &'a Connection);

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
        })
    }
}

/// A rusqlite error as a [`DbError`] that says whether it was a lock, a full disk or else.
fn db_error(e: rusqlite::Error) -> anyhow::Error {
    let fault = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Fault::Busy,
        Some(ErrorCode::DiskFull) => Fault::Full,
        _ => Fault::Other,
    };
    DbError {
        fault,
        text: e.to_string().replace('\n', "; "),
    }
    .into()
}

fn row_values(row: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let n = row.as_ref().column_count();
    let mut values = Vec::with_capacity(n);
    for i in 0..n {
        values.push(match row.get_ref(i)? {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(v) => Value::Int(v),
            ValueRef::Real(v) => Value::Real(v),
            ValueRef::Text(t) | ValueRef::Blob(t) => {
                Value::Text(String::from_utf8_lossy(t).into_owned())
            }
        });
    }
    Ok(Row(values))
}

impl Conn for Sqlite<'_> {
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        let n = self
            .0
            .execute(sql, rusqlite::params_from_iter(args.iter()))
            .map_err(db_error)?;
        Ok(n as u64)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>> {
        let mut stmt = self.0.prepare_cached(sql).map_err(db_error)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), row_values)
            .map_err(db_error)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_error)
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.0.execute_batch(sql).map_err(db_error)
    }
}

/// Opens the file at `path` (created if missing) for reading and writing. File names are
/// taken as they are, never as `file:` URIs, so no name opens an in-memory database.
pub fn open(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(db_error)?;
    conn.busy_timeout(LOCK_WAIT).map_err(db_error)?;
    Ok(conn)
}

/// Runs `f` in one immediate transaction (the write lock taken at its start, so two writers
/// wait for each other instead of failing at commit), committing when it returns `Ok`.
pub fn transaction<R>(
    conn: &mut Connection,
    f: impl FnOnce(&mut dyn Conn) -> Result<R>,
) -> Result<R> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    let out = f(&mut Sqlite(&tx))?;
    tx.commit().map_err(db_error).context("while committing")?;
    Ok(out)
}

/// The schema version of the open database.
pub fn schema_version(conn: &Connection) -> Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(db_error)
}

/// Sets up the connection and applies missing migrations. A database written by a newer
/// wirebench, or one that is not ours, is refused unchanged. Migrating happens in one
/// immediate transaction that reads the version again under the write lock, so processes
/// opening one new file at once migrate it once, and none sees it half made.
pub fn prepare(conn: &mut Connection) -> Result<()> {
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(db_error)?;
    let version = schema_version(conn)?;
    check_not_newer(version)?;
    if version == schema::CURRENT_VERSION {
        return Ok(());
    }
    // Off while migrating (it cannot change inside a transaction): a migration that
    // rebuilds a parent table must not cascade its DROP to the children (schema V6, V9).
    conn.pragma_update(None, "foreign_keys", false)
        .map_err(db_error)?;
    let migrated = migrate(conn);
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(db_error)?;
    migrated
}

fn check_not_newer(version: u32) -> Result<()> {
    if version > schema::CURRENT_VERSION {
        bail!(
            "its schema version {version} is newer than this wirebench understands ({}); \
             use a newer wirebench or another --db",
            schema::CURRENT_VERSION
        );
    }
    Ok(())
}

/// Every missing migration, in one transaction under the write lock.
fn migrate(conn: &mut Connection) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_error)?;
    // Another process may have migrated (part of) it while we waited for the lock.
    let version = schema_version(&tx)?;
    check_not_newer(version)?;
    if version == 0 {
        // A non-empty database without our version mark belongs to someone else.
        let tables: i64 = tx
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |row| row.get(0),
            )
            .map_err(db_error)?;
        if tables > 0 {
            bail!("it is an SQLite database but not a wirebench results store; pass another --db");
        }
    }
    for (i, m) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
        let at = || format!("while migrating to schema version {}", i + 1);
        tx.execute_batch(m.sqlite)
            .map_err(db_error)
            .with_context(at)?;
        check_foreign_keys(&tx).with_context(at)?;
        tx.pragma_update(None, "user_version", (i + 1) as u32)
            .map_err(db_error)?;
    }
    tx.commit().map_err(db_error)?;
    Ok(())
}

/// Fails when a migration left a row pointing at a missing parent.
fn check_foreign_keys(conn: &Connection) -> Result<()> {
    let broken: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |row| {
            row.get(0)
        })
        .map_err(db_error)?;
    if broken > 0 {
        bail!("{broken} row(s) would point at missing rows");
    }
    Ok(())
}
