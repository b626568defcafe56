//! The SQLite backend of the store (the embedded default): [`Conn`] over a rusqlite
//! connection or transaction, its schema version (`PRAGMA user_version`) and its migration
//! runner. Must not know any table but through `schema`.

use anyhow::{bail, Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, TransactionBehavior};

use super::schema;
use super::sql::{Conn, Row, Value};

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
            .execute(sql, rusqlite::params_from_iter(args.iter()))?;
        Ok(n as u64)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), row_values)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.0.execute_batch(sql)?)
    }
}

/// Runs `f` in one immediate transaction (the write lock taken at its start, so two writers
/// wait for each other instead of failing at commit), committing when it returns `Ok`.
pub fn transaction<R>(
    conn: &mut Connection,
    f: impl FnOnce(&mut dyn Conn) -> Result<R>,
) -> Result<R> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let out = f(&mut Sqlite(&tx))?;
    tx.commit().context("while committing")?;
    Ok(out)
}

/// The schema version of the open database.
pub fn schema_version(conn: &Connection) -> Result<u32> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

/// Sets up the connection and applies missing migrations. A database written by a newer
/// wirebench, or one that is not ours, is refused unchanged.
pub fn prepare(conn: &mut Connection) -> Result<()> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "foreign_keys", true)?;
    let version = schema_version(conn)?;
    if version > schema::CURRENT_VERSION {
        bail!(
            "its schema version {version} is newer than this wirebench understands ({}); \
             use a newer wirebench or another --db",
            schema::CURRENT_VERSION
        );
    }
    if version == 0 {
        // A non-empty database without our version mark belongs to someone else.
        let tables: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |row| row.get(0),
        )?;
        if tables > 0 {
            bail!("it is an SQLite database but not a wirebench results store; pass another --db");
        }
    }
    // Off while migrating (it cannot change inside a transaction): a migration that
    // rebuilds a parent table must not cascade its DROP to the children (schema V6).
    conn.pragma_update(None, "foreign_keys", false)?;
    for (i, m) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
        tx.execute_batch(m.sqlite)
            .with_context(|| format!("while migrating to schema version {}", i + 1))?;
        check_foreign_keys(&tx)
            .with_context(|| format!("while migrating to schema version {}", i + 1))?;
        tx.pragma_update(None, "user_version", (i + 1) as u32)?;
        tx.commit()?;
    }
    conn.pragma_update(None, "foreign_keys", true)?;
    Ok(())
}

/// Fails when a migration left a row pointing at a missing parent.
fn check_foreign_keys(conn: &Connection) -> Result<()> {
    let broken: i64 =
        conn.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |row| {
            row.get(0)
        })?;
    if broken > 0 {
        bail!("{broken} row(s) would point at missing rows");
    }
    Ok(())
}
