//! `wirebench run --iperf3`: one test against a real iperf3 server, TCP or UDP, forward or
//! reverse, one or more streams, limited by bytes or time. Owns the client's side of the control
//! dialogue and the data tasks; must not print (its record is `iperf3::record`'s, its text `wirebench_output::iperf3_test`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;
use wirebench_core::wire::iperf3::{self as wire, State, StreamResult, TestParams, TestResults};

use super::{expect_state, recv_json, recv_state, send_json, send_state, SETUP_TIMEOUT};
use crate::transport::counters::CpuMeter;
use crate::transport::net;
pub use streams::StreamTally;
use streams::{join, recv_tcp, recv_udp, send_tcp, send_udp, settle, Shared, TaskCtx};
use wirebench_core::vocab::counters::{CpuUsage, Cumulative, IntervalSample, IntervalSeries};
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::DataPathOptions;

mod streams;

/// What ends the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// This many bytes over all streams (the sender's count; exact).
    Bytes(u64),
    /// This long.
    Time(Duration),
}

/// A validated iperf3 client test.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server as the user named it.
    pub name: String,
    /// Its resolved address (control and data).
    pub server: SocketAddr,
    /// UDP instead of TCP.
    pub udp: bool,
    /// The server sends (`-R`).
    pub reverse: bool,
    /// Parallel streams (`-P`).
    pub parallel: u32,
    /// Bytes per write (TCP) or per datagram, header included (UDP).
    pub len: u32,
    /// What ends the test.
    pub limit: Limit,
    /// Per-stream rate in bit/s, 0 = unlimited (UDP defaults to iperf3's 1 Mbit/s).
    pub rate_bps: u64,
    /// Print JSON instead of text.
    pub json: bool,
    /// What the user should know about how the test was set up (a UDP `-n` rounded up to
    /// whole datagrams), one line each.
    pub notes: Vec<String>,
    /// The data sockets' options (`-w`, `-C`, `-M`, `-N`, `-S`): ours, and asked of the
    /// server for its own.
    pub options: DataPathOptions,
    /// `--fq-rate`: kernel pacing of each TCP stream's sender, bit/s (0: none).
    pub fq_rate_bps: u64,
    /// `--get-server-output`: ask for the server's own output with its results.
    pub server_output: bool,
    /// `-A N,M`: the CPU the server runs the test on.
    pub server_cpu: Option<u32>,
    /// `--udp-counters-64bit`: UDP datagrams carry a 64-bit count (asked of the server too).
    pub counters_64bit: bool,
    /// `--dont-fragment`: our UDP sockets set Don't Fragment (`net::ClientSockets`), and the
    /// server is asked to set it on its own.
    pub dont_fragment: bool,
    /// `-i`: what our streams moved is read every this long (None: no series).
    pub interval: Option<Duration>,
}

/// Both views of one finished test.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    /// Our streams, in id order.
    pub ours: Vec<StreamTally>,
    /// The results we sent to the server.
    pub our_results: TestResults,
    /// The results the server sent us.
    pub server: TestResults,
    /// With an interval: what our streams sent (with -R received) per interval.
    pub intervals: Vec<IntervalSample>,
    /// CPU time this process spent from the streams' start to the results (getrusage).
    pub cpu: Option<CpuUsage>,
    /// When our streams had all stopped.
    pub streams_stopped: Instant,
}

impl ClientOutcome {
    /// Bytes over all our streams.
    pub fn our_bytes(&self) -> u64 {
        self.ours.iter().map(|s| s.bytes).sum()
    }

    /// First byte to last byte over all our streams, seconds.
    pub fn our_seconds(&self) -> f64 {
        let first = self.ours.iter().map(|s| s.first_s).fold(f64::MAX, f64::min);
        let last = self.ours.iter().map(|s| s.last_s).fold(0.0, f64::max);
        if last > first {
            last - first
        } else {
            0.0
        }
    }
}

/// Runs one test to its end: set-up, the data phase, then the results both ways.
pub async fn run(cfg: &ClientConfig) -> Result<ClientOutcome> {
    let mut ctrl = tokio::time::timeout(SETUP_TIMEOUT, net::connect_tcp(cfg.server))
        .await
        .map_err(|_| anyhow::anyhow!("iperf3 server {} did not answer in time", cfg.name))?
        .with_context(|| format!("cannot connect to the iperf3 server {}", cfg.name))?;
    let _ = ctrl.set_nodelay(true);
    let cookie = super::new_cookie();
    ctrl.write_all(&cookie)
        .await
        .context("while sending the iperf3 cookie")?;
    let streams = set_up(cfg, &mut ctrl, &cookie).await?;
    let start = Instant::now();
    let cpu = CpuMeter::start();
    let (shared, stop_tx, mut tasks) = start_streams(cfg, streams, start);
    let mut series = watch_data_phase(cfg, &mut ctrl, &shared, start).await?;
    let mut outcome = end_test(cfg, ctrl, &stop_tx, &mut tasks, (start, cpu)).await?;
    // The last, partial interval ends where the streams stopped: it holds every byte they
    // moved after the last reading (unless the test ended right on a reading).
    if cfg.interval.is_some() {
        let at = duration_ns(outcome.streams_stopped.saturating_duration_since(start));
        if at > series.end_ns() {
            series.push(
                at,
                Cumulative {
                    bytes: outcome.our_bytes(),
                    ..Cumulative::default()
                },
            );
        }
    }
    outcome.intervals = series.into_samples();
    Ok(outcome)
}

/// Set-up: answers the server's states until it says the test runs; the data streams it asked
/// for, one per `-P`.
async fn set_up(
    cfg: &ClientConfig,
    ctrl: &mut TcpStream,
    cookie: &[u8; wire::COOKIE_LEN],
) -> Result<Vec<DataStream>> {
    let mut streams: Vec<DataStream> = Vec::new();
    loop {
        let state = expect_state(ctrl, "during set-up").await?;
        match state {
            State::ParamExchange => send_json(ctrl, &params(cfg)).await?,
            State::CreateStreams => {
                for index in 0..cfg.parallel {
                    streams.push(open_stream(cfg, cookie, index).await?);
                }
            }
            State::TestStart => {}
            State::TestRunning => break,
            other => return Err(refusal(ctrl, other).await),
        }
    }
    if streams.len() != cfg.parallel as usize {
        bail!("the iperf3 server started the test before asking for the data streams");
    }
    Ok(streams)
}

/// The streams' tasks, started at `start`: what they share (the byte budget, what moved), the
/// switch that stops them, and their set.
fn start_streams(
    cfg: &ClientConfig,
    streams: Vec<DataStream>,
    start: Instant,
) -> (
    Arc<Shared>,
    watch::Sender<bool>,
    JoinSet<Result<StreamTally>>,
) {
    let shared = Arc::new(Shared {
        budget: AtomicU64::new(match cfg.limit {
            Limit::Bytes(n) if !cfg.reverse => n,
            _ => u64::MAX,
        }),
        moved: AtomicU64::new(0),
        target: match cfg.limit {
            Limit::Bytes(n) if cfg.reverse => n,
            _ => u64::MAX,
        },
        reached: tokio::sync::Notify::new(),
        finished: AtomicUsize::new(0),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for (index, stream) in streams.into_iter().enumerate() {
        let ctx = TaskCtx {
            id: wire::stream_id(index as u32),
            len: cfg.len as usize,
            rate_bps: cfg.rate_bps,
            counters_64bit: cfg.counters_64bit,
            start,
            shared: shared.clone(),
            stop: stop_rx.clone(),
        };
        match (stream, cfg.reverse) {
            // TCP streams leave the runtime for threads of their own (`streams::send_tcp`).
            (DataStream::Tcp(s), false) => {
                tasks.spawn_blocking(move || send_tcp(off_runtime(s)?, ctx))
            }
            (DataStream::Tcp(s), true) => {
                tasks.spawn_blocking(move || recv_tcp(off_runtime(s)?, ctx))
            }
            (DataStream::Udp(s), false) => tasks.spawn(send_udp(s, ctx)),
            (DataStream::Udp(s), true) => tasks.spawn(recv_udp(s, ctx)),
        };
    }
    (shared, stop_tx, tasks)
}

/// A TCP stream taken off the runtime, for a thread of its own.
fn off_runtime(s: TcpStream) -> Result<std::net::TcpStream> {
    s.into_std()
        .context("while taking an iperf3 TCP stream off the runtime")
}

/// The data phase: watches the limit, the streams and the control connection until the test's
/// end condition (its time, its bytes, every stream done), reading what moved every `-i`; a
/// stalled test or a server that speaks or leaves meanwhile is an error. Returns the series
/// so far (its last interval is the end's to close).
async fn watch_data_phase(
    cfg: &ClientConfig,
    ctrl: &mut TcpStream,
    shared: &Shared,
    start: Instant,
) -> Result<IntervalSeries> {
    let mut series = IntervalSeries::new();
    let mut next_reading = cfg.interval.map(|period| start + period);
    let deadline = match cfg.limit {
        Limit::Time(d) => Some(start + d),
        Limit::Bytes(_) => None,
    };
    // Only the stall check needs a tick: the deadline, the readings, the streams' end and the
    // server each wake the loop themselves. A 10 ms tick woke a CPU the streams use 100 times
    // a second.
    let mut stall_look = tokio::time::interval(STALL_LOOK);
    stall_look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_progress = (0u64, Instant::now());
    // A paced UDP stream may be quiet for a few datagram intervals; TCP never should be.
    let stall_limit = SETUP_TIMEOUT
        + match cfg.rate_bps {
            0 => Duration::ZERO,
            r => Duration::from_secs_f64(3.0 * f64::from(cfg.len) * 8.0 / r as f64),
        };
    loop {
        tokio::select! {
            _ = stall_look.tick() => {}
            _ = shared.reached.notified() => {}
            // A timed test ends on its time, and a reading is taken on its time.
            () = until(deadline) => {}
            () = until(next_reading) => {}
            state = recv_state(ctrl) => match state? {
                None => bail!("the iperf3 server closed the control connection during the test"),
                Some(other) => return Err(refusal(ctrl, other).await),
            },
        }
        let now = Instant::now();
        let moved = shared.moved.load(Ordering::Relaxed);
        if let (Some(at), Some(period)) = (next_reading, cfg.interval) {
            if now >= at {
                let reading = Cumulative {
                    bytes: moved,
                    ..Cumulative::default()
                };
                series.push(duration_ns(now.saturating_duration_since(start)), reading);
                next_reading = Some(next_reading_after(at, period, now));
            }
        }
        let reverse_done = matches!(cfg.limit, Limit::Bytes(n) if cfg.reverse && moved >= n);
        if deadline.is_some_and(|d| now >= d)
            || reverse_done
            || shared.finished.load(Ordering::Relaxed) == cfg.parallel as usize
        {
            return Ok(series);
        }
        if moved != last_progress.0 {
            last_progress = (moved, now);
        } else if now.duration_since(last_progress.1) > stall_limit {
            bail!("no data moved for {stall_limit:?}: the iperf3 test stalled");
        }
    }
}

/// When the reading after the one due `at` and taken `now` is due: a period after `at`, or,
/// when that has passed too, a period after `now`. A late reading is taken late, not bunched:
/// the loop wakes with `until(next_reading)`, which a time already past would answer at once
/// with a second reading.
fn next_reading_after(at: Instant, period: Duration, now: Instant) -> Instant {
    let next = at + period;
    if next > now {
        next
    } else {
        now + period
    }
}

/// How often the data phase looks whether data still moves (its limit is seconds).
const STALL_LOOK: Duration = Duration::from_millis(100);

/// Sleeps until `deadline`, or for ever without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// The end: stops the streams (senders before TEST_END, receivers after the server stopped
/// sending), exchanges the results and says goodbye.
async fn end_test(
    cfg: &ClientConfig,
    mut ctrl: TcpStream,
    stop_tx: &watch::Sender<bool>,
    tasks: &mut JoinSet<Result<StreamTally>>,
    (start, cpu): (Instant, CpuMeter),
) -> Result<ClientOutcome> {
    if !cfg.reverse {
        // Senders stop; the server counts what they wrote before TEST_END.
        let _ = stop_tx.send(true);
    }
    let mut streams_stopped = start;
    // An iperf3 server stops its clock and its counts when it reads TEST_END. Our TCP senders
    // waited for the acknowledgements and the settle (`streams::send_tcp`), which lets the
    // server read what its kernel holds while its time runs at most 1 % long; UDP has no
    // acknowledgements, so the settle alone. What it still did not count, `report` says.
    let mut ours = if cfg.reverse {
        Vec::new()
    } else {
        let tallies = join(tasks).await?;
        streams_stopped = tallies
            .iter()
            .map(|t| start + Duration::from_secs_f64(t.last_s))
            .max()
            .unwrap_or(start);
        if cfg.udp {
            tokio::time::sleep(settle(streams_stopped.saturating_duration_since(start))).await;
        }
        tallies
    };
    send_state(&mut ctrl, State::TestEnd).await?;
    match expect_state(&mut ctrl, "after TEST_END").await? {
        State::ExchangeResults => {}
        other => return Err(refusal(&mut ctrl, other).await),
    }
    if cfg.reverse {
        // The server has stopped sending: receivers take what already arrived, then stop.
        let _ = stop_tx.send(true);
        ours = join(tasks).await?;
        streams_stopped = Instant::now();
    }
    ours.sort_by_key(|s| s.id);
    // Our CPU over the test, sent to the server as iperf3's client sends its own.
    let cpu = cpu.stop();
    let cpu_percent = cpu.map_or((0.0, 0.0, 0.0), |c| {
        c.percent_of(start.elapsed().as_secs_f64())
    });
    let our_results = results(&ours, cfg.reverse, cpu_percent);
    send_json(&mut ctrl, &our_results).await?;
    let server: TestResults = recv_json(&mut ctrl).await?;
    match expect_state(&mut ctrl, "after the results").await? {
        State::DisplayResults => {}
        other => return Err(refusal(&mut ctrl, other).await),
    }
    send_state(&mut ctrl, State::IperfDone).await?;
    let _ = ctrl.shutdown().await;
    Ok(ClientOutcome {
        ours,
        our_results,
        server,
        intervals: Vec::new(),
        cpu,
        streams_stopped,
    })
}

/// The parameters we send for `cfg`.
pub fn params(cfg: &ClientConfig) -> TestParams {
    let (time, num) = match cfg.limit {
        Limit::Bytes(n) => (0, n),
        // iperf3 takes whole seconds; we stop on our own clock, so round up.
        Limit::Time(d) => ((d.as_secs_f64().ceil() as u64).max(1), 0),
    };
    TestParams {
        tcp: !cfg.udp,
        udp: cfg.udp,
        omit: 0,
        time,
        num,
        blockcount: 0,
        parallel: cfg.parallel,
        reverse: cfg.reverse,
        bidirectional: false,
        len: cfg.len,
        bandwidth: cfg.rate_bps,
        udp_counters_64bit: u64::from(cfg.counters_64bit),
        pacing_timer: Some(1000),
        client_version: Some(format!("wirebench {}", env!("CARGO_PKG_VERSION"))),
        fqrate: cfg.fq_rate_bps,
        window: cfg.options.window.map_or(0, u64::from),
        mss: cfg.options.mss.map_or(0, u64::from),
        nodelay: cfg.options.nodelay,
        tos: cfg.options.tos.map_or(0, u64::from),
        congestion: cfg.options.congestion.clone(),
        get_server_output: u64::from(cfg.server_output),
        // What iperf3's client sends for -A N,M and --dont-fragment, which TestParams does
        // not name.
        other: cfg
            .server_cpu
            .map(|cpu| ("server_affinity".to_string(), cpu.into()))
            .into_iter()
            .chain(
                cfg.dont_fragment
                    .then(|| ("dont_fragment".to_string(), 1.into())),
            )
            .collect(),
        ..TestParams::default()
    }
}

/// The results document for our streams.
fn results(
    ours: &[StreamTally],
    reverse: bool,
    (total, user, system): (f64, f64, f64),
) -> TestResults {
    TestResults {
        // Percent of the test's time, as iperf3's client reports it (the server prints it).
        cpu_util_total: total,
        cpu_util_user: user,
        cpu_util_system: system,
        // iperf3's 1: the sender read its retransmissions (our TCP streams' TCP_INFO).
        sender_has_retransmits: match (reverse, ours.iter().any(|s| s.transport.is_some())) {
            (true, _) => -1,
            (false, true) => 1,
            (false, false) => 0,
        },
        congestion_used: None,
        streams: ours
            .iter()
            .map(|s| StreamResult {
                id: s.id,
                bytes: s.bytes,
                retransmits: s
                    .transport
                    .as_ref()
                    .and_then(|t| t.tcp_total_retrans)
                    .map_or(-1, |r| i64::try_from(r).unwrap_or(i64::MAX)),
                jitter: s.udp.as_ref().map_or(0.0, |u| u.jitter_s),
                errors: s
                    .udp
                    .as_ref()
                    .map_or(0, |u| i64::try_from(u.lost).unwrap_or(i64::MAX)),
                packets: match &s.udp {
                    Some(u) => i64::try_from(u.highest).unwrap_or(i64::MAX),
                    None => i64::try_from(s.datagrams).unwrap_or(i64::MAX),
                },
                start_time: 0.0,
                end_time: s.last_s,
                ..StreamResult::default()
            })
            .collect(),
        server_output_text: None,
    }
}

/// Turns an unexpected state into an error that says what the server meant.
async fn refusal(ctrl: &mut TcpStream, state: State) -> anyhow::Error {
    match state {
        State::AccessDenied => {
            anyhow::anyhow!("the iperf3 server is busy with another test (it serves one at a time)")
        }
        State::ServerError => {
            let mut codes = [0u8; 8];
            let read = tokio::time::timeout(SETUP_TIMEOUT, ctrl.read_exact(&mut codes)).await;
            if matches!(read, Ok(Ok(_))) {
                let code = i32::from_be_bytes([codes[0], codes[1], codes[2], codes[3]]);
                let errno = i32::from_be_bytes([codes[4], codes[5], codes[6], codes[7]]);
                anyhow::anyhow!(
                    "the iperf3 server reported error {code} (errno {errno}); its own log says more"
                )
            } else {
                anyhow::anyhow!("the iperf3 server reported an error")
            }
        }
        State::ServerTerminate => anyhow::anyhow!("the iperf3 server is shutting down"),
        other => anyhow::anyhow!("the iperf3 server sent {other:?} out of turn"),
    }
}

/// A connected data stream.
enum DataStream {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

/// Opens data stream number `index`: TCP with the cookie, or UDP with the connect handshake.
async fn open_stream(cfg: &ClientConfig, cookie: &[u8], index: u32) -> Result<DataStream> {
    let what = format!("data stream {} to {}", index + 1, cfg.name);
    if !cfg.udp {
        // The data socket as wirebench's own: -w and -M before connect, the rest after, and
        // --fq-rate on a sending one.
        let pacing = (cfg.fq_rate_bps > 0 && !cfg.reverse).then_some(cfg.fq_rate_bps);
        let connect = net::connect_tcp_data(cfg.server, &cfg.options, Mechanism::Stream, pacing);
        let mut s = tokio::time::timeout(SETUP_TIMEOUT, connect)
            .await
            .map_err(|_| anyhow::anyhow!("{what}: no answer in time"))?
            .with_context(|| format!("cannot open {what}"))?;
        s.write_all(cookie)
            .await
            .with_context(|| format!("while opening {what}"))?;
        return Ok(DataStream::Tcp(s));
    }
    let std = crate::transport::net::udp_socket(cfg.server.is_ipv6(), None, None)?;
    let s = UdpSocket::from_std(std).context("while registering a UDP socket")?;
    s.connect(cfg.server)
        .await
        .with_context(|| format!("cannot open {what}"))?;
    let handshake = async {
        s.send(&wire::UDP_CONNECT_MSG).await?;
        let mut reply = [0u8; 64];
        loop {
            let n = s.recv(&mut reply).await?;
            if reply[..n] == wire::UDP_CONNECT_REPLY || reply[..n] == wire::LEGACY_UDP_CONNECT_REPLY
            {
                return Ok::<_, std::io::Error>(());
            }
        }
    };
    tokio::time::timeout(SETUP_TIMEOUT, handshake)
        .await
        .map_err(|_| anyhow::anyhow!("{what}: the server did not answer the UDP connect message"))?
        .with_context(|| format!("while opening {what}"))?;
    Ok(DataStream::Udp(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_keep_their_grid_and_a_late_one_is_not_followed_by_another_at_once() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        // On time, or late by less than a period: the grid holds.
        let at = start + second;
        assert_eq!(next_reading_after(at, second, at), start + 2 * second);
        let late = at + Duration::from_millis(300);
        assert_eq!(next_reading_after(at, second, late), start + 2 * second);
        // Late by more than a period: a period after the late reading, not a time already
        // past.
        let very_late = at + Duration::from_millis(2500);
        let next = next_reading_after(at, second, very_late);
        assert_eq!(next, very_late + second);
        assert!(next > very_late);
    }
}
