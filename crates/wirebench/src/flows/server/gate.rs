//! The one gate every server session passes, whatever its kind — a transfer (TCP, UDP, QUIC;
//! streaming or stop-and-wait; either way), a request-response exchange (`rr`, `ping`, latency
//! and rpm probes), a QUIC `perf` connection or an iperf3 test. [`Gate::admit`] checks what
//! the peer asked (every field in its documented range, then the server's limits) and takes a
//! place (sessions in all and per client); the [`Pass`] it returns stops the session when a
//! limit is reached ([`Pass::stop`]: duration, bytes both ways, a sender far above its rate,
//! the interval series, the server's shutdown), meters it, and ends it exactly once
//! ([`Pass::end`]): its status decided here, its `/metrics` counts, its one session line, its
//! peer text made safe. A pass dropped without an end — a session task that failed or
//! panicked — still ends, aborted with the reason. The kinds only move data.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::text::make_safe;
use wirebench_core::wire::proto::{
    RrParams, ServerReport, SessionParams, MAX_INTERVAL_SAMPLES, UNBOUNDED_TOTAL,
};

use super::admission::{Admission, SessionSlot};
use super::counts::ServerMetrics;
use super::events::{ServerEvent, ServerNotice, SessionSummary};
use super::meter::{Meter, RateCheck};
use super::options::Limits;
use crate::transport::counters::CpuMeter;
use crate::transport::net::{self, canonical_ip};

/// How often a running session's meter is read against the limits: a session stops within
/// this of passing one (the gate's own writers check theirs on every batch).
pub const WATCH_TICK: Duration = Duration::from_millis(100);

/// What a peer asks of the server, as the gate sees it.
#[derive(Debug, Clone, Copy)]
pub enum Ask<'a> {
    /// A transfer session (`run`).
    Transfer(&'a SessionParams),
    /// A request-response session (`rr`, `ping`, latency and rpm probes).
    Exchange(&'a RrParams),
    /// A QUIC connection that negotiated the `perf` ALPN.
    Perf,
    /// An iperf3 test, described as the session its line shows.
    Iperf3(&'a SessionParams),
}

impl Ask<'_> {
    fn kind(&self) -> Kind {
        match self {
            Ask::Transfer(_) => Kind::Transfer,
            Ask::Exchange(_) => Kind::Exchange,
            Ask::Perf => Kind::Perf,
            Ask::Iperf3(_) => Kind::Iperf3,
        }
    }

    /// What the session line shows of the session.
    fn line(&self) -> SessionParams {
        let base = |protocol, mechanism, msg_size| SessionParams {
            duration_us: None,
            omit_us: None,
            protocol,
            mechanism,
            msg_size,
            total_bytes: 0,
            rto_us: None,
            rate_bps: None,
            grace_us: 0,
            options: Default::default(),
            interval_us: None,
            reverse: false,
        };
        match self {
            Ask::Transfer(p) | Ask::Iperf3(p) => (*p).clone(),
            // Shown as a stop-and-wait exchange of `request`-byte messages.
            Ask::Exchange(rr) => base(rr.protocol, Mechanism::StopAndWait, rr.request),
            Ask::Perf => base(Protocol::Quic, Mechanism::Stream, 0),
        }
    }
}

/// The kind of a session, for the rules that depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A transfer session (`run`).
    Transfer,
    /// A request-response session.
    Exchange,
    /// A QUIC `perf` connection.
    Perf,
    /// An iperf3 test.
    Iperf3,
}

impl Kind {
    fn noun(self) -> &'static str {
        match self {
            Kind::Transfer | Kind::Exchange => "session",
            Kind::Perf => "QUIC perf connection",
            Kind::Iperf3 => "iperf3 test",
        }
    }
}

/// The server's policy and its running sessions, shared by every listener (wirebench's own
/// port and the iperf3 listener).
#[derive(Debug)]
pub struct Gate {
    limits: Limits,
    admission: Arc<Admission>,
    pub(super) metrics: Arc<ServerMetrics>,
    /// Turns true when the shutdown's grace period is over: running sessions stop.
    abort: watch::Sender<bool>,
    events: OnceLock<UnboundedSender<ServerEvent>>,
}

impl Gate {
    /// A gate under `limits` (a server makes its own; a listener run alone, as in tests, may
    /// have one of its own too).
    pub fn new(limits: &Limits) -> Arc<Gate> {
        Arc::new(Gate {
            limits: limits.clone(),
            admission: Admission::new(limits),
            metrics: Arc::default(),
            abort: watch::Sender::new(false),
            events: OnceLock::new(),
        })
    }

    /// Sends session lines and notices to `events` from now on (the first call wins).
    pub fn set_events(&self, events: UnboundedSender<ServerEvent>) {
        let _ = self.events.set(events);
    }

    /// Tells whoever runs the server about something that is not a session.
    pub fn notice(&self, peer: SocketAddr, message: String) {
        if let Some(events) = self.events.get() {
            let _ = events.send(ServerEvent::Notice(ServerNotice { peer, message }));
        }
    }

    /// The sessions' places (for the shutdown and `/metrics`).
    pub(super) fn admission(&self) -> &Arc<Admission> {
        &self.admission
    }

    /// Stops every running session now (the end of the shutdown's grace period).
    pub(super) fn abort_all(&self) {
        self.abort.send_replace(true);
    }

    /// Admits a session from `peer` asking `ask`, or says why not (the reason is counted,
    /// told as a notice, and for the caller to send in its protocol).
    pub fn admit(self: &Arc<Self>, peer: SocketAddr, ask: Ask<'_>) -> Result<Pass, String> {
        let kind = ask.kind();
        let checked = self
            .check(peer, ask)
            .and_then(|()| self.admission.admit(peer.ip()));
        let slot = match checked {
            Ok(slot) => slot,
            Err(reason) => {
                self.refuse(peer, kind, &reason);
                return Err(reason);
            }
        };
        self.metrics.started();
        let mut line = ask.line();
        if line.timed() {
            // A timed session's total is only an upper bound: the server's --max-bytes caps
            // what it reads or sends (a stream that reaches it is aborted, naming the flag).
            line.total_bytes = line.total_bytes.min(self.limits.max_bytes);
        }
        Ok(Pass {
            gate: Arc::clone(self),
            _slot: slot,
            peer,
            kind,
            meter: Arc::new(Meter::new(self.limits.max_bytes, self.limits.max_rate_bps)),
            session: AtomicU32::new(rand::random::<u32>().max(1)),
            deadline: tokio::time::Instant::now() + self.limits.max_duration,
            started: Instant::now(),
            cpu: CpuMeter::start(),
            line,
            ended: false,
        })
    }

    /// Refuses a session of `kind` from `peer` for `reason`: counts it and tells it as a
    /// notice (the caller sends the reason in its protocol). [`Gate::admit`] refuses through
    /// it; a kind that refuses a request before it can ask (one it cannot read) calls it.
    pub fn refuse(&self, peer: SocketAddr, kind: Kind, reason: &str) {
        self.metrics.refused(reason);
        self.notice(peer, format!("{} refused: {reason}", kind.noun()));
    }

    /// Every field in its range, then the server's limits.
    fn check(&self, peer: SocketAddr, ask: Ask<'_>) -> Result<(), String> {
        let ipv6 = canonical_ip(peer.ip()).is_ipv6();
        match ask {
            Ask::Transfer(p) => {
                p.validate(ipv6).map_err(|e| e.0)?;
                congestion_available(p)?;
                within_limits(p, &self.limits)
            }
            Ask::Exchange(rr) => rr.validate(ipv6).map_err(|e| e.0),
            Ask::Perf => Ok(()),
            Ask::Iperf3(p) => within_limits(p, &self.limits),
        }
    }
}

/// A congestion control the client asks for must exist here.
fn congestion_available(p: &SessionParams) -> Result<(), String> {
    let (Some(cc), Some(available)) = (&p.options.congestion, net::available_congestion_controls())
    else {
        return Ok(());
    };
    if available.iter().any(|a| a == cc) {
        return Ok(());
    }
    Err(format!(
        "congestion control {cc} is not available on the server: allowed {}",
        available.join(", ")
    ))
}

/// A session request against the server's limits on bytes, time and rate.
fn within_limits(p: &SessionParams, limits: &Limits) -> Result<(), String> {
    if let Some(us) = p.duration_us {
        let asked = Duration::from_micros(us);
        if asked >= limits.max_duration {
            return Err(format!(
                "a timed session of {asked:?} is longer than this server allows: less than {:?} (--max-duration)",
                limits.max_duration
            ));
        }
    } else if p.total_bytes > limits.max_bytes && p.total_bytes != UNBOUNDED_TOTAL {
        return Err(format!(
            "a total of {} bytes is more than this server allows per session: at most {} bytes (--max-bytes)",
            p.total_bytes, limits.max_bytes
        ));
    }
    if let Some(us) = p.omit_us {
        let asked = Duration::from_micros(us);
        if asked >= limits.max_duration {
            return Err(format!(
                "an omit span (-O) of {asked:?} is longer than this server allows a session: less than {:?} (--max-duration)",
                limits.max_duration
            ));
        }
    }
    if let Some(max) = limits.max_rate_bps {
        // The server paces what it sends and reads itself; a UDP sender it cannot slow down
        // must pace to the limit on its own (and is stopped when it sends far above it).
        let forward_udp_stream =
            p.protocol == Protocol::Udp && p.mechanism == Mechanism::Stream && !p.reverse;
        if forward_udp_stream && p.rate_bps.is_none_or(|r| r > max) {
            return Err(format!(
                "this server limits a session to {max} bit/s (--max-rate): pass --rate {max} or lower"
            ));
        }
    }
    Ok(())
}

/// One admitted session: its place, its limits and meter, and its one end.
#[derive(Debug)]
pub struct Pass {
    gate: Arc<Gate>,
    _slot: SessionSlot,
    peer: SocketAddr,
    kind: Kind,
    line: SessionParams,
    meter: Arc<Meter>,
    session: AtomicU32,
    deadline: tokio::time::Instant,
    started: Instant,
    cpu: CpuMeter,
    ended: bool,
}

impl Pass {
    /// What the session runs with: a transfer's request as the server serves it (a timed
    /// session's upper bound lowered to `--max-bytes`).
    pub fn params(&self) -> &SessionParams {
        &self.line
    }

    /// The session's meter: each kind points it at its data path's counters
    /// ([`Meter::watch`]) or counts through the gate's writers.
    pub fn meter(&self) -> &Arc<Meter> {
        &self.meter
    }

    /// `--max-rate`, for the kind's own pacing of what it sends and reads.
    pub fn max_rate_bps(&self) -> Option<u64> {
        self.gate.limits.max_rate_bps
    }

    /// Shows the session as the server sending (`reverse`) or reading: for a kind that does
    /// both (a perf connection), whichever moved more.
    pub fn show_direction(&mut self, server_sent: bool) {
        self.line.reverse = server_sent;
    }

    /// The session's id as the client knows it (a random one until the kind sets it).
    pub fn set_session(&self, id: u32) {
        self.session.store(id, Ordering::Relaxed);
    }

    /// The session's id.
    pub fn session(&self) -> u32 {
        self.session.load(Ordering::Relaxed)
    }

    /// A report with no figures yet.
    pub fn empty_report(&self) -> ServerReport {
        ServerReport {
            protocol: self.line.protocol,
            mechanism: self.line.mechanism,
            ..ServerReport::default()
        }
    }

    /// Resolves, with the reason, when the session must stop: its `--max-duration`, the
    /// server's shutdown, more than `--max-bytes` moved, a client sending far above the rate
    /// it may send, an interval series at its bound. Call once per session.
    pub fn stop(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let deadline = self.deadline;
        let max_duration = self.gate.limits.max_duration;
        let mut abort = self.gate.abort.subscribe();
        let meter = Arc::clone(&self.meter);
        let rates = self.rates();
        let series = self
            .line
            .interval_us
            .map(|us| Duration::from_micros(us.saturating_mul(MAX_INTERVAL_SAMPLES)));
        let started = self.started;
        async move {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => format!(
                    "the session ran into the server's limit of {} (--max-duration)",
                    flag_duration(max_duration)
                ),
                _ = abort.wait_for(|a| *a) => "the server shut down before the session ended".to_string(),
                reason = watch(meter, rates, series, started) => reason,
            }
        }
    }

    /// Ends the session as aborted for `reason` (a limit a data path ran into comes first,
    /// as in [`Pass::end`]), with what its meter counted in the direction it shows; returns
    /// the report. For a session that failed before it had figures of its own.
    pub fn abort(&mut self, reason: String) -> ServerReport {
        let mut report = self.empty_report();
        let moved = self.meter.moved();
        report.bytes = if self.line.reverse {
            moved.sent
        } else {
            moved.read
        };
        self.end(report, Err(reason))
    }

    /// The rates the session is held to: what the client sends against a forward transfer's
    /// declared `rate_bps`, else the server's `--max-rate`; what the server sends against
    /// `--max-rate` (its own writers pace to it: this catches answers it cannot pace).
    fn rates(&self) -> Rates {
        // A declared rate binds what the client paces: every forward stream, and TCP and QUIC
        // stop-and-wait (paced by the kernel and by the sender). A UDP stop-and-wait sender is
        // clocked by the acknowledgements and never paced, so a `--rate` for a run's streams
        // must not abort its stop-and-wait (a lab's `--mode stream,saw --rate 2Gbit` was
        // aborted at 9.98 Gbit/s); `--max-rate` still holds it.
        let paced_by_client =
            !(self.line.protocol == Protocol::Udp && self.line.mechanism == Mechanism::StopAndWait);
        let declared = match self.kind {
            Kind::Transfer | Kind::Iperf3 if !self.line.reverse && paced_by_client => {
                self.line.rate_bps
            }
            _ => None,
        };
        let max = self.gate.limits.max_rate_bps;
        Rates {
            read: match (declared, max) {
                (Some(d), _) => Some((d, "the rate it declared")),
                (None, Some(max)) => Some((max, "--max-rate")),
                (None, None) => None,
            },
            sent: max,
        }
    }

    /// Ends the session with `report` and the kind's `outcome` (the reason it failed): decides
    /// its status, counts it, announces its line; returns the report to send to the client.
    /// The session's place is freed when the pass is dropped, after the report has gone out.
    pub fn end(&mut self, mut report: ServerReport, outcome: Result<(), String>) -> ServerReport {
        // A limit a data path ran into is the cause, whatever the kind saw after it.
        let outcome = match self.meter.tripped() {
            Some(reason) => Err(reason.to_string()),
            None => outcome,
        };
        match outcome {
            Err(reason) if !report.aborted => {
                report.aborted = true;
                report.abort_reason = Some(reason);
            }
            Ok(()) if !report.aborted => {
                if let Some(reason) = self.ended_early(&report) {
                    report.aborted = true;
                    report.abort_reason = Some(reason);
                }
            }
            _ => {}
        }
        self.finish(report)
    }

    /// A forward timed transfer whose data stopped well before its time: its client went away
    /// (killed, or stopped) — a normal end is after the time asked, by the sender's clock.
    fn ended_early(&self, report: &ServerReport) -> Option<String> {
        let asked = self.line.duration_us.map(Duration::from_micros)?;
        if self.kind != Kind::Transfer || self.line.reverse || self.line.protocol == Protocol::Udp {
            // Reversed the server itself sends for the time; UDP ends by the client's "done".
            return None;
        }
        let ran = Duration::from_nanos(report.elapsed_ns);
        let slack = (asked / 20).max(Duration::from_millis(200));
        (ran + slack < asked).then(|| {
            format!(
                "the client stopped sending after {:.3} s of the {:.3} s it asked for (it went away or was stopped)",
                ran.as_secs_f64(),
                asked.as_secs_f64()
            )
        })
    }

    fn finish(&mut self, mut report: ServerReport) -> ServerReport {
        self.ended = true;
        if let Some(reason) = &mut report.abort_reason {
            make_safe(reason);
        }
        report.cpu = self.cpu.stop();
        if matches!(self.kind, Kind::Exchange | Kind::Perf) {
            // No total was asked: the line shows what was read.
            self.line.total_bytes = report.bytes;
        }
        self.gate
            .metrics
            .ended(self.line.protocol, &report, self.meter.moved());
        if let Some(events) = self.gate.events.get() {
            let _ = events.send(ServerEvent::Session(Box::new(SessionSummary {
                session: self.session(),
                peer: self.peer,
                params: self.line.clone(),
                report: report.clone(),
            })));
        }
        report
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // The session's task ended without its end: it failed or panicked. Report it anyway.
        let reason = if std::thread::panicking() {
            "the session failed inside the server (it panicked; the server's log has the details)"
        } else {
            "the session ended inside the server without a report (an internal error)"
        };
        self.abort(reason.to_string());
    }
}

/// Reads `meter` every [`WATCH_TICK`] until a limit is passed; returns why.
async fn watch(
    meter: Arc<Meter>,
    rates: Rates,
    series: Option<Duration>,
    started: Instant,
) -> String {
    let mut ticks = tokio::time::interval(WATCH_TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read = rates.read.map(|(bps, what)| (RateCheck::new(bps), what));
    let mut sent = rates.sent.map(RateCheck::new);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            why = meter.tripped_wait() => return why,
        }
        if let Some(why) = meter.over_limit() {
            return why;
        }
        let moved = meter.moved();
        let now = Instant::now();
        if let Some((check, what)) = &mut read {
            if let Some(rate) = check.sample(now, moved.read) {
                return format!(
                    "the client sent at {rate:.0} bit/s, far above the {} bit/s it may send ({what})",
                    check.rate_bps()
                );
            }
        }
        if let Some(check) = &mut sent {
            if let Some(rate) = check.sample(now, moved.sent) {
                return format!(
                    "the client's requests called for answers at {rate:.0} bit/s, far above this server's limit of {} bit/s (--max-rate)",
                    check.rate_bps()
                );
            }
        }
        if series.is_some_and(|longest| started.elapsed() > longest) {
            return format!(
                "the interval series reached {MAX_INTERVAL_SAMPLES} samples, the most a session keeps (interval_us)"
            );
        }
    }
}

/// The rates a session's meter is held to: what the client sends (and where that rate comes
/// from), and what the server sends on its behalf.
#[derive(Debug, Clone, Copy)]
struct Rates {
    read: Option<(u64, &'static str)>,
    sent: Option<u64>,
}

/// `90s`, `10m`, `2h`, `1500ms`: a duration as the flags take it.
fn flag_duration(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) if d.subsec_millis() > 0 || sec == 0 => format!("{}ms", d.as_millis()),
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (h, 0, 0) => format!("{h}h"),
        _ => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests;
