//! One iperf3 test on the server, from PARAM_EXCHANGE to IPERF_DONE: its plan refused or
//! admitted by the gate, its streams collected and set up with the client's options, its data
//! tasks, the end of its omitted seconds, TEST_END, and the results. Owns the dialogue and the
//! time line; must not move data itself (`streams`, the hub) nor render figures (`results`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::iperf3::{State, TestParams, TestPlan, TestResults, UdpReceiver};
use wirebench_core::wire::proto::{SessionParams, UNBOUNDED_TOTAL};

use super::results::{self, Extras, Span, StreamTally};
use super::shared::Shared;
use super::sockets;
use super::streams::{self, Budget, Sending, StreamCount};
use super::tcp_streams;
use crate::flows::iperf3::hub::HubCmd;
use crate::flows::iperf3::{expect_state, recv_json, recv_state, send_json, send_state};
use crate::flows::server::gate::{Ask, Kind, Pass};
use crate::flows::server::meter::Meter;
use crate::transport::counters::{self, CpuMeter};
use crate::transport::net;

/// Datagrams sent just before TEST_END may still be on their way when it arrives.
const UDP_SETTLE: Duration = Duration::from_millis(20);

/// One data stream as collected: a TCP connection (with the order it was accepted in) or a
/// UDP client address.
enum Stream {
    /// Off the runtime: its data moves on a thread of its own (`tcp_streams`).
    Tcp(Arc<std::net::TcpStream>),
    Udp(SocketAddr),
}

/// How a test ended, for its session line.
pub(super) struct Outcome {
    pub tallies: Vec<StreamTally>,
    pub span: Span,
    /// What the client reported it moved (its results), for the line's notice.
    pub client: TestResults,
    /// The first TCP data socket's path (buffers, congestion control).
    pub data_path: wirebench_core::wire::proto::DataPathInfo,
}

/// A test the server refused (its plan invalid, or the gate's refusal): the gate has counted
/// and told it already.
#[derive(Debug)]
pub(super) struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// One iperf3 test on the server.
pub(super) struct Test {
    pub id: u64,
    pub peer: SocketAddr,
    pub shared: Arc<Shared>,
    /// TCP data connections for this test, with the order they were accepted in.
    pub data: mpsc::UnboundedReceiver<(u64, TcpStream)>,
    pub plan: Option<TestPlan>,
    /// The test's pass through the server's gate, once admitted.
    pub pass: Option<Pass>,
}

/// The omit mark of a running test: when its omitted seconds ended, and each stream's
/// counts then.
struct Marks {
    at: Option<Instant>,
    /// Bytes and calls of each stream at the mark.
    counts: Vec<(u64, u64)>,
    /// Retransmissions of each TCP stream at the mark.
    retransmits: Vec<Option<u64>>,
}

impl Test {
    /// The whole dialogue; returns what was counted.
    pub(super) async fn serve(&mut self, ctrl: &mut TcpStream) -> Result<Outcome> {
        let (plan, meter, stop) = self.admit(ctrl).await?;
        send_state(ctrl, State::CreateStreams).await?;
        let streams = self.collect_streams(&plan, &meter).await?;
        self.refuse_more_streams();
        let (data_path, congestion) = self.apply_options(&streams, &plan);
        send_state(ctrl, State::TestStart).await?;
        send_state(ctrl, State::TestRunning).await?;
        let start = Instant::now();
        let cpu = CpuMeter::start();
        let (stop_tx, stop_rx) = watch::channel(false);
        let counts: Vec<Arc<StreamCount>> = streams.iter().map(|_| Arc::default()).collect();
        // The control connection's round trip tells a UDP sender how soon TEST_END can come.
        let control_rtt = counters::tcp_stats(&*ctrl)
            .and_then(|t| t.srtt_us)
            .map(Duration::from_micros);
        let mut tasks = self.spawn_data(
            &streams,
            &plan,
            &counts,
            &meter,
            (start, control_rtt),
            &stop_rx,
        );
        let (waited, marks) = self
            .wait_test_end(ctrl, &plan, &streams, &counts, start, stop)
            .await;
        let end_at = Instant::now();
        let ended = match waited {
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
        let cpu = cpu.stop();
        while let Some(done) = tasks.join_next().await {
            done.context("a data task failed")??;
        }
        let receivers = self.end_streams(&streams, &plan).await;
        let span = Span {
            start,
            mark: marks.at,
            end: end_at,
        };
        let tallies = tally(
            &streams,
            &counts,
            &marks.counts,
            &marks.retransmits,
            receivers,
            &plan,
        );
        ended?;
        let extras = Extras {
            cpu,
            congestion: if plan.udp { None } else { congestion },
            output: None,
        };
        let client = self
            .exchange_results(ctrl, &plan, &tallies, &span, extras)
            .await?;
        Ok(Outcome {
            tallies,
            span,
            client,
            data_path: data_path.unwrap_or_default(),
        })
    }

    /// PARAM_EXCHANGE: the client's plan, refused when invalid, then through the gate before
    /// any stream is set up. The plan, the pass's meter and its stop.
    async fn admit(
        &mut self,
        ctrl: &mut TcpStream,
    ) -> Result<(
        TestPlan,
        Arc<Meter>,
        impl std::future::Future<Output = String> + Send + 'static,
    )> {
        send_state(ctrl, State::ParamExchange).await?;
        let params: TestParams = recv_json(ctrl).await?;
        let plan = match params.plan() {
            Ok(p) => p,
            Err(e) => {
                // iperf3's own error number, so its client prints its own words for it.
                let mut msg = vec![State::ServerError.to_byte()];
                msg.extend_from_slice(&e.errno().to_be_bytes());
                msg.extend_from_slice(&0i32.to_be_bytes());
                let _ = ctrl.write_all(&msg).await;
                let reason = e.to_string();
                self.shared.gate.refuse(self.peer, Kind::Iperf3, &reason);
                return Err(Refused(reason).into());
            }
        };
        // Through the gate before any stream is set up: a refusal is iperf3's "busy".
        let pass = match self
            .shared
            .gate
            .admit(self.peer, Ask::Iperf3(&session_of(&plan)))
        {
            Ok(pass) => pass,
            Err(reason) => {
                let _ = send_state(ctrl, State::AccessDenied).await;
                return Err(Refused(reason).into());
            }
        };
        let meter = Arc::clone(pass.meter());
        let stop = pass.stop();
        self.pass = Some(pass);
        self.plan = Some(plan.clone());
        Ok((plan, meter, stop))
    }

    /// Sets the client's options on the TCP streams (a notice for each one not applied); the
    /// first stream's data path and the congestion control they run.
    fn apply_options(
        &self,
        streams: &[Stream],
        plan: &TestPlan,
    ) -> (
        Option<wirebench_core::wire::proto::DataPathInfo>,
        Option<String>,
    ) {
        let mut data_path = None;
        let mut congestion = None;
        for (index, s) in streams.iter().enumerate() {
            if let Stream::Tcp(tcp) = s {
                let sends = plan.server_sends(index as u32);
                for refused in sockets::apply(tcp, plan, sends) {
                    self.shared.notice(
                        self.peer,
                        format!("iperf3 test option not applied: {refused}"),
                    );
                }
                let path = net::tcp_data_path(tcp.as_ref());
                congestion.clone_from(&path.congestion);
                data_path.get_or_insert(path);
            }
        }
        (data_path, congestion)
    }

    /// Starts a data task per stream the server sends or reads (the hub counts what arrives
    /// on UDP), until `stop` says the test ended.
    fn spawn_data(
        &self,
        streams: &[Stream],
        plan: &TestPlan,
        counts: &[Arc<StreamCount>],
        meter: &Arc<Meter>,
        (start, control_rtt): (Instant, Option<Duration>),
        stop: &watch::Receiver<bool>,
    ) -> JoinSet<Result<()>> {
        let sending = plan.streams() - plan.receiving_streams();
        let how = Sending {
            len: plan.len as usize,
            rate_bps: pace(plan, meter.max_rate_bps(), sending),
            start,
            counters_64bit: plan.counters_64bit,
            top_up_after: super::streams::top_up_wait(control_rtt),
        };
        // Whole blocks, as iperf3's own sender: it sends until it has sent `-n` bytes, and its
        // clients read a reversed stream by whole blocks (3.21's waits for the rest of a short
        // last one, and never sees `-n` arrive).
        let len = u64::from(plan.len);
        let budget = Budget::new(match (plan.bytes, plan.blocks) {
            (Some(b), _) => b.div_ceil(len).saturating_mul(len),
            (None, Some(k)) => k.saturating_mul(len),
            (None, None) => u64::MAX,
        });
        let mut tasks: JoinSet<Result<()>> = JoinSet::new();
        let tcp_receivers = streams
            .iter()
            .enumerate()
            .filter(|(index, stream)| {
                matches!(stream, Stream::Tcp(_)) && !plan.server_sends(*index as u32)
            })
            .count();
        for (index, stream) in streams.iter().enumerate() {
            let (count, meter, stop) = (counts[index].clone(), meter.clone(), stop.clone());
            let sends = plan.server_sends(index as u32);
            match stream {
                Stream::Tcp(s) if sends => {
                    let (s, how, budget) = (s.clone(), how.clone(), budget.clone());
                    tasks.spawn_blocking(move || {
                        tcp_streams::send(s, how, budget, count, meter, stop)
                    });
                }
                Stream::Tcp(s) => {
                    let s = s.clone();
                    let len = plan.len as usize;
                    let sharing = tcp_receivers > 1;
                    tasks.spawn_blocking(move || {
                        tcp_streams::recv((s, len, sharing), count, meter, stop)
                    });
                }
                Stream::Udp(to) if sends => {
                    let socket = self.shared.udp.clone();
                    tasks.spawn(streams::send_udp(
                        socket,
                        *to,
                        how.clone(),
                        budget.clone(),
                        count,
                        meter,
                        stop,
                    ));
                }
                // The hub counts what arrives on it.
                Stream::Udp(_) => {}
            }
        }
        tasks
    }

    /// The streams the test declared and no more: once they are all there, a further
    /// connection presenting its cookie is closed at once (4,000 were held until the test's
    /// end), and those that came early are closed now, with one notice.
    fn refuse_more_streams(&mut self) {
        self.data.close();
        let mut extra = 0u64;
        while self.data.try_recv().is_ok() {
            extra += 1;
        }
        if extra > 0 {
            self.shared.notice(
                self.peer,
                format!(
                    "iperf3 test: {extra} data connection(s) past the streams it declared, closed"
                ),
            );
        }
    }

    /// The test runs until the client's TEST_END (or the gate's `stop`); its omitted seconds
    /// end on the way. What the client said, and the omit mark.
    async fn wait_test_end(
        &self,
        ctrl: &mut TcpStream,
        plan: &TestPlan,
        streams: &[Stream],
        counts: &[Arc<StreamCount>],
        start: Instant,
        stop: impl std::future::Future<Output = String>,
    ) -> (Result<Option<State>>, Marks) {
        let patience = Duration::from_secs(plan.time_s.saturating_add(plan.omit_s) + 60);
        let omit_end = (plan.omit_s > 0).then(|| start + Duration::from_secs(plan.omit_s));
        let mut marks = Marks {
            at: None,
            counts: vec![(0, 0); streams.len()],
            retransmits: vec![None; streams.len()],
        };
        tokio::pin!(stop);
        let waited = loop {
            let omit_timer = async {
                match omit_end {
                    Some(at) if marks.at.is_none() => tokio::time::sleep_until(at.into()).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                () = omit_timer => {
                    marks.at = Some(Instant::now());
                    for (i, c) in counts.iter().enumerate() {
                        marks.counts[i] = (c.bytes(), c.calls());
                        marks.retransmits[i] = retransmits(&streams[i]);
                    }
                    let _ = self.shared.hub.send(HubCmd::Mark { test: self.id });
                }
                end = tokio::time::timeout(patience, recv_state(ctrl)) => break end
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("no TEST_END within the test's time + 60 s"))),
                // The gate stops the test: its duration, a limit, the server's shutdown.
                reason = &mut stop => break Err(anyhow::anyhow!("{reason}")),
            }
        };
        (waited, marks)
    }

    /// After the data tasks: the end of the reversed TCP streams, and (UDP) what the hub
    /// received on each stream.
    async fn end_streams(&self, streams: &[Stream], plan: &TestPlan) -> Vec<UdpReceiver> {
        for (index, stream) in streams.iter().enumerate() {
            if let (Stream::Tcp(s), true) = (stream, plan.server_sends(index as u32)) {
                // Nothing more will come: an iperf3 3.12 client drains its reversed streams
                // after TEST_END with blocking reads of whole blocks, and must see the end.
                let _ = socket2::SockRef::from(s.as_ref()).shutdown(std::net::Shutdown::Write);
            }
        }
        if plan.udp && plan.receiving_streams() > 0 {
            tokio::time::sleep(UDP_SETTLE).await;
            let (reply, answer) = oneshot::channel();
            let _ = self.shared.hub.send(HubCmd::Finish {
                test: self.id,
                reply,
            });
            answer.await.unwrap_or_default()
        } else {
            Vec::new()
        }
    }

    /// EXCHANGE_RESULTS to IPERF_DONE: the client's results in, the server's out; the
    /// client's.
    async fn exchange_results(
        &self,
        ctrl: &mut TcpStream,
        plan: &TestPlan,
        tallies: &[StreamTally],
        span: &Span,
        mut extras: Extras,
    ) -> Result<TestResults> {
        send_state(ctrl, State::ExchangeResults).await?;
        let client: TestResults = recv_json(ctrl).await?;
        extras.output = plan
            .server_output
            .then(|| results::output_text(self.id, &self.peer.to_string(), tallies, plan, span));
        send_json(ctrl, &results::results(tallies, plan, span, extras)).await?;
        send_state(ctrl, State::DisplayResults).await?;
        // The client answers IPERF_DONE and closes; either is fine.
        let _ = expect_state(ctrl, "after the results").await;
        Ok(client)
    }

    /// Waits for the test's data streams, in the order the client opened them; a UDP stream's
    /// datagrams are counted on `meter` (the pass's) as the hub reads them.
    async fn collect_streams(
        &mut self,
        plan: &TestPlan,
        meter: &Arc<Meter>,
    ) -> Result<Vec<Stream>> {
        let mut streams = Vec::new();
        if plan.udp {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let _ = self.shared.hub.send(HubCmd::Expect {
                test: self.id,
                ip: net::canonical_ip(self.peer.ip()),
                count: plan.streams(),
                counters_64bit: plan.counters_64bit,
                streams: tx,
                meter: Arc::clone(meter),
            });
            for _ in 0..plan.streams() {
                let addr = tokio::time::timeout(super::super::SETUP_TIMEOUT, rx.recv())
                    .await
                    .map_err(|_| anyhow::anyhow!("the client opened too few UDP streams in time"))?
                    .context("the UDP hub stopped")?;
                streams.push(Stream::Udp(addr));
            }
        } else {
            let mut accepted = Vec::new();
            for _ in 0..plan.streams() {
                let s = tokio::time::timeout(super::super::SETUP_TIMEOUT, self.data.recv())
                    .await
                    .map_err(|_| anyhow::anyhow!("the client opened too few TCP streams in time"))?
                    .context("no more TCP streams")?;
                accepted.push(s);
            }
            // Each connection's cookie is read on a task of its own: the order they were
            // accepted in is the order the client opened them (with --bidir, its sending
            // streams first).
            accepted.sort_by_key(|(order, _)| *order);
            for (_, s) in accepted {
                let s = s
                    .into_std()
                    .context("while taking a TCP stream off the runtime")?;
                streams.push(Stream::Tcp(Arc::new(s)));
            }
        }
        Ok(streams)
    }
}

/// Each stream's pace, bit/s: the client's `-b` (or `--fq-rate` for UDP, which has no kernel
/// pacing here: its streams share the listener's socket), held under the server's
/// `--max-rate` shared by the `sending` streams.
fn pace(plan: &TestPlan, max_rate_bps: Option<u64>, sending: u32) -> u64 {
    let mut rate = plan.rate_bps;
    if plan.udp && plan.fq_rate_bps > 0 {
        rate = match rate {
            0 => plan.fq_rate_bps,
            r => r.min(plan.fq_rate_bps),
        };
    }
    match max_rate_bps {
        Some(max) => {
            let share = (max / u64::from(sending.max(1))).max(1);
            if rate == 0 {
                share
            } else {
                rate.min(share)
            }
        }
        None => rate,
    }
}

/// A TCP stream's retransmissions so far (TCP_INFO), when the OS says.
fn retransmits(stream: &Stream) -> Option<u64> {
    match stream {
        Stream::Tcp(s) => counters::tcp_stats(s.as_ref()).and_then(|t| t.tcp_total_retrans),
        Stream::Udp(_) => None,
    }
}

/// Each stream's figures at the end, with its marks.
fn tally(
    streams: &[Stream],
    counts: &[Arc<StreamCount>],
    marks: &[(u64, u64)],
    retrans_at_mark: &[Option<u64>],
    receivers: Vec<UdpReceiver>,
    plan: &TestPlan,
) -> Vec<StreamTally> {
    let mut receivers = receivers.into_iter();
    streams
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let sends = plan.server_sends(i as u32);
            let mut t = StreamTally {
                index: i as u32,
                sends,
                bytes: counts[i].bytes(),
                calls: counts[i].calls(),
                mark: marks[i],
                ..StreamTally::default()
            };
            if sends {
                t.retransmits =
                    retransmits(s).map(|end| end.saturating_sub(retrans_at_mark[i].unwrap_or(0)));
            }
            // The hub hands back every stream of the test in order, the sending ones too
            // (nothing arrives on those).
            let receiver = if plan.udp { receivers.next() } else { None };
            if let (Some(r), false) = (receiver, sends) {
                t.bytes = r.bytes;
                t.calls = r.datagrams;
                t.receiver = Some(r);
            }
            t
        })
        .collect()
}

/// The session a test is, as the gate admits it and its line shows it: protocol, block size,
/// total (or time), direction, the rate the client declared over all its sending streams.
fn session_of(plan: &TestPlan) -> SessionParams {
    let total = match (plan.bytes, plan.blocks) {
        (Some(b), _) => Some(b),
        (None, Some(k)) => Some(k.saturating_mul(u64::from(plan.len))),
        (None, None) => None,
    };
    SessionParams {
        duration_us: total.is_none().then(|| {
            plan.time_s
                .saturating_add(plan.omit_s)
                .saturating_mul(1_000_000)
        }),
        omit_us: (plan.omit_s > 0).then(|| plan.omit_s.saturating_mul(1_000_000)),
        protocol: if plan.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        mechanism: Mechanism::Stream,
        msg_size: plan.len,
        total_bytes: total.unwrap_or(UNBOUNDED_TOTAL),
        rto_us: None,
        rate_bps: (plan.rate_bps > 0)
            .then(|| plan.rate_bps.saturating_mul(u64::from(plan.parallel))),
        grace_us: 0,
        options: Default::default(),
        interval_us: None,
        reverse: plan.reverse,
    }
}
