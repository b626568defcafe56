//! `run --latency-probe`'s flow: small request-response probes on sessions of their own beside a
//! run (a UDP datagram, or a request on a TCP connection or QUIC stream kept open) — a few
//! idle ones before the load, then one every interval while it runs — over the probe sessions
//! of `rpm` (`rpm::probe::ProbeSession`). Owns the probe sessions, the schedule and the clock
//! readings; must not aggregate (`wirebench_core::record::loaded_latency` does) nor print.
//!
//! One probe is outstanding per flow at a time: a probe slower than the interval delays the
//! next (no burst to catch up). A probe unanswered within the timeout is counted lost; a probe
//! still in flight when its phase ends is not counted at all, so `sent = answered + lost`.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::watch;
use tokio::task::JoinSet;
use wirebench_core::auth::Psk;
use wirebench_core::plan::Protocol;
use wirebench_core::record::loaded_latency::{
    LoadedLatency, PhaseSamples, ProbeFlowRecord, ProbeSample,
};
use wirebench_core::wire::{Header, Kind, HEADER_LEN};

use crate::engine::udp::UdpClient;
use crate::rpm::probe::{ProbeSession, REQUEST_BYTES, RESPONSE_BYTES};
use crate::{engine, rr_client, tls};

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
            let flow = ProbeFlow::open(server, protocol, psk)
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
        let flows = run_phase(flows, &plan, Some(plan.idle_probes), idle_rx).await;
        let (flows, idle): (Vec<ProbeFlow>, Vec<PhaseSamples>) = flows.into_iter().unzip();
        let loaded = run_phase(flows, &plan, None, stop_rx);
        let load = async move {
            let out = load.await;
            let _ = stop_tx.send(true);
            out
        };
        let (out, flows) = tokio::join!(load, loaded);
        let mut probes = Vec::new();
        let mut finishing = JoinSet::new();
        for ((flow, loaded), idle) in flows.into_iter().zip(idle) {
            probes.push(ProbeFlowRecord::of(
                flow.protocol,
                ns(plan.interval),
                ns(plan.timeout),
                &idle,
                &loaded,
            ));
            let sent =
                idle.answered.len() as u64 + idle.lost + loaded.answered.len() as u64 + loaded.lost;
            finishing.spawn(flow.finish(sent));
        }
        while finishing.join_next().await.is_some() {}
        (out, LoadedLatency { probes })
    }
}

/// Runs one phase on every flow at once (each on a task of its own) and hands the flows back
/// in their order with what they measured.
async fn run_phase(
    flows: Vec<ProbeFlow>,
    plan: &ProbePlan,
    count: Option<u32>,
    stop: watch::Receiver<bool>,
) -> Vec<(ProbeFlow, PhaseSamples)> {
    let mut tasks = JoinSet::new();
    let n = flows.len();
    for (i, mut flow) in flows.into_iter().enumerate() {
        let (interval, timeout, stop) = (plan.interval, plan.timeout, stop.clone());
        tasks.spawn(async move {
            let samples = flow.phase(interval, timeout, count, stop).await;
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

/// One probe flow: its session and the connection (or socket) its probes go over.
struct ProbeFlow {
    protocol: Protocol,
    session: ProbeSession,
    channel: Channel,
}

/// What a probe travels over.
enum Channel {
    Tcp(StreamProbe<OwnedReadHalf, OwnedWriteHalf>),
    Quic {
        stream: StreamProbe<quinn::RecvStream, quinn::SendStream>,
        connection: quinn::Connection,
        endpoint: quinn::Endpoint,
    },
    Udp(UdpProbe),
}

impl ProbeFlow {
    async fn open(server: SocketAddr, protocol: Protocol, psk: Option<&Psk>) -> Result<ProbeFlow> {
        let (session, quic_cert) = ProbeSession::open_over(server, protocol, false, psk).await?;
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
                crate::control::write_preamble(&mut send, &preamble).await?;
                Channel::Quic {
                    stream: StreamProbe::new(recv, send),
                    connection,
                    endpoint,
                }
            }
            Protocol::Udp => {
                let udp = UdpClient::connect(server, None).await?;
                // The server answers no request from this socket until it has echoed the token.
                engine::udp_hello::validate(udp.socket(), preamble.session, preamble.token).await?;
                Channel::Udp(UdpProbe {
                    udp,
                    session: preamble.session,
                    next_seq: 0,
                })
            }
        };
        Ok(ProbeFlow {
            protocol,
            session,
            channel,
        })
    }

    /// Probes every `interval`: `count` probes, or until `stop` turns true. Times are since the
    /// phase began.
    async fn phase(
        &mut self,
        interval: Duration,
        timeout: Duration,
        count: Option<u32>,
        mut stop: watch::Receiver<bool>,
    ) -> PhaseSamples {
        let began = Instant::now();
        let mut samples = PhaseSamples::default();
        let mut next = began;
        let mut sent = 0u32;
        while count.is_none_or(|n| sent < n) {
            let stopped = async {
                // A dropped sender also ends the phase.
                let _ = stop.wait_for(|s| *s).await;
            };
            tokio::pin!(stopped);
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep_until(next.into()) => {}
            }
            let at = Instant::now();
            let outcome = tokio::select! {
                r = tokio::time::timeout(timeout, self.channel.round_trip()) => r,
                // In flight when the phase ended: neither answered nor lost.
                _ = &mut stopped => break,
            };
            sent += 1;
            match outcome {
                Ok(Ok(())) => samples.answered.push(ProbeSample {
                    t_ns: ns(at - began),
                    rtt_ns: ns(at.elapsed()),
                }),
                // Timed out, or the send or the connection failed: lost. A failed connection
                // keeps failing, so every later probe of this flow is lost too, and counted.
                _ => samples.lost += 1,
            }
            next += interval;
            // No burst to catch up after a slow probe.
            next = next.max(Instant::now());
        }
        samples.duration_ns = ns(began.elapsed());
        samples
    }

    /// Ends the probe session (the server's report is not waited for long) and the connection.
    async fn finish(mut self, sent: u64) {
        self.session.count_sent(sent);
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
            Channel::Udp(_) => {}
        }
        self.session.finish().await;
    }
}

impl Channel {
    /// One probe: a request sent, its response received.
    async fn round_trip(&mut self) -> Result<()> {
        match self {
            Channel::Tcp(s) => s.round_trip().await,
            Channel::Quic { stream, .. } => stream.round_trip().await,
            Channel::Udp(u) => u.round_trip().await,
        }
    }
}

/// Probes on one byte stream (a TCP connection or a QUIC stream): requests of
/// [`REQUEST_BYTES`] answered in order by [`RESPONSE_BYTES`] each. The bytes still owed either
/// way are kept across calls, so a probe cancelled by its timeout leaves the stream in step:
/// the next probe reads the late answer first (it arrives first on an ordered stream anyway).
struct StreamProbe<R, W> {
    rd: R,
    wr: W,
    unwritten: usize,
    owed: usize,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> StreamProbe<R, W> {
    fn new(rd: R, wr: W) -> Self {
        StreamProbe {
            rd,
            wr,
            unwritten: 0,
            owed: 0,
        }
    }

    async fn round_trip(&mut self) -> Result<()> {
        self.unwritten += REQUEST_BYTES as usize;
        self.owed += RESPONSE_BYTES as usize;
        let zeros = [0u8; REQUEST_BYTES as usize];
        while self.unwritten > 0 {
            let n = self
                .wr
                .write(&zeros[..self.unwritten.min(zeros.len())])
                .await
                .context("while sending a latency probe")?;
            if n == 0 {
                bail!("the probe connection closed");
            }
            self.unwritten -= n;
        }
        let mut buf = [0u8; 64];
        while self.owed > 0 {
            let want = self.owed.min(buf.len());
            let n = self
                .rd
                .read(&mut buf[..want])
                .await
                .context("while reading a latency probe's answer")?;
            if n == 0 {
                bail!("the server closed the probe connection");
            }
            self.owed -= n;
        }
        Ok(())
    }
}

/// Probes as single datagrams of the server's UDP request-response session, each with its own
/// sequence number: an answer to an earlier (timed-out) probe is ignored.
struct UdpProbe {
    udp: UdpClient,
    session: u32,
    next_seq: u64,
}

impl UdpProbe {
    async fn round_trip(&mut self) -> Result<()> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut out = [0u8; HEADER_LEN + REQUEST_BYTES as usize];
        Header {
            kind: Kind::Request,
            retransmit: false,
            session: self.session,
            seq,
        }
        .write_to(&mut out)
        .map_err(|e| anyhow::anyhow!("cannot encode a probe header: {e:?}"))?;
        let socket = self.udp.socket();
        socket
            .send(&out)
            .await
            .context("while sending a UDP latency probe")?;
        let mut buf = [0u8; HEADER_LEN + RESPONSE_BYTES as usize + 1];
        loop {
            let n = match socket.recv(&mut buf).await {
                Ok(n) => n,
                // An ICMP error from an earlier send: wait on (the timeout decides).
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e).context("while reading a UDP latency probe's answer"),
            };
            match Header::decode(&buf[..n]) {
                Ok(h) if h.kind == Kind::Response && h.session == self.session && h.seq == seq => {
                    return Ok(())
                }
                // Late answers to lost probes, or not ours.
                _ => continue,
            }
        }
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
