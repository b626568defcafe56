//! `wirebench run`: starts the embedded server when no --server is given, runs the plan, and
//! prints each run as it finishes, then the summary tables (text) or one JSON document. Each
//! finished run is committed to the results store before the next starts; SIGINT (Ctrl-C),
//! SIGTERM or SIGHUP marks the campaign aborted and stores the run in flight as an aborted run
//! (its parameters and the client's figures so far); a run that fails (a server that went
//! away) is stored the same way, with its error as the reason.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use wirebench_core::vocab::plan::{self, Mechanism};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::{ByteSize, RateUnit};

use wirebench_core::record::document::RunDocument;
use wirebench_core::record::ratesearch::RateSearchRecord;
use wirebench_core::record::{count_of, AbortedRun, NewCampaign, RunRecord, Status};

use crate::commands::embedded;
use crate::config::StoreTarget;
use crate::engine::inflight::InFlight;
use crate::flows::relay::RunRelay;
use crate::flows::server::ServerEvent;
use crate::output::progress::Progress;
use crate::output::text;
use crate::report::table;
use crate::runner::{self, Campaign, RunConfig, Target};
use crate::store::Store;
use crate::transport::signals::{Ended, Stops};
use wirebench_core::record::campaign::SoFar;

/// Runs the run command: [`Ended::Ran`]`(false)` when a run failed (exit status 1),
/// [`Ended::Stopped`] when a signal stopped it.
pub async fn execute(
    cfg: RunConfig,
    store_target: StoreTarget,
    quiet: bool,
    output: crate::config::RunOutput,
) -> Result<Ended> {
    let output = &output;
    // From here on SIGINT, SIGTERM and SIGHUP are ours to record, not the end of the process.
    let mut stops = Stops::watch();
    // Open the store first: a database that cannot be opened stops us before any traffic.
    let store = match &store_target {
        StoreTarget::Off => None,
        StoreTarget::File(path) => Some(Store::open(path)?),
    };
    // The embedded server's session lines are printed with each run.
    let (tx, rx) = mpsc::unbounded_channel();
    let (server_addr, _embedded) =
        embedded::server_for(&cfg.target, cfg.psk.clone(), Some(tx)).await?;
    let mut events = matches!(cfg.target, Target::Embedded(_)).then_some(rx);
    let mut server_name = embedded::server_name(&cfg.target, server_addr);
    // --impair: the client talks to an in-process relay in front of the server.
    let mut relay = match cfg.impair {
        None => None,
        Some((impairments, seed)) => Some(RunRelay::start(impairments, seed, server_addr).await?),
    };
    if let Some(r) = &relay {
        server_name = format!("{server_name} {}", r.description());
    }
    let server_addr = relay.as_ref().map_or(server_addr, RunRelay::addr);
    let total_runs = runner::planned_runs(&cfg) * cfg.points.len();
    if !cfg.json {
        if cfg.points.len() == 1 {
            println!(
                "{} against {server_name}",
                text::plan_heading(
                    runner::planned_runs(&cfg),
                    cfg.combinations.len(),
                    cfg.repeat,
                    cfg.msg_size,
                    (
                        cfg.total_bytes,
                        cfg.time
                            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
                    )
                )
            );
        } else {
            println!("{} against {server_name}", sweep_heading(&cfg, total_runs));
        }
        if let Some(note) = long_stop_and_wait_note(&cfg) {
            eprintln!("{note}");
        }
        if cfg.warmup > 0 {
            println!(
                "  plus {} of every combination before each message size × total",
                count_of(
                    cfg.warmup as usize,
                    "unmeasured warm-up run",
                    "unmeasured warm-up runs"
                )
            );
        }
    }
    let mut recorder = match store {
        None => None,
        Some(store) => Some(Recorder::begin(store, &cfg, &server_name)?),
    };
    let progress = Progress::new(run_labels(&cfg), quiet);
    // What is in flight, for Ctrl-C: the plan position of the last finished measured run, and
    // whether an (unmeasured, never stored) warm-up is running instead of the next one.
    let finished = AtomicUsize::new(0);
    let warming = AtomicBool::new(false);
    let o = &cfg.options;
    let show_path =
        o.window.is_some() || o.congestion.is_some() || o.nodelay || o.busy_poll || output.verbose;
    // --json-stream's lines, and -J --iperf3-shape's document (iperf3's flags).
    let lines = (output.json_stream || output.iperf3_shape)
        .then(|| super::run_output::Streamer::new(&cfg, total_runs, &server_name, output));
    let stream = lines.as_ref().filter(|_| output.json_stream);
    // With -i, the position whose heading went out before its interval lines.
    let headed = AtomicUsize::new(0);
    // What the run in flight has moved so far, for a run cut short.
    let in_flight_progress = InFlight::new();
    let running = InFlight::scope(Arc::clone(&in_flight_progress), async {
        let mut campaign = Campaign::default();
        // --rate max: the search that found no rate, which stopped the campaign.
        let mut unfound = None;
        let mut records: Vec<(Point, RunRecord)> = Vec::new();
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
                warming.store(true, Ordering::Relaxed);
                let searched = search_rate(&point_cfg, &plan, server_addr, &progress).await;
                if let Some(r) = relay.as_mut() {
                    r.skip();
                }
                let record = match searched {
                    Ok(record) => record,
                    Err(e) => {
                        campaign.failure = Some(format!("{e:#}"));
                        break;
                    }
                };
                let Some(rate) = record.rate_bps else {
                    campaign.failure = Some(format!(
                        "rate search for {} B messages: {}",
                        point.msg_size,
                        crate::output::ratesearch::result_line(&record)
                    ));
                    unfound = Some(record);
                    break;
                };
                warming.store(false, Ordering::Relaxed);
                point_cfg.rate = Some(wirebench_core::vocab::units::BitRate(rate));
                found = Some(record);
            }
            if cfg.warmup > 0 {
                progress.note(&format!(
                    "warming up: {} B messages, {}",
                    point.msg_size,
                    wirebench_core::record::total_label(point.total_bytes)
                ));
                let warmup_cfg = RunConfig {
                    repeat: cfg.warmup,
                    // Warm-up runs are not measured: no probes beside them.
                    latency_probe: None,
                    ..point_cfg.clone()
                };
                warming.store(true, Ordering::Relaxed);
                let warm =
                    runner::run_campaign(&warmup_cfg, server_addr, |_, _, _| {}, |_, _| {}).await;
                if let Some(failure) = warm.failure {
                    // `warming` stays set: the failed run was a warm-up, never stored.
                    campaign.failure = Some(format!("warm-up: {failure}"));
                    break;
                }
                warming.store(false, Ordering::Relaxed);
                progress.note_next(campaign.runs.len());
                if let Some(r) = relay.as_mut() {
                    r.skip();
                }
            }
            let offset = campaign.runs.len();
            let interval_verb = if cfg.reverse { "received" } else { "sent" };
            let part = runner::run_campaign(
                &point_cfg,
                server_addr,
                |position, _, finished_run| {
                    let position = offset + position;
                    let mut record = finished_run.record();
                    // What the relay (--impair) did during this run, stored and printed with it.
                    record.relay = relay.as_mut().map(RunRelay::finish_run);
                    record.rate_search.clone_from(&found);
                    finished.store(position, Ordering::Relaxed);
                    in_flight_progress.clear();
                    // Stored before it is printed: a run on the screen is a run in the database.
                    if let Some(r) = recorder.as_mut() {
                        r.record(position, finished_run.point(), &record);
                    }
                    let server_line = events
                        .as_mut()
                        .and_then(|rx| embedded_line(rx, record.session, cfg.rate_unit));
                    progress.finished(position, || {
                        if !cfg.json {
                            let mut out = std::io::stdout().lock();
                            let _ = write!(
                                out,
                                "{}",
                                text::run_block(
                                    position,
                                    total_runs,
                                    &record,
                                    server_line.as_deref(),
                                    text::BlockLayout {
                                        headed: headed.load(Ordering::Relaxed) == position,
                                        show_path,
                                        rate_unit: cfg.rate_unit,
                                    },
                                )
                            );
                            if let Some(note) = record
                                .rate_search
                                .as_ref()
                                .and_then(crate::output::ratesearch::found_note)
                            {
                                let _ = writeln!(out, "{note}");
                            }
                            if let Some(counts) = &record.relay {
                                let _ =
                                    writeln!(out, "  {}", crate::output::relay::run_line(counts));
                            }
                            if let Some(latency) = &record.loaded_latency {
                                let _ = write!(out, "{}", crate::output::latency::block(latency));
                            }
                            let _ = out.flush();
                        }
                    });
                    if let Some(s) = stream {
                        s.end(position, &record);
                    }
                    records.push((finished_run.point(), record));
                },
                |position, sample| {
                    if let Some(s) = stream {
                        s.interval(offset + position, sample);
                    }
                    if !cfg.json {
                        let position = offset + position;
                        progress.print_above(|| {
                            // A closed stdout (| head) is not worth a panic.
                            let mut out = std::io::stdout().lock();
                            // The run's heading goes first, so its intervals read as its own.
                            if headed.swap(position, Ordering::Relaxed) != position {
                                if let Some(h) = heading_in_flight(&cfg, position, total_runs) {
                                    let _ = writeln!(out, "{h}");
                                }
                            }
                            let mut line =
                                text::interval_line_in(interval_verb, sample, cfg.rate_unit);
                            // -O: an interval that starts before the mark, as iperf3 marks it.
                            let middle = u128::from(text::midpoint_ns(sample));
                            if cfg.omit.is_some_and(|o| middle < o.as_nanos()) {
                                line.push_str(" (omitted)");
                            }
                            let _ = writeln!(out, "  {line}");
                        });
                    }
                },
            )
            .await;
            campaign.runs.extend(part.runs);
            if part.failure.is_some() {
                campaign.failure = part.failure;
                break;
            }
        }
        (campaign, records, unfound)
    });
    let stopped = tokio::select! {
        done = running => Ok(done),
        signal = stops.next() => Err(signal),
    };
    let in_flight = || {
        if warming.load(Ordering::Relaxed) {
            None
        } else {
            runner::run_at(&cfg, finished.load(Ordering::Relaxed) + 1)
        }
    };
    let (campaign, records, unfound): (Campaign, Vec<(Point, RunRecord)>, _) = match stopped {
        Ok(done) => done,
        Err(signal) => {
            // Storing takes a moment; a second signal ends the process at once.
            stops.second_ends_process();
            progress.finish();
            let in_flight = in_flight();
            let so_far = in_flight
                .as_ref()
                .and_then(|run| in_flight_progress.so_far(run.params.msg_size));
            let reason = signal.reason();
            let stored = recorder.as_ref().map_or(0, |r| r.stored);
            let mut aborted_stored = false;
            if let Some(mut r) = recorder.take() {
                if let Some(run) = &in_flight {
                    aborted_stored = r.record_aborted(run, &reason, so_far);
                }
                r.finish(Status::Aborted, Some(&reason), cfg.json);
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
            return Ok(Ended::Stopped(signal));
        }
    };
    progress.finish();
    if let Some(failure) = &campaign.failure {
        // The run that failed (a server that went away, a refusal) is kept as aborted, with
        // its error and what the client had done.
        if let Some(run) = in_flight() {
            let so_far = in_flight_progress.so_far(run.params.msg_size);
            let stored = recorder
                .as_mut()
                .is_some_and(|r| r.record_aborted(&run, failure, so_far));
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
    let store_failed = recorder.as_ref().is_some_and(|r| r.error.is_some());
    if let Some(r) = recorder.take() {
        let status = if campaign.failure.is_some() {
            Status::Failed
        } else {
            Status::Complete
        };
        r.finish(status, campaign.failure.as_deref(), cfg.json);
    }
    if let (Some(s), Some(failure)) = (stream, &campaign.failure) {
        s.error(failure);
    }
    let iperf3_doc = lines
        .as_ref()
        .filter(|_| !output.json_stream)
        .and_then(|l| records.first().map(|(_, r)| l.iperf3_document(r)));
    if let Some(doc) = iperf3_doc {
        let body = serde_json::to_string_pretty(&doc).context("while encoding the JSON output")?;
        println!("{body}");
    } else if cfg.json && !output.json_stream {
        let doc = RunDocument::new(
            env!("CARGO_PKG_VERSION"),
            runner::parameters(&cfg, &server_name),
            &records,
            campaign.failure.clone(),
        );
        let doc = RunDocument {
            rate_search: unfound,
            ..doc
        };
        let mut doc = serde_json::to_value(&doc).context("while encoding the JSON output")?;
        if let Some(r) = &relay {
            r.annotate(&mut doc);
        }
        if let (Some(title), serde_json::Value::Object(m)) = (&output.title, &mut doc) {
            m.insert("title".into(), title.clone().into());
        }
        let body = serde_json::to_string_pretty(&doc).context("while encoding the JSON output")?;
        println!("{body}");
    } else if cfg.repeat > 1 && !records.is_empty() {
        // The same tables `wirebench report` prints, from the same summaries.
        println!();
        let summaries = wirebench_core::record::summarise(&records);
        let mut out = std::io::stdout().lock();
        let _ = table::write_summaries(&summaries, &mut out);
    }
    if let Some(failure) = &campaign.failure {
        eprintln!("error: {failure}");
        return Ok(Ended::Ran(false));
    }
    Ok(Ended::Ran(!store_failed))
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

/// The values of `items` in first-seen order, without repeats.
fn distinct<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The plan line of a sweep: how many runs, which sizes and totals.
fn sweep_heading(cfg: &RunConfig, total_runs: usize) -> String {
    let sizes = distinct(cfg.points.iter().map(|p| p.msg_size));
    let totals = distinct(cfg.points.iter().map(|p| p.total_bytes));
    format!(
        "wirebench: {}: {} × {} × {} × {}; sizes {} B; totals {}",
        count_of(total_runs, "run", "runs"),
        count_of(sizes.len(), "message size", "message sizes"),
        count_of(totals.len(), "total", "totals"),
        count_of(cfg.combinations.len(), "combination", "combinations"),
        count_of(cfg.repeat as usize, "repeat", "repeats"),
        sizes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        totals
            .iter()
            .map(|t| wirebench_core::record::total_label(*t))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Stop-and-wait sends one message per round trip, so its time is the message count times the
/// round-trip time. When the plan's stop-and-wait messages would take over an hour at a 1 ms
/// round trip (a LAN), say so before starting.
fn long_stop_and_wait_note(cfg: &RunConfig) -> Option<String> {
    if cfg.time.is_some() {
        // A timed run lasts its time, whatever the round trip.
        return None;
    }
    let saw = cfg
        .combinations
        .iter()
        .filter(|c| c.mechanism == Mechanism::StopAndWait)
        .count() as u64;
    let per_repeat: u64 = cfg
        .points
        .iter()
        .map(|p| plan::message_count(p.total_bytes, p.msg_size))
        .sum();
    let round_trips = saw
        .saturating_mul(u64::from(cfg.repeat + cfg.warmup))
        .saturating_mul(per_repeat);
    let hours = round_trips as f64 * 1e-3 / 3600.0;
    (hours >= 1.0).then(|| {
        format!(
            "note: this plan's stop-and-wait runs make {round_trips} round trips: about {hours:.1} h \
             at 1 ms per round trip (a LAN), {:.1} h at 100 µs (loopback); fewer bytes (-n) or larger \
             messages (-l) shorten it",
            hours / 10.0
        )
    })
}

/// What the progress bar says for each run of the plan, in plan order.
fn run_labels(cfg: &RunConfig) -> Vec<String> {
    let mut labels = Vec::new();
    for point in &cfg.points {
        for c in &cfg.combinations {
            for r in 0..cfg.repeat {
                let mut label = format!("{} {}", c.protocol, c.mechanism);
                if cfg.points.len() > 1 {
                    label.push_str(&format!(
                        ", {} B × {}",
                        point.msg_size,
                        wirebench_core::record::total_label(point.total_bytes)
                    ));
                }
                label.push_str(&format!(", repeat {}/{}", r + 1, cfg.repeat));
                labels.push(label);
            }
        }
    }
    labels
}

/// The heading of the run at 1-based `position`, before it has any figure (for its interval
/// lines).
fn heading_in_flight(cfg: &RunConfig, position: usize, of: usize) -> Option<String> {
    let run = runner::run_at(cfg, position)?;
    Some(format!(
        "[{position}/{of}] {} {}, run {}",
        run.params.protocol,
        run.params.mechanism,
        run.repeat_index + 1
    ))
}

/// Seconds since the Unix epoch, for the store's timestamps (0 if the clock is before 1970).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Writes a campaign into the store as it runs. A store failure is reported once and ends
/// storing (the measurements go on and are still printed); the exit status is then 1.
struct Recorder {
    store: Store,
    campaign: i64,
    stored: u64,
    aborted: u64,
    error: Option<String>,
}

impl Recorder {
    fn begin(mut store: Store, cfg: &RunConfig, server_name: &str) -> Result<Recorder> {
        let campaign = store
            .begin_campaign(&NewCampaign {
                started_at_unix_s: unix_now(),
                parameters: runner::parameters(cfg, server_name),
                planned_runs: (runner::planned_runs(cfg) * cfg.points.len()) as u64,
                msg_sizes: distinct(cfg.points.iter().map(|p| p.msg_size)),
                totals: distinct(cfg.points.iter().map(|p| p.total_bytes)),
                environment: crate::transport::environment::detect(),
            })
            .with_context(|| format!("cannot store in {}", store.path().display()))?;
        // Who writes it, so a later command can tell if this process died without a word.
        store
            .claim_campaign(campaign, &crate::store::liveness::this_process())
            .with_context(|| format!("cannot store in {}", store.path().display()))?;
        Ok(Recorder {
            store,
            campaign,
            stored: 0,
            aborted: 0,
            error: None,
        })
    }

    fn record(&mut self, position: usize, point: Point, record: &RunRecord) {
        if self.error.is_some() {
            return;
        }
        match self
            .store
            .add_run(self.campaign, position as u64, point, record)
        {
            Ok(()) => self.stored += 1,
            Err(e) => {
                let msg = format!(
                    "cannot store run {position} in {}: {e:#}; later runs are not stored",
                    self.store.path().display()
                );
                eprintln!("warning: {msg}");
                self.error = Some(msg);
            }
        }
    }

    /// Stores a run cut short (a signal, a failure) as aborted, with why and the client's
    /// figures so far; whether it was stored.
    fn record_aborted(&mut self, run: &AbortedRun, reason: &str, so_far: Option<SoFar>) -> bool {
        if self.error.is_some() {
            return false;
        }
        match self
            .store
            .add_stopped_run(self.campaign, run, reason, so_far)
        {
            Ok(()) => {
                self.aborted += 1;
                true
            }
            Err(e) => {
                eprintln!(
                    "warning: cannot store the aborted run {} in {}: {e:#}",
                    run.position,
                    self.store.path().display()
                );
                false
            }
        }
    }

    fn finish(mut self, status: Status, error: Option<&str>, json_output: bool) {
        let error = error.or(self.error.as_deref());
        match self
            .store
            .finish_campaign(self.campaign, status, unix_now(), error)
        {
            Ok(()) => {
                let aborted = if self.aborted > 0 {
                    format!(" + {} aborted in flight", self.aborted)
                } else {
                    String::new()
                };
                let note = format!(
                    "stored as campaign {} ({}{aborted}, {}) in {}",
                    self.campaign,
                    count_of(self.stored as usize, "run", "runs"),
                    status.as_str(),
                    self.store.path().display()
                );
                // Not println!: after SIGHUP the terminal may be gone, and a failed write must
                // not turn a stored campaign into a panic.
                if json_output {
                    let _ = writeln!(std::io::stderr(), "{note}");
                } else {
                    let _ = writeln!(std::io::stdout(), "{note}");
                }
            }
            Err(e) => eprintln!(
                "warning: cannot mark campaign {} as {}: {e:#}",
                self.campaign,
                status.as_str()
            ),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn cfg(args: &[&str]) -> RunConfig {
        let argv = ["wirebench", "run"].iter().chain(args).copied();
        match Cli::parse_from(argv).command {
            Command::Run(a) => RunConfig::from_args(&a).unwrap(),
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn the_run_in_flight_is_found_in_plan_order() {
        let c = cfg(&[
            "--proto", "tcp,udp", "--mode", "stream", "-l", "100,200", "-n", "1000", "--repeat",
            "2", "--rate", "1G",
        ]);
        // Plan: 100 B: tcp ×2, udp ×2; then 200 B: tcp ×2, udp ×2.
        let names: Vec<String> = (1..=8)
            .map(|i| {
                let r = runner::run_at(&c, i).expect("in the plan");
                assert_eq!(r.position, i as u64);
                format!(
                    "{} {} {}",
                    r.params.protocol, r.params.msg_size, r.repeat_index
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "tcp 100 0",
                "tcp 100 1",
                "udp 100 0",
                "udp 100 1",
                "tcp 200 0",
                "tcp 200 1",
                "udp 200 0",
                "udp 200 1"
            ]
        );
        let r = runner::run_at(&c, 7).unwrap();
        assert_eq!(
            (r.params.total_bytes, r.params.rate_bps),
            (1000, Some(1_000_000_000))
        );
        assert_eq!(runner::run_at(&c, 0), None);
        assert_eq!(
            runner::run_at(&c, 9),
            None,
            "past the end: nothing in flight"
        );
    }

    #[test]
    fn long_stop_and_wait_plans_are_announced() {
        // 10 GiB in 1 KiB messages: 10,485,760 round trips, about 2.9 h at 1 ms.
        let note = long_stop_and_wait_note(&cfg(&["--mode", "saw", "-l", "1KiB", "-n", "10GiB"]));
        let note = note.expect("announced");
        assert!(note.contains("10485760 round trips"), "{note}");
        assert!(note.contains("2.9 h"), "{note}");
        // Streaming, or a short stop-and-wait plan, says nothing.
        assert_eq!(
            long_stop_and_wait_note(&cfg(&["--mode", "stream", "-l", "1KiB", "-n", "10GiB"])),
            None
        );
        assert_eq!(
            long_stop_and_wait_note(&cfg(&["--mode", "saw", "-l", "1KiB", "-n", "100MiB"])),
            None
        );
    }
}
