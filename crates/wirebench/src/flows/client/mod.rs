//! One session from the client's side: the session request ([`SessionRequest`], the one way in),
//! control hello, the data transfer through an engine (one file per protocol: [`tcp`], [`quic`],
//! [`udp`]), and the server's report. Timing runs on the monotonic clock from the first byte
//! sent to the last acknowledgement (stop-and-wait) or the server's confirmation (streaming);
//! connection set-up is not part of it. Must not decide the plan or print.

mod leg;
mod quic;
mod tcp;
mod udp;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use wirebench_core::record::{bits_per_second, ClientRecord, EndMetrics};
use wirebench_core::record::{RttFigures, UdpReceipt};
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::counters::{CpuUsage, IntervalSample, TransportStats};
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{
    ControlMessage, DataPathInfo, Omitted, Preamble, ServerReport, SessionParams,
};

use crate::engine::interval::{self, Progress};
use crate::engine::liveness::Judge;
use crate::engine::stream;
use crate::engine::SendTally;
use crate::transport::control;
use crate::transport::counters::CpuMeter;
use leg::{Leg, Transfer};

/// What the client measured in one session.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFigures {
    /// What the sender did.
    pub tally: SendTally,
    /// When the first byte was sent, on this host's monotonic clock (to line flows up).
    pub started: Instant,
    /// Transmission time.
    pub elapsed: Duration,
    /// Stop-and-wait round trips.
    pub rtt: Option<RttFigures>,
    /// Every stop-and-wait round trip, nanoseconds (empty when streaming), so flows can merge.
    pub rtt_histogram: Histogram<u64>,
    /// What the client's data path ran with.
    pub data_path: DataPathInfo,
    /// What the client's transport reported (TCP_INFO, QUIC stats, UDP tallies).
    pub transport: Option<TransportStats>,
    /// CPU time the client process spent on the session, connection set-up included.
    pub cpu: Option<CpuUsage>,
    /// What the client sent per interval (`-i`; the runner samples it), oldest first.
    pub intervals: Vec<IntervalSample>,
    /// UDP with `--reverse`: what the client, as the receiver, found missing, repeated and
    /// out of order, and the jitter.
    pub udp_received: Option<UdpReceipt>,
    /// `-O`: what the client had moved at its omit mark (its time measured from `started`).
    pub omitted: Option<Omitted>,
}

impl ClientFigures {
    /// The result record of the client's figures.
    pub fn record(&self) -> ClientRecord {
        let seconds = self.elapsed.as_secs_f64();
        let t = &self.tally;
        ClientRecord {
            messages: t.messages,
            bytes: t.bytes,
            seconds,
            elapsed_ns: duration_ns(self.elapsed),
            rate_bps: bits_per_second(t.bytes, seconds),
            send_calls: t.send_calls,
            datagrams: t.datagrams,
            retransmissions: t.retransmissions,
            timeouts: t.timeouts,
            send_errors: t.send_errors,
            not_sent: t.not_sent,
            rtt: self.rtt,
            data_path: self.data_path.clone(),
            measured: EndMetrics::of(
                self.transport.as_ref(),
                self.cpu.as_ref(),
                t.bytes,
                &self.intervals,
            ),
            udp_received: self.udp_received,
            omitted: self.omitted,
        }
    }
}

/// Both sides of one session.
#[derive(Debug, Clone)]
pub struct SessionOutcome {
    /// The server's session id.
    pub session: u32,
    /// The client's figures.
    pub client: ClientFigures,
    /// The server's figures.
    pub server: ServerReport,
}

impl SessionOutcome {
    /// Marks both CPU figures as covering one process: the client and an embedded server.
    pub fn mark_shared_process(&mut self) {
        for cpu in [&mut self.client.cpu, &mut self.server.cpu]
            .into_iter()
            .flatten()
        {
            cpu.shared_process = true;
        }
    }
}

/// One session to ask of a server: where, what ([`SessionParams`]), and the optional parts (a
/// progress counter read on another task, a pre-shared key, a judge of the server's receipts).
/// Built once by whoever plans the run and handed down; [`SessionRequest::run`] is the one way
/// a client session runs.
pub struct SessionRequest<'j> {
    /// The server's address.
    pub server: SocketAddr,
    /// What the session asks of the server.
    pub params: SessionParams,
    /// Where the transfer stores the payload bytes sent (or acknowledged, or received) so far,
    /// for interval reports and the run in flight, read on another task.
    pub progress: Arc<Progress>,
    /// Prove to the server that we hold this key (and refuse a server that does not ask).
    pub psk: Option<Psk>,
    /// A `run --rate max` trial: a forward UDP stream whose params ask for receipts
    /// (`options.receipt_us`); each receipt goes to the judge, and the sending stops (the
    /// session then ends as usual, with what was sent) as soon as it says so. Other sessions
    /// never hear from the server before its report, so their judge is never called.
    pub judge: Option<Judge<'j>>,
    /// The only flow of its run (no `-P`, no `--bidir`): a UDP stream then sends from a thread
    /// of its own (`udp::stream_on_thread`), or with `-R` runs its session on one; the flows
    /// of a `-P` run share the runtime's workers, which on 2 vCPUs left their receivers more
    /// of the machine (`-P 8`: 27 % lost against 83 % with a thread per flow).
    pub sole: bool,
}

impl SessionRequest<'static> {
    /// A session of `params` against the server at `server`, with a progress counter of its
    /// own, no key and no judge.
    pub fn new(server: SocketAddr, params: &SessionParams) -> SessionRequest<'static> {
        SessionRequest {
            server,
            params: params.clone(),
            progress: Progress::new(),
            psk: None,
            judge: None,
            sole: true,
        }
    }
}

impl<'j> SessionRequest<'j> {
    /// The same request, proving it holds `psk` when given.
    pub fn psk(self, psk: Option<&Psk>) -> Self {
        SessionRequest {
            psk: psk.cloned(),
            ..self
        }
    }

    /// Runs the session. A QUIC session runs on a thread of its own with a single-threaded
    /// runtime, so its endpoint, quinn's connection driver and the data loop share one thread
    /// as in quinn's perf tool, instead of handing the connection's lock and wake-ups between
    /// the runtime's workers (measured on loopback, medians of 3: 1 GiB in 128 KiB writes at
    /// MTU 1452, upload 6.13 → 6.58 Gbit/s, download 6.13 → 6.40; with the send window sized
    /// by message, 1 KiB messages 6.1 → 7.5 Gbit/s, 100 B and 4 KiB even). A reversed UDP
    /// session that is its run's only flow does the same: on the runtime its receive task hopped
    /// between the two workers, and the scheduler could not keep it off the sender's CPU
    /// (2 vCPUs, 1472 B unpaced `-R`, unpinned, `bench/compare.py udp1472_R`: 51.2 → 59.7
    /// Gbit/s, 0.90 → 1.05 of iperf3 3.21 `--gsro -R`). Dropping the returned future ends that
    /// thread's session too.
    pub async fn run(self) -> Result<SessionOutcome> {
        match self {
            SessionRequest {
                server,
                params,
                progress,
                psk,
                judge: None,
                sole,
            } if runs_on_own_thread(&params, false, sole) => {
                let request = SessionRequest {
                    server,
                    params,
                    progress,
                    psk,
                    judge: None,
                    sole,
                };
                on_own_thread(request).await
            }
            request => request.run_here().await,
        }
    }

    /// The session on this task: the request, the transfer by protocol, the omit mark and the
    /// server's report.
    async fn run_here(self) -> Result<SessionOutcome> {
        let SessionRequest {
            server,
            params,
            progress,
            psk,
            judge,
            sole,
        } = self;
        let cpu = CpuMeter::start();
        let request = ControlMessage::SessionRequest(params.clone());
        let (mut ctrl, granted) =
            control::request_session_auth(server, &request, psk.as_ref()).await?;
        let (session, token) = (granted.session, granted.token);
        let mut rtt = stream::rtt_histogram()?;
        let mut t = Transfer {
            server,
            p: &params,
            ctrl: &mut ctrl,
            rtt: &mut rtt,
            progress: &progress,
        };
        let transfer = async {
            match params.protocol {
                Protocol::Tcp => tcp::run(&mut t, &Preamble::data(session, token)).await,
                Protocol::Quic => {
                    let cert = granted
                        .quic_cert
                        .context("the server announced no QUIC certificate")?;
                    quic::run(&mut t, &Preamble::data(session, token), cert).await
                }
                Protocol::Udp => udp::run(&mut t, (session, token), judge, sole).await,
            }
        };
        // -O: the mark is taken on this task, counted from the start of the data transfer.
        let omit = params.omit_us.map(Duration::from_micros);
        let (leg, mark) =
            interval::marked(transfer, omit, || progress.bytes.load(Ordering::Relaxed)).await;
        let leg = leg?;
        check_report(&params, &leg)?;
        Ok(SessionOutcome {
            session,
            client: ClientFigures {
                tally: leg.tally,
                started: leg.started,
                elapsed: leg.elapsed,
                rtt: RttFigures::of(&rtt),
                rtt_histogram: rtt,
                data_path: leg.data_path,
                transport: leg.transport,
                cpu: cpu.stop(),
                intervals: Vec::new(),
                udp_received: leg.udp_received,
                omitted: mark.map(|m| Omitted {
                    bytes: m.bytes,
                    messages: params.whole_messages(m.bytes),
                    elapsed_ns: m.ns_after(leg.started),
                }),
            },
            server: leg.report,
        })
    }
}

/// The server's report as every protocol's transfer received it, beside what the client
/// measured: the one place the client checks a report before it is believed.
fn check_report(params: &SessionParams, leg: &Leg) -> Result<()> {
    // A report that cannot be true, or that says the session was aborted, is no run's.
    wirebench_core::record::plausibility::check_report(
        wirebench_core::record::plausibility::ClientView::of(
            params.reverse,
            leg.tally.messages,
            leg.tally.bytes,
        ),
        wirebench_core::vocab::units::duration_ns(leg.started.elapsed()),
        &leg.report,
    )?;
    if params.omit_us.is_some() && leg.report.omitted.is_none() {
        bail!(
            "the server did not report its -O/--omit mark (a wirebench server older than -O): \
             run without -O, or update the server"
        );
    }
    Ok(())
}

/// Whether a session of `params` runs on a thread of its own ([`SessionRequest::run`]): a QUIC
/// session or a reversed UDP one that is its run's only flow, neither watched by a judge.
fn runs_on_own_thread(params: &SessionParams, judged: bool, sole: bool) -> bool {
    !judged
        && (params.protocol == Protocol::Quic
            || (params.protocol == Protocol::Udp && params.reverse && sole))
}

/// Runs `request` (a QUIC session, or a sole reversed UDP one; no judge) on a thread of its
/// own; see [`SessionRequest::run`].
async fn on_own_thread(request: SessionRequest<'static>) -> Result<SessionOutcome> {
    let (result_tx, result_rx) = tokio::sync::oneshot::channel();
    // Dropped with this future: the thread then drops its session (closing its connection).
    let (_cancel_on_drop, cancelled) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("wirebench-flow".into())
        .stack_size(FLOW_THREAD_STACK)
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ =
                        result_tx.send(Err(anyhow!(e).context("cannot start a flow's runtime")));
                    return;
                }
            };
            runtime.block_on(async move {
                // A task, not the `block_on` future itself: tokio polls the latter only after
                // a look at the event queue (one more `epoll_wait` per wake-up, so per round
                // trip), a task runs straight from the run queue after the task that woke it.
                let session = tokio::spawn(request.run_here());
                let stop = session.abort_handle();
                tokio::select! {
                    joined = session => match joined {
                        Ok(outcome) => {
                            let _ = result_tx.send(outcome);
                        }
                        // As if it had panicked on this thread: the caller sees the thread end.
                        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                        Err(_) => {}
                    },
                    _ = cancelled => stop.abort(),
                }
            });
        })
        .context("cannot start a flow's thread")?;
    result_rx
        .await
        .context("a flow's thread ended without a result")?
}

/// Stack of a flow's own thread: a main thread's, which a debug build's session futures need.
const FLOW_THREAD_STACK: usize = 8 << 20;
