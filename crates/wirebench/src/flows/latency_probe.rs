//! `run --latency-probe`'s flow: small request-response probes on sessions of their own beside a
//! run (a UDP datagram, or a request on a TCP connection or QUIC stream kept open) — a few
//! idle ones before the load, then one every interval while it runs — over the probe sessions
//! of `rpm` (`rpm::probe::ProbeSession`). Owns the probe sessions, the schedule and the clock
//! readings; must not aggregate (`wirebench_core::record::loaded_latency` does) nor print.
//!
//! Probes leave on schedule whatever the earlier ones are doing (no coordinated omission: a
//! slow answer does not thin out the samples of a slow period), each tracked by the core
//! `RequestTracker`: a probe unanswered within the timeout is lost (its late answer is
//! ignored). When the sending stops (the idle count reached, or the load ended) the probes in
//! flight are waited for, up to their timeout, so every probe sent is answered or lost:
//! `sent = answered + lost`.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;
use tokio::task::JoinSet;
use wirebench_core::machine::rr::{Answer, Expiry, RequestTracker};
use wirebench_core::record::loaded_latency::{
    LoadedLatency, PhaseSamples, ProbeFlowRecord, ProbeSample,
};
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::clock_offset::{ClockClaim, ClockInfo, Exchange};
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::datagram::{read_stamps, Header, Kind, HEADER_LEN, STAMPS_LEN};

use crate::engine;
use crate::engine::udp::UdpClient;
use crate::engine::wall_clock::{local_clock_info, WallAnchor};
use crate::flows::rpm::probe::{ProbeSession, REQUEST_BYTES};
use crate::flows::rr_client;
use crate::transport::tls;
use wirebench_core::vocab::units::duration_ns;

/// Default spacing of the probes during the load.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// Default probes before the load (the idle round trip).
pub const DEFAULT_IDLE_PROBES: u32 = 10;

/// A probe unanswered this long is lost.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Which probe flows to run: a transport, or the protocol of the run under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// A fixed transport.
    Proto(Protocol),
    /// The protocol of the run being probed (`same`).
    Same,
}

/// What `--latency-probe` asks for, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    /// The probe flows, in order (`same` resolved per run).
    pub kinds: Vec<ProbeKind>,
    /// Spacing of the probes, idle and loaded.
    pub interval: Duration,
    /// Probes before the load.
    pub idle_probes: u32,
    /// A probe unanswered this long is lost.
    pub timeout: Duration,
}

impl ProbePlan {
    /// The probe transports of a run of `under_test`, each once, in the configured order.
    pub fn protocols(&self, under_test: Protocol) -> Vec<Protocol> {
        let mut out = Vec::new();
        for kind in &self.kinds {
            let p = match kind {
                ProbeKind::Proto(p) => *p,
                ProbeKind::Same => under_test,
            };
            if !out.contains(&p) {
                out.push(p);
            }
        }
        out
    }
}

/// The probe flows of one run, open and idle.
pub struct ProbeFlows {
    flows: Vec<ProbeFlow>,
    plan: ProbePlan,
}

impl ProbeFlows {
    /// Opens one probe session and connection per transport the plan gives a run of
    /// `under_test`, to `server` (through the relay when the run goes through it).
    pub async fn open(
        server: SocketAddr,
        plan: &ProbePlan,
        under_test: Protocol,
        psk: Option<&Psk>,
    ) -> Result<ProbeFlows> {
        let mut flows = Vec::new();
        for protocol in plan.protocols(under_test) {
            let flow = ProbeFlow::open(server, protocol, plan.timeout, psk)
                .await
                .with_context(|| format!("cannot open the {protocol} latency probe"))?;
            flows.push(flow);
        }
        Ok(ProbeFlows {
            flows,
            plan: plan.clone(),
        })
    }

    /// Probes idle, then runs `load` with probes beside it until it finishes; returns what
    /// `load` returned and the probes' record.
    pub async fn around<F: Future>(self, load: F) -> (F::Output, LoadedLatency) {
        let ProbeFlows { flows, plan } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        // Idle: no stop signal; the phase ends after its probes.
        let (_idle_tx, idle_rx) = watch::channel(false);
        let flows = run_phase(flows, plan.interval, Some(plan.idle_probes), idle_rx).await;
        let flows: Vec<ProbeFlow> = flows
            .into_iter()
            .map(|(mut flow, idle)| {
                flow.idle = idle;
                flow
            })
            .collect();
        let loaded = run_phase(flows, plan.interval, None, stop_rx);
        let load = async move {
            let out = load.await;
            let _ = stop_tx.send(true);
            out
        };
        let (out, flows) = tokio::join!(load, loaded);
        let probes = flows
            .iter()
            .map(|(flow, loaded)| {
                ProbeFlowRecord::of(
                    flow.protocol,
                    (duration_ns(plan.interval), duration_ns(plan.timeout)),
                    &flow.idle,
                    loaded,
                    flow.stamps.map(|(_, claim)| claim),
                )
            })
            .collect();
        finish_all(flows.into_iter().map(|(flow, _)| flow)).await;
        (out, LoadedLatency { probes })
    }
}

/// What [`ProbeFlows::through`] measured: per phase, its load's output, when it began (since
/// the first phase began) and each flow's samples; per flow, its transport and what both hosts
/// claim of their clocks when its probes were stamped.
pub struct PhasedProbes<T> {
    /// Each phase in order: (the load's output, its start, each flow's samples).
    pub phases: Vec<(T, Duration, Vec<PhaseSamples>)>,
    /// Each flow: its transport and its clock claim (None: not stamped).
    pub flows: Vec<(Protocol, Option<ClockClaim>)>,
}

impl ProbeFlows {
    /// Probes through `loads` one after another: each phase lasts until its load finishes
    /// (the probes in flight then are waited for, up to their timeout). `wirebench latency`'s
    /// idle, upload, download and both phases.
    pub async fn through<F: Future>(self, loads: Vec<F>) -> PhasedProbes<F::Output> {
        let ProbeFlows { mut flows, plan } = self;
        let began = Instant::now();
        let mut phases = Vec::new();
        for load in loads {
            let (stop_tx, stop_rx) = watch::channel(false);
            let start = began.elapsed();
            let load = async move {
                let out = load.await;
                let _ = stop_tx.send(true);
                out
            };
            let (out, measured) =
                tokio::join!(load, run_phase(flows, plan.interval, None, stop_rx));
            let (kept, samples): (Vec<ProbeFlow>, Vec<PhaseSamples>) = measured.into_iter().unzip();
            flows = kept;
            phases.push((out, start, samples));
        }
        let claims = flows
            .iter()
            .map(|f| (f.protocol, f.stamps.map(|(_, claim)| claim)))
            .collect();
        finish_all(flows).await;
        PhasedProbes {
            phases,
            flows: claims,
        }
    }
}

/// Ends every flow's probe session at once.
async fn finish_all(flows: impl IntoIterator<Item = ProbeFlow>) {
    let mut finishing = JoinSet::new();
    for flow in flows {
        finishing.spawn(flow.finish());
    }
    while finishing.join_next().await.is_some() {}
}

/// Runs one phase on every flow at once (each on a task of its own) and hands the flows back
/// in their order with what they measured.
async fn run_phase(
    flows: Vec<ProbeFlow>,
    interval: Duration,
    count: Option<u32>,
    stop: watch::Receiver<bool>,
) -> Vec<(ProbeFlow, PhaseSamples)> {
    let mut tasks = JoinSet::new();
    let n = flows.len();
    for (i, mut flow) in flows.into_iter().enumerate() {
        let stop = stop.clone();
        tasks.spawn(async move {
            let samples = flow.phase(interval, count, stop).await;
            (i, flow, samples)
        });
    }
    let mut done: Vec<Option<(ProbeFlow, PhaseSamples)>> = (0..n).map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        // A probe task cannot panic by design; one that did would lose only its flow.
        if let Ok((i, flow, samples)) = joined {
            done[i] = Some((flow, samples));
        }
    }
    done.into_iter().flatten().collect()
}

/// One probe flow: its session, the connection (or socket) its probes go over and the tracker
/// of its outstanding probes (one for both phases, so a late answer is never taken for a newer
/// probe's).
struct ProbeFlow {
    protocol: Protocol,
    session: ProbeSession,
    channel: Channel,
    tracker: RequestTracker,
    /// What the idle phase measured, once it ran.
    idle: PhaseSamples,
    /// Stamped answers: how this host's instants map onto its wall clock, and what both
    /// hosts claim of their clocks.
    stamps: Option<(WallAnchor, ClockClaim)>,
}

/// What a probe travels over.
enum Channel {
    Tcp(StreamProbe<OwnedReadHalf, OwnedWriteHalf>),
    Quic {
        stream: StreamProbe<quinn::RecvStream, quinn::SendStream>,
        connection: quinn::Connection,
        endpoint: quinn::Endpoint,
    },
    Udp {
        udp: UdpClient,
        session: u32,
    },
}

impl ProbeFlow {
    async fn open(
        server: SocketAddr,
        protocol: Protocol,
        timeout: Duration,
        psk: Option<&Psk>,
    ) -> Result<ProbeFlow> {
        // Every probe asks for the server's stamps, for one-way delays.
        let (session, granted) =
            ProbeSession::open_over(server, protocol, false, psk, true).await?;
        let quic_cert = granted.quic_cert;
        // The answers are stamped by a server that announces its clock.
        let stamps = granted.clock.map(|server_clock| {
            let anchor = WallAnchor::now();
            let claim = ClockInfo::claim(
                &local_clock_info(),
                &server_clock,
                anchor.read_error_ns.saturating_mul(2),
            );
            (anchor, claim)
        });
        let preamble = session.preamble();
        let channel = match protocol {
            Protocol::Tcp => {
                let tcp = session.target().connect().await?;
                let (rd, wr) = tcp.into_split();
                Channel::Tcp(StreamProbe::new(rd, wr))
            }
            Protocol::Quic => {
                let cert = quic_cert.context("the server announced no QUIC certificate")?;
                let cfg = rr_client::quic_client_config(cert)?;
                let endpoint = rr_client::quic_endpoint(server)?;
                let connection = endpoint
                    .connect_with(cfg, server, tls::SERVER_NAME)
                    .context("while starting the probe's QUIC handshake")?
                    .await
                    .with_context(|| format!("the probe's QUIC handshake with {server} failed"))?;
                let (mut send, recv) = connection
                    .open_bi()
                    .await
                    .context("while opening the probe's QUIC stream")?;
                crate::transport::control::write_preamble(&mut send, &preamble).await?;
                Channel::Quic {
                    stream: StreamProbe::new(recv, send),
                    connection,
                    endpoint,
                }
            }
            Protocol::Udp => {
                let udp = UdpClient::connect(server, None).await?;
                // The server answers no request from this socket until it has echoed the token.
                engine::udp::hello::validate(udp.socket(), preamble.session, preamble.token)
                    .await?;
                Channel::Udp {
                    udp,
                    session: preamble.session,
                }
            }
        };
        Ok(ProbeFlow {
            protocol,
            session,
            channel,
            // No retries: a probe is one request, answered or lost.
            tracker: RequestTracker::new(timeout, 0),
            idle: PhaseSamples::default(),
            stamps,
        })
    }

    /// Sends a probe every `interval` — `count` of them, or until `stop` turns true — and
    /// collects their answers and losses. Times are since the phase began.
    async fn phase(
        &mut self,
        interval: Duration,
        count: Option<u32>,
        mut stop: watch::Receiver<bool>,
    ) -> PhaseSamples {
        let began = Instant::now();
        let mut samples = PhaseSamples::default();
        let mut next = Some(began);
        let mut issued = 0u32;
        // The connection failed: no more answers will come; the outstanding probes time out.
        let mut broken = false;
        // When sending stopped (the count reached, or the load ended): the probes in flight
        // then are still waited for, up to their timeout, so each is answered or lost.
        let mut sending_until: Option<Instant> = None;
        loop {
            if sending_until.is_none() && count.is_some_and(|n| issued >= n) {
                sending_until = Some(Instant::now());
            }
            if sending_until.is_some() {
                next = None;
                if self.tracker.outstanding() == 0 {
                    break;
                }
            }
            let deadline = self.tracker.poll_timeout();
            tokio::select! {
                // A dropped sender also ends the sending.
                _ = async {
                    // The guard `wait_for` returns is not `Send`: dropped at once.
                    let _ = stop.wait_for(|s| *s).await;
                }, if sending_until.is_none() => sending_until = Some(Instant::now()),
                _ = sleep_until(next) => {
                    let now = Instant::now();
                    let seq = self.tracker.send_new(now);
                    issued += 1;
                    // A send that fails is left to the timeout: it is counted lost.
                    let _ = self.channel.send(seq).await;
                    // On schedule, without a burst to catch up after a stall.
                    next = Some((next.unwrap_or(now) + interval).max(Instant::now()));
                }
                answer = self.channel.recv(), if !broken => match answer {
                    Ok((seq, server_stamps)) => {
                        let now = Instant::now();
                        if let Answer::Answered { response_time, .. } =
                            self.tracker.on_response(seq, now)
                        {
                            let sent_at = now.checked_sub(response_time).unwrap_or(began);
                            samples.answered.push(ProbeSample {
                                t_ns: duration_ns(sent_at.saturating_duration_since(began)),
                                rtt_ns: duration_ns(response_time),
                                up_ns: None,
                                down_ns: None,
                            });
                            if let Some((anchor, _)) = &self.stamps {
                                let client = (anchor.unix_ns(sent_at), anchor.unix_ns(now));
                                samples.exchanges.push(
                                    server_stamps.and_then(|server| Exchange::checked(client, server)),
                                );
                            }
                        }
                        // Late (already lost), duplicate or unknown answers are no samples.
                    }
                    Err(_) => broken = true,
                },
                _ = sleep_until(deadline) => {
                    let now = Instant::now();
                    while let Some(expiry) = self.tracker.handle_timeout(now) {
                        if matches!(expiry, Expiry::Lost { .. }) {
                            samples.lost += 1;
                        }
                    }
                }
            }
        }
        samples.duration_ns = duration_ns(
            sending_until
                .unwrap_or_else(Instant::now)
                .saturating_duration_since(began),
        );
        samples
    }

    /// Ends the probe session (the server's report is not waited for long) and the connection.
    async fn finish(mut self) {
        self.session.count_sent(self.tracker.counts().sent);
        match self.channel {
            Channel::Tcp(mut s) => {
                let _ = s.wr.shutdown().await;
            }
            Channel::Quic {
                mut stream,
                connection,
                endpoint,
            } => {
                let _ = stream.wr.finish();
                connection.close(0u32.into(), b"done");
                engine::quic::drain(&endpoint).await;
            }
            Channel::Udp { .. } => {}
        }
        self.session.finish().await;
    }
}

/// Sleeps until `at`, or for ever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

impl Channel {
    /// Sends probe `seq`.
    async fn send(&mut self, seq: u64) -> Result<()> {
        match self {
            Channel::Tcp(s) => s.send(seq).await,
            Channel::Quic { stream, .. } => stream.send(seq).await,
            Channel::Udp { udp, session } => {
                let mut out = [0u8; HEADER_LEN + REQUEST_BYTES as usize];
                Header {
                    kind: Kind::Request,
                    retransmit: false,
                    session: *session,
                    seq,
                }
                .write_to(&mut out)
                .map_err(|e| anyhow::anyhow!("cannot encode a probe header: {e:?}"))?;
                udp.socket()
                    .send(&out)
                    .await
                    .context("while sending a UDP latency probe")?;
                Ok(())
            }
        }
    }

    /// The number of the next probe answered, with the server's stamps when the answer
    /// carries them (UDP); cancel-safe (a `select!` branch).
    async fn recv(&mut self) -> Result<(u64, Option<(i64, i64)>)> {
        match self {
            Channel::Tcp(s) => s.recv().await,
            Channel::Quic { stream, .. } => stream.recv().await,
            Channel::Udp { udp, session } => {
                let mut buf = [0u8; HEADER_LEN + STAMPS_LEN + 1];
                loop {
                    let n = match udp.socket().recv(&mut buf).await {
                        Ok(n) => n,
                        // An ICMP error from an earlier send: that probe times out.
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                        Err(e) => {
                            return Err(e).context("while reading a UDP latency probe's answer")
                        }
                    };
                    match Header::decode(&buf[..n]) {
                        Ok(h) if h.kind == Kind::Response && h.session == *session => {
                            return Ok((h.seq, read_stamps(&buf[HEADER_LEN..n])))
                        }
                        // Not an answer of ours: ignored.
                        _ => continue,
                    }
                }
            }
        }
    }
}

/// Probes on one byte stream (a TCP connection or a QUIC stream): requests of
/// [`REQUEST_BYTES`] answered in order by [`STAMPS_LEN`] each (the server's stamps), so each answer belongs to
/// the oldest probe not yet answered on the stream (a late answer to a lost probe included).
struct StreamProbe<R, W> {
    rd: R,
    wr: W,
    /// Probes written and not yet answered, oldest first.
    in_order: VecDeque<u64>,
    /// The current answer ([`STAMPS_LEN`] bytes: the server's stamps) as read so far, kept
    /// across cancelled reads.
    answer: Vec<u8>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> StreamProbe<R, W> {
    fn new(rd: R, wr: W) -> Self {
        StreamProbe {
            rd,
            wr,
            in_order: VecDeque::new(),
            answer: Vec::with_capacity(STAMPS_LEN),
        }
    }

    async fn send(&mut self, seq: u64) -> Result<()> {
        let request = [0u8; REQUEST_BYTES as usize];
        self.wr
            .write_all(&request)
            .await
            .context("while sending a latency probe")?;
        self.in_order.push_back(seq);
        Ok(())
    }

    /// The next answered probe and the server's stamps when it stamps; cancel-safe: what was
    /// read is kept in `answer` between calls.
    async fn recv(&mut self) -> Result<(u64, Option<(i64, i64)>)> {
        let mut buf = [0u8; STAMPS_LEN];
        loop {
            let want = STAMPS_LEN - self.answer.len();
            let n = self
                .rd
                .read(&mut buf[..want])
                .await
                .context("while reading a latency probe's answer")?;
            if n == 0 {
                bail!("the server closed the probe connection");
            }
            self.answer.extend_from_slice(&buf[..n]);
            if self.answer.len() == STAMPS_LEN {
                let stamps = read_stamps(&self.answer);
                self.answer.clear();
                let seq = self
                    .in_order
                    .pop_front()
                    .context("the server answered a probe that was never sent")?;
                return Ok((seq, stamps));
            }
        }
    }
}
