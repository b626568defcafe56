//! `run`'s second phase: the plan, one message size × total (a point) at a time — its rate
//! search (--rate max), its warm-ups, then its measured runs, each recorded in the store
//! before it is printed. What is in flight is tracked for a run cut short; a store that
//! breaks (a full disk) ends the loop through `broken`.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Result;
use tokio::sync::{mpsc, Notify};
use wirebench_core::record::lifecycle::StoredRun;
use wirebench_core::record::ratesearch::RateSearchRecord;
use wirebench_core::record::RunRecord;
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::RateUnit;

use crate::commands::recording::Recorder;
use crate::engine::inflight::InFlight;
use crate::flows::relay::RunRelay;
use crate::flows::server::ServerEvent;
use crate::output::progress::Progress;
use crate::output::text;
use crate::runner::{self, FinishedRun, RunConfig};
use crate::store::run::Run;

use super::plan_text::heading_in_flight;
use super::setup::Setup;

/// What is in flight, for a run cut short.
pub(super) struct Track {
    /// The plan position of the last finished measured run.
    pub finished: AtomicUsize,
    /// Whether an (unmeasured, never stored) warm-up or rate-search trial runs instead of the
    /// next measured run.
    pub warming: AtomicBool,
    /// With -i, the position whose heading went out before its interval lines.
    headed: AtomicUsize,
    /// What the run in flight has moved so far.
    pub in_flight: Arc<InFlight>,
}

impl Track {
    /// Nothing run yet.
    pub fn new() -> Track {
        Track {
            finished: AtomicUsize::new(0),
            warming: AtomicBool::new(false),
            headed: AtomicUsize::new(0),
            in_flight: InFlight::new(),
        }
    }
}

/// How the plan's loop ended by itself.
pub(super) struct Done {
    /// The error that stopped the campaign early, if any.
    pub failure: Option<String>,
    /// --rate max: the search that found no rate, which stopped the campaign.
    pub unfound: Option<RateSearchRecord>,
}

/// Runs the plan point by point, pushing each finished run to `records` (after recording it
/// in the store); wakes `broken` when the store broke and the campaign must stop.
pub(super) async fn run_points(
    cfg: &RunConfig,
    s: &mut Setup,
    track: &Track,
    broken: &Notify,
    records: &mut Vec<(Point, RunRecord)>,
) -> Done {
    InFlight::scope(Arc::clone(&track.in_flight), async {
        let mut done_runs = 0;
        for &point in &cfg.points {
            let mut point_cfg = RunConfig {
                msg_size: point.msg_size,
                total_bytes: point.total_bytes,
                points: vec![point],
                ..cfg.clone()
            };
            // --rate max: each message size × total searches its own rate first; its runs
            // (every combination and repeat) then run at it and carry the search.
            let mut found = None;
            if let Some(plan) = cfg.search {
                // Trials, like warm-ups, are never stored as runs.
                track.warming.store(true, Ordering::Relaxed);
                let addr = s.link.server_addr;
                let searched = search_rate(&point_cfg, &plan, addr, &s.progress).await;
                if let Some(r) = s.link.relay.as_mut() {
                    r.skip();
                }
                let record = match searched {
                    Ok(record) => record,
                    Err(e) => return failed(format!("{e:#}"), None),
                };
                let Some(rate) = record.rate_bps else {
                    let why = format!(
                        "rate search for {} B messages: {}",
                        point.msg_size,
                        crate::output::ratesearch::result_line(&record)
                    );
                    return failed(why, Some(record));
                };
                track.warming.store(false, Ordering::Relaxed);
                point_cfg.rate = Some(wirebench_core::vocab::units::BitRate(rate));
                found = Some(record);
            }
            if cfg.warmup > 0 {
                if let Err(why) = warm_up(&point_cfg, s, track, done_runs).await {
                    return failed(why, None);
                }
            }
            let offset = done_runs;
            let part = measure(cfg, &point_cfg, s, track, broken, &found, offset, records).await;
            done_runs += part.runs.len();
            if part.failure.is_some() {
                return failed(part.failure.unwrap_or_default(), None);
            }
        }
        Done {
            failure: None,
            unfound: None,
        }
    })
    .await
}

fn failed(why: String, unfound: Option<RateSearchRecord>) -> Done {
    Done {
        failure: Some(why),
        unfound,
    }
}

/// The unmeasured warm-up runs before a point; the error when one failed (`warming` then
/// stays set: the failed run was a warm-up, never stored).
async fn warm_up(
    point_cfg: &RunConfig,
    s: &mut Setup,
    track: &Track,
    done_runs: usize,
) -> std::result::Result<(), String> {
    s.progress.note(&format!(
        "warming up: {} B messages, {}",
        point_cfg.msg_size,
        wirebench_core::record::total_label(point_cfg.total_bytes)
    ));
    let warmup_cfg = RunConfig {
        repeat: point_cfg.warmup,
        // Warm-up runs are not measured: no probes beside them.
        latency_probe: None,
        ..point_cfg.clone()
    };
    track.warming.store(true, Ordering::Relaxed);
    let addr = s.link.server_addr;
    let warm = runner::run_campaign(&warmup_cfg, addr, |_, _, _| {}, |_, _| {}).await;
    if let Some(failure) = warm.failure {
        return Err(format!("warm-up: {failure}"));
    }
    track.warming.store(false, Ordering::Relaxed);
    s.progress.note_next(done_runs);
    if let Some(r) = s.link.relay.as_mut() {
        r.skip();
    }
    Ok(())
}

/// The measured runs of one point: each recorded in the store, then printed, as it finishes.
#[allow(clippy::too_many_arguments)]
async fn measure(
    cfg: &RunConfig,
    point_cfg: &RunConfig,
    s: &mut Setup,
    track: &Track,
    broken: &Notify,
    found: &Option<RateSearchRecord>,
    offset: usize,
    records: &mut Vec<(Point, RunRecord)>,
) -> runner::Campaign {
    let interval_verb = if cfg.reverse { "received" } else { "sent" };
    let (link, recorder, progress, lines) = (&mut s.link, &mut s.recorder, &s.progress, &s.lines);
    let total_runs = link.total_runs;
    runner::run_campaign(
        point_cfg,
        link.server_addr,
        |position, _, finished_run| {
            let position = offset + position;
            let mut record = finished_run.record();
            // What the relay (--impair) did during this run, stored and printed with it.
            record.relay = link.relay.as_mut().map(RunRelay::finish_run);
            record.rate_search.clone_from(found);
            track.finished.store(position, Ordering::Relaxed);
            track.in_flight.clear();
            // Stored before it is printed: a run on the screen is a run in the database.
            store_run(recorder, broken, position, finished_run, &record);
            let server_line = link
                .events
                .as_mut()
                .and_then(|rx| embedded_line(rx, record.session, cfg.rate_unit));
            let layout = text::BlockLayout {
                headed: track.headed.load(Ordering::Relaxed) == position,
                show_path: show_path(cfg) || lines.verbose(),
                rate_unit: cfg.rate_unit,
            };
            progress.finished(position, || {
                if !cfg.json {
                    print_run(
                        position,
                        total_runs,
                        &record,
                        server_line.as_deref(),
                        layout,
                    );
                }
            });
            lines.end(position, &record);
            records.push((finished_run.point(), record));
        },
        |position, sample| {
            lines.interval(offset + position, sample);
            if !cfg.json {
                let position = offset + position;
                progress.print_above(|| {
                    // A closed stdout (| head) is not worth a panic.
                    let mut out = std::io::stdout().lock();
                    // The run's heading goes first, so its intervals read as its own.
                    if track.headed.swap(position, Ordering::Relaxed) != position {
                        if let Some(h) = heading_in_flight(cfg, position, total_runs) {
                            let _ = writeln!(out, "{h}");
                        }
                    }
                    let mut line = text::interval_line_in(interval_verb, sample, cfg.rate_unit);
                    // -O: an interval that starts before the mark, as iperf3 marks it.
                    if text::omitted(sample, cfg.omit) {
                        line.push_str(" (omitted)");
                    }
                    let _ = writeln!(out, "  {line}");
                });
            }
        },
    )
    .await
}

/// Records a finished run; wakes `broken` when the store broke (the campaign must stop).
fn store_run(
    recorder: &mut Option<Recorder<Run>>,
    broken: &Notify,
    position: usize,
    finished_run: &FinishedRun,
    record: &RunRecord,
) {
    let Some(r) = recorder.as_mut() else { return };
    let stored = StoredRun::Finished {
        point: finished_run.point(),
        run: Box::new(record.clone()),
    };
    r.record(position as u64, stored);
    if r.broken().is_some() {
        broken.notify_one();
    }
}

/// Whether the run blocks show the path's settings (window, congestion control, …).
fn show_path(cfg: &RunConfig) -> bool {
    let o = &cfg.options;
    o.window.is_some() || o.congestion.is_some() || o.nodelay || o.busy_poll
}

/// One finished run's block, and what came with it (the rate found, the relay's counts, the
/// latency probes).
fn print_run(
    position: usize,
    total_runs: usize,
    record: &RunRecord,
    server_line: Option<&str>,
    layout: text::BlockLayout,
) {
    let mut out = std::io::stdout().lock();
    let block = text::run_block(position, total_runs, record, server_line, layout);
    let _ = write!(out, "{block}");
    if let Some(note) = record
        .rate_search
        .as_ref()
        .and_then(crate::output::ratesearch::found_note)
    {
        let _ = writeln!(out, "{note}");
    }
    if let Some(counts) = &record.relay {
        let _ = writeln!(out, "  {}", crate::output::relay::run_line(counts));
    }
    if let Some(latency) = &record.loaded_latency {
        let _ = write!(out, "{}", crate::output::latency::block(latency));
    }
    let _ = out.flush();
}

/// `--rate max`: runs the search of one message size × total (`cfg`'s) against `server`,
/// printing the plan, each trial and the result (stdout above the progress bar, or stderr
/// beside --json).
async fn search_rate(
    cfg: &RunConfig,
    plan: &runner::ratesearch::SearchPlan,
    server: SocketAddr,
    progress: &Progress,
) -> Result<RateSearchRecord> {
    let say = |line: &str| {
        progress.print_above(|| {
            if cfg.json {
                let _ = writeln!(std::io::stderr(), "{line}");
            } else {
                let _ = writeln!(std::io::stdout(), "{line}");
            }
        });
    };
    let c = plan.config;
    say(&crate::output::ratesearch::heading(
        cfg.msg_size,
        c.low_bps,
        c.high_bps,
        c.resolution * 100.0,
        c.max_loss * 100.0,
        plan.trial,
        plan.trial_grace,
    ));
    let record = runner::ratesearch::search(cfg, plan, server, |i, t| {
        say(&crate::output::ratesearch::trial_line(i, t));
    })
    .await?;
    say(&crate::output::ratesearch::result_line(&record));
    Ok(record)
}

/// The embedded server's own summary line for `session` (it is sent before the client gets
/// its report, so it is already queued). Notices on the way go to stderr.
fn embedded_line(
    rx: &mut mpsc::UnboundedReceiver<ServerEvent>,
    session: u32,
    unit: Option<RateUnit>,
) -> Option<String> {
    while let Ok(event) = rx.try_recv() {
        match event {
            ServerEvent::Session(s) if s.session == session => {
                return Some(text::session_line_in(
                    s.session,
                    &s.peer.to_string(),
                    &s.params,
                    &s.report,
                    unit,
                ));
            }
            ServerEvent::Session(_) => {}
            ServerEvent::Notice(n) => eprintln!("server notice: {}: {}", n.peer, n.message),
        }
    }
    None
}
