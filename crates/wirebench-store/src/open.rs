//! Opening the store for a command: connect (`store.rs`), then bring in what an earlier
//! writer left in a spool file and mark campaigns whose writer died as interrupted.

use anyhow::Result;
use wirebench_core::vocab::error::UsageError;

use crate::location::Location;
use crate::store::{BusyNotice, Store};
use crate::{spool, writer};

impl Store {
    /// Opens the database at `db` (a path or a [`Location`]) and brings its schema up to
    /// date; an SQLite file and its directory are created if needed. A database that is not
    /// a wirebench store, or one written by a newer wirebench, is refused without being
    /// changed. Spool files left for this store are brought in ([`Store::replayed`]).
    pub fn open(db: impl Into<Location>) -> Result<Store> {
        Store::open_noting(db, None)
    }

    /// [`Store::open`], telling `on_busy` whenever an operation finds the store busy and
    /// waits for it (opening included).
    pub fn open_noting(db: impl Into<Location>, on_busy: Option<BusyNotice>) -> Result<Store> {
        let location = db.into();
        let mut store = Store::connect(location, on_busy)?;
        // What an earlier writer could not store goes in first; then campaigns whose writer
        // died without a word are marked `interrupted`. Best effort: a store we cannot update
        // now is still readable, and the next open tries again.
        store.replayed = spool::replay(&mut store);
        let _ = store.mark_interrupted(&writer::this_process());
        Ok(store)
    }

    /// Opens an existing database for the commands that only read it: a missing file is an
    /// error that says how one is made, and nothing is created.
    pub fn open_existing(db: impl Into<Location>) -> Result<Store> {
        let location = db.into();
        if let Location::File(path) = &location {
            if !path.exists() {
                return Err(UsageError(format!(
                    "there is no results database at {} yet: `wirebench run` creates it (or pass --db PATH)",
                    path.display()
                ))
                .into());
            }
        }
        Store::open(location)
    }
}
