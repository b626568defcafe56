//! One session from the client's side: control hello, session request, the data transfer
//! through an engine, and the server's report. Timing runs on the monotonic clock from the first
//! byte sent to the last acknowledgement (stop-and-wait) or the server's confirmation
//! (streaming); connection set-up is not part of it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use tokio::net::{TcpSocket, TcpStream};
use wirebench_core::machine::rto::{
    RtoEstimator, DEFAULT_INITIAL_RTO, DEFAULT_MAX_RTO, DEFAULT_MIN_RTO,
};
use wirebench_core::machine::saw::RtoPolicy;
use wirebench_core::record::{bits_per_second, ClientRecord, EndMetrics};
use wirebench_core::record::{RttFigures, UdpReceipt};
use wirebench_core::vocab::metrics::{CpuUsage, IntervalSample, TransportStats};
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::units::BitRate;
use wirebench_core::wire::proto::{
    ControlMessage, DataPathInfo, Omitted, Preamble, ServerReport, SessionParams,
};

use crate::engine::blocking::{self, block_on, Blocking};
use crate::engine::interval::{self, Progress};
use crate::engine::liveness::{self, Judged, Watched};
use crate::engine::quic;
use crate::engine::quic_stream::{QuicSink, QuicSource};
use crate::engine::stream::{self, MessageSink, ReadSource, ReadTally, WriteSink};
use crate::engine::throttle::{Pause, Throttled};
use crate::engine::udp::{self, AsyncPort, SpinPort, UdpClient};
use crate::engine::udp_reverse;
use crate::engine::SendTally;
use crate::transport::counters::{self, CpuMeter};
use crate::transport::{control, net};
use wirebench_core::vocab::units::duration_ns;

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

/// Runs one session against the server at `server`.
pub async fn run_session(server: SocketAddr, params: &SessionParams) -> Result<SessionOutcome> {
    run_session_with(server, params, &Progress::new()).await
}

/// Like [`run_session`], storing the payload bytes sent (or acknowledged) so far in `progress`
/// as the transfer goes, for interval reports read on another task.
pub async fn run_session_with(
    server: SocketAddr,
    params: &SessionParams,
    progress: &Arc<Progress>,
) -> Result<SessionOutcome> {
    run_session_auth(server, params, progress, None).await
}

/// Like [`run_session_with`], proving to the server that we hold `psk` when given (and
/// refusing a server that does not ask for it).
pub async fn run_session_auth(
    server: SocketAddr,
    params: &SessionParams,
    progress: &Arc<Progress>,
    psk: Option<&wirebench_core::security::auth::Psk>,
) -> Result<SessionOutcome> {
    run_session_judged(server, params, progress, psk, None).await
}

/// One flow of a run: [`run_session_auth`], with a QUIC flow on a thread of its own and a
/// single-threaded runtime, so its endpoint, quinn's connection driver and the data loop
/// share one thread as in quinn's perf tool, instead of handing the connection's lock and
/// wake-ups between the runtime's workers (measured on loopback, medians of 3: 1 GiB in
/// 128 KiB writes at MTU 1452, upload 6.13 → 6.58 Gbit/s, download 6.13 → 6.40; with the send
/// window sized by message, 1 KiB messages 6.1 → 7.5 Gbit/s, 100 B and 4 KiB even).
/// Dropping the returned future ends the flow's thread too.
pub async fn run_flow(
    server: SocketAddr,
    params: &SessionParams,
    progress: &Arc<Progress>,
    psk: Option<&wirebench_core::security::auth::Psk>,
) -> Result<SessionOutcome> {
    if params.protocol != Protocol::Quic {
        return run_session_auth(server, params, progress, psk).await;
    }
    let (params, progress, psk) = (params.clone(), Arc::clone(progress), psk.cloned());
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
                let session = tokio::spawn(async move {
                    run_session_auth(server, &params, &progress, psk.as_ref()).await
                });
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

/// A `run --rate max` trial: like [`run_session_auth`] for a forward UDP stream whose params
/// ask for receipts (`options.receipt_us`); each receipt goes to `judge`, and the sending
/// stops (the session then ends as usual, with what was sent) as soon as it says so.
pub async fn run_trial(
    server: SocketAddr,
    params: &SessionParams,
    progress: &Arc<Progress>,
    psk: Option<&wirebench_core::security::auth::Psk>,
    judge: liveness::Judge<'_>,
) -> Result<SessionOutcome> {
    run_session_judged(server, params, progress, psk, Some(judge)).await
}

async fn run_session_judged(
    server: SocketAddr,
    params: &SessionParams,
    progress: &Arc<Progress>,
    psk: Option<&wirebench_core::security::auth::Psk>,
    judge: Option<liveness::Judge<'_>>,
) -> Result<SessionOutcome> {
    let cpu = CpuMeter::start();
    let (mut ctrl, granted) =
        control::request_session_auth(server, &ControlMessage::SessionRequest(params.clone()), psk)
            .await?;
    let (session, token, quic_cert) = (granted.session, granted.token, granted.quic_cert);
    let data = Preamble::data(session, token);
    let mut rtt = stream::rtt_histogram()?;
    let transfer = async {
        match params.protocol {
            Protocol::Tcp => run_tcp(server, params, &data, &mut ctrl, &mut rtt, progress).await,
            Protocol::Quic => {
                let cert = quic_cert.context("the server announced no QUIC certificate")?;
                run_quic(server, params, &data, cert, &mut ctrl, &mut rtt, progress).await
            }
            Protocol::Udp => {
                run_udp(
                    server,
                    params,
                    (session, token),
                    &mut ctrl,
                    &mut rtt,
                    (progress, judge),
                )
                .await
            }
        }
    };
    // -O: the mark is taken on this task, counted from the start of the data transfer.
    let omit = params.omit_us.map(Duration::from_micros);
    let (leg, mark) =
        interval::marked(transfer, omit, || progress.bytes.load(Ordering::Relaxed)).await;
    let leg = leg?;
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
    if omit.is_some() && leg.report.omitted.is_none() {
        bail!(
            "the server did not report its -O/--omit mark (a wirebench server older than -O): \
             run without -O, or update the server"
        );
    }
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
            omitted: mark.map(|m| m.omitted(leg.started, params.msg_size)),
        },
        server: leg.report,
    })
}

/// What one data transfer produced on the client.
struct Leg {
    tally: SendTally,
    started: Instant,
    elapsed: Duration,
    report: ServerReport,
    data_path: DataPathInfo,
    transport: Option<TransportStats>,
    udp_received: Option<UdpReceipt>,
}

/// TCP: a second connection to the same port, driven on a blocking (or spinning) socket in a
/// thread of its own (see engine::blocking); the loops are the ones QUIC uses.
async fn run_tcp(
    server: SocketAddr,
    p: &SessionParams,
    preamble: &Preamble,
    ctrl: &mut TcpStream,
    rtt: &mut Histogram<u64>,
    progress: &Arc<Progress>,
) -> Result<Leg> {
    let opts = &p.options;
    let socket = if server.is_ipv6() {
        TcpSocket::new_v6()
    } else {
        TcpSocket::new_v4()
    }
    .context("while creating the TCP data socket")?;
    if let Some(w) = opts.window {
        // Before connect, so the window scale offered in the SYN fits the buffer.
        socket.set_send_buffer_size(w).context("while setting -w")?;
        socket.set_recv_buffer_size(w).context("while setting -w")?;
    }
    let mut data = socket
        .connect(server)
        .await
        .with_context(|| format!("cannot open the TCP data connection to {server}"))?;
    net::apply_tcp_options(&data, opts, p.mechanism).context("while setting TCP options")?;
    if let (Some(rate), false) = (p.rate_bps, p.reverse) {
        net::set_max_pacing_rate(&data, rate)
            .context("while pacing the TCP data socket to --rate (SO_MAX_PACING_RATE)")?;
    }
    control::write_preamble(&mut data, preamble).await?;
    let data =
        blocking::into_blocking(data, opts.busy_poll).context("while preparing the data socket")?;
    if p.reverse {
        return receive_tcp(data, p, ctrl, progress).await;
    }
    progress.watch_tcp_sender(&data);
    // A second handle, to stop the sender thread (shutdown wakes a blocked write or read) if
    // the server goes away mid-transfer.
    let stopper = data
        .try_clone()
        .context("while preparing the data socket")?;
    let params = p.clone();
    let payload = vec![0u8; p.msg_size as usize];
    // The thread owns a copy of the histogram and hands it back.
    let mut hist = rtt.clone();
    let sender_progress = Arc::clone(progress);
    let sender = tokio::task::spawn_blocking(move || {
        let progress = sender_progress;
        let spin = params.options.busy_poll;
        let mut writer = Blocking::new(&data, spin);
        let mut sink = WriteSink {
            writer: &mut writer,
            payload: &payload,
        };
        let started = Instant::now();
        let result = block_on(send_on_stream(
            &mut Blocking::new(&data, spin),
            &mut sink,
            &params,
            &mut hist,
            &progress,
        ));
        let done_at = Instant::now();
        if params.timed() {
            // A timed session ends by the sender closing its side (the receiver cannot know
            // the total); the socket stays open for the acknowledgements and TCP_INFO.
            let _ = data.shutdown(std::net::Shutdown::Write);
        }
        (
            result,
            started,
            done_at,
            net::tcp_data_path(&data, spin),
            hist,
            data,
        )
    });
    let stop = || {
        let _ = stopper.shutdown(std::net::Shutdown::Both);
    };
    let joined = match liveness::watch_stoppable(ctrl, sender, stop).await {
        Watched::Done(joined) => joined,
        Watched::Gone { reason, .. } => return Err(gone(reason, progress, p)),
    };
    let (result, started, done_at, data_path, hist, data) =
        joined.context("the TCP sender thread failed")?;
    *rtt = hist;
    let tally = match result {
        Ok(tally) => tally,
        Err(e) => return Err(explain_failure(e, ctrl, progress, p).await),
    };
    let (elapsed, report) = finish_timing(p.mechanism, started, done_at, ctrl).await?;
    // Read after the server's report, once the last acknowledgements (and the D-SACKs that
    // unmask spurious retransmissions) are in.
    let transport = counters::tcp_sender_stats(&data).await;
    Ok(Leg {
        tally,
        started,
        elapsed,
        report,
        data_path,
        transport,
        udp_received: None,
    })
}

/// TCP with `--reverse`: the client plays the receiving role in a thread of its own, then
/// closes the data connection, which tells the server everything arrived.
async fn receive_tcp(
    data: std::net::TcpStream,
    p: &SessionParams,
    ctrl: &mut TcpStream,
    progress: &Arc<Progress>,
) -> Result<Leg> {
    let params = p.clone();
    // A second handle, to stop the receiver thread if the server goes away mid-transfer.
    let stopper = data
        .try_clone()
        .context("while preparing the data socket")?;
    let receiver_progress = Arc::clone(progress);
    let receiver = tokio::task::spawn_blocking(move || {
        let progress = receiver_progress;
        let spin = params.options.busy_poll;
        let mut tally = ReadTally::default();
        let mut reader = Blocking::new(&data, spin);
        let mut source = ReadSource {
            reader: &mut reader,
            buf: vec![0u8; stream::receive_buffer_len(params.mechanism, params.msg_size)],
        };
        let result = block_on(stream::receive_role(
            &mut source,
            &mut Blocking::new(&data, spin),
            &params,
            &mut tally,
            &progress.bytes,
        ));
        let transport = counters::tcp_stats(&data);
        (result, tally, net::tcp_data_path(&data, spin), transport)
        // `data` is closed here, before the report is awaited.
    });
    let stop = || {
        let _ = stopper.shutdown(std::net::Shutdown::Both);
    };
    let joined = match liveness::watch_stoppable(ctrl, receiver, stop).await {
        Watched::Done(joined) => joined,
        Watched::Gone { reason, .. } => return Err(gone(reason, progress, p)),
    };
    // The server waits for the client to close the data connection (its FIN says everything
    // arrived): with the thread's handle gone, this last one closes it.
    drop(stopper);
    let (result, tally, data_path, transport) = joined.context("the TCP receiver thread failed")?;
    if let Err(e) = result {
        let e = anyhow::Error::from(e).context("the data transfer failed");
        return Err(explain_failure(e, ctrl, progress, p).await);
    }
    let report = control::read_report(ctrl).await?;
    Ok(received_leg(&tally, report, data_path, transport))
}

/// What a client that received (`--reverse`) reports: messages and bytes read, read calls in
/// place of send calls, and the time from the first byte read to the last.
fn received_leg(
    t: &ReadTally,
    report: ServerReport,
    data_path: DataPathInfo,
    transport: Option<TransportStats>,
) -> Leg {
    let started = t.first_at.unwrap_or_else(Instant::now);
    Leg {
        tally: SendTally {
            messages: t.messages,
            bytes: t.bytes,
            send_calls: t.read_calls,
            ..SendTally::default()
        },
        started,
        elapsed: t
            .last_at
            .map_or(Duration::ZERO, |l| l.saturating_duration_since(started)),
        report,
        data_path,
        transport,
        udp_received: None,
    }
}

/// QUIC: a connection to the same UDP port, one bidirectional stream; messages are slices of
/// one shared payload buffer.
async fn run_quic(
    server: SocketAddr,
    p: &SessionParams,
    preamble: &Preamble,
    cert: Vec<u8>,
    ctrl: &mut TcpStream,
    rtt: &mut Histogram<u64>,
    progress: &Progress,
) -> Result<Leg> {
    let (endpoint, connection, mut data_path) =
        quic::connect(server, cert, p.options.quic_mtu).await?;
    let (mut send, mut recv) = connection
        .open_bi()
        .await
        .context("while opening the QUIC stream")?;
    control::write_preamble(&mut send, preamble).await?;
    if p.reverse {
        let mut source = QuicSource::new(&mut recv);
        let mut tally = ReadTally::default();
        let receiving =
            stream::receive_role(&mut source, &mut send, p, &mut tally, &progress.bytes);
        let received = match liveness::watch(ctrl, receiving).await {
            Watched::Done(received) => received,
            Watched::Gone { reason, .. } => {
                connection.close(0u32.into(), b"server gone");
                return Err(gone(reason, progress, p));
            }
        };
        if let Err(e) = received {
            connection.close(0u32.into(), b"failed");
            let e = anyhow::Error::from(e).context("the data transfer failed");
            return Err(explain_failure(e, ctrl, progress, p).await);
        }
        data_path.cpu = net::current_cpu();
        let report = control::read_report(ctrl).await;
        let transport = Some(counters::quic_stats(&connection));
        connection.close(0u32.into(), b"done");
        quic::drain(&endpoint).await;
        return Ok(received_leg(&tally, report?, data_path, transport));
    }
    let sink = QuicSink::new(&mut send, &connection, p);
    // --rate: paced by the application (quinn's own pacer follows its congestion window).
    let mut sink = Throttled::new(sink, p.rate_bps, Pause::Timer);
    let started = Instant::now();
    let sent = liveness::watch(ctrl, send_on_stream(&mut recv, &mut sink, p, rtt, progress)).await;
    let sent = match sent {
        Watched::Done(sent) => sent,
        Watched::Gone { reason, .. } => {
            // No drain: nobody is left to acknowledge the close.
            connection.close(0u32.into(), b"server gone");
            return Err(gone(reason, progress, p));
        }
    };
    let tally = match sent {
        Ok(tally) => tally,
        Err(e) => {
            connection.close(0u32.into(), b"failed");
            return Err(explain_failure(e, ctrl, progress, p).await);
        }
    };
    let done_at = Instant::now();
    data_path.cpu = net::current_cpu();
    let send_window = sink.get_ref().send_window();
    drop(sink);
    let _ = send.finish();
    let result = finish_timing(p.mechanism, started, done_at, ctrl).await;
    let transport = Some(TransportStats {
        send_window_bytes: send_window,
        ..counters::quic_stats(&connection)
    });
    connection.close(0u32.into(), b"done");
    quic::drain(&endpoint).await;
    let (elapsed, report) = result?;
    Ok(Leg {
        tally,
        started,
        elapsed,
        report,
        data_path,
        transport,
        udp_received: None,
    })
}

/// UDP: datagrams to the same port; the end is agreed on the control connection.
async fn run_udp(
    server: SocketAddr,
    p: &SessionParams,
    (session, token): (u32, u32),
    ctrl: &mut TcpStream,
    rtt: &mut Histogram<u64>,
    (progress, judge): (&Arc<Progress>, Option<liveness::Judge<'_>>),
) -> Result<Leg> {
    let udp = UdpClient::connect(server, p.options.window).await?;
    let mut data_path = udp.data_path(p.options.busy_poll);
    if p.reverse {
        let wait_done = async {
            match control::recv(&mut *ctrl).await? {
                Some(ControlMessage::SenderDone { messages_sent, .. }) => Ok(messages_sent),
                Some(ControlMessage::Report(r)) => bail!(
                    "the server ended the session: {}",
                    r.abort_reason.as_deref().unwrap_or("no reason given")
                ),
                Some(ControlMessage::Error { reason }) => {
                    bail!("the server reported an error: {reason}")
                }
                Some(_) => bail!("the server sent something other than its done message"),
                None => {
                    bail!("the server is gone: it closed the control connection before it was done")
                }
            }
        };
        let (counts, sent) =
            udp_reverse::receive(&udp, (session, token), p, progress, wait_done).await?;
        data_path.cpu = net::current_cpu();
        let report = control::read_report(ctrl).await?;
        let lost = sent.saturating_sub(counts.messages);
        let started = counts.first_at.unwrap_or_else(Instant::now);
        return Ok(Leg {
            tally: SendTally {
                messages: counts.messages,
                bytes: counts.bytes,
                send_calls: counts.datagrams,
                ..SendTally::default()
            },
            started,
            elapsed: counts
                .last_at
                .map_or(Duration::ZERO, |l| l.saturating_duration_since(started)),
            report,
            data_path,
            // As forward: what the sender put on the wire that had to be resent or was lost.
            transport: (p.mechanism == Mechanism::Stream)
                .then(|| TransportStats::from_udp(sent, lost)),
            udp_received: Some(UdpReceipt {
                lost,
                duplicates: counts.duplicates,
                out_of_order: counts.out_of_order,
                jitter_us: counts.jitter_us,
            }),
        });
    }
    // The server answers nothing from this socket until it has echoed the token (docs/protocol.md).
    crate::engine::udp_hello::validate(udp.socket(), session, token).await?;
    let (tally, started, acked_at) = match p.mechanism {
        Mechanism::Stream => {
            let started = Instant::now();
            let sending = udp.send_stream(
                session,
                (p.total_bytes, stream::session_deadline(p, started)),
                p.msg_size,
                p.rate_bps.map(BitRate),
                &progress.bytes,
            );
            let tally = match judge {
                None => match liveness::watch(ctrl, sending).await {
                    Watched::Done(Ok(tally)) => tally,
                    Watched::Done(Err(e)) => {
                        return Err(explain_failure(e, ctrl, progress, p).await)
                    }
                    Watched::Gone { reason, .. } => return Err(gone(reason, progress, p)),
                },
                Some(judge) => {
                    let watched = (started, &progress.bytes);
                    match liveness::watch_receipts(ctrl, sending, watched, judge).await {
                        Judged::Done(Ok(tally)) => tally,
                        Judged::Done(Err(e)) => {
                            return Err(explain_failure(e, ctrl, progress, p).await)
                        }
                        // Dropped between sends: the progress counter is exactly what left.
                        Judged::Stopped => {
                            let bytes = progress.bytes.load(Ordering::Relaxed);
                            let messages =
                                wirebench_core::vocab::plan::message_count(bytes, p.msg_size);
                            SendTally {
                                messages,
                                bytes,
                                datagrams: messages,
                                ..SendTally::default()
                            }
                        }
                        Judged::Gone(reason) => return Err(gone(reason, progress, p)),
                    }
                }
            };
            data_path.cpu = net::current_cpu();
            (tally, started, Instant::now())
        }
        Mechanism::StopAndWait => {
            let policy = match p.rto_us {
                Some(us) => RtoPolicy::Fixed(Duration::from_micros(us)),
                None => RtoPolicy::Adaptive(RtoEstimator::new(
                    DEFAULT_INITIAL_RTO,
                    DEFAULT_MIN_RTO,
                    DEFAULT_MAX_RTO,
                )),
            };
            let (total, size) = (p.total_bytes, p.msg_size);
            if p.options.busy_poll {
                let halt = Arc::new(AtomicBool::new(false));
                let mut port = SpinPort(
                    udp.into_std().context("while preparing the UDP socket")?,
                    Arc::clone(&halt),
                );
                // The thread owns a copy of the histogram and hands it back.
                let mut hist = rtt.clone();
                let sender_progress = Arc::clone(progress);
                let params = p.clone();
                let sender = tokio::task::spawn_blocking(move || {
                    let progress = sender_progress;
                    let started = Instant::now();
                    let deadline = stream::session_deadline(&params, started);
                    let result = block_on(udp::send_stop_and_wait(
                        &mut port,
                        session,
                        (total, deadline),
                        size,
                        policy,
                        &mut hist,
                        &progress.bytes,
                    ));
                    (result, started, Instant::now(), net::current_cpu(), hist)
                });
                let stop = || halt.store(true, Ordering::Relaxed);
                let joined = match liveness::watch_stoppable(ctrl, sender, stop).await {
                    Watched::Done(joined) => joined,
                    Watched::Gone { reason, .. } => return Err(gone(reason, progress, p)),
                };
                let (result, started, acked_at, cpu, hist) =
                    joined.context("the UDP sender thread failed")?;
                *rtt = hist;
                data_path.cpu = cpu;
                match result {
                    Ok(tally) => (tally, started, acked_at),
                    Err(e) => return Err(explain_failure(e, ctrl, progress, p).await),
                }
            } else {
                let started = Instant::now();
                let mut port = AsyncPort(udp.socket());
                let sending = udp::send_stop_and_wait(
                    &mut port,
                    session,
                    (total, stream::session_deadline(p, started)),
                    size,
                    policy,
                    rtt,
                    &progress.bytes,
                );
                let tally = match liveness::watch(ctrl, sending).await {
                    Watched::Done(Ok(tally)) => tally,
                    Watched::Done(Err(e)) => {
                        return Err(explain_failure(e, ctrl, progress, p).await)
                    }
                    Watched::Gone { reason, .. } => return Err(gone(reason, progress, p)),
                };
                data_path.cpu = net::current_cpu();
                (tally, started, Instant::now())
            }
        }
    };
    control::send(
        ctrl,
        &ControlMessage::SenderDone {
            messages_sent: tally.messages,
            bytes_sent: tally.bytes,
        },
    )
    .await?;
    let report = control::read_report(ctrl).await?;
    let elapsed = match p.mechanism {
        Mechanism::StopAndWait => acked_at - started,
        // Up to the server's confirmation, less the time the server then spent waiting for
        // stragglers after the last datagram arrived (a duration on its own clock).
        Mechanism::Stream => started
            .elapsed()
            .saturating_sub(Duration::from_nanos(report.idle_after_last_ns)),
    };
    let resent_or_lost = match p.mechanism {
        Mechanism::StopAndWait => tally.retransmissions,
        Mechanism::Stream => report.lost,
    };
    Ok(Leg {
        tally,
        started,
        elapsed,
        report,
        data_path,
        transport: Some(TransportStats::from_udp(tally.datagrams, resent_or_lost)),
        udp_received: None,
    })
}

/// How long a failed transfer looks at the control connection for a better reason.
const FAILURE_LOOK: Duration = Duration::from_millis(500);

/// The error of a transfer stopped because the server went away: why, and what the client
/// had sent (stop-and-wait: had acknowledged; `--reverse`: had received) by then.
fn gone(reason: String, progress: &Progress, p: &SessionParams) -> anyhow::Error {
    let bytes = progress.bytes.load(Ordering::Relaxed);
    let what = match (p.reverse, p.mechanism) {
        (true, _) => "received",
        (false, Mechanism::Stream) => "sent (what arrived is unknown: no report came)",
        (false, Mechanism::StopAndWait) => "sent and acknowledged",
    };
    anyhow!("{reason}; the transfer stopped after {bytes} B {what}")
}

/// A transfer that failed on its own (a reset data connection, a closed UDP port): when the
/// control connection says the server is gone, that is the error; otherwise the failure's.
async fn explain_failure(
    e: impl Into<anyhow::Error>,
    ctrl: &mut TcpStream,
    progress: &Progress,
    p: &SessionParams,
) -> anyhow::Error {
    let e = e.into();
    match liveness::server_gone(ctrl, FAILURE_LOOK).await {
        Some(reason) => gone(format!("{reason} ({e:#})"), progress, p),
        None => e,
    }
}

async fn send_on_stream<R, S>(
    acks: &mut R,
    sink: &mut S,
    p: &SessionParams,
    rtt: &mut Histogram<u64>,
    progress: &Progress,
) -> Result<SendTally>
where
    R: tokio::io::AsyncRead + Unpin,
    S: MessageSink,
{
    stream::send_role(acks, sink, p, rtt, &progress.bytes)
        .await
        .context("the data transfer failed")
}

/// Stops the clock: stop-and-wait is done at its last acknowledgement (`done_at`); streaming
/// when the server confirms it has read everything. Returns the elapsed time and the report.
async fn finish_timing(
    mechanism: Mechanism,
    started: Instant,
    done_at: Instant,
    ctrl: &mut TcpStream,
) -> Result<(Duration, ServerReport)> {
    let report = control::read_report(ctrl).await?;
    let elapsed = match mechanism {
        Mechanism::StopAndWait => done_at - started,
        Mechanism::Stream => started.elapsed(),
    };
    Ok((elapsed, report))
}
