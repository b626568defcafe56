//! `run`'s last phase: how the campaign ended — a signal (the run in flight stored as
//! aborted, the campaign `aborted`), a failed run (stored as aborted with its error, the
//! campaign `failed`), a store that broke (the campaign `failed` with why) or the end of the
//! plan — stored, then the JSON document or the summary tables, and the exit status.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::record::campaign::SoFar;
use wirebench_core::record::document::RunDocument;
use wirebench_core::record::lifecycle::StoredRun;
use wirebench_core::record::{count_of, AbortedRun, RunRecord, Status};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::ByteSize;

use crate::commands::recorder::Recorder;
use crate::report::table;
use crate::runner::{PlannedRun, RunConfig};
use crate::store::recording::Ending;
use crate::store::run::Run;
use crate::transport::signals::{Ended, StopSignal, Stops};

use super::points::{Done, Track};
use super::setup::Setup;

/// How the plan's loop ended.
pub(super) enum Outcome {
    /// By itself: the plan's end, a failed run or a rate search that found no rate.
    Done(Done),
    /// A signal stopped it.
    Stopped(StopSignal),
    /// The store broke (a full disk): the campaign stops there.
    StoreBroke,
}

/// Stores how the campaign ended, prints what is left to print, and gives the exit status.
pub(super) fn finish(
    cfg: &RunConfig,
    mut s: Setup,
    track: &Track,
    records: Vec<(Point, RunRecord)>,
    outcome: Outcome,
    stops: Stops,
) -> Result<Ended> {
    let (failure, unfound): (Option<String>, _) = match outcome {
        Outcome::Stopped(signal) => {
            // Storing takes a moment; a second signal ends the process at once.
            stops.second_ends_process();
            s.progress.finish();
            stopped(cfg, s.recorder.take(), track, signal);
            return Ok(Ended::Stopped(signal));
        }
        Outcome::Done(done) => (done.failure, done.unfound),
        Outcome::StoreBroke => (
            s.recorder
                .as_ref()
                .and_then(|r| r.broken().map(str::to_string)),
            None,
        ),
    };
    s.progress.finish();
    let mut aborted = 0;
    let warming = track.warming.load(std::sync::atomic::Ordering::Relaxed);
    if let (Some(failure), false) = (&failure, warming) {
        // The run that failed (a server that went away, a refusal) is kept as aborted, with
        // its error and what the client had done. A store that broke cut nothing measured.
        if let Some(run) = in_flight(cfg, track).filter(|_| !store_broke(&s)) {
            let so_far = so_far(track, &run);
            let stored = record_aborted(&mut s.recorder, &run, failure, so_far);
            aborted += u64::from(stored);
            // A run that failed before any byte moved (a refusal, a wrong peer) is said in
            // the one error line below; one cut short mid-transfer also says how far it got.
            if so_far.is_some_and(|f| f.bytes > 0) {
                eprintln!(
                    "run {} stopped{}{}",
                    run.position,
                    so_far_text(so_far),
                    if stored { "; stored as aborted" } else { "" }
                );
            }
        }
    }
    let all_stored = match s.recorder.take() {
        Some(r) => {
            let ending = Ending::Ran {
                failed: failure.is_some(),
                why: failure.clone(),
            };
            r.finish(ending, cfg.json, |f, db| {
                stored_note(f.id, f.results - aborted, aborted, f.status, db)
            })
        }
        None => true,
    };
    if let Some(failure) = &failure {
        s.lines.error(failure);
    }
    print_results(cfg, &s, &records, failure.clone(), unfound)?;
    if let Some(failure) = &failure {
        eprintln!("error: {failure}");
        return Ok(Ended::Ran(false));
    }
    Ok(Ended::Ran(all_stored))
}

/// A signal stopped the campaign: the run in flight stored as aborted, with the client's
/// figures so far, the campaign `aborted`, and one line saying what is stored.
fn stopped(cfg: &RunConfig, recorder: Option<Recorder<Run>>, track: &Track, signal: StopSignal) {
    let in_flight = if track.warming.load(std::sync::atomic::Ordering::Relaxed) {
        None
    } else {
        in_flight(cfg, track)
    };
    let so_far = in_flight.as_ref().and_then(|run| so_far(track, run));
    let reason = signal.reason();
    let mut recorder = recorder;
    let mut aborted_stored = false;
    if let Some(run) = &in_flight {
        aborted_stored = record_aborted(&mut recorder, run, &reason, so_far);
    }
    let stored = recorder
        .as_ref()
        .map_or(0, |r| r.results() - u64::from(aborted_stored));
    if let Some(r) = recorder {
        let aborted = u64::from(aborted_stored);
        r.finish(Ending::Stopped(reason.clone()), cfg.json, |f, db| {
            stored_note(f.id, f.results - aborted, aborted, f.status, db)
        });
    }
    let what = match (&in_flight, aborted_stored) {
        (Some(run), true) => format!(
            "the run in flight ({}) is stored as aborted{}",
            run.position,
            so_far_text(so_far)
        ),
        (Some(run), false) => format!(
            "the run in flight ({}) is not stored{}",
            run.position,
            so_far_text(so_far)
        ),
        (None, _) => "no measured run was in flight".to_string(),
    };
    let _ = writeln!(
        std::io::stderr(),
        "{reason}: {} stored, {what}",
        count_of(stored as usize, "finished run", "finished runs")
    );
}

/// The measured run after the last finished one: the one in flight.
fn in_flight(cfg: &RunConfig, track: &Track) -> Option<AbortedRun> {
    let finished = track.finished.load(std::sync::atomic::Ordering::Relaxed);
    cfg.plan.at(finished + 1).map(PlannedRun::aborted)
}

/// What the run in flight had moved when it was cut short: its flows' bytes, in whole
/// messages of its plan.
fn so_far(track: &Track, run: &AbortedRun) -> Option<SoFar> {
    let (bytes, elapsed) = track.in_flight.moved()?;
    Some(SoFar {
        bytes,
        messages: run.params.whole_messages(bytes),
        elapsed,
    })
}

fn store_broke(s: &Setup) -> bool {
    s.recorder.as_ref().is_some_and(|r| r.broken().is_some())
}

/// Records a run cut short as aborted, with why and the client's figures so far; whether it
/// was kept (in the store or the spool).
fn record_aborted(
    recorder: &mut Option<Recorder<Run>>,
    run: &AbortedRun,
    reason: &str,
    so_far: Option<SoFar>,
) -> bool {
    let Some(r) = recorder.as_mut() else {
        return false;
    };
    let stored = StoredRun::Aborted {
        run: Box::new(run.clone()),
        reason: Some(reason.to_string()),
        so_far,
    };
    r.record(run.position, stored)
}

/// "stored as campaign 3 (8 runs + 1 aborted in flight, complete) in results.sqlite3".
fn stored_note(
    id: i64,
    runs: u64,
    aborted: u64,
    status: Status,
    db: &crate::store::Location,
) -> String {
    let aborted = if aborted > 0 {
        format!(" + {aborted} aborted in flight")
    } else {
        String::new()
    };
    format!(
        "stored as campaign {id} ({}{aborted}, {}) in {}",
        count_of(runs as usize, "run", "runs"),
        status.as_str(),
        db.display()
    )
}

/// The JSON document, or the summary tables `wirebench report` prints.
fn print_results(
    cfg: &RunConfig,
    s: &Setup,
    records: &[(Point, RunRecord)],
    failure: Option<String>,
    unfound: Option<wirebench_core::record::ratesearch::RateSearchRecord>,
) -> Result<()> {
    if s.lines.streaming() {
        // Each run's lines went out as it finished.
        return Ok(());
    }
    if let Some(doc) = records
        .first()
        .and_then(|(_, r)| s.lines.iperf3_document(r))
    {
        let body = serde_json::to_string_pretty(&doc).context("while encoding the JSON output")?;
        println!("{body}");
    } else if cfg.json {
        let doc = RunDocument::new(
            env!("CARGO_PKG_VERSION"),
            s.link.parameters.clone(),
            records,
            failure,
        );
        let doc = RunDocument {
            rate_search: unfound,
            ..doc
        };
        let mut doc = serde_json::to_value(&doc).context("while encoding the JSON output")?;
        if let Some(r) = &s.link.relay {
            r.annotate(&mut doc);
        }
        s.lines.add_title(&mut doc);
        let body = serde_json::to_string_pretty(&doc).context("while encoding the JSON output")?;
        println!("{body}");
    } else if cfg.repeat > 1 && !records.is_empty() {
        // The same tables `wirebench report` prints, from the same summaries.
        println!();
        let summaries = wirebench_core::record::summarise(records);
        let mut out = std::io::stdout().lock();
        let _ = table::write_summaries(&summaries, &mut out);
    }
    Ok(())
}

/// ", after 12582912 B (12 MiB), 12288 whole messages, in 1.25 s" when the client's figures
/// are known (stop-and-wait: acknowledged).
fn so_far_text(so_far: Option<SoFar>) -> String {
    match so_far {
        Some(s) => format!(
            ", after {}, {} whole messages, in {:.2} s",
            ByteSize(s.bytes),
            s.messages,
            s.elapsed.as_secs_f64()
        ),
        None => String::new(),
    }
}
