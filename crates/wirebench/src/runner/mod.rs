//! Executes a run plan ([`plan::Plan`], built once by `config`): its runs in one loop, one
//! session at a time, a point's `--rate max` search first. What happens is said on the caller's
//! channel ([`RunEvent`]s, in order: a finished run's record before the next run starts), so
//! the caller never runs inside the runner's loop and nothing finished is lost if a later run
//! fails: the caller reads the channel to its end.

mod finished;
pub mod plan;
pub mod ratesearch;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use wirebench_core::machine::impair::Impairments;
use wirebench_core::record::ratesearch::{RateSearchRecord, TrialEntry};
use wirebench_core::record::{Parameters, RunRecord};
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::counters::{Cumulative, IntervalSample, IntervalSeries};
use wirebench_core::vocab::plan::{Combination, Mechanism, Protocol};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::{BitRate, RateUnit};
use wirebench_core::wire::proto::{DataPathOptions, SessionParams};

use crate::engine::interval::Progress;
use crate::flows::client::{SessionOutcome, SessionRequest};
use crate::flows::parallel::{self, RunFlows, RunOutcome};

pub use finished::FinishedRun;
pub use plan::{Plan, PlannedRun, SessionPlan};

/// Where `run` sends its traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A server started in-process on this loopback address (port chosen by the OS).
    Embedded(IpAddr),
    /// A server somewhere else, as the user named it.
    Remote {
        /// What the user typed (for messages).
        name: String,
        /// The resolved address all traffic goes to.
        addr: SocketAddr,
    },
}

impl Target {
    /// Whether the path to the server is IPv6 (which changes the largest UDP datagram).
    pub fn is_ipv6(&self) -> bool {
        match self {
            Target::Embedded(ip) => ip.is_ipv6(),
            Target::Remote { addr, .. } => addr.is_ipv6(),
        }
    }
}

/// Everything `wirebench run` needs, validated.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Server to test against.
    pub target: Target,
    /// Protocol × mechanism combinations, in the order they run.
    pub combinations: Vec<Combination>,
    /// Application message size in bytes.
    pub msg_size: u32,
    /// `-l` was not given: the messages are the default 1 KiB, which `run` says costs a
    /// streaming TCP or QUIC run its bulk throughput.
    pub default_msg_size: bool,
    /// Exact number of payload bytes per run.
    pub total_bytes: u64,
    /// Runs per combination (≥ 1).
    pub repeat: u32,
    /// Fixed UDP stop-and-wait retransmission timeout; `None` means adaptive.
    pub rto: Option<Duration>,
    /// UDP streaming pacing; `None` means unpaced.
    pub rate: Option<BitRate>,
    /// How long the server waits for late UDP datagrams after the client is done.
    pub grace: Duration,
    /// Data-path options both ends apply.
    pub options: DataPathOptions,
    /// Print one JSON document instead of text.
    pub json: bool,
    /// Message size × total points of a sweep in plan order (sizes outer); one for a plain run.
    /// `msg_size` and `total_bytes` are the first point.
    pub points: Vec<Point>,
    /// Unmeasured warm-up runs of every combination before each point's measured runs.
    pub warmup: u32,
    /// Concurrent flows per run (≥ 1), each its own session; the total is split across them.
    pub parallel: u32,
    /// Period of the interval reports; `None` prints none.
    pub interval: Option<Duration>,
    /// The server sends, the client receives.
    pub reverse: bool,
    /// `--impair`: the impairments and seed of an in-process relay between client and server.
    pub impair: Option<(Impairments, u64)>,
    /// Pre-shared key to authenticate with (`--psk`); the embedded server requires it too.
    pub psk: Option<std::sync::Arc<wirebench_core::security::auth::Psk>>,
    /// `-f/--rate-unit`: the unit the text output prints bit rates in (iperf3's -f); `None`
    /// keeps the output's own units.
    pub rate_unit: Option<RateUnit>,
    /// `--rate max`: search the highest loss-free UDP rate first, then run at it (`rate` is
    /// then set to the rate found).
    pub search: Option<ratesearch::SearchPlan>,
    /// `-t/--time`: every run sends for this long instead of `total_bytes` (then an upper
    /// bound, `wirebench_core::wire::proto::UNBOUNDED_TOTAL`); `None` ends runs by their total.
    pub time: Option<Duration>,
    /// `--latency-probe`: probe flows beside every measured run (idle, then under its load).
    pub latency_probe: Option<crate::flows::latency_probe::ProbePlan>,
    /// `--bidir`: every run sends both ways at once, `parallel` flows each way, `total_bytes`
    /// (or `time`) per direction.
    pub bidir: bool,
    /// `-O/--omit`: the span at the start of each run its figures leave out.
    pub omit: Option<Duration>,
    /// Every run of the campaign in the order it runs, built once from the fields above.
    pub plan: Plan,
}

/// Everything a campaign produced.
#[derive(Debug, Clone, Default)]
pub struct Campaign {
    /// Finished runs, in the order they ran.
    pub runs: Vec<FinishedRun>,
    /// The error that stopped the campaign early, if any.
    pub failure: Option<String>,
    /// `--rate max`: the search that found no rate, which stopped the campaign.
    pub unfound: Option<RateSearchRecord>,
}

impl RunConfig {
    /// The parameters record of this configuration against the server named `server`.
    pub fn parameters(&self, server: &str) -> Parameters {
        let cfg = self;
        let mut protocols = Vec::new();
        let mut mechanisms = Vec::new();
        for c in &cfg.combinations {
            if !protocols.contains(&c.protocol) {
                protocols.push(c.protocol);
            }
            if !mechanisms.contains(&c.mechanism) {
                mechanisms.push(c.mechanism);
            }
        }
        // What every session of the plan is asked for, whatever its combination.
        let any = cfg.combinations.first().copied().unwrap_or(Combination {
            protocol: Protocol::Tcp,
            mechanism: Mechanism::Stream,
        });
        let first = Point {
            msg_size: cfg.msg_size,
            total_bytes: cfg.total_bytes,
        };
        let session = session_params(cfg, first, any);
        Parameters {
            server: server.to_string(),
            embedded_server: matches!(cfg.target, Target::Embedded(_)),
            protocols,
            mechanisms,
            msg_size: cfg.msg_size,
            total_bytes: cfg.total_bytes,
            repeat: cfg.repeat,
            rto_us: session.rto_us,
            rate_bps: session.rate_bps,
            grace_us: session.grace_us,
            options: session.options,
            parallel: cfg.parallel,
            reverse: cfg.reverse,
            duration_us: session.duration_us,
            bidir: cfg.bidir,
            omit_us: session.omit_us,
        }
    }
}

/// The session parameters of one combination at one point of a run configuration.
pub fn session_params(cfg: &RunConfig, point: Point, combination: Combination) -> SessionParams {
    let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    SessionParams {
        protocol: combination.protocol,
        mechanism: combination.mechanism,
        msg_size: point.msg_size,
        total_bytes: point.total_bytes,
        rto_us: cfg.rto.map(us),
        rate_bps: cfg.rate.map(|r| r.0),
        grace_us: us(cfg.grace),
        options: cfg.options.clone(),
        interval_us: cfg.interval.map(us),
        reverse: cfg.reverse,
        duration_us: cfg.time.map(us),
        omit_us: cfg.omit.map(us),
    }
}

/// What the runner says as the plan runs, in the order it happens.
#[derive(Debug)]
pub enum RunEvent {
    /// Unmeasured work (a rate search's trials, a point's warm-ups) starts (`true`) or ends.
    Unmeasured(bool),
    /// `--rate max`: the search of this point starts.
    SearchStarts(Point),
    /// `--rate max`: the `n`th trial of the search ended.
    Trial(usize, TrialEntry),
    /// `--rate max`: the search ended, with its record (`None`: it failed; the campaign's
    /// failure says why).
    SearchEnds(Option<RateSearchRecord>),
    /// The warm-ups of this point start.
    WarmUps(Point),
    /// The warm-ups of a point ended; this many measured runs are finished before its own.
    WarmedUp(usize),
    /// With `-i`: an interval of the client's sending in this measured run closed.
    Interval(PlannedRun, IntervalSample),
    /// This measured run finished, with its record.
    Finished(PlannedRun, Box<RunRecord>),
}

/// Where the runner says what happens ([`RunEvent`]s); `None` (the exporter) hears nothing.
pub type Listener = Option<mpsc::UnboundedSender<RunEvent>>;

/// Says `event` to `listener`, if there is one (a listener that has gone hears nothing).
fn tell(listener: &Listener, event: impl FnOnce() -> RunEvent) {
    if let Some(tx) = listener {
        let _ = tx.send(event());
    }
}

/// Runs the plan against `server`, one run after another, telling `listener` as it goes;
/// stops at the first failed run (or trial, or a rate search that found no rate).
pub async fn run_plan(cfg: &RunConfig, server: SocketAddr, listener: &Listener) -> Campaign {
    let mut campaign = Campaign::default();
    // --rate max: the rate the point's search found; its runs run at it and carry the search.
    let mut found: Option<RateSearchRecord> = None;
    let runs = cfg.plan.runs();
    for (i, run) in runs.iter().enumerate() {
        let previous = i.checked_sub(1).and_then(|p| runs.get(p));
        if previous.is_none_or(|p| p.point_index != run.point_index) {
            if let Some(search) = &cfg.search {
                match search_rate(cfg, run.point, search, server, listener).await {
                    Ok(record) => found = Some(record),
                    Err(stop) => {
                        (campaign.failure, campaign.unfound) = stop;
                        return campaign;
                    }
                }
            }
            if run.warmup {
                tell(listener, || RunEvent::WarmUps(run.point));
                tell(listener, || RunEvent::Unmeasured(true));
            }
        }
        if !run.warmup && previous.is_some_and(|p| p.warmup) {
            tell(listener, || RunEvent::Unmeasured(false));
            let done = campaign.runs.len();
            tell(listener, || RunEvent::WarmedUp(done));
        }
        let rate = found.as_ref().and_then(|f| f.rate_bps);
        let ran = run_one(cfg, run, rate, server, listener).await;
        if ran.is_ok() {
            // Its figures are final: nothing is in flight until the next run starts (a failed
            // run stays there: what it had moved is stored with its error).
            crate::engine::inflight::clear();
        }
        match ran {
            Ok(_) if run.warmup => {}
            Ok(mut finished) => {
                finished.rate_search.clone_from(&found);
                tell(listener, || {
                    RunEvent::Finished(run.clone(), Box::new(finished.record()))
                });
                campaign.runs.push(finished);
            }
            Err(e) => {
                let (proto, mech) = (run.combination.protocol, run.combination.mechanism);
                let (r, of) = (run.repeat_index + 1, run.repeats);
                let failed = format!("{proto} {mech} run {r} of {of} failed: {e:#}");
                let warm_up = if run.warmup { "warm-up: " } else { "" };
                campaign.failure = Some(format!("{warm_up}{failed}"));
                return campaign;
            }
        }
    }
    campaign
}

/// `--rate max`: the search of `point`, its trials unmeasured; the failure and the search that
/// found no rate when it stops the campaign.
async fn search_rate(
    cfg: &RunConfig,
    point: Point,
    search: &ratesearch::SearchPlan,
    server: SocketAddr,
    listener: &Listener,
) -> Result<RateSearchRecord, (Option<String>, Option<RateSearchRecord>)> {
    // Trials, like warm-ups, are never stored as runs.
    tell(listener, || RunEvent::Unmeasured(true));
    tell(listener, || RunEvent::SearchStarts(point));
    let udp_stream = Combination {
        protocol: Protocol::Udp,
        mechanism: Mechanism::Stream,
    };
    let base = session_params(cfg, point, udp_stream);
    let shared_process = matches!(cfg.target, Target::Embedded(_));
    let psk = cfg.psk.as_deref();
    let on_trial = |n: usize, t: &TrialEntry| tell(listener, || RunEvent::Trial(n, *t));
    let searched = ratesearch::search(base, psk, shared_process, search, server, on_trial).await;
    tell(listener, || {
        RunEvent::SearchEnds(searched.as_ref().ok().cloned())
    });
    let record = searched.map_err(|e| (Some(format!("{e:#}")), None))?;
    if record.rate_bps.is_none() {
        return Err((None, Some(record)));
    }
    tell(listener, || RunEvent::Unmeasured(false));
    Ok(record)
}

/// One run of the plan (at `rate`, bits/s, when its point's `--rate max` search found one):
/// its flows at once (and `--latency-probe`'s probes beside a measured run), sampled every `-i`.
async fn run_one(
    cfg: &RunConfig,
    run: &PlannedRun,
    rate: Option<u64>,
    server: SocketAddr,
    listener: &Listener,
) -> anyhow::Result<FinishedRun> {
    let session = &run.session;
    let (flows, progress) = requests(session, rate, server, cfg.psk.as_deref());
    crate::engine::inflight::publish(&progress);
    // The client's interval series is its flows' in the run's direction (the first ones);
    // with --bidir the server → client flows, read at the same moments, make a second series
    // (what the client received). Each server session keeps its own.
    let (sending, receiving) = progress.split_at(session.flows.len());
    let back_readings = std::sync::Mutex::new(Vec::new());
    let sent_so_far = || {
        if !receiving.is_empty() {
            if let Ok(mut readings) = back_readings.lock() {
                readings.push(reading_of(receiving));
            }
        }
        reading_of(sending)
    };
    let beside = parallel::Beside {
        interval: cfg.interval,
        read: sent_so_far,
        on_sample: |s: &IntervalSample| {
            if !run.warmup {
                tell(listener, || RunEvent::Interval(run.clone(), *s));
            }
        },
        // --latency-probe: warm-up runs are not measured, so no probes beside them.
        probe: cfg
            .latency_probe
            .as_ref()
            .filter(|_| !run.warmup)
            .map(|probe| (server, probe, run.combination.protocol, cfg.psk.as_deref())),
    };
    let (result, intervals, latency) = parallel::run_beside(flows, beside).await?;
    let RunOutcome {
        forward: (mut outcome, mut flows),
        mut back,
    } = result?;
    if let Some((o, _)) = back.as_mut() {
        // One back reading per forward interval, taken with it: the same boundaries.
        let readings = back_readings.into_inner().unwrap_or_default();
        let mut series = IntervalSeries::new();
        o.client.intervals = intervals
            .iter()
            .zip(readings)
            .map(|(s, r)| series.push(s.end_ns, r))
            .collect();
    }
    outcome.client.intervals = intervals;
    if cfg.parallel == 1 {
        // One flow each way: the sums are the flows.
        flows.clear();
        if let Some((_, f)) = back.as_mut() {
            f.clear();
        }
    }
    if matches!(cfg.target, Target::Embedded(_)) {
        outcome.mark_shared_process();
        let back_flows = back
            .iter_mut()
            .flat_map(|(o, f)| std::iter::once(o).chain(f.iter_mut()));
        flows
            .iter_mut()
            .chain(back_flows)
            .for_each(SessionOutcome::mark_shared_process);
    }
    Ok(FinishedRun {
        combination: run.combination,
        repeat_index: run.repeat_index,
        params: paced(&session.params, rate),
        outcome,
        flows,
        latency,
        back,
        rate_search: None,
    })
}

/// `params` at `rate` (bits/s) when one was found, else as planned.
fn paced(params: &SessionParams, rate: Option<u64>) -> SessionParams {
    SessionParams {
        rate_bps: rate.or(params.rate_bps),
        ..params.clone()
    }
}

/// What `flows` have moved together so far: their counts added; a window, a round trip and a
/// jitter, which do not add up, taken from the first flow (the jitter: the largest).
fn reading_of(flows: &[Arc<Progress>]) -> Cumulative {
    flows
        .iter()
        .map(|p| p.read())
        .fold(Cumulative::default(), |a, b| Cumulative {
            bytes: a.bytes + b.bytes,
            // With -R the client's flows receive: a UDP receiver counts its losses.
            lost: sum(a.lost, b.lost),
            retransmitted: sum(a.retransmitted, b.retransmitted),
            tcp: a.tcp.or(b.tcp),
            jitter_ns: a.jitter_ns.max(b.jitter_ns),
        })
}

/// The sum of two counts either of which may be missing (None when both are).
fn sum(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    }
}

/// The requests of one run of `session` against `server` (at `rate` when one was found), each
/// flow with a fresh progress counter; the counters in flow order (the run's direction first).
fn requests(
    session: &SessionPlan,
    rate: Option<u64>,
    server: SocketAddr,
    psk: Option<&Psk>,
) -> (RunFlows, Vec<Arc<Progress>>) {
    let mut progress = Vec::new();
    let sole = session.flows.len() + session.back.len() == 1;
    let mut request = |p: &SessionParams| {
        let counter = Progress::new();
        progress.push(Arc::clone(&counter));
        SessionRequest {
            server,
            params: paced(p, rate),
            progress: counter,
            psk: psk.cloned(),
            judge: None,
            sole,
        }
    };
    let flows = RunFlows {
        flows: session.flows.iter().map(&mut request).collect(),
        back: session.back.iter().map(&mut request).collect(),
    };
    (flows, progress)
}
