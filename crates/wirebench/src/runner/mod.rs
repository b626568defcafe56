//! Executes a run plan: every protocol × mechanism combination in the configured order, each
//! repeated `--repeat` times, one session at a time. Each finished run is handed to the caller
//! before the next starts, so nothing finished is lost if a later run fails.

pub mod ratesearch;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use wirebench_core::machine::impair::Impairments;
use wirebench_core::record::{
    AbortedRun, DirectionRecord, EndedBy, FlowRecord, Parameters, RunRecord, ServerRecord,
};
use wirebench_core::vocab::metrics::{Cumulative, IntervalSample};
use wirebench_core::vocab::plan::{Combination, Mechanism, Protocol};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::{BitRate, RateUnit};
use wirebench_core::wire::proto::{DataPathOptions, SessionParams};

use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::plan::split_flows;

use crate::engine::interval::{self, Progress};
use crate::flows::client::{SessionOutcome, SessionRequest};
use crate::flows::latency_probe::ProbeFlows;
use crate::flows::parallel::{self, RunFlows, RunOutcome};

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
}

/// One finished run, as the flows measured it; [`FinishedRun::record`] makes the result record.
#[derive(Debug, Clone)]
pub struct FinishedRun {
    /// Which combination it was.
    pub combination: Combination,
    /// 0-based repeat index within the combination.
    pub repeat_index: u32,
    /// What was asked of the server.
    pub params: SessionParams,
    /// Both sides' figures (with -P, summed over the flows).
    pub outcome: SessionOutcome,
    /// With -P N > 1, each flow's figures in flow order; empty for a single flow.
    pub flows: Vec<SessionOutcome>,
    /// `--latency-probe`: the probes' round trips before and during this run.
    pub latency: Option<wirebench_core::record::LoadedLatency>,
    /// `--bidir`: the server → client direction (summed, and its flows as `flows`); `outcome`
    /// and `flows` above are then the client → server one.
    pub back: Option<(SessionOutcome, Vec<SessionOutcome>)>,
}

/// Everything a campaign produced.
#[derive(Debug, Clone, Default)]
pub struct Campaign {
    /// Finished runs, in the order they ran.
    pub runs: Vec<FinishedRun>,
    /// The error that stopped the campaign early, if any.
    pub failure: Option<String>,
}

/// The session parameters for one combination of a run configuration.
pub fn session_params(cfg: &RunConfig, combination: Combination) -> SessionParams {
    SessionParams {
        protocol: combination.protocol,
        mechanism: combination.mechanism,
        msg_size: cfg.msg_size,
        total_bytes: cfg.total_bytes,
        rto_us: cfg
            .rto
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        rate_bps: cfg.rate.map(|r| r.0),
        grace_us: u64::try_from(cfg.grace.as_micros()).unwrap_or(u64::MAX),
        options: cfg.options.clone(),
        interval_us: cfg
            .interval
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        reverse: cfg.reverse,
        duration_us: cfg
            .time
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        omit_us: cfg
            .omit
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
    }
}

/// Number of runs the plan holds.
pub fn planned_runs(cfg: &RunConfig) -> usize {
    cfg.combinations.len() * cfg.repeat as usize
}

/// The run at 1-based `position` of the plan (points outer, then combinations, then repeats),
/// as the client knows it before any figure (the run in flight when a run is cut short):
/// `None` past the end of the plan.
pub fn run_at(cfg: &RunConfig, position: usize) -> Option<AbortedRun> {
    let per_point = planned_runs(cfg);
    let index = position.checked_sub(1)?;
    let point = cfg.points.get(index / per_point.max(1))?;
    let within = index % per_point.max(1);
    let repeat = cfg.repeat.max(1) as usize;
    let combination = *cfg.combinations.get(within / repeat)?;
    let mut params = session_params(cfg, combination);
    params.msg_size = point.msg_size;
    params.total_bytes = point.total_bytes;
    Some(AbortedRun {
        position: position as u64,
        repeat_index: (within % repeat) as u32,
        params,
    })
}

/// Runs the plan against `server`; `on_run` sees each run as soon as it finishes, with its
/// 1-based position and the plan size; with `-i`, `on_interval` sees each interval of the
/// client's sending (all flows together) as it closes, with the position of its run. Stops at the first failed run.
pub async fn run_campaign(
    cfg: &RunConfig,
    server: SocketAddr,
    mut on_run: impl FnMut(usize, usize, &FinishedRun),
    mut on_interval: impl FnMut(usize, &IntervalSample),
) -> Campaign {
    let total = planned_runs(cfg);
    let mut campaign = Campaign::default();
    let shared_process = matches!(cfg.target, Target::Embedded(_));
    for &combination in &cfg.combinations {
        let failed = |repeat_index: u32, e: &anyhow::Error| {
            let (proto, mech) = (combination.protocol, combination.mechanism);
            format!(
                "{proto} {mech} run {} of {} failed: {e:#}",
                repeat_index + 1,
                cfg.repeat
            )
        };
        // Built once per combination: every repeat asks the same of the server.
        let plan = match SessionPlan::of(cfg, combination) {
            Ok(plan) => plan,
            Err(e) => {
                campaign.failure = Some(failed(0, &e));
                return campaign;
            }
        };
        for repeat_index in 0..cfg.repeat {
            let (flows, progress) = plan.requests(server, cfg.psk.as_deref());
            crate::engine::inflight::publish(&progress);
            // --bidir: the client's interval series is what it sent (the client → server
            // flows, the first ones); each server session keeps its own.
            let sending = &progress[..plan.flows.len()];
            let work = parallel::run(flows);
            let sent_so_far = || {
                sending
                    .iter()
                    .map(|p| p.read())
                    .fold(Cumulative::default(), |a, b| Cumulative {
                        bytes: a.bytes + b.bytes,
                        lost: None,
                        retransmitted: match (a.retransmitted, b.retransmitted) {
                            (Some(x), Some(y)) => Some(x + y),
                            (x, y) => x.or(y),
                        },
                    })
            };
            let position = campaign.runs.len() + 1;
            // --latency-probe: the probe flows open (and probe idle) before the load starts.
            let probes = match &cfg.latency_probe {
                Some(probe) => {
                    match ProbeFlows::open(server, probe, combination.protocol, cfg.psk.as_deref())
                        .await
                    {
                        Ok(p) => Some(p),
                        Err(e) => {
                            campaign.failure = Some(failed(repeat_index, &e));
                            return campaign;
                        }
                    }
                }
                None => None,
            };
            let sampled = interval::sampled(work, cfg.interval, sent_so_far, |s| {
                on_interval(position, s)
            });
            let ((result, intervals), latency) = match probes {
                Some(p) => {
                    let (done, latency) = p.around(sampled).await;
                    (done, Some(latency))
                }
                None => (sampled.await, None),
            };
            match result {
                Ok(RunOutcome {
                    forward: (mut outcome, mut flows),
                    mut back,
                }) => {
                    outcome.client.intervals = intervals;
                    if cfg.parallel == 1 {
                        // One flow each way: the sums are the flows.
                        flows.clear();
                        if let Some((_, f)) = back.as_mut() {
                            f.clear();
                        }
                    }
                    if shared_process {
                        outcome.mark_shared_process();
                        let back_flows = back
                            .iter_mut()
                            .flat_map(|(o, f)| std::iter::once(o).chain(f.iter_mut()));
                        flows
                            .iter_mut()
                            .chain(back_flows)
                            .for_each(SessionOutcome::mark_shared_process);
                    }
                    let record = FinishedRun {
                        combination,
                        repeat_index,
                        params: plan.params.clone(),
                        outcome,
                        flows,
                        latency,
                        back,
                    };
                    on_run(position, total, &record);
                    campaign.runs.push(record);
                }
                Err(e) => {
                    campaign.failure = Some(failed(repeat_index, &e));
                    return campaign;
                }
            }
        }
    }
    campaign
}

/// What every run of one combination asks of the server, built once from the configuration:
/// the run's session parameters, and each flow's (the total split across `-P` flows by whole
/// messages, so they add up exactly; `--bidir`'s server → client flows reversed).
struct SessionPlan {
    params: SessionParams,
    flows: Vec<SessionParams>,
    back: Vec<SessionParams>,
}

impl SessionPlan {
    fn of(cfg: &RunConfig, combination: Combination) -> anyhow::Result<SessionPlan> {
        let params = session_params(cfg, combination);
        let split = |reverse: bool| {
            let p = SessionParams {
                reverse,
                ..params.clone()
            };
            let totals = split_flows(p.total_bytes, p.msg_size, cfg.parallel).ok_or_else(|| {
                anyhow::anyhow!(
                    "cannot split {} B of {} B messages into {} flows",
                    p.total_bytes,
                    p.msg_size,
                    cfg.parallel
                )
            })?;
            Ok::<_, anyhow::Error>(
                totals
                    .into_iter()
                    .map(|total_bytes| SessionParams {
                        total_bytes,
                        ..p.clone()
                    })
                    .collect::<Vec<_>>(),
            )
        };
        // --bidir: `-n` (or `-t`) is per direction, each split across its own flows.
        let (flows, back) = if cfg.bidir {
            (split(false)?, split(true)?)
        } else {
            (split(params.reverse)?, Vec::new())
        };
        Ok(SessionPlan {
            params,
            flows,
            back,
        })
    }

    /// The requests of one run against `server`, each flow with a fresh progress counter;
    /// the counters in flow order (the run's direction first).
    fn requests(&self, server: SocketAddr, psk: Option<&Psk>) -> (RunFlows, Vec<Arc<Progress>>) {
        let mut progress = Vec::new();
        let mut request = |p: &SessionParams| {
            let counter = Progress::new();
            progress.push(Arc::clone(&counter));
            SessionRequest {
                server,
                params: p.clone(),
                progress: counter,
                psk: psk.cloned(),
                judge: None,
            }
        };
        let flows = RunFlows {
            flows: self.flows.iter().map(&mut request).collect(),
            back: self.back.iter().map(&mut request).collect(),
        };
        (flows, progress)
    }
}

impl FinishedRun {
    /// The result record of this run.
    pub fn record(&self) -> RunRecord {
        let o = &self.outcome;
        RunRecord {
            protocol: self.combination.protocol,
            mechanism: self.combination.mechanism,
            repeat_index: self.repeat_index,
            session: o.session,
            client: o.client.record(),
            server: ServerRecord::of(&o.server),
            relay: None,
            flows: self
                .flows
                .iter()
                .map(|f| (f, false))
                .chain(
                    self.back
                        .iter()
                        .flat_map(|(_, flows)| flows.iter().map(|f| (f, true))),
                )
                .map(|(f, reverse)| FlowRecord {
                    session: f.session,
                    client: f.client.record(),
                    server: ServerRecord::of(&f.server),
                    reverse,
                })
                .collect(),
            server_to_client: self.back.as_ref().map(|(o, _)| {
                Box::new(DirectionRecord {
                    session: o.session,
                    client: o.client.record(),
                    server: ServerRecord::of(&o.server),
                })
            }),
            reverse: self.params.reverse,
            ended_by: if self.params.timed() {
                EndedBy::Time
            } else {
                EndedBy::Bytes
            },
            loaded_latency: self.latency.clone(),
            rate_search: None,
        }
    }

    /// The message size and total this run measured.
    pub fn point(&self) -> Point {
        Point {
            msg_size: self.params.msg_size,
            total_bytes: self.params.total_bytes,
        }
    }
}

/// The parameters record of a run configuration against the server named `server`.
pub fn parameters(cfg: &RunConfig, server: &str) -> Parameters {
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
    let session = session_params(cfg, any);
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
