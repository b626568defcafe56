//! `wirebench rpm`'s flow: responsiveness under working conditions after
//! draft-ietf-ippm-responsiveness — idle probes, then load flows added one per interval while
//! foreign and self probes run, each interval handed to the core [`RampMachine`], until RPM is
//! stable or the time limit; owns the tasks and the clock readings, must not aggregate (core
//! does) nor print (see [`render`]).

pub mod load;
pub mod probe;
pub mod render;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use wirebench_core::machine::responsiveness::{
    moving_average_goodput_bps, trimmed_mean, ComponentRecord, IdleRecord, IntervalProbes,
    IntervalRecord, LoadDirection, Parameters, RampMachine, Rating, RpmResult, RPM_SCHEMA_VERSION,
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
    let mut stopped = false;
    let params = settings.params;
    let mut foreign_session = ProbeSession::open(server, true, psk.as_deref()).await?;
    let mut self_session = ProbeSession::open(server, false, psk.as_deref()).await?;
    let self_target = self_session.target();
    let mut self_conn = self_target.connect().await?;
    let foreign = foreign_session.target();

    // Idle latency: probe pairs one after another before any load.
    let idle = if settings.idle_probes > 0 {
        let (mut tcp, mut req, mut own) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..settings.idle_probes {
            let f = tokio::time::timeout(settings.probe_timeout, foreign.run())
                .await
                .context("an idle probe timed out")??;
            tcp.push(ms(f.tcp));
            req.push(ms(f.request));
            let o = tokio::time::timeout(settings.probe_timeout, probe::self_probe(&mut self_conn))
                .await
                .context("an idle self probe timed out")??;
            own.push(ms(o));
        }
        foreign_session.count_sent(u64::from(settings.idle_probes));
        self_session.count_sent(u64::from(settings.idle_probes));
        let tm =
            |v: &[f64]| (trimmed_mean(v, params.trimmed_mean_percent).unwrap_or(0.0) * 1e6) as u64;
        Some(IdleRecord {
            probes: settings.idle_probes,
            tcp_handshake_rtt_ns: tm(&tcp),
            foreign_request_rtt_ns: tm(&req),
            self_request_rtt_ns: tm(&own),
        })
    } else {
        None
    };

    // Load and probes.
    let bytes = Arc::new(LoadBytes::default());
    let mut flows: Vec<LoadFlow> = Vec::new();
    let mut open_flows = 0u32;
    let mut refused: Option<String> = None;
    let started = Instant::now();
    flows.extend(
        add_flows(server, settings.direction, psk.clone(), bytes.clone())
            .await
            .context("the server refused the first load flow")?,
    );
    open_flows += 1;
    // Flows open in the background: through a full queue a session request takes several
    // loaded round trips, which must not stretch an interval.
    let mut opening: Option<tokio::task::JoinHandle<Result<Vec<LoadFlow>>>> = None;

    let (tx, mut rx) = mpsc::unbounded_channel::<Sample>();
    let rate: SharedRate = Arc::new(AtomicU64::new(
        u64::from(params.max_probes_per_second.max(1)) * 1000,
    ));
    let sent = Arc::new(AtomicU64::new(0));
    let self_sent = Arc::new(AtomicU64::new(0));
    let mut probes = JoinSet::new();
    probes.spawn(foreign_scheduler(
        foreign,
        rate.clone(),
        settings.probe_timeout,
        tx.clone(),
        sent.clone(),
    ));
    probes.spawn(self_scheduler(
        self_conn,
        self_target,
        rate.clone(),
        settings.probe_timeout,
        tx.clone(),
        self_sent.clone(),
    ));
    drop(tx);

    let mut machine = RampMachine::new(params);
    let interval = Duration::from_nanos(params.interval_ns.max(1));
    let mut intervals = Vec::new();
    let mut last = (0u64, 0u64);
    let mut down_series = Vec::new();
    let mut up_series = Vec::new();
    let mut total_series = Vec::new();
    let mut failed_probes = 0u64;
    'intervals: for index in 0u32.. {
        let end = started + interval * (index + 1);
        let mut current = IntervalProbes::default();
        let (mut n_foreign, mut n_self) = (0u32, 0u32);
        let (mut tcp_ns, mut request_ns, mut own_ns) = (Vec::new(), Vec::new(), Vec::new());
        // Collect the probes that complete before the interval ends.
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            let received = tokio::select! {
                biased;
                () = &mut stop => {
                    // The unfinished interval is left out: its goodput would be of a part.
                    stopped = true;
                    break 'intervals;
                }
                received = tokio::time::timeout(end - now, rx.recv()) => received,
            };
            match received {
                Ok(Some(Sample::Foreign(f))) => {
                    current.foreign_tcp_ms.push(ms(f.tcp));
                    current.foreign_request_ms.push(ms(f.request));
                    tcp_ns.push(duration_ns(f.tcp));
                    request_ns.push(duration_ns(f.request));
                    n_foreign += 1;
                }
                Ok(Some(Sample::Own(d))) => {
                    current.self_request_ms.push(ms(d));
                    own_ns.push(duration_ns(d));
                    n_self += 1;
                }
                Ok(Some(Sample::Failed)) => failed_probes += 1,
                Ok(None) => tokio::time::sleep_until(end.into()).await,
                Err(_) => break,
            }
        }
        let now = (
            bytes.download.load(Ordering::Relaxed),
            bytes.upload.load(Ordering::Relaxed),
        );
        let (down, up) = (now.0 - last.0, now.1 - last.1);
        last = now;
        down_series.push(down);
        up_series.push(up);
        total_series.push(down + up);
        let secs = interval.as_secs_f64();
        let step = machine.handle_interval(down + up, current);
        intervals.push(IntervalRecord {
            index,
            flows: open_flows,
            download_goodput_bps: down as f64 * 8.0 / secs,
            upload_goodput_bps: up as f64 * 8.0 / secs,
            moving_average_goodput_bps: moving_average_goodput_bps(
                &total_series,
                params.moving_average_distance as usize,
                params.interval_ns,
            ),
            rpm: machine
                .responsiveness_series()
                .last()
                .copied()
                .filter(|r| r.is_finite()),
            foreign_probes: n_foreign,
            self_probes: n_self,
            foreign_tcp_handshake_rtt_ns: tcp_ns,
            foreign_request_rtt_ns: request_ns,
            self_request_rtt_ns: own_ns,
        });
        // The probes' share of the capacity: PTC of the last interval's goodput.
        let goodput_bps = (down + up) as f64 * 8.0 / secs;
        rate.store(
            (params.probe_rate(goodput_bps) * 1000.0) as u64,
            Ordering::Relaxed,
        );
        if step.done || started.elapsed() + interval > settings.max_duration {
            break;
        }
        if opening.as_ref().is_some_and(|h| h.is_finished()) {
            if let Some(h) = opening.take() {
                match h.await {
                    Ok(Ok(new)) => {
                        flows.extend(new);
                        open_flows += 1;
                    }
                    Ok(Err(e)) => {
                        // The server's limits (--max-sessions and the like) cap the ramp.
                        refused = Some(format!("{e:#}"));
                        machine.flows_capped(open_flows);
                    }
                    Err(e) => refused = Some(format!("opening a load flow failed: {e}")),
                }
            }
        }
        if step.add_flow && refused.is_none() && opening.is_none() {
            opening = Some(tokio::spawn(add_flows(
                server,
                settings.direction,
                psk.clone(),
                bytes.clone(),
            )));
        }
    }
    if let Some(h) = opening.take() {
        h.abort();
    }
    let duration = started.elapsed();
    probes.abort_all();
    while probes.join_next().await.is_some() {}
    load::stop_all(flows).await;
    foreign_session.count_sent(sent.load(Ordering::Relaxed));
    self_session.count_sent(self_sent.load(Ordering::Relaxed));
    tokio::join!(foreign_session.finish(), self_session.finish());

    let mad = params.moving_average_distance as usize;
    let per_direction = |series: &[u64]| {
        moving_average_goodput_bps(series, mad.min(series.len()), params.interval_ns).unwrap_or(0.0)
    };
    let components = machine.current_components();
    let figures = machine.current_figures();
    let mut diffs = differences(&params);
    if let Some(why) = refused {
        diffs.push(format!(
            "The server refused more load flows, so the ramp stopped at {open_flows} per direction: {why}"
        ));
    }
    if stopped {
        diffs.push(format!(
            "Stopped by a signal after {}: the figures cover only those.",
            wirebench_core::record::count_of(intervals.len(), "interval", "intervals")
        ));
    }
    let failures = bytes.failures.load(Ordering::Relaxed);
    if failures > 0 {
        diffs.push(format!(
            "{failures} load session(s) failed during the test."
        ));
    }
    let result = RpmResult {
        schema_version: RPM_SCHEMA_VERSION,
        draft: DRAFT.to_owned(),
        server: server_name.to_owned(),
        protocol: "tcp".to_owned(),
        direction: settings.direction,
        rpm: figures.map(|f| f.rpm),
        rating: figures.map(|f| Rating::of(f.rpm)),
        rpm_confidence: machine.responsiveness_confidence(),
        goodput_confidence: machine.goodput_confidence(),
        components: components
            .zip(figures)
            .map(|(c, f)| ComponentRecord::of(&c, &f)),
        idle,
        download_goodput_bps: per_direction(&down_series),
        upload_goodput_bps: per_direction(&up_series),
        load_flows: open_flows,
        goodput_stable: machine.goodput_saturated(),
        rpm_stable: machine.responsiveness_stable(),
        duration_ns: duration_ns(duration),
        failed_probes,
        parameters: params,
        intervals,
        differences: diffs,
    };
    Ok((result, stopped))
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
