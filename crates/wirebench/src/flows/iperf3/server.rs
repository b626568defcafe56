//! The iperf3 listener of `wirebench server --iperf3`: serves real `iperf3 -c` clients (TCP and
//! UDP, forward and `-R`, `-P N`) on its own port, several tests at once. Each test passes the
//! server's gate (admission, `--max-bytes` both ways, `--max-rate`, `--max-duration`, the
//! shutdown) and is reported by it as one session line. Owns the server side of the iperf3
//! dialogue and the UDP hub that demultiplexes datagrams by sender; must not touch wirebench's
//! own listener.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::iperf3::{
    self as wire, State, StreamResult, TestParams, TestPlan, TestResults, UdpHeader, UdpReceiver,
    COOKIE_LEN,
};
use wirebench_core::wire::proto::{ServerReport, SessionParams};

use super::hub::{hub, HubCmd};
use super::{expect_state, recv_cookie, recv_json, recv_state, send_json, send_state};
use crate::flows::server::gate::{Ask, Gate, Pass};
use crate::flows::server::meter::Meter;
use wirebench_core::vocab::units::duration_ns;

/// iperf3's error code for "not implemented", sent with `SERVER_ERROR` when a client asks for
/// something this listener does not serve (the reason is printed on our side).
const IE_UNIMPLEMENTED: i32 = 13;

/// After TEST_END, a data stream counts as drained once nothing arrived for this long.
const QUIET: Duration = Duration::from_millis(20);

/// Longest time spent draining after TEST_END.
const MAX_DRAIN: Duration = Duration::from_secs(2);

/// A bound iperf3 listener (TCP and UDP on one port), ready to run.
#[derive(Debug)]
pub struct Iperf3Server {
    listener: TcpListener,
    udp: Arc<UdpSocket>,
    local: SocketAddr,
}

impl Iperf3Server {
    /// Binds TCP and UDP on the same port; with port 0 the OS picks the TCP port and UDP takes
    /// the same number (retrying a few times if that UDP port is taken).
    pub async fn bind(listen: SocketAddr) -> Result<Iperf3Server> {
        let attempts = if listen.port() == 0 { 20 } else { 1 };
        let mut last_err = None;
        for _ in 0..attempts {
            let tcp = crate::transport::net::tcp_listener(listen)?;
            let port = tcp
                .local_addr()
                .context("while reading the TCP port")?
                .port();
            match crate::transport::net::udp_socket(
                listen.is_ipv6(),
                Some(SocketAddr::new(listen.ip(), port)),
                None,
            ) {
                Ok(udp) => {
                    let listener = TcpListener::from_std(tcp)
                        .context("while registering the iperf3 TCP listener")?;
                    let udp = UdpSocket::from_std(udp)
                        .context("while registering the iperf3 UDP socket")?;
                    let local = listener.local_addr().context("while reading the address")?;
                    return Ok(Iperf3Server {
                        listener,
                        udp: Arc::new(udp),
                        local,
                    });
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err
            .unwrap_or_else(|| anyhow::anyhow!("no port"))
            .context(format!(
                "cannot use UDP port {} next to TCP for iperf3",
                listen.port()
            )))
    }

    /// The address (and the one port) it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until dropped; every test passes `gate`, which reports it.
    pub async fn run(self, gate: Arc<Gate>) -> Result<()> {
        let (hub_tx, hub_rx) = mpsc::unbounded_channel();
        let hub_task = tokio::spawn(hub(self.udp.clone(), hub_rx));
        let _guard = AbortOnDrop(hub_task);
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            hub: hub_tx,
            udp: self.udp.clone(),
            gate,
            next_test: AtomicU64::new(1),
        });
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    shared.notice(self.local, format!("iperf3 accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let shared = shared.clone();
            tokio::spawn(async move { route(stream, peer, shared).await });
        }
    }
}

/// State every connection handler shares.
struct Shared {
    /// Tests waiting for their TCP data connections, by cookie.
    pending: Mutex<HashMap<[u8; COOKIE_LEN], mpsc::UnboundedSender<TcpStream>>>,
    hub: mpsc::UnboundedSender<HubCmd>,
    udp: Arc<UdpSocket>,
    gate: Arc<Gate>,
    next_test: AtomicU64,
}

impl Shared {
    fn notice(&self, peer: SocketAddr, message: String) {
        self.gate.notice(peer, message);
    }
}

/// Reads the cookie of a new connection: a known cookie makes it a data stream of that test,
/// an unknown one starts a test.
async fn route(mut stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let cookie = match recv_cookie(&mut stream).await {
        Ok(c) => c,
        Err(e) => {
            shared.notice(peer, format!("iperf3 connection refused: {e:#}"));
            return;
        }
    };
    let waiting = shared
        .pending
        .lock()
        .ok()
        .and_then(|p| p.get(&cookie).cloned());
    if let Some(test) = waiting {
        let _ = test.send(stream);
        return;
    }
    let _ = stream.set_nodelay(true);
    // Register the cookie before PARAM_EXCHANGE, so data connections find this test.
    let (tx, rx) = mpsc::unbounded_channel();
    if let Ok(mut p) = shared.pending.lock() {
        p.insert(cookie, tx);
    }
    let test = shared.next_test.fetch_add(1, Ordering::Relaxed);
    let mut ctx = Test {
        id: test,
        peer,
        shared: shared.clone(),
        data: rx,
        plan: None,
        pass: None,
        client_bytes: None,
    };
    let outcome = ctx.serve(&mut stream).await;
    if let Ok(mut p) = shared.pending.lock() {
        p.remove(&cookie);
    }
    let _ = shared.hub.send(HubCmd::Forget { test });
    ctx.end(outcome);
    let _ = stream.shutdown().await;
}

/// What one test counted on our side.
#[derive(Debug, Default)]
struct Counted {
    bytes: u64,
    /// Read calls (TCP) or datagrams received (UDP).
    reads: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    udp: Option<UdpReceiver>,
}

/// One iperf3 test on the server.
struct Test {
    id: u64,
    peer: SocketAddr,
    shared: Arc<Shared>,
    data: mpsc::UnboundedReceiver<TcpStream>,
    plan: Option<TestPlan>,
    /// The test's pass through the server's gate, once admitted.
    pass: Option<Pass>,
    /// What the client said it received (reverse tests).
    client_bytes: Option<(u64, u64, f64)>,
}

impl Test {
    /// The whole dialogue; returns what we counted.
    async fn serve(&mut self, ctrl: &mut TcpStream) -> Result<Counted> {
        send_state(ctrl, State::ParamExchange).await?;
        let params: TestParams = recv_json(ctrl).await?;
        let plan = match params.plan() {
            Ok(p) => p,
            Err(e) => {
                let mut msg = vec![State::ServerError.to_byte()];
                msg.extend_from_slice(&IE_UNIMPLEMENTED.to_be_bytes());
                msg.extend_from_slice(&0i32.to_be_bytes());
                let _ = ctrl.write_all(&msg).await;
                bail!("{e}");
            }
        };
        // Through the gate before any stream is set up: a refusal is iperf3's "busy".
        let line = session_of(&plan);
        let pass = match self.shared.gate.admit(self.peer, Ask::Iperf3(&line)) {
            Ok(pass) => pass,
            Err(reason) => {
                let _ = send_state(ctrl, State::AccessDenied).await;
                bail!("{reason}");
            }
        };
        let meter = Arc::clone(pass.meter());
        let stop = pass.stop();
        self.pass = Some(pass);
        self.plan = Some(plan.clone());
        send_state(ctrl, State::CreateStreams).await?;
        let streams = self.collect_streams(&plan).await?;
        send_state(ctrl, State::TestStart).await?;
        send_state(ctrl, State::TestRunning).await?;
        let start = Instant::now();
        let (stop_tx, stop_rx) = watch::channel(false);
        let budget = Arc::new(AtomicU64::new(match (plan.bytes, plan.blocks) {
            (Some(b), _) => b,
            (None, Some(k)) => k.saturating_mul(u64::from(plan.len)),
            (None, None) => u64::MAX,
        }));
        // What the server sends is paced to the lower of the test's rate and --max-rate.
        let send_rate = match (plan.rate_bps, meter_rate(&meter)) {
            (0, max) => max.unwrap_or(0),
            (asked, Some(max)) => asked.min(max),
            (asked, None) => asked,
        };
        let mut tasks: JoinSet<Result<(usize, Counted)>> = JoinSet::new();
        for (index, stream) in streams.into_iter().enumerate() {
            let stop = stop_rx.clone();
            let len = plan.len as usize;
            match stream {
                Stream::Tcp(s) if plan.reverse => {
                    let budget = budget.clone();
                    let meter = Arc::clone(&meter);
                    tasks.spawn(async move {
                        Ok((index, send_tcp(s, len, budget, &meter, stop).await?))
                    });
                }
                Stream::Tcp(s) => {
                    let meter = Arc::clone(&meter);
                    tasks.spawn(async move { Ok((index, recv_tcp(s, &meter, stop).await?)) });
                }
                Stream::Udp(addr) if plan.reverse => {
                    let socket = self.shared.udp.clone();
                    let budget = budget.clone();
                    let pace = Pace {
                        start,
                        rate_bps: send_rate,
                        counters_64bit: plan.counters_64bit,
                    };
                    let meter = Arc::clone(&meter);
                    tasks.spawn(async move {
                        Ok((
                            index,
                            send_udp(socket, addr, len, budget, pace, &meter, stop).await?,
                        ))
                    });
                }
                // Forward UDP is counted by the hub.
                Stream::Udp(_) => {}
            }
        }
        // Wait for the client's TEST_END.
        // A time-limited test whose client vanished without closing ends here too.
        let patience = match (plan.bytes, plan.blocks) {
            (None, None) => Duration::from_secs(plan.time_s.saturating_add(60)),
            _ => Duration::MAX,
        };
        let waited = tokio::select! {
            end = tokio::time::timeout(patience, recv_state(ctrl)) => end
                .unwrap_or_else(|_| Err(anyhow::anyhow!("no TEST_END within the test's time + 60 s"))),
            // The gate stops the test: its duration, a limit, the server's shutdown.
            reason = stop => Err(anyhow::anyhow!("{reason}")),
        };
        let end = match waited {
            Ok(Some(State::TestEnd)) => Ok(()),
            Ok(Some(State::ClientTerminate)) => Err(anyhow::anyhow!(
                "the client stopped the test (CLIENT_TERMINATE)"
            )),
            Ok(Some(State::IperfDone)) | Ok(None) => Err(anyhow::anyhow!(
                "the client closed the control connection during the test"
            )),
            Ok(Some(other)) => Err(anyhow::anyhow!("the client sent {other:?} during the test")),
            Err(e) => Err(e),
        };
        let _ = stop_tx.send(true);
        let mut per_stream: Vec<(usize, Counted)> = Vec::new();
        while let Some(done) = tasks.join_next().await {
            per_stream.push(done.context("a data task failed")??);
        }
        if plan.udp && !plan.reverse {
            // Datagrams sent just before TEST_END may still be on their way.
            tokio::time::sleep(QUIET).await;
            let (reply, answer) = oneshot::channel();
            let _ = self.shared.hub.send(HubCmd::Finish {
                test: self.id,
                reply,
            });
            let receivers = answer.await.unwrap_or_default();
            for (index, r) in receivers.into_iter().enumerate() {
                per_stream.push((
                    index,
                    Counted {
                        bytes: r.1.bytes,
                        reads: r.1.datagrams,
                        first: r.0.map(|(f, _)| f),
                        last: r.0.map(|(_, l)| l),
                        udp: Some(r.1),
                    },
                ));
            }
        }
        per_stream.sort_by_key(|(i, _)| *i);
        end?;
        send_state(ctrl, State::ExchangeResults).await?;
        let client: TestResults = recv_json(ctrl).await?;
        if plan.reverse {
            self.client_bytes = Some((
                client.total_bytes(),
                client.total_packets(),
                client.duration_s(),
            ));
        }
        send_json(ctrl, &results(&per_stream, &plan, start)).await?;
        send_state(ctrl, State::DisplayResults).await?;
        // The client answers IPERF_DONE and closes; either is fine.
        let _ = expect_state(ctrl, "after the results").await;
        Ok(merge(per_stream))
    }

    /// Waits for the test's data streams.
    async fn collect_streams(&mut self, plan: &TestPlan) -> Result<Vec<Stream>> {
        let mut streams = Vec::new();
        if plan.udp {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let meter = self.pass.as_ref().map(|p| Arc::clone(p.meter()));
            let _ = self.shared.hub.send(HubCmd::Expect {
                test: self.id,
                ip: crate::transport::net::canonical_ip(self.peer.ip()),
                count: plan.parallel,
                counters_64bit: plan.counters_64bit,
                streams: tx,
                meter,
            });
            for _ in 0..plan.parallel {
                let addr = tokio::time::timeout(super::SETUP_TIMEOUT, rx.recv())
                    .await
                    .map_err(|_| anyhow::anyhow!("the client opened no UDP stream in time"))?
                    .context("the UDP hub stopped")?;
                streams.push(Stream::Udp(addr));
            }
        } else {
            for _ in 0..plan.parallel {
                let s = tokio::time::timeout(super::SETUP_TIMEOUT, self.data.recv())
                    .await
                    .map_err(|_| anyhow::anyhow!("the client opened too few TCP streams in time"))?
                    .context("no more TCP streams")?;
                streams.push(Stream::Tcp(s));
            }
        }
        Ok(streams)
    }

    /// Ends the test through its pass (the gate prints its line); a test that never got
    /// that far (a port scan, a stray connection, a refused one) is a notice at most.
    fn end(&mut self, outcome: Result<Counted>) {
        let (Some(plan), Some(mut pass)) = (self.plan.clone(), self.pass.take()) else {
            if let (Err(e), None) = (&outcome, &self.pass) {
                if self.plan.is_none() {
                    self.shared
                        .notice(self.peer, format!("iperf3 test refused: {e:#}"));
                }
            }
            return;
        };
        let plan = &plan;
        let protocol = if plan.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let (counted, result) = match outcome {
            Ok(c) => (c, Ok(())),
            Err(e) => (Counted::default(), Err(format!("{e:#}"))),
        };
        let elapsed_ns = match (counted.first, counted.last) {
            (Some(f), Some(l)) => duration_ns(l.saturating_duration_since(f)),
            _ => 0,
        };
        let udp = counted.udp.clone().unwrap_or_default();
        let mut report = ServerReport {
            protocol,
            mechanism: Mechanism::Stream,
            messages: if plan.udp {
                udp.datagrams - udp.out_of_order.min(udp.datagrams)
            } else {
                counted.reads
            },
            bytes: counted.bytes,
            read_calls: counted.reads,
            elapsed_ns,
            lost: udp.lost,
            out_of_order: udp.out_of_order,
            ..ServerReport::default()
        };
        if plan.reverse {
            // We sent: the reading end is the client, so the line shows what it reported.
            let (bytes, packets, secs) = self.client_bytes.unwrap_or_default();
            self.shared.notice(
                self.peer,
                format!(
                    "iperf3 -R test: wirebench sent {} bytes; the session line shows what the iperf3 client read",
                    counted.bytes
                ),
            );
            report.bytes = bytes;
            report.messages = if plan.udp { packets } else { 0 };
            report.read_calls = 0;
            report.elapsed_ns = (secs * 1e9) as u64;
        }
        pass.end(report, result);
    }
}

/// The session a test is, as the gate admits it and its line shows it: protocol, block size,
/// total (or time), the rate over all its streams.
fn session_of(plan: &TestPlan) -> SessionParams {
    let total = match (plan.bytes, plan.blocks) {
        (Some(b), _) => Some(b),
        (None, Some(k)) => Some(k.saturating_mul(u64::from(plan.len))),
        (None, None) => None,
    };
    SessionParams {
        duration_us: total
            .is_none()
            .then(|| plan.time_s.saturating_mul(1_000_000)),
        omit_us: None,
        protocol: if plan.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        mechanism: Mechanism::Stream,
        msg_size: plan.len,
        total_bytes: total.unwrap_or(wirebench_core::wire::proto::UNBOUNDED_TOTAL),
        rto_us: None,
        rate_bps: (plan.rate_bps > 0)
            .then(|| plan.rate_bps.saturating_mul(u64::from(plan.parallel))),
        grace_us: 0,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    }
}

/// The server's --max-rate, as the meter holds it (None: unlimited).
fn meter_rate(meter: &Meter) -> Option<u64> {
    meter.max_rate_bps()
}

/// A data stream of a running test.
enum Stream {
    Tcp(TcpStream),
    Udp(SocketAddr),
}

/// Sums per-stream counts.
fn merge(per_stream: Vec<(usize, Counted)>) -> Counted {
    let mut total = Counted::default();
    let mut udp: Option<UdpReceiver> = None;
    for (_, c) in per_stream {
        total.bytes += c.bytes;
        total.reads += c.reads;
        total.first = match (total.first, c.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        total.last = match (total.last, c.last) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(r) = c.udp {
            let u = udp.get_or_insert_with(UdpReceiver::default);
            u.datagrams += r.datagrams;
            u.bytes += r.bytes;
            u.highest += r.highest;
            u.lost += r.lost;
            u.out_of_order += r.out_of_order;
            u.jitter_s = u.jitter_s.max(r.jitter_s);
        }
    }
    total.udp = udp;
    total
}

/// Our results document.
fn results(per_stream: &[(usize, Counted)], plan: &TestPlan, start: Instant) -> TestResults {
    TestResults {
        cpu_util_total: 0.0,
        cpu_util_user: 0.0,
        cpu_util_system: 0.0,
        sender_has_retransmits: if plan.reverse { 0 } else { -1 },
        congestion_used: None,
        streams: per_stream
            .iter()
            .map(|(index, c)| StreamResult {
                id: wire::stream_id(*index as u32),
                bytes: c.bytes,
                retransmits: -1,
                jitter: c.udp.as_ref().map_or(0.0, |u| u.jitter_s),
                errors: c
                    .udp
                    .as_ref()
                    .map_or(0, |u| i64::try_from(u.lost).unwrap_or(i64::MAX)),
                packets: match &c.udp {
                    Some(u) => i64::try_from(u.highest).unwrap_or(i64::MAX),
                    None if plan.udp => i64::try_from(c.reads).unwrap_or(i64::MAX),
                    None => 0,
                },
                start_time: 0.0,
                end_time: c.last.map_or(0.0, |l| super::seconds_since(start, l)),
            })
            .collect(),
    }
}

fn payload(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
        .collect()
}

/// Takes up to `want` bytes from a shared budget; 0 when spent.
fn claim(budget: &AtomicU64, want: u64) -> u64 {
    let mut got = 0;
    let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
        got = left.min(want);
        Some(left - got)
    });
    got
}

async fn recv_tcp(
    mut s: TcpStream,
    meter: &Meter,
    mut stop: watch::Receiver<bool>,
) -> Result<Counted> {
    let mut buf = vec![0u8; 128 * 1024];
    let mut c = Counted::default();
    let count = |n: usize, c: &mut Counted| {
        let now = Instant::now();
        c.first.get_or_insert(now);
        c.last = Some(now);
        c.bytes += n as u64;
        c.reads += 1;
        meter.count_read(n as u64);
    };
    loop {
        tokio::select! {
            r = s.read(&mut buf) => match r {
                Ok(0) => return Ok(c),
                Ok(n) => count(n, &mut c),
                Err(e) => return Err(anyhow::Error::from(e).context("while reading an iperf3 TCP stream")),
            },
            _ = stop.changed() => break,
        }
        // --max-rate: reading no faster makes TCP slow the client down.
        let wait = meter.read_pause();
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
        }
    }
    // An iperf3 client sends TEST_END as soon as its last write returns, while that data may
    // still be queued on its side or in ours: read on until the stream stays quiet.
    let give_up = Instant::now() + MAX_DRAIN;
    loop {
        tokio::select! {
            r = s.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => count(n, &mut c),
            },
            _ = tokio::time::sleep(QUIET) => break,
        }
        if Instant::now() >= give_up {
            break;
        }
    }
    Ok(c)
}

async fn send_tcp(
    mut s: TcpStream,
    len: usize,
    budget: Arc<AtomicU64>,
    meter: &Meter,
    mut stop: watch::Receiver<bool>,
) -> Result<Counted> {
    let buf = payload(len);
    let mut c = Counted::default();
    'blocks: loop {
        let n = claim(&budget, len as u64) as usize;
        if n == 0 {
            break;
        }
        meter.may_send(n as u64).map_err(anyhow::Error::msg)?;
        let wait = meter.send_pause();
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break 'blocks,
            }
        }
        let mut off = 0;
        while off < n {
            tokio::select! {
                r = s.write(&buf[off..n]) => {
                    let w = r.context("while sending on an iperf3 TCP stream")?;
                    let now = Instant::now();
                    c.first.get_or_insert(now);
                    c.last = Some(now);
                    c.bytes += w as u64;
                    c.reads += 1;
                    meter.count_sent(w as u64);
                    off += w;
                }
                _ = stop.changed() => break 'blocks,
            }
        }
    }
    Ok(c)
}

/// Pacing of a UDP sender.
struct Pace {
    start: Instant,
    rate_bps: u64,
    counters_64bit: bool,
}

async fn send_udp(
    socket: Arc<UdpSocket>,
    to: SocketAddr,
    len: usize,
    budget: Arc<AtomicU64>,
    pace: Pace,
    meter: &Meter,
    mut stop: watch::Receiver<bool>,
) -> Result<Counted> {
    let mut buf = payload(len);
    let mut c = Counted::default();
    let header_len = wire::udp_header_len(pace.counters_64bit);
    loop {
        if *stop.borrow() {
            break;
        }
        if pace.rate_bps > 0 {
            let due =
                pace.start + Duration::from_secs_f64(c.bytes as f64 * 8.0 / pace.rate_bps as f64);
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                _ = stop.changed() => break,
            }
        }
        let n = claim(&budget, len as u64) as usize;
        if n == 0 {
            break;
        }
        let n = n.max(header_len);
        meter.may_send(n as u64).map_err(anyhow::Error::msg)?;
        let (sec, usec) = super::udp_timestamp(pace.start);
        let header = UdpHeader {
            sec,
            usec,
            count: c.reads + 1,
        };
        header.encode(pace.counters_64bit, &mut buf);
        // A full queue drops this datagram; the client counts it as lost.
        if socket.send_to(&buf[..n], to).await.is_ok() {
            let now = Instant::now();
            c.first.get_or_insert(now);
            c.last = Some(now);
            c.bytes += n as u64;
            c.reads += 1;
            meter.count_sent(n as u64);
        }
    }
    Ok(c)
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
