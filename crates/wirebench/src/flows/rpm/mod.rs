//! `wirebench rpm`'s flow: responsiveness under working conditions after
//! draft-ietf-ippm-responsiveness — idle probes, then load flows added one per interval while
//! foreign and self probes run, each interval handed to the core [`RampMachine`], until RPM is
//! stable or the time limit; owns the tasks and the clock readings, must not aggregate (core
//! does) nor print (`wirebench_output::rpm` renders the result).

pub mod load;
pub mod probe;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use wirebench_core::machine::responsiveness::{
    moving_average_goodput_bps, trimmed_mean, ComponentRecord, IdleRecord, IntervalProbes,
    IntervalRecord, LoadDirection, Parameters, RampMachine, Rating, RpmResult, Step as RampStep,
    RPM_SCHEMA_VERSION,
};
use wirebench_core::security::auth::Psk;

use load::{LoadBytes, LoadFlow};
use probe::{ForeignSample, ProbeSession, ProbeTarget};
use wirebench_core::vocab::units::duration_ns;

/// The draft revision followed.
pub const DRAFT: &str = "draft-ietf-ippm-responsiveness-08";

/// What to run.
#[derive(Debug, Clone)]
pub struct RpmSettings {
    /// Direction of the load.
    pub direction: LoadDirection,
    /// The draft's parameters (ID, MAD, MNP, MPS, …).
    pub params: Parameters,
    /// Longest load phase; the result then carries a lower confidence.
    pub max_duration: Duration,
    /// Probe pairs measured before the load (idle latency); 0 skips it.
    pub idle_probes: u32,
    /// A probe not answered within this long counts as failed.
    pub probe_timeout: Duration,
}

/// Default longest load phase: with the idle probes the test ends within 20 s.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(16);

/// Default idle probe pairs.
pub const DEFAULT_IDLE_PROBES: u32 = 10;

/// Where we differ from the draft; printed with every result and stored in the JSON.
pub fn differences(params: &Parameters) -> Vec<String> {
    let mut d = vec![
        "Our own protocol stands in for HTTP/2: the load is wirebench TCP streaming sessions (one session per flow at a time, renewed every 256 MiB), the probes a 64-byte request answered by a 1-byte response on the server's request-response sessions.".to_owned(),
        "No TLS: the TCP-only formula is used (foreign = 60000 / ((TM(tcp_f) + TM(http_f)) / 2)); tls_f is absent.".to_owned(),
        "Self probes run on one persistent probe connection opened before the load, not multiplexed into the load-generating connections (our streaming data connections carry no requests): they see the network queue but not the load connections' own send-buffer backlog.".to_owned(),
        "Foreign and self probes are sent as pairs at one rate (at most MPS per second and PTC of the goodput measured in the previous interval, at least one per second); a self probe is skipped while the previous one is unanswered.".to_owned(),
        "Stability uses the population standard deviation; responsiveness stability counts only the intervals after goodput saturation, each RPM computed over the probes of the last MAD intervals.".to_owned(),
        "The trimmed mean drops the highest floor(n x 5%) samples (none below 20 samples).".to_owned(),
        "A load flow whose session fails is not replaced and the test is not aborted; the failure is counted.".to_owned(),
        "Only TCP load and probes; QUIC is not implemented yet.".to_owned(),
    ];
    if params.interval_ns == 1_000_000_000 {
        d.push("ID = 1 s (draft -08); the editors' -09 raises it to 5 s, which with MAD = 4 would need well over 20 s.".to_owned());
    }
    d
}

/// A probe's outcome, as the probe tasks report it.
#[derive(Debug)]
enum Sample {
    Foreign(ForeignSample),
    Own(Duration),
    Failed,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Probe pairs per second, in thousandths, shared with the probe scheduler.
type SharedRate = Arc<AtomicU64>;

/// Runs the test against `server` and returns its result; `server_name` is for the record.
pub async fn run_rpm(
    server: SocketAddr,
    server_name: &str,
    settings: &RpmSettings,
    psk: Option<Arc<Psk>>,
) -> Result<RpmResult> {
    let (result, _) =
        run_rpm_until(server, server_name, settings, psk, std::future::pending()).await?;
    Ok(result)
}

/// Runs the test as [`run_rpm`] does, ending the load phase early when `stop` completes (a
/// signal): the result then covers the intervals that finished, says so in its differences,
/// and comes back with `true`.
pub async fn run_rpm_until(
    server: SocketAddr,
    server_name: &str,
    settings: &RpmSettings,
    psk: Option<Arc<Psk>>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(RpmResult, bool)> {
    tokio::pin!(stop);
    let mut foreign_session = ProbeSession::open(server, true, psk.as_deref()).await?;
    let mut self_session = ProbeSession::open(server, false, psk.as_deref()).await?;
    let self_target = self_session.target();
    let mut self_conn = self_target.connect().await?;
    let foreign = foreign_session.target();

    // Idle latency: probe pairs one after another before any load.
    let idle = if settings.idle_probes > 0 {
        let idle = idle_latency(settings, &foreign, &mut self_conn).await?;
        foreign_session.count_sent(u64::from(settings.idle_probes));
        self_session.count_sent(u64::from(settings.idle_probes));
        Some(idle)
    } else {
        None
    };

    // Load and probes.
    let started = Instant::now();
    let mut load = Load::start(server, settings.direction, psk).await?;
    let mut probing = Probing::start(foreign, self_conn, self_target, settings);
    let mut ramp = Ramp::new(settings.params);
    let stopped = ramp
        .run(started, settings, &mut load, &mut probing, stop)
        .await;
    if let Some(h) = load.opening.take() {
        h.abort();
    }
    let duration = started.elapsed();
    probing.tasks.abort_all();
    while probing.tasks.join_next().await.is_some() {}
    let Load {
        flows,
        bytes,
        open_flows,
        refused,
        ..
    } = load;
    load::stop_all(flows).await;
    foreign_session.count_sent(probing.sent.load(Ordering::Relaxed));
    self_session.count_sent(probing.self_sent.load(Ordering::Relaxed));
    tokio::join!(foreign_session.finish(), self_session.finish());

    let mut diffs = differences(&settings.params);
    if let Some(why) = refused {
        diffs.push(format!(
            "The server refused more load flows, so the ramp stopped at {open_flows} per direction: {why}"
        ));
    }
    if stopped {
        diffs.push(format!(
            "Stopped by a signal after {}: the figures cover only those.",
            wirebench_core::record::count_of(ramp.intervals.len(), "interval", "intervals")
        ));
    }
    let failures = bytes.failures.load(Ordering::Relaxed);
    if failures > 0 {
        diffs.push(format!(
            "{failures} load session(s) failed during the test."
        ));
    }
    let ended = Ended {
        server_name,
        idle,
        load_flows: open_flows,
        duration,
        differences: diffs,
    };
    Ok((ramp.into_result(settings, ended), stopped))
}

/// Idle latency: `settings.idle_probes` probe pairs one after another, before any load.
async fn idle_latency(
    settings: &RpmSettings,
    foreign: &ProbeTarget,
    self_conn: &mut tokio::net::TcpStream,
) -> Result<IdleRecord> {
    let (mut tcp, mut req, mut own) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..settings.idle_probes {
        let f = tokio::time::timeout(settings.probe_timeout, foreign.run())
            .await
            .context("an idle probe timed out")??;
        tcp.push(ms(f.tcp));
        req.push(ms(f.request));
        let o = tokio::time::timeout(settings.probe_timeout, probe::self_probe(self_conn))
            .await
            .context("an idle self probe timed out")??;
        own.push(ms(o));
    }
    let percent = settings.params.trimmed_mean_percent;
    let tm = |v: &[f64]| (trimmed_mean(v, percent).unwrap_or(0.0) * 1e6) as u64;
    Ok(IdleRecord {
        probes: settings.idle_probes,
        tcp_handshake_rtt_ns: tm(&tcp),
        foreign_request_rtt_ns: tm(&req),
        self_request_rtt_ns: tm(&own),
    })
}

/// The test's load flows, and the one being opened in the background.
struct Load {
    server: SocketAddr,
    direction: LoadDirection,
    psk: Option<Arc<Psk>>,
    bytes: Arc<LoadBytes>,
    flows: Vec<LoadFlow>,
    /// Flows open per direction.
    open_flows: u32,
    /// Why the server refused another flow, once it did.
    refused: Option<String>,
    /// Flows open in the background: through a full queue a session request takes several
    /// loaded round trips, which must not stretch an interval.
    opening: Option<tokio::task::JoinHandle<Result<Vec<LoadFlow>>>>,
}

impl Load {
    /// Opens the first flow per direction.
    async fn start(
        server: SocketAddr,
        direction: LoadDirection,
        psk: Option<Arc<Psk>>,
    ) -> Result<Load> {
        let bytes = Arc::new(LoadBytes::default());
        let flows = add_flows(server, direction, psk.clone(), bytes.clone())
            .await
            .context("the server refused the first load flow")?;
        Ok(Load {
            server,
            direction,
            psk,
            bytes,
            flows,
            open_flows: 1,
            refused: None,
            opening: None,
        })
    }

    /// Takes in the flows opened in the background, if they are open (or refused) by now.
    async fn take_opened(&mut self, machine: &mut RampMachine) {
        if !self.opening.as_ref().is_some_and(|h| h.is_finished()) {
            return;
        }
        let Some(h) = self.opening.take() else {
            return;
        };
        match h.await {
            Ok(Ok(new)) => {
                self.flows.extend(new);
                self.open_flows += 1;
            }
            Ok(Err(e)) => {
                // The server's limits (--max-sessions and the like) cap the ramp.
                self.refused = Some(format!("{e:#}"));
                machine.flows_capped(self.open_flows);
            }
            Err(e) => self.refused = Some(format!("opening a load flow failed: {e}")),
        }
    }

    /// Starts opening one more flow per direction, unless one is on its way or the server
    /// refused one.
    fn open_another(&mut self) {
        if self.refused.is_none() && self.opening.is_none() {
            self.opening = Some(tokio::spawn(add_flows(
                self.server,
                self.direction,
                self.psk.clone(),
                self.bytes.clone(),
            )));
        }
    }
}

/// The probe schedulers, and what they send back.
struct Probing {
    rx: mpsc::UnboundedReceiver<Sample>,
    rate: SharedRate,
    /// Foreign and self probes sent.
    sent: Arc<AtomicU64>,
    self_sent: Arc<AtomicU64>,
    tasks: JoinSet<()>,
}

impl Probing {
    /// Starts the foreign and the self probe schedulers, at the draft's highest rate.
    fn start(
        foreign: ProbeTarget,
        self_conn: tokio::net::TcpStream,
        self_target: ProbeTarget,
        settings: &RpmSettings,
    ) -> Probing {
        let (tx, rx) = mpsc::unbounded_channel::<Sample>();
        let rate: SharedRate = Arc::new(AtomicU64::new(
            u64::from(settings.params.max_probes_per_second.max(1)) * 1000,
        ));
        let sent = Arc::new(AtomicU64::new(0));
        let self_sent = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        tasks.spawn(foreign_scheduler(
            foreign,
            rate.clone(),
            settings.probe_timeout,
            tx.clone(),
            sent.clone(),
        ));
        tasks.spawn(self_scheduler(
            self_conn,
            self_target,
            rate.clone(),
            settings.probe_timeout,
            tx,
            self_sent.clone(),
        ));
        Probing {
            rx,
            rate,
            sent,
            self_sent,
            tasks,
        }
    }
}

/// The probes of one interval, as they came in.
#[derive(Default)]
struct Probed {
    current: IntervalProbes,
    foreign: u32,
    own: u32,
    tcp_ns: Vec<u64>,
    request_ns: Vec<u64>,
    own_ns: Vec<u64>,
}

/// Collects the probes that complete before `end`; None when `stop` came first.
async fn collect_probes<S: std::future::Future<Output = ()>>(
    rx: &mut mpsc::UnboundedReceiver<Sample>,
    end: Instant,
    mut stop: std::pin::Pin<&mut S>,
    failed_probes: &mut u64,
) -> Option<Probed> {
    let mut p = Probed::default();
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let received = tokio::select! {
            biased;
            () = &mut stop => return None,
            received = tokio::time::timeout(end - now, rx.recv()) => received,
        };
        match received {
            Ok(Some(Sample::Foreign(f))) => {
                p.current.foreign_tcp_ms.push(ms(f.tcp));
                p.current.foreign_request_ms.push(ms(f.request));
                p.tcp_ns.push(duration_ns(f.tcp));
                p.request_ns.push(duration_ns(f.request));
                p.foreign += 1;
            }
            Ok(Some(Sample::Own(d))) => {
                p.current.self_request_ms.push(ms(d));
                p.own_ns.push(duration_ns(d));
                p.own += 1;
            }
            Ok(Some(Sample::Failed)) => *failed_probes += 1,
            Ok(None) => tokio::time::sleep_until(end.into()).await,
            Err(_) => break,
        }
    }
    Some(p)
}

/// The load phase as it goes: the core's machine, and what each interval recorded.
struct Ramp {
    params: Parameters,
    machine: RampMachine,
    intervals: Vec<IntervalRecord>,
    /// Bytes downloaded and uploaded by the end of the last interval.
    last: (u64, u64),
    down_series: Vec<u64>,
    up_series: Vec<u64>,
    total_series: Vec<u64>,
    failed_probes: u64,
}

/// How the test ended, for its record.
struct Ended<'a> {
    server_name: &'a str,
    idle: Option<IdleRecord>,
    load_flows: u32,
    duration: Duration,
    differences: Vec<String>,
}

impl Ramp {
    fn new(params: Parameters) -> Ramp {
        Ramp {
            params,
            machine: RampMachine::new(params),
            intervals: Vec::new(),
            last: (0, 0),
            down_series: Vec::new(),
            up_series: Vec::new(),
            total_series: Vec::new(),
            failed_probes: 0,
        }
    }

    /// Runs the intervals from `started` until the machine is done, the time is up or `stop`
    /// completes; true when `stop` ended it.
    async fn run(
        &mut self,
        started: Instant,
        settings: &RpmSettings,
        load: &mut Load,
        probing: &mut Probing,
        mut stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
    ) -> bool {
        let interval = Duration::from_nanos(self.params.interval_ns.max(1));
        for index in 0u32.. {
            let end = started + interval * (index + 1);
            let probes =
                collect_probes(&mut probing.rx, end, stop.as_mut(), &mut self.failed_probes);
            // The unfinished interval is left out: its goodput would be of a part.
            let Some(probed) = probes.await else {
                return true;
            };
            let (step, goodput_bps) = self.record(index, probed, load, interval);
            // The probes' share of the capacity: PTC of the last interval's goodput.
            probing.rate.store(
                (self.params.probe_rate(goodput_bps) * 1000.0) as u64,
                Ordering::Relaxed,
            );
            if step.done || started.elapsed() + interval > settings.max_duration {
                break;
            }
            load.take_opened(&mut self.machine).await;
            if step.add_flow {
                load.open_another();
            }
        }
        false
    }

    /// Hands one interval to the machine and records it; the machine's step and the
    /// interval's goodput.
    fn record(
        &mut self,
        index: u32,
        probed: Probed,
        load: &Load,
        interval: Duration,
    ) -> (RampStep, f64) {
        let params = self.params;
        let now = (
            load.bytes.download.load(Ordering::Relaxed),
            load.bytes.upload.load(Ordering::Relaxed),
        );
        let (down, up) = (now.0 - self.last.0, now.1 - self.last.1);
        self.last = now;
        self.down_series.push(down);
        self.up_series.push(up);
        self.total_series.push(down + up);
        let secs = interval.as_secs_f64();
        let step = self.machine.handle_interval(down + up, probed.current);
        self.intervals.push(IntervalRecord {
            index,
            flows: load.open_flows,
            download_goodput_bps: down as f64 * 8.0 / secs,
            upload_goodput_bps: up as f64 * 8.0 / secs,
            moving_average_goodput_bps: moving_average_goodput_bps(
                &self.total_series,
                params.moving_average_distance as usize,
                params.interval_ns,
            ),
            rpm: self
                .machine
                .responsiveness_series()
                .last()
                .copied()
                .filter(|r| r.is_finite()),
            foreign_probes: probed.foreign,
            self_probes: probed.own,
            foreign_tcp_handshake_rtt_ns: probed.tcp_ns,
            foreign_request_rtt_ns: probed.request_ns,
            self_request_rtt_ns: probed.own_ns,
        });
        (step, (down + up) as f64 * 8.0 / secs)
    }

    /// The test's record.
    fn into_result(self, settings: &RpmSettings, ended: Ended<'_>) -> RpmResult {
        let params = self.params;
        let mad = params.moving_average_distance as usize;
        let per_direction = |series: &[u64]| {
            moving_average_goodput_bps(series, mad.min(series.len()), params.interval_ns)
                .unwrap_or(0.0)
        };
        let machine = &self.machine;
        let components = machine.current_components();
        let figures = machine.current_figures();
        RpmResult {
            schema_version: RPM_SCHEMA_VERSION,
            draft: DRAFT.to_owned(),
            server: ended.server_name.to_owned(),
            protocol: "tcp".to_owned(),
            direction: settings.direction,
            rpm: figures.map(|f| f.rpm),
            rating: figures.map(|f| Rating::of(f.rpm)),
            rpm_confidence: machine.responsiveness_confidence(),
            goodput_confidence: machine.goodput_confidence(),
            components: components
                .zip(figures)
                .map(|(c, f)| ComponentRecord::of(&c, &f)),
            idle: ended.idle,
            download_goodput_bps: per_direction(&self.down_series),
            upload_goodput_bps: per_direction(&self.up_series),
            load_flows: ended.load_flows,
            goodput_stable: machine.goodput_saturated(),
            rpm_stable: machine.responsiveness_stable(),
            duration_ns: duration_ns(ended.duration),
            failed_probes: self.failed_probes,
            parameters: params,
            intervals: self.intervals,
            differences: ended.differences,
        }
    }
}

/// Opens one load flow per direction the test loads.
async fn add_flows(
    server: SocketAddr,
    direction: LoadDirection,
    psk: Option<Arc<Psk>>,
    bytes: Arc<LoadBytes>,
) -> Result<Vec<LoadFlow>> {
    let mut flows = Vec::new();
    if direction.downloads() {
        flows.push(LoadFlow::start(server, true, psk.clone(), bytes.clone()).await?);
    }
    if direction.uploads() {
        flows.push(LoadFlow::start(server, false, psk, bytes).await?);
    }
    Ok(flows)
}

/// The pause between probes at `rate` (thousandths of a probe per second).
fn gap(rate: &SharedRate) -> Duration {
    let milli = rate.load(Ordering::Relaxed).max(1);
    Duration::from_nanos(1_000_000_000_000 / milli)
}

/// Launches a foreign probe every 1 / rate seconds, each on its own task.
async fn foreign_scheduler(
    probe: ProbeTarget,
    rate: SharedRate,
    timeout: Duration,
    tx: mpsc::UnboundedSender<Sample>,
    sent: Arc<AtomicU64>,
) {
    let mut running = JoinSet::new();
    let mut next = Instant::now();
    loop {
        tokio::time::sleep_until(next.into()).await;
        next += gap(&rate);
        let tx = tx.clone();
        sent.fetch_add(1, Ordering::Relaxed);
        running.spawn(async move {
            let sample = match tokio::time::timeout(timeout, probe.run()).await {
                Ok(Ok(f)) => Sample::Foreign(f),
                _ => Sample::Failed,
            };
            let _ = tx.send(sample);
        });
        // Reap the finished ones so the set stays small.
        while running.try_join_next().is_some() {}
    }
}

/// Sends a self probe every 1 / rate seconds on the persistent connection, one at a time; a
/// connection that fails or times out is replaced (the probe counts as failed).
async fn self_scheduler(
    mut conn: tokio::net::TcpStream,
    target: ProbeTarget,
    rate: SharedRate,
    timeout: Duration,
    tx: mpsc::UnboundedSender<Sample>,
    sent: Arc<AtomicU64>,
) {
    let mut next = Instant::now();
    loop {
        tokio::time::sleep_until(next.into()).await;
        sent.fetch_add(1, Ordering::Relaxed);
        let sample = match tokio::time::timeout(timeout, probe::self_probe(&mut conn)).await {
            Ok(Ok(d)) => Sample::Own(d),
            _ => Sample::Failed,
        };
        let failed = matches!(sample, Sample::Failed);
        if tx.send(sample).is_err() {
            return;
        }
        if failed {
            match tokio::time::timeout(timeout, target.connect()).await {
                Ok(Ok(c)) => conn = c,
                _ => return,
            }
        }
        next += gap(&rate);
        // Skipped while the previous probe was unanswered: no burst to catch up.
        next = next.max(Instant::now());
    }
}
