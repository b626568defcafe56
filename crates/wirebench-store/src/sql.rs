//! The one interface the store's SQL runs through, whichever backend holds the data: a tiny
//! value type ([`Value`]), rows of them ([`Row`]), and [`Conn`] (execute, query, insert with
//! `RETURNING id`). Statements are written once with SQLite's `?N` placeholders; the
//! PostgreSQL backend rewrites them to `$N`. A backend's error says which [`Fault`] it is, so
//! the store can wait out a busy database and tell a full disk from a bad statement. Must not
//! know any table.

use anyhow::{anyhow, Context, Result};

/// What kind of failure a database error is, as far as a writer must act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Another connection holds a lock we need (SQLite busy or locked, PostgreSQL lock
    /// timeout or deadlock): worth waiting for.
    Busy,
    /// The disk (or the database's quota) is full.
    Full,
    /// Anything else: a broken file, a lost connection, a constraint.
    Other,
}

/// An error of either backend, on one line, with its [`Fault`].
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub struct DbError {
    /// What kind of failure it is.
    pub fault: Fault,
    /// The backend's message, on one line.
    pub text: String,
}

/// The [`Fault`] of an error from the store: the first [`DbError`] in its chain, else
/// [`Fault::Other`].
pub fn fault_of(e: &anyhow::Error) -> Fault {
    e.chain()
        .find_map(|cause| cause.downcast_ref::<DbError>())
        .map_or(Fault::Other, |db| db.fault)
}

/// One SQL value, as both backends can bind and return it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// NULL.
    Null,
    /// Any integer column (SQLite INTEGER, PostgreSQL BIGINT).
    Int(i64),
    /// A floating-point column (DOUBLE PRECISION).
    Real(f64),
    /// A text column.
    Text(String),
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::Int(i64::from(v))
            }
        }
    )*};
}
from_int!(i64, i32, u32, u16, u8, bool);

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Real(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::Text(v.clone())
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

impl<T: Clone + Into<Value>> From<&Option<T>> for Value {
    fn from(v: &Option<T>) -> Value {
        v.clone().map_or(Value::Null, Into::into)
    }
}

/// The arguments of one statement: `args![a, b, c]` is `&[Value]`.
macro_rules! args {
    ($($v:expr),* $(,)?) => {
        &[$($crate::sql::Value::from($v)),*][..]
    };
}
pub(crate) use args;

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    fn at(&self, i: usize) -> Result<&Value> {
        self.0
            .get(i)
            .ok_or_else(|| anyhow!("the results database returned no column {i}"))
    }

    /// Column `i` as an integer that may be NULL.
    pub fn opt_i64(&self, i: usize) -> Result<Option<i64>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            other => Err(anyhow!(
                "column {i} holds {other:?} where an integer belongs"
            )),
        }
    }

    /// Column `i` as an integer.
    pub fn i64(&self, i: usize) -> Result<i64> {
        self.opt_i64(i)?
            .ok_or_else(|| anyhow!("column {i} is NULL where an integer belongs"))
    }

    /// Column `i` as a non-negative integer that fits 32 bits.
    pub fn u32(&self, i: usize) -> Result<u32> {
        let v = self.i64(i)?;
        u32::try_from(v).with_context(|| format!("column {i} holds {v}, not a 32-bit count"))
    }

    /// Column `i` as a count (a negative number, which we never store, reads as 0).
    pub fn count(&self, i: usize) -> Result<u64> {
        Ok(u64::try_from(self.i64(i)?).unwrap_or(0))
    }

    /// Column `i` as a floating-point number that may be NULL (an integer reads as one).
    pub fn opt_f64(&self, i: usize) -> Result<Option<f64>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Real(v) => Ok(Some(*v)),
            Value::Int(v) => Ok(Some(*v as f64)),
            other => Err(anyhow!("column {i} holds {other:?} where a number belongs")),
        }
    }

    /// Column `i` as text that may be NULL.
    pub fn opt_text(&self, i: usize) -> Result<Option<String>> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v.clone())),
            other => Err(anyhow!("column {i} holds {other:?} where text belongs")),
        }
    }

    /// Column `i` as text.
    pub fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i)?
            .ok_or_else(|| anyhow!("column {i} is NULL where text belongs"))
    }
}

/// A connection or an open transaction of either backend.
pub trait Conn {
    /// Runs one statement; returns the number of rows it changed.
    fn execute(&mut self, sql: &str, args: &[Value]) -> Result<u64>;

    /// Runs one query; returns every row.
    fn query(&mut self, sql: &str, args: &[Value]) -> Result<Vec<Row>>;

    /// Runs several `;`-separated statements without arguments (a migration).
    fn batch(&mut self, sql: &str) -> Result<()>;

    /// Runs one query; returns its first row, if any.
    fn query_opt(&mut self, sql: &str, args: &[Value]) -> Result<Option<Row>> {
        Ok(self.query(sql, args)?.into_iter().next())
    }

    /// Runs one query that returns exactly one row (an aggregate).
    fn query_one(&mut self, sql: &str, args: &[Value]) -> Result<Row> {
        self.query_opt(sql, args)?
            .ok_or_else(|| anyhow!("the results database returned no row"))
    }

    /// Runs an `INSERT … RETURNING id`; returns the new row's id.
    fn insert(&mut self, sql: &str, args: &[Value]) -> Result<i64> {
        self.query_one(sql, args)?.i64(0)
    }
}

/// SQLite's `?N` placeholders as PostgreSQL's `$N` (our statements hold no `?` in literals).
pub fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars() {
        assert_eq!(
            dollar_placeholders("UPDATE t SET a = ?1, b = ?12 WHERE c = ?2 AND d = '?'"),
            "UPDATE t SET a = $1, b = $12 WHERE c = $2 AND d = '?'"
        );
    }

    #[test]
    fn rows_convert_and_say_what_was_wrong() {
        let row = Row(vec![Value::Int(7), Value::Null, Value::Text("x".into())]);
        assert_eq!(row.i64(0).unwrap(), 7);
        assert_eq!(row.opt_i64(1).unwrap(), None);
        assert_eq!(row.text(2).unwrap(), "x");
        assert!(row.i64(1).is_err() && row.text(0).is_err() && row.i64(9).is_err());
        assert_eq!(args![1u32, None::<i64>, "a"].len(), 3);
    }
}
