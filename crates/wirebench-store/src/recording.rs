//! A campaign of any kind written into the store as it runs, such that no measured result is
//! thrown away: each result is committed when it finishes (a busy store is waited for, up to
//! the store's bound); one the store still does not take goes, with everything before it, into
//! a spool file that the next open brings in. A failure other than a busy store (a full disk,
//! a lost connection) breaks the recording: the command must stop, and the campaign ends as
//! `failed` with that reason, in the store or in the spool. Owns that policy once for every
//! kind; must not print (it says what happened, the command tells the user).

use std::path::PathBuf;

use anyhow::Result;
use wirebench_core::record::campaign::Status;
use wirebench_core::record::lifecycle::{CampaignDocument, Lifecycle, Positioned};

use super::kind::Kind;
use super::lifecycle::Begun;
use super::spool;
use super::sql::{fault_of, Fault};
use super::writer::this_process;
use crate::store::Store;

/// Where one result (or the campaign's end) went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kept {
    /// Into the store.
    Stored,
    /// Not into the store (`why`), but into this spool file, with the campaign so far.
    Spooled {
        /// Why the store did not take it.
        why: String,
        /// The spool file.
        path: PathBuf,
    },
    /// Neither into the store (`why`) nor into any spool place (`spool`): only what the
    /// command printed is left.
    Lost {
        /// Why the store did not take it.
        why: String,
        /// Why no spool place did.
        spool: String,
    },
}

/// How a measuring command's campaign ended, as the command saw it. [`Ending::outcome`] turns
/// it into the status and the reason stored: the one place that rule is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// A stop signal cut it short: the signal's reason.
    Stopped(String),
    /// It ran to its end (or to the failure that ended it): `failed` when a result failed or
    /// no figure came out; `why`, when the command can say, the failure to store.
    Ran {
        /// Whether something failed.
        failed: bool,
        /// Why, when the command can say (a failure given without `failed` fails it too).
        why: Option<String>,
    },
}

impl Ending {
    /// It ran to its end and nothing failed.
    pub fn complete() -> Ending {
        Ending::Ran {
            failed: false,
            why: None,
        }
    }

    /// The status and reason to store: a stop signal makes the campaign `aborted` (why: the
    /// signal); a failure, or a store that broke (`broken`: why), `failed` (why: the
    /// command's failure, else the store's); anything else `complete`.
    pub fn outcome(&self, broken: Option<&str>) -> (Status, Option<String>) {
        match self {
            Ending::Stopped(reason) => (Status::Aborted, Some(reason.clone())),
            Ending::Ran { failed, why } => match (why.as_deref().or(broken), *failed) {
                (Some(why), _) => (Status::Failed, Some(why.to_string())),
                (None, true) => (Status::Failed, None),
                (None, false) => (Status::Complete, None),
            },
        }
    }
}

/// How a recorded campaign ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Its id in the store.
    pub id: i64,
    /// The status it ended with (`failed` when the recording broke).
    pub status: Status,
    /// Results recorded, in the store or the spool.
    pub results: u64,
    /// Where its end (and any result the store lacks) went.
    pub kept: Kept,
}

/// A campaign being written.
pub struct Recording<K: Kind> {
    store: Store,
    begun: Begun,
    /// The whole campaign so far: what a spool file holds.
    doc: CampaignDocument<K::Plan, K::Result>,
    /// The spool file, once one was written.
    spool: Option<PathBuf>,
    /// Why the store failed in a way waiting does not mend.
    broken: Option<String>,
}

impl<K: Kind> Recording<K> {
    /// Begins a campaign of `plan` in `store` (status `running`, this process its writer).
    /// A store that cannot take even that fails here, before anything is measured.
    pub fn begin(store: Store, plan: K::Plan) -> Result<Recording<K>> {
        let begun = store.begin::<K>(&plan)?;
        let life = Lifecycle {
            id: begun.id,
            uid: Some(begun.uid.clone()),
            started_at_unix_s: K::started_at(&plan),
            finished_at_unix_s: None,
            status: Status::Running,
            error: None,
            origin: "run".into(),
            planned: K::planned(&plan),
            stored: 0,
            aborted: 0,
        };
        let mut doc = CampaignDocument::new(env!("CARGO_PKG_VERSION"), K::KIND, life, plan, vec![]);
        doc.writer = Some(this_process());
        Ok(Recording {
            store,
            begun,
            doc,
            spool: None,
            broken: None,
        })
    }

    /// The campaign's id in the store.
    pub fn id(&self) -> i64 {
        self.begun.id
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Why the recording broke (the command must stop: the campaign ends `failed`), if it did.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Results recorded so far (in the store or the spool).
    pub fn results(&self) -> u64 {
        self.doc.results.len() as u64
    }

    /// Records one finished result at its 1-based `position`.
    pub fn record(&mut self, position: u64, result: K::Result) -> Kept {
        let written = match &self.broken {
            // The store failed in a way waiting does not mend: straight to the spool.
            Some(why) => Err(anyhow::anyhow!("{why}")),
            None => self.store.record::<K>(self.begun.id, position, &result),
        };
        self.doc.results.push(Positioned { position, result });
        match written {
            Ok(()) => {
                if self.spool.is_some() {
                    // The store takes writes again: bring in what waits in the spool.
                    self.flush_spool();
                }
                Kept::Stored
            }
            Err(e) => {
                let why = format!(
                    "cannot store {} {position} in {}: {e:#}",
                    K::KIND.result_noun(),
                    self.store.path().display()
                );
                if fault_of(&e) != Fault::Busy && self.broken.is_none() {
                    self.broken = Some(why.clone());
                }
                self.keep(why)
            }
        }
    }

    /// Ends the campaign as `ending` says (with this recording's breakage, if any: see
    /// [`Ending::outcome`]) at `finished_at_unix_s`.
    pub fn finish(mut self, ending: &Ending, finished_at_unix_s: i64) -> Finished {
        let (status, error) = ending.outcome(self.broken.as_deref());
        let life = &mut self.doc.campaign;
        life.status = status;
        life.finished_at_unix_s = Some(finished_at_unix_s);
        life.error.clone_from(&error);
        let written = if self.spool.is_some() {
            // Everything at once: the results the store lacks and the end.
            self.store.merge::<K>(&self.doc, None, false).map(|_| ())
        } else {
            self.store
                .finish::<K>(self.begun.id, status, finished_at_unix_s, error.as_deref())
        };
        let kept = match written {
            Ok(()) => {
                if let Some(path) = self.spool.take() {
                    spool::remove(&path);
                }
                Kept::Stored
            }
            Err(e) => self.keep(format!(
                "cannot store the end of {} {} in {}: {e:#}",
                K::KIND.noun(),
                self.begun.id,
                self.store.path().display()
            )),
        };
        Finished {
            id: self.begun.id,
            status,
            results: self.results(),
            kept,
        }
    }

    /// Writes the campaign so far to its spool file.
    fn keep(&mut self, why: String) -> Kept {
        match spool::write(self.store.path(), &self.doc) {
            Ok(path) => {
                self.spool = Some(path.clone());
                Kept::Spooled { why, path }
            }
            Err(e) => Kept::Lost {
                why,
                spool: format!("{e:#}"),
            },
        }
    }

    /// Merges the campaign so far into the store and removes the spool file, when the store
    /// takes it; otherwise the spool file stays as it is.
    fn flush_spool(&mut self) {
        if self.store.merge::<K>(&self.doc, None, false).is_ok() {
            if let Some(path) = self.spool.take() {
                spool::remove(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_aborts_a_failure_or_a_broken_store_fails_else_complete() {
        let ran = |failed, why: Option<&str>| Ending::Ran {
            failed,
            why: why.map(str::to_string),
        };
        let stopped = Ending::Stopped("SIGINT".into());
        let said = |s: &str| Some(s.to_string());
        assert_eq!(stopped.outcome(None), (Status::Aborted, said("SIGINT")));
        assert_eq!(
            stopped.outcome(Some("disk full")),
            (Status::Aborted, said("SIGINT"))
        );
        assert_eq!(Ending::complete().outcome(None), (Status::Complete, None));
        assert_eq!(
            Ending::complete().outcome(Some("disk full")),
            (Status::Failed, said("disk full"))
        );
        assert_eq!(ran(true, None).outcome(None), (Status::Failed, None));
        assert_eq!(
            ran(true, Some("refused")).outcome(Some("disk full")),
            (Status::Failed, said("refused"))
        );
        assert_eq!(
            ran(false, Some("refused")).outcome(None),
            (Status::Failed, said("refused"))
        );
    }
}
