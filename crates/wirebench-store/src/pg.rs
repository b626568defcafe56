//! The PostgreSQL backend of the store (`--db postgres://…`): [`Conn`] over a client or a
//! transaction of the `postgres` crate, its schema version (table `wirebench_schema`) and its
//! migration runner, serialised between hosts by an advisory lock. No TLS (`NoTls`): use a
//! loopback address, a unix socket (`postgres://user@%2Frun%2Fpostgresql/db`) or a tunnel.
//! Must not know any table but through `schema`.
//!
//! The `postgres` client drives its own small tokio runtime and panics when called from a
//! thread that is inside another (as `wirebench run`'s async code is): every call goes
//! through [`off_runtime`], which moves it to a scoped thread in that case.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bytes::BytesMut;
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::{Client, GenericClient, NoTls};

use super::schema;
use super::sql::{args, dollar_placeholders, Conn, DbError, Fault, Row, Value};

/// The advisory lock that one migration at a time holds ("wbschema" in ASCII).
const MIGRATION_LOCK: i64 = 0x7762_7363_6865_6d61;

/// An open connection to a PostgreSQL results store.
pub struct Pg {
    // An Option so that Drop can move the client off a runtime thread to close it.
    client: Option<Client>,
}

/// Runs `f` where a blocking `postgres` call may run: right here, or on a scoped thread when
/// this thread is inside a tokio runtime.
pub fn off_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// How long one statement waits for another transaction's lock (`lock_timeout`) before it
/// reports the store busy; the store's own loop decides how long to keep trying.
const LOCK_WAIT: &str = "1s";

/// A driver error on one line (the server's DETAIL and HINT come on lines of their own), with
/// its [`Fault`]: a lock not granted in time or a deadlock is busy, a full disk is full.
fn one_line(e: postgres::Error) -> anyhow::Error {
    use postgres::error::SqlState;
    let fault = match e.code() {
        Some(c)
            if *c == SqlState::LOCK_NOT_AVAILABLE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::T_R_SERIALIZATION_FAILURE =>
        {
            Fault::Busy
        }
        Some(c) if *c == SqlState::DISK_FULL => Fault::Full,
        _ => Fault::Other,
    };
    let text = match e.as_db_error() {
        Some(db) => db.to_string(),
        None => e.to_string(),
    };
    DbError {
        fault,
        text: text.replace('\n', "; "),
    }
    .into()
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            // The column's own integer width: our schema uses BIGINT, but a parameter
            // compared with an int4 expression is typed int4 by the server.
            Value::Int(v) => match *ty {
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => v.to_string().to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            Value::Real(v) => v.to_sql(ty, out),
            Value::Text(v) => v.as_str().to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn row_values(row: &postgres::Row) -> Result<Row> {
    let mut values = Vec::with_capacity(row.len());
    for (i, col) in row.columns().iter().enumerate() {
        let ty = col.type_();
        let v = match *ty {
            Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Value::Int),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(i)?
                .map(|v| Value::Int(v.into())),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(i)?
                .map(|v| Value::Int(v.into())),
            Type::BOOL => row
                .try_get::<_, Option<bool>>(i)?
                .map(|v| Value::Int(v.into())),
            Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Value::Real),
            Type::FLOAT4 => row
                .try_get::<_, Option<f32>>(i)?
                .map(|v| Value::Real(v.into())),
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                row.try_get::<_, Option<String>>(i)?.map(Value::Text)
            }
            _ => bail!(
                "column {} has type {ty}, which the store does not read",
                col.name()
            ),
        };
        values.push(v.unwrap_or(Value::Null));
    }
    Ok(Row(values))
}

/// [`Conn`] over a client or a transaction.
struct PgConn<'a, C>(&'a mut C);

impl<C: GenericClient + Send> Conn for PgConn<'_, C> {
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64> {
        let sql = dollar_placeholders(sql);
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|v| v as _).collect();
        let client = &mut *self.0;
        off_runtime(|| client.execute(sql.as_str(), &params)).map_err(one_line)
    }

    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>> {
        let sql = dollar_placeholders(sql);
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|v| v as _).collect();
        let client = &mut *self.0;
        let rows = off_runtime(|| client.query(sql.as_str(), &params)).map_err(one_line)?;
        rows.iter().map(row_values).collect()
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        let client = &mut *self.0;
        off_runtime(|| client.batch_execute(sql)).map_err(one_line)
    }
}

impl Pg {
    /// Connects to the database `url` names (`postgres://user[:password]@host[:port]/db`),
    /// waiting at most 10 s unless the URL sets `connect_timeout`.
    pub fn connect(url: &str) -> Result<Pg> {
        let mut config: postgres::Config = url.parse().map_err(one_line)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("wirebench");
        }
        let mut client = off_runtime(|| config.connect(NoTls)).map_err(one_line)?;
        // A lock held elsewhere makes a statement fail after LOCK_WAIT instead of hanging, so
        // the store can say it is waiting and bound the wait.
        let set = format!("SET lock_timeout = '{LOCK_WAIT}'");
        off_runtime(|| client.batch_execute(&set)).map_err(one_line)?;
        Ok(Pg {
            client: Some(client),
        })
    }

    fn client(&mut self) -> Result<&mut Client> {
        self.client
            .as_mut()
            .ok_or_else(|| anyhow!("the PostgreSQL connection is closed"))
    }

    /// The connection, for one statement outside a transaction.
    pub fn conn(&mut self) -> Result<impl Conn + '_> {
        Ok(PgConn(self.client()?))
    }

    /// Runs `f` in one transaction, committing when it returns `Ok` and rolling back when
    /// it returns an error.
    pub fn transaction<R>(&mut self, f: impl FnOnce(&mut dyn Conn) -> Result<R>) -> Result<R> {
        let client = self.client()?;
        let mut tx = off_runtime(|| client.transaction()).map_err(one_line)?;
        match f(&mut PgConn(&mut tx)) {
            Ok(out) => {
                off_runtime(move || tx.commit())
                    .map_err(one_line)
                    .context("while committing")?;
                Ok(out)
            }
            Err(e) => {
                // Best effort: a connection that failed mid-transaction rolls back anyway.
                let _ = off_runtime(move || tx.rollback());
                Err(e)
            }
        }
    }

    /// The schema version of the database (0 for an empty one).
    pub fn schema_version(&mut self) -> Result<u32> {
        let mut conn = self.conn()?;
        if !has_version_table(&mut conn)? {
            return Ok(0);
        }
        let v = conn
            .query_one("SELECT max(version) FROM wirebench_schema", &[])?
            .opt_i64(0)?
            .unwrap_or(0);
        u32::try_from(v).context("the schema version is not a version number")
    }

    /// Applies missing migrations in one transaction under an advisory lock, so that many
    /// processes opening one new database at once migrate it once. A database written by a
    /// newer wirebench, or a schema holding other tables, is refused unchanged.
    pub fn prepare(&mut self) -> Result<()> {
        self.transaction(|tx| {
            tx.execute("SELECT pg_advisory_xact_lock(?1)", args![MIGRATION_LOCK])?;
            if !has_version_table(tx)? {
                let tables = tx
                    .query_one(
                        "SELECT count(*) FROM information_schema.tables
                         WHERE table_schema = current_schema()",
                        &[],
                    )?
                    .i64(0)?;
                if tables > 0 {
                    bail!(
                        "it is a PostgreSQL database but not a wirebench results store (its schema \
                         holds {tables} other table(s)); pass another --db"
                    );
                }
                tx.batch(
                    "CREATE TABLE wirebench_schema (version BIGINT NOT NULL);
                     INSERT INTO wirebench_schema (version) VALUES (0);",
                )?;
            }
            let version = tx
                .query_one("SELECT max(version) FROM wirebench_schema", &[])?
                .opt_i64(0)?
                .unwrap_or(0);
            let version = u32::try_from(version).unwrap_or(u32::MAX);
            if version > schema::CURRENT_VERSION {
                bail!(
                    "its schema version {version} is newer than this wirebench understands ({}); \
                     use a newer wirebench or another --db",
                    schema::CURRENT_VERSION
                );
            }
            for (i, m) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
                tx.batch(m.postgres)
                    .with_context(|| format!("while migrating to schema version {}", i + 1))?;
                tx.execute(
                    "UPDATE wirebench_schema SET version = ?1",
                    args![i64::try_from(i + 1).unwrap_or(i64::MAX)],
                )?;
            }
            Ok(())
        })
    }
}

fn has_version_table(conn: &mut dyn Conn) -> Result<bool> {
    Ok(conn
        .query_one(
            "SELECT count(*) FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_name = 'wirebench_schema'",
            &[],
        )?
        .i64(0)?
        > 0)
}

impl Drop for Pg {
    fn drop(&mut self) {
        // Closing blocks on the client's runtime, so it must not happen on a runtime thread.
        if let Some(client) = self.client.take() {
            off_runtime(move || drop(client));
        }
    }
}
