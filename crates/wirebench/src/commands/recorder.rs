//! What the measuring commands (`run`, `rr`, `ping`, `dns`, `rpm`) say about the store, said
//! once for all of them: opening it (and waiting for it when busy), what an open brought in
//! from the spool, each result the store did not take and where it was kept instead, and how
//! the campaign ended up. The policy itself (wait, spool, break) is `store::recording`'s.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use wirebench_core::record::lifecycle::CampaignKind;

use crate::store::kind::Kind;
use crate::store::lifecycle::Merged;
use crate::store::recording::{Ending, Finished, Kept, Recording};
use crate::store::{Location, Store};
use crate::transport::signals::Stops;

// Read by every recording command beside its recorder (dns, rr, rpm, exporter, interop).
pub use crate::commands::clock::unix_now;

/// Opens the store at `location` for a measuring command: a busy store is waited for, and
/// said on stderr; spool files the open brought in are said too.
pub fn open(location: &Location) -> Result<Store> {
    let name = location.display().to_string();
    let notice = move |wait: Duration| {
        let _ = writeln!(
            std::io::stderr(),
            "note: the results store {name} is busy (another process holds it): waiting up to \
             {} s ({} sets how long)",
            wait.as_secs(),
            crate::store::BUSY_WAIT_ENV
        );
    };
    let mut store = blocking(|| Store::open_noting(location, Some(Box::new(notice))))?;
    say_replayed(&store);
    store.give_up_when(stop_flag());
    Ok(store)
}

/// A flag set when a stop signal (SIGINT, SIGTERM, SIGHUP) arrives, watched on a task of its
/// own beside the command's own watch: a store write blocked on a busy store is no task the
/// command can interrupt, so the store itself checks this flag and stops waiting.
fn stop_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    if tokio::runtime::Handle::try_current().is_ok() {
        let mut stops = Stops::watch();
        let set = Arc::clone(&flag);
        tokio::spawn(async move {
            stops.next().await;
            set.store(true, Ordering::Relaxed);
        });
    }
    flag
}

/// One line per spool file the open of `store` brought in, or could not.
pub fn say_replayed(store: &Store) {
    for r in store.replayed() {
        let line = match &r.outcome {
            Ok(merged) => format!(
                "note: {} {} was kept in {} when the store could not take it; it is in {} now{}",
                r.kind.noun(),
                merged.id(),
                r.path.display(),
                store.path().display(),
                match merged {
                    Merged::Updated { added, .. } => format!(" ({added} more results)"),
                    _ => String::new(),
                }
            ),
            Err(e) => format!(
                "warning: {} is kept in {}, and the store still cannot take it: {e}",
                r.kind.noun(),
                r.path.display()
            ),
        };
        let _ = writeln!(std::io::stderr(), "{line}");
    }
}

/// A campaign of kind `K` being recorded by a command: [`Recording`] with its words.
pub struct Recorder<K: Kind> {
    recording: Recording<K>,
    /// The spool file already named to the user.
    said_spool: Option<std::path::PathBuf>,
}

impl<K: Kind> Recorder<K> {
    /// Begins recording a campaign of `plan` in `store`; a store that cannot take even that
    /// stops the command before anything is measured.
    pub fn begin(store: Store, plan: K::Plan) -> Result<Recorder<K>> {
        let location = store.path().display().to_string();
        let recording = blocking(|| Recording::<K>::begin(store, plan))
            .with_context(|| format!("cannot store in {location}"))?;
        Ok(Recorder {
            recording,
            said_spool: None,
        })
    }

    /// The campaign's id in the store.
    pub fn id(&self) -> i64 {
        self.recording.id()
    }

    /// Where the store is.
    pub fn location(&self) -> &Location {
        self.recording.store().path()
    }

    /// Results recorded so far (in the store or the spool).
    pub fn results(&self) -> u64 {
        self.recording.results()
    }

    /// Records one result at `position`; says where it went when not into the store. Whether
    /// it was kept (in the store or a spool file). When the store broke (a full disk, a lost
    /// connection), [`Recorder::broken`] says why, and the command must stop.
    pub fn record(&mut self, position: u64, result: K::Result) -> bool {
        let kept = blocking(|| self.recording.record(position, result));
        self.say(&kept);
        !matches!(kept, Kept::Lost { .. })
    }

    /// Why the recording broke, if it did.
    pub fn broken(&self) -> Option<&str> {
        self.recording.broken()
    }

    /// Ends the campaign as `ending` says (the status and reason follow from it once, in
    /// [`Ending::outcome`]). When its end and every result are in the store, `stored` is the
    /// line to print (to stderr when `quiet_stdout`, e.g. beside --json); otherwise where they
    /// were kept is said. Whether all is stored.
    pub fn finish(
        self,
        ending: Ending,
        quiet_stdout: bool,
        stored: impl FnOnce(&Finished, &Location) -> String,
    ) -> bool {
        let location = self.location().clone();
        let finished = blocking(|| self.recording.finish(&ending, unix_now()));
        match &finished.kept {
            Kept::Stored => {
                let line = stored(&finished, &location);
                // Not println!: after SIGHUP the terminal may be gone, and a failed write must
                // not turn a stored campaign into a panic.
                if quiet_stdout {
                    let _ = writeln!(std::io::stderr(), "{line}");
                } else {
                    let _ = writeln!(std::io::stdout(), "{line}");
                }
                true
            }
            kept => {
                let line = not_stored_line(K::KIND, &finished, kept, &location);
                let _ = writeln!(std::io::stderr(), "{line}");
                false
            }
        }
    }

    /// Says where a result went when it did not go into the store (a spool file once, the
    /// first time it is used).
    fn say(&mut self, kept: &Kept) {
        match kept {
            Kept::Stored => {}
            Kept::Spooled { why, path } => {
                if self.said_spool.as_ref() != Some(path) {
                    let _ = writeln!(
                        std::io::stderr(),
                        "warning: {why}; kept in {} with the {} so far, until the store takes it",
                        path.display(),
                        K::KIND.noun()
                    );
                    self.said_spool = Some(path.clone());
                }
            }
            Kept::Lost { why, spool } => {
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: {why}; and {spool}: only what is printed is left of it"
                );
            }
        }
    }
}

/// Runs `f`, which may wait for a busy store, such that the runtime's other tasks go on
/// meanwhile (the embedded server, the watch for a stop signal): the worker hands its queue
/// to another thread for the time it blocks.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// The line for a campaign whose end (or some result) is not in the store.
fn not_stored_line(kind: CampaignKind, f: &Finished, kept: &Kept, db: &Location) -> String {
    let what = format!(
        "{} {} ({} {}, {})",
        kind.noun(),
        f.id,
        f.results,
        if f.results == 1 {
            kind.result_noun().to_string()
        } else {
            format!("{}s", kind.result_noun())
        },
        f.status.as_str()
    );
    match kept {
        Kept::Spooled { why, path } => format!(
            "warning: {why}; {what} is kept in {}: the next wirebench command that opens {} \
             brings it in (or: wirebench import {} --db {})",
            path.display(),
            db.display(),
            path.display(),
            db.display()
        ),
        Kept::Lost { why, spool } => format!(
            "warning: {why}; and {spool}: {what} is not stored; only what is printed is left"
        ),
        Kept::Stored => format!("stored as {what} in {}", db.display()),
    }
}
