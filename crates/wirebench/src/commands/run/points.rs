//! `run`'s second phase: the plan, as the runner runs it — what the runner says on its channel
//! heard beside it: each point's rate search (--rate max) and warm-ups said, its measured runs
//! each recorded in the store before it is printed. What is in flight is tracked for a run cut
//! short; a store that breaks (a full disk) ends the loop through `broken`; what the runner had
//! said before a stop is heard all the same (`hear_the_rest`).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio::sync::Notify;
use wirebench_core::record::lifecycle::StoredRun;
use wirebench_core::record::ratesearch::RateSearchRecord;
use wirebench_core::record::RunRecord;
use wirebench_core::vocab::counters::IntervalSample;
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::RateUnit;

use crate::commands::recorder::Recorder;
use crate::engine::inflight::InFlight;
use crate::flows::relay::RunRelay;
use crate::flows::server::ServerEvent;
use crate::output::{run_block, session};
use crate::runner::{self, Listener, PlannedRun, RunConfig, RunEvent};
use crate::store::run::Run;

use super::plan_text::{default_size_note, heading_in_flight};
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

/// Runs the plan, hearing what the runner says as it goes (`heard`: the runner's channel,
/// kept by the caller so what it said before a stop is still heard): each finished run is
/// recorded in the store, printed and pushed to `records`; wakes `broken` when the store broke
/// and the campaign must stop.
pub(super) async fn run_points(
    cfg: &RunConfig,
    s: &mut Setup,
    track: &Track,
    broken: &Notify,
    records: &mut Vec<(Point, RunRecord)>,
    (listener, heard): (Listener, &mut UnboundedReceiver<RunEvent>),
) -> Done {
    let server = s.link.server_addr;
    let mut measuring = Measuring {
        cfg,
        s,
        track,
        broken,
        records,
    };
    let running = InFlight::scope(Arc::clone(&track.in_flight), async move {
        // The channel closes when the plan ends, which ends the hearing below.
        runner::run_plan(cfg, server, &listener).await
    });
    let hearing = async {
        while let Some(event) = heard.recv().await {
            measuring.hear(event);
        }
    };
    let (campaign, ()) = tokio::join!(running, hearing);
    // --rate max: a search that found no rate stops the campaign with its result as the why.
    let unfound_why = campaign.unfound.as_ref().map(|record| {
        format!(
            "rate search for {} B messages: {}",
            record.msg_size,
            crate::output::ratesearch::result_line(record)
        )
    });
    Done {
        failure: campaign.failure.or(unfound_why),
        unfound: campaign.unfound,
    }
}

/// What the runner had said and [`run_points`] had not heard when a signal or a broken store
/// stopped it: heard now, so a run that finished is recorded and printed before the end.
pub(super) fn hear_the_rest(
    cfg: &RunConfig,
    s: &mut Setup,
    track: &Track,
    broken: &Notify,
    records: &mut Vec<(Point, RunRecord)>,
    heard: &mut UnboundedReceiver<RunEvent>,
) {
    let mut measuring = Measuring {
        cfg,
        s,
        track,
        broken,
        records,
    };
    while let Ok(event) = heard.try_recv() {
        measuring.hear(event);
    }
}

/// What `run` does as the plan runs: the rate search's and the warm-ups' lines, each measured
/// run recorded in the store, then printed, as it finishes.
struct Measuring<'a> {
    cfg: &'a RunConfig,
    s: &'a mut Setup,
    track: &'a Track,
    broken: &'a Notify,
    records: &'a mut Vec<(Point, RunRecord)>,
}

impl Measuring<'_> {
    /// One thing the runner said.
    fn hear(&mut self, event: RunEvent) {
        match event {
            RunEvent::Unmeasured(on) => self.track.warming.store(on, Ordering::Relaxed),
            RunEvent::SearchStarts(point) => self.search_starts(point),
            RunEvent::Trial(n, trial) => {
                self.say(&crate::output::ratesearch::trial_line(n, &trial));
            }
            RunEvent::SearchEnds(found) => {
                if let Some(record) = &found {
                    self.say(&crate::output::ratesearch::result_line(record));
                }
                self.skip_relay();
            }
            RunEvent::WarmUps(point) => self.s.progress.note(&format!(
                "warming up: {} B messages, {}",
                point.msg_size,
                wirebench_core::record::total_label(point.total_bytes)
            )),
            RunEvent::WarmedUp(done) => {
                self.s.progress.note_next(done);
                self.skip_relay();
            }
            RunEvent::Interval(run, sample) => self.interval(&run, &sample),
            RunEvent::Finished(run, record) => self.finished(&run, *record),
        }
    }

    /// A line of the rate search: stdout above the progress bar, or stderr beside --json.
    fn say(&self, line: &str) {
        self.s.progress.print_above(|| {
            if self.cfg.json {
                let _ = writeln!(std::io::stderr(), "{line}");
            } else {
                let _ = writeln!(std::io::stdout(), "{line}");
            }
        });
    }

    /// What the relay (--impair) counted during unmeasured work is not a run's.
    fn skip_relay(&mut self) {
        if let Some(r) = self.s.link.relay.as_mut() {
            r.skip();
        }
    }

    /// `--rate max`: the heading of the search of `point`.
    fn search_starts(&mut self, point: Point) {
        let Some(plan) = self.cfg.search.as_ref() else {
            return;
        };
        let c = plan.config;
        self.say(&crate::output::ratesearch::heading(
            point.msg_size,
            c.low_bps,
            c.high_bps,
            c.resolution * 100.0,
            c.max_loss * 100.0,
            plan.trial,
            plan.trial_grace,
        ));
    }

    fn interval(&mut self, run: &PlannedRun, sample: &IntervalSample) {
        let (cfg, track) = (self.cfg, self.track);
        self.s.lines.interval(run, sample);
        if cfg.json {
            return;
        }
        let total_runs = self.s.link.total_runs;
        let verb = if cfg.reverse { "received" } else { "sent" };
        self.s.progress.print_above(|| {
            // A closed stdout (| head) is not worth a panic.
            let mut out = std::io::stdout().lock();
            // The run's heading goes first, so its intervals read as its own.
            if track.headed.swap(run.position, Ordering::Relaxed) != run.position {
                let _ = writeln!(out, "{}", heading_in_flight(run, total_runs));
            }
            let mut line = session::interval_line_in(verb, sample, cfg.rate_unit);
            // -O: an interval that starts before the mark, as iperf3 marks it.
            if run_block::omitted(sample, cfg.omit) {
                line.push_str(" (omitted)");
            }
            let _ = writeln!(out, "  {line}");
        });
    }

    fn finished(&mut self, run: &PlannedRun, mut record: RunRecord) {
        let (cfg, track, position) = (self.cfg, self.track, run.position);
        let link = &mut self.s.link;
        // What the relay (--impair) did during this run, stored and printed with it.
        record.relay = link.relay.as_mut().map(RunRelay::finish_run);
        track.finished.store(position, Ordering::Relaxed);
        // Stored before it is printed: a run on the screen is a run in the database.
        store_run(&mut self.s.recorder, self.broken, run, &record);
        let server_line = link
            .events
            .as_mut()
            .and_then(|rx| embedded_line(rx, record.session, cfg.rate_unit));
        let layout = run_block::BlockLayout {
            headed: track.headed.load(Ordering::Relaxed) == position,
            show_path: show_path(cfg) || self.s.lines.verbose(),
            rate_unit: cfg.rate_unit,
        };
        let total_runs = link.total_runs;
        self.s.progress.finished(position, || {
            if !cfg.json {
                print_run(
                    position,
                    total_runs,
                    &record,
                    server_line.as_deref(),
                    layout,
                );
                // Under the first figure it explains (a run that never ran has nothing to say).
                if let Some(note) = default_size_note(cfg).filter(|_| position == 1) {
                    eprintln!("{note}");
                }
            }
        });
        self.s.lines.end(run, &record);
        self.records.push((run.point, record));
    }
}

/// Records a finished run; wakes `broken` when the store broke (the campaign must stop).
fn store_run(
    recorder: &mut Option<Recorder<Run>>,
    broken: &Notify,
    run: &PlannedRun,
    record: &RunRecord,
) {
    let Some(r) = recorder.as_mut() else { return };
    let stored = StoredRun::Finished {
        point: run.point,
        run: Box::new(record.clone()),
    };
    r.record(run.position as u64, stored);
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
    layout: run_block::BlockLayout,
) {
    let mut out = std::io::stdout().lock();
    let block = run_block::run_block(position, total_runs, record, server_line, layout);
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
                return Some(session::session_line_in(
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
