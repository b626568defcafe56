//! `wirebench run`: starts the embedded server when no --server is given, runs the plan, and
//! prints each run as it finishes, then the summary tables (text) or one JSON document. Each
//! finished run is committed to the results store before the next starts (a busy store is
//! waited for; a run it still cannot take is kept in a spool file); SIGINT (Ctrl-C), SIGTERM
//! or SIGHUP marks the campaign aborted and stores the run in flight as an aborted run (its
//! parameters and the client's figures so far); a run that fails (a server that went away)
//! is stored the same way, with its error as the reason; a store that breaks (a full disk)
//! ends the campaign as failed. Three phases, a file each: `setup`, `points` (what `run` does
//! as the runner runs the plan) and `finish`; `plan_text` holds the plan's words, `lines` the
//! JSON lines and documents of iperf3's output flags.

mod finish;
mod lines;
mod plan_text;
mod points;
mod setup;

use anyhow::Result;
use tokio::sync::{mpsc, Notify};

use crate::config::StoreTarget;
use crate::runner::RunConfig;
use crate::transport::signals::{Ended, Stops};

/// Runs the run command: [`Ended::Ran`]`(false)` when a run failed or a result is not in the
/// store (exit status 1), [`Ended::Stopped`] when a signal stopped it.
pub async fn execute(
    cfg: RunConfig,
    store_target: StoreTarget,
    quiet: bool,
    output: crate::config::RunOutput,
) -> Result<Ended> {
    // From here on SIGINT, SIGTERM and SIGHUP are ours to record, not the end of the process.
    let mut stops = Stops::watch();
    let mut s = setup::Setup::start(&cfg, &store_target, quiet, output).await?;
    let track = points::Track::new();
    let broken = Notify::new();
    let mut records = Vec::new();
    // The runner's channel stays here: what it said before a stop is still heard.
    let (listener, mut heard) = mpsc::unbounded_channel();
    let outcome = tokio::select! {
        done = points::run_points(
            &cfg, &mut s, &track, &broken, &mut records, (Some(listener), &mut heard),
        ) => finish::Outcome::Done(done),
        signal = stops.next() => finish::Outcome::Stopped(signal),
        () = broken.notified() => finish::Outcome::StoreBroke,
    };
    points::hear_the_rest(&cfg, &mut s, &track, &broken, &mut records, &mut heard);
    finish::finish(&cfg, s, &track, records, outcome, stops)
}
