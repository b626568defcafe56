//! Where results go: `--db PATH`, `--db postgres://…`, `--no-store`, and the default store.

use crate::cli::{DbArgs, StoreArgs};
use crate::store;

use super::error::usage;

/// Where `run` stores its results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreTarget {
    /// `--no-store`.
    Off,
    /// This database: a file, or a PostgreSQL URL.
    File(store::Location),
}

impl StoreTarget {
    /// `--no-store`, `--db PATH|URL`, `$WIREBENCH_DB`, or the default database.
    pub fn from_args(args: &StoreArgs) -> anyhow::Result<Self> {
        if args.no_store {
            return Ok(StoreTarget::Off);
        }
        Ok(StoreTarget::File(db_path(&DbArgs {
            db: args.db.clone(),
        })?))
    }
}

/// The database `--db` names (a path or a `postgres://` URL), else the one `$WIREBENCH_DB`
/// names, else the default file.
pub fn db_path(args: &DbArgs) -> anyhow::Result<store::Location> {
    match &args.db {
        Some(db) => store::Location::parse(db.as_os_str()),
        None => match std::env::var_os(store::DB_ENV).filter(|v| !v.is_empty()) {
            Some(db) => store::Location::parse(&db)
                .map_err(|e| usage(format!("{e} (from ${})", store::DB_ENV)).into()),
            None => Ok(store::Location::File(store::default_path()?)),
        },
    }
}
