//! One session on the server, from the session request on the control connection to the report
//! sent back: validates the request, waits for the data connection (TCP, QUIC) or the client's
//! "done" (UDP), counts through the engines, and always ends with one summary — aborted ones
//! marked with the reason.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::AsyncRead;
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;
use wirebench_core::vocab::plan::{Mechanism, Protocol, MAX_STREAM_MSG_SIZE, MIN_MSG_SIZE};
use wirebench_core::wire::datagram;
use wirebench_core::wire::proto::{ControlMessage, DataPathInfo, ServerReport, SessionParams};

use super::options::Limits;
use super::registry::{DataStream, Registration, Registry};
use super::stop::{stop_reason, Interruptible};
use super::{ServerEvent, ServerNotice, SessionSummary, Shared};
use crate::engine::blocking::{self, block_on, Blocking};
use crate::engine::interval::{self, Progress};
use crate::engine::quic_stream::QuicSource;
use crate::engine::stream::{self, ReadSource, ReadTally};
use crate::engine::throttle::{Pause, Throttled};
use crate::engine::udp_receiver::UdpReceiver;
use crate::transport::control::{self, SETUP_TIMEOUT};
use crate::transport::counters::{self, CpuMeter};
use crate::transport::net::{self, canonical_ip};
use wirebench_core::vocab::units::duration_ns;

/// Longest grace period a client may ask for.
const MAX_GRACE: Duration = Duration::from_secs(60);

/// How long the server keeps a finished QUIC connection open so its last acknowledgements
/// reach the client, unless the client closes it first.
pub(super) const QUIC_LINGER: Duration = Duration::from_secs(5);

/// Serves one control connection to its end; sends a summary (or a notice) to `events`.
pub(super) async fn serve(
    stream: &mut TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    events: &UnboundedSender<ServerEvent>,
    hello_deadline: tokio::time::Instant,
) {
    let notice = |message: String| {
        let _ = events.send(ServerEvent::Notice(ServerNotice { peer, message }));
    };
    let limits = &shared.options.limits;
    let (mut rd, mut wr) = stream.split();
    // The request (and, with a pre-shared key, the client's proof) must be in before the
    // hello deadline.
    let request = tokio::time::timeout_at(
        hello_deadline,
        super::auth::recv_request(&mut rd, &mut wr, peer, shared, events),
    )
    .await
    .unwrap_or_else(|_| {
        Err(anyhow::anyhow!(
            "no session request within {:?} (the server's --hello-timeout)",
            limits.hello_timeout
        ))
    });
    // Every session holds a place until it has reported; none starts over the limits.
    let is_session = matches!(
        request,
        Ok(ControlMessage::SessionRequest(_) | ControlMessage::RrRequest(_))
    );
    let _slot = if is_session {
        match shared.admission.admit(peer.ip()) {
            Ok(slot) => Some(slot),
            Err(reason) => {
                refuse(
                    &mut wr,
                    ControlMessage::Rejected {
                        reason: reason.clone(),
                    },
                )
                .await;
                shared.metrics.refused(&reason);
                notice(format!("session refused: {reason}"));
                return;
            }
        }
    } else {
        None
    };
    // From here on, the session's duration limit and the server's shutdown interrupt it.
    let mut rd = Interruptible::new(rd, limits.max_duration, shared.abort.subscribe());
    let params = match request {
        Ok(ControlMessage::SessionRequest(p)) => p,
        Ok(ControlMessage::RrRequest(rr)) => {
            super::rr_session::serve(&mut rd, &mut wr, peer, shared, events, rr).await;
            return;
        }
        Ok(other) => {
            let reason = format!("expected a session request, got {}", kind_name(&other));
            refuse(
                &mut wr,
                ControlMessage::Error {
                    reason: reason.clone(),
                },
            )
            .await;
            notice(format!("connection closed: {reason}"));
            return;
        }
        // Authentication refused: the client has been told, the notice is sent.
        Err(e) if e.is::<super::auth::Refused>() => return,
        Err(e) => {
            let reason = format!("{e:#}");
            refuse(
                &mut wr,
                ControlMessage::Error {
                    reason: reason.clone(),
                },
            )
            .await;
            notice(format!("connection closed: {reason}"));
            return;
        }
    };
    if let Err(reason) = validate(&params, peer).and_then(|()| within_limits(&params, limits)) {
        refuse(
            &mut wr,
            ControlMessage::Rejected {
                reason: reason.clone(),
            },
        )
        .await;
        shared.metrics.refused(&reason);
        notice(format!("session refused: {reason}"));
        return;
    }
    let params = bound_timed(params, limits);
    shared.metrics.started();
    let cpu = CpuMeter::start();
    let (session, mut report) = match params.protocol {
        Protocol::Tcp | Protocol::Quic => {
            serve_stream(&mut rd, &mut wr, peer, shared, &params).await
        }
        Protocol::Udp if params.reverse => {
            serve_udp_reverse(&mut rd, &mut wr, peer, shared, &params).await
        }
        Protocol::Udp => serve_udp(&mut rd, &mut wr, peer, shared, &params).await,
    };
    let Some(session) = session else {
        return;
    };
    report.cpu = cpu.stop();
    shared.metrics.ended(&params, &report);
    // The summary goes out before the report, so whoever prints both sees the server's first.
    let _ = events.send(ServerEvent::Session(Box::new(SessionSummary {
        session,
        peer,
        params: params.clone(),
        report: report.clone(),
    })));
    let _ = control::send(&mut wr, &ControlMessage::Report(Box::new(report))).await;
}

/// Sends a refusal (or an error) to the client; the connection ends after it.
async fn refuse<W: tokio::io::AsyncWrite + Unpin>(wr: &mut W, answer: ControlMessage) {
    let _ = control::send(wr, &answer).await;
}

/// Checks a session request against what this server allows; the error is for the user.
fn validate(p: &SessionParams, peer: SocketAddr) -> Result<(), String> {
    if p.total_bytes == 0 {
        return Err("total must be at least 1 byte".into());
    }
    let max = match p.protocol {
        Protocol::Tcp | Protocol::Quic => MAX_STREAM_MSG_SIZE,
        Protocol::Udp => datagram::max_message_size(canonical_ip(peer.ip()).is_ipv6()),
    };
    if p.msg_size < MIN_MSG_SIZE || p.msg_size > max {
        return Err(format!(
            "message size {} is out of range for {}: allowed {MIN_MSG_SIZE} to {max} bytes",
            p.msg_size, p.protocol
        ));
    }
    if let Some(cc) = &p.options.congestion {
        if let Some(available) = net::available_congestion_controls() {
            if !available.iter().any(|a| a == cc) {
                return Err(format!(
                    "congestion control {cc} is not available on the server: allowed {}",
                    available.join(", ")
                ));
            }
        }
    }
    if p.options.busy_poll && p.protocol == Protocol::Quic {
        return Err("busy-poll applies to TCP and UDP, not QUIC".into());
    }
    if Duration::from_micros(p.grace_us) > MAX_GRACE {
        return Err(format!(
            "grace period is out of range: allowed up to {MAX_GRACE:?}"
        ));
    }
    Ok(())
}

/// Checks a session request against the server's limits on bytes and rate.
fn within_limits(p: &SessionParams, limits: &Limits) -> Result<(), String> {
    if let Some(us) = p.duration_us {
        // A timed session's total is only an upper bound: --max-bytes caps it instead (see
        // `bound_timed`), and its duration must fit --max-duration.
        let asked = Duration::from_micros(us);
        if asked >= limits.max_duration {
            return Err(format!(
                "a timed session of {asked:?} is longer than this server allows: less than {:?} (--max-duration)",
                limits.max_duration
            ));
        }
    } else if p.total_bytes > limits.max_bytes {
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
        // must pace to the limit on its own.
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

/// A timed session's upper bound on bytes lowered to the server's `--max-bytes`: the receiver
/// never reads, and a reversed sender never sends, more than that (a forward stream that
/// reaches it is aborted, naming the flag).
fn bound_timed(mut p: SessionParams, limits: &Limits) -> SessionParams {
    if p.timed() {
        p.total_bytes = p.total_bytes.min(limits.max_bytes);
    }
    p
}

/// A report that carries no figures yet.
fn empty_report(p: &SessionParams) -> ServerReport {
    ServerReport {
        protocol: p.protocol,
        mechanism: p.mechanism,
        ..ServerReport::default()
    }
}

/// Tells the client its session exists (and, for QUIC, which certificate to expect); false
/// when the client is already gone.
pub(super) async fn send_accepted<W: tokio::io::AsyncWrite + Unpin>(
    wr: &mut W,
    registration: &Registration,
    quic_cert: Option<Vec<u8>>,
) -> bool {
    let accepted = ControlMessage::Accepted {
        session: registration.id,
        token: registration.token,
        quic_cert,
    };
    control::send(wr, &accepted).await.is_ok()
}

/// TCP or QUIC: wait for the data connection, then receive through `engine::stream`.
async fn serve_stream<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    p: &SessionParams,
) -> (Option<u32>, ServerReport)
where
    R: AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut report = empty_report(p);
    let (registration, attach) = shared.registry.register_stream(peer.ip());
    let session = registration.id;
    let cert = (p.protocol == Protocol::Quic).then(|| shared.cert_der.clone());
    if !send_accepted(wr, &registration, cert).await {
        return (None, report);
    }
    let data = tokio::select! {
        r = tokio::time::timeout(SETUP_TIMEOUT, attach) => match r {
            Ok(Ok(d)) => d,
            _ => return (Some(session), abort(report, format!("the client opened no data connection within {SETUP_TIMEOUT:?}"))),
        },
        reason = watch_control(rd) => return (Some(session), abort(report, reason)),
    };
    drop(registration);
    if p.reverse {
        let result = super::reverse::send_to_client(data, rd, shared, p, &mut report).await;
        return match result {
            Ok(()) => (Some(session), report),
            Err(reason) => (Some(session), abort(report, reason)),
        };
    }
    let buf_len = stream::receive_buffer_len(p.mechanism, p.msg_size);
    let mut tally = ReadTally::default();
    let progress = Progress::new();
    let period = p.interval_us.map(Duration::from_micros);
    let receiving = async {
        match data {
            DataStream::Tcp(tcp) => match net::apply_tcp_options(&tcp, &p.options, p.mechanism) {
                Ok(()) => {
                    let rate = shared.options.limits.max_rate_bps;
                    let reading = Reading { buf_len, rate };
                    receive_tcp_blocking(tcp, rd, p, reading, &mut tally, &mut report, &progress)
                        .await
                }
                Err(e) => Err(format!("cannot set the TCP options: {e}")),
            },
            DataStream::Quic {
                connection,
                mut send,
                mut recv,
            } => {
                let mut source = Throttled::new(
                    QuicSource::new(&mut recv),
                    shared.options.limits.max_rate_bps,
                    Pause::Timer,
                );
                let res = tokio::select! {
                    res = stream::receive_role(&mut source, &mut send, p, &mut tally, &progress.bytes) => res.map_err(|e| e.to_string()),
                    reason = watch_control(rd) => Err(reason),
                };
                report.data_path = shared_udp_data_path(shared);
                report.transport = Some(counters::quic_stats(&connection));
                // Let the last acknowledgements drain; the client closes the connection when done.
                tokio::spawn(async move {
                    let _ = send.finish();
                    let _ = tokio::time::timeout(QUIC_LINGER, connection.closed()).await;
                });
                res
            }
        }
    };
    let sampled = interval::sampled(receiving, period, || progress.read(), |_| {});
    let ((result, intervals), mark) =
        interval::marked(sampled, omit_span(p), || progress.read().bytes).await;
    if result.is_err() {
        settle_cancelled(&mut tally, p);
    }
    report.omitted = omitted(mark, tally.first_at, p);
    report.intervals = intervals;
    report.messages = tally.messages;
    report.bytes = tally.bytes;
    report.read_calls = tally.read_calls;
    report.acks_sent = tally.acks_sent;
    report.elapsed_ns = span_ns(tally.first_at, tally.last_at);
    report.idle_after_last_ns = tally.last_at.map(|t| duration_ns(t.elapsed())).unwrap_or(0);
    match result {
        Ok(()) if p.timed() && tally.bytes >= p.total_bytes => {
            let reason = format!(
                "the timed session reached this server's limit of {} bytes (--max-bytes)",
                p.total_bytes
            );
            (Some(session), abort(report, reason))
        }
        Ok(()) => (Some(session), report),
        Err(reason) => (Some(session), abort(report, reason)),
    }
}

/// How the server reads a TCP data stream: its buffer, and the server's --max-rate.
struct Reading {
    buf_len: usize,
    rate: Option<u64>,
}

/// A receiver cancelled mid-transfer (the control connection ended first, as when a QUIC
/// client is killed) never reached its own bookkeeping: count its complete messages and end
/// its span where the abort was noticed, so an aborted summary is as consistent as a finished
/// one. Idempotent for a receiver that did finish its bookkeeping.
fn settle_cancelled(tally: &mut ReadTally, p: &SessionParams) {
    if p.mechanism == Mechanism::Stream {
        tally.messages = tally.bytes / u64::from(p.msg_size.max(1));
    }
    if tally.first_at.is_some() && tally.last_at.is_none() {
        tally.last_at = Some(Instant::now());
    }
}

/// Receives a TCP session on a blocking socket in a thread of its own (see engine::blocking),
/// while this task watches the control connection; if that ends first, shutting the socket
/// down wakes the thread.
async fn receive_tcp_blocking<R: AsyncRead + Unpin>(
    tcp: TcpStream,
    rd: &mut R,
    p: &SessionParams,
    reading: Reading,
    tally: &mut ReadTally,
    report: &mut ServerReport,
    progress: &Arc<Progress>,
) -> Result<(), String> {
    let spin = p.options.busy_poll;
    let data = blocking::into_blocking(tcp, spin).map_err(|e| format!("data socket: {e}"))?;
    let waker = data.try_clone().map_err(|e| format!("data socket: {e}"))?;
    let params = p.clone();
    let progress = Arc::clone(progress);
    let mut worker = tokio::task::spawn_blocking(move || {
        let mut t = ReadTally::default();
        let mut reader = Blocking::new(&data, spin);
        let source = ReadSource {
            reader: &mut reader,
            buf: vec![0u8; reading.buf_len],
        };
        let mut source = Throttled::new(source, reading.rate, Pause::Thread);
        let res = block_on(stream::receive_role(
            &mut source,
            &mut Blocking::new(&data, spin),
            &params,
            &mut t,
            &progress.bytes,
        ));
        let ends = (net::tcp_data_path(&data, spin), counters::tcp_stats(&data));
        (t, res, ends)
    });
    tokio::select! {
        joined = &mut worker => match joined {
            Ok((t, res, (info, transport))) => {
                *tally = t;
                (report.data_path, report.transport) = (info, transport);
                res.map_err(|e| e.to_string())
            }
            Err(e) => Err(format!("the receiver thread failed: {e}")),
        },
        reason = watch_control(rd) => {
            let _ = waker.shutdown(std::net::Shutdown::Both);
            if let Ok((t, _, (info, transport))) = worker.await {
                *tally = t;
                (report.data_path, report.transport) = (info, transport);
            }
            Err(reason)
        }
    }
}

/// UDP: datagrams are counted by the registry's handler; here we wait for the client's "done"
/// and then for stragglers, at most a grace period of quiet.
async fn serve_udp<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    p: &SessionParams,
) -> (Option<u32>, ServerReport)
where
    R: AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut report = empty_report(p);
    let (registration, udp) =
        shared
            .registry
            .register_udp(peer.ip(), p.mechanism, p.total_bytes, p.msg_size);
    let session = registration.id;
    if !send_accepted(wr, &registration, None).await {
        return (None, report);
    }
    let period = p.interval_us.map(Duration::from_micros);
    // Stragglers belong to the series too: it ends when the session's counting does.
    let receiving = async {
        // --rate max trials ask for the counts so far while they send, to end a failed trial
        // early; the reports stop when the client is done.
        let sent = match receipt_period(p) {
            None => wait_sender_done(rd).await?,
            Some(every) => tokio::select! {
                sent = wait_sender_done(rd) => sent?,
                never = send_receipts(wr, &udp, every) => match never {},
            },
        };
        udp.sender_done(sent);
        udp.wait_for_stragglers(Duration::from_micros(p.grace_us))
            .await;
        anyhow::Ok(sent)
    };
    let sampled = interval::sampled(receiving, period, || udp.progress(), |_| {});
    let ((done, intervals), mark) =
        interval::marked(sampled, omit_span(p), || udp.progress().bytes).await;
    report.omitted = omitted(mark, udp.counts().first_at, p);
    report.intervals = intervals;
    let sent = match done {
        Ok(sent) => sent,
        Err(e) => {
            fill_udp(&mut report, &udp, None);
            return (Some(session), abort(report, format!("{e:#}")));
        }
    };
    drop(registration);
    fill_udp(&mut report, &udp, Some(sent));
    report.data_path = shared_udp_data_path(shared);
    (Some(session), report)
}

/// How often a forward UDP streaming session reports its receive counts: when its client
/// asked (`receipt_us`), at most every `MIN_RECEIPT_US`.
fn receipt_period(p: &SessionParams) -> Option<Duration> {
    let us = p.options.receipt_us?;
    (p.mechanism == Mechanism::Stream && !p.reverse)
        .then(|| Duration::from_micros(us.max(wirebench_core::wire::proto::MIN_RECEIPT_US)))
}

/// Sends what `udp` has received so far every `every` until the session ends; if the control
/// connection cannot take them, stops sending them (the done message's reader sees why).
async fn send_receipts<W>(
    wr: &mut W,
    udp: &UdpReceiver,
    every: Duration,
) -> std::convert::Infallible
where
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let (messages, bytes, next_seq) = udp.receipt();
        let receipt = ControlMessage::Receipt {
            messages,
            bytes,
            next_seq,
        };
        if control::send(wr, &receipt).await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// UDP reversed: the server sends from the shared port to where the client's hello came from.
async fn serve_udp_reverse<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    p: &SessionParams,
) -> (Option<u32>, ServerReport)
where
    R: AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut report = empty_report(p);
    let (registration, slot, mut acks) = shared.registry.register_udp_reverse(peer.ip());
    let session = registration.id;
    if !send_accepted(wr, &registration, None).await {
        return (None, report);
    }
    let result =
        super::reverse_udp::send_to_client(&slot, &mut acks, rd, wr, shared, p, &mut report).await;
    match result {
        Ok(()) => (Some(session), report),
        Err(reason) => (Some(session), abort(report, reason)),
    }
}

/// Waits for the client's "done" message; a session stopped from outside fails with the reason
/// alone.
pub(super) async fn wait_sender_done<R: AsyncRead + Unpin>(rd: &mut R) -> Result<u64> {
    let message = match control::recv(rd).await {
        Ok(m) => m,
        Err(e) => match stop_reason(&e) {
            Some(reason) => bail!("{reason}"),
            None => return Err(e),
        },
    };
    match message {
        Some(ControlMessage::SenderDone { messages_sent, .. }) => Ok(messages_sent),
        Some(other) => bail!(
            "expected the client's done message, got {}",
            kind_name(&other)
        ),
        None => bail!("client closed the control connection before it was done"),
    }
}

/// What the shared UDP socket (UDP and QUIC sessions) runs with.
pub(super) fn shared_udp_data_path(shared: &Shared) -> DataPathInfo {
    DataPathInfo {
        recv_buffer: shared.udp_buffers.0,
        send_buffer: shared.udp_buffers.1,
        cpu: net::current_cpu(),
        ..DataPathInfo::default()
    }
}

fn fill_udp(report: &mut ServerReport, udp: &UdpReceiver, sent: Option<u64>) {
    let c = udp.counts();
    report.messages = c.messages;
    report.bytes = c.bytes;
    report.read_calls = c.datagrams;
    report.duplicates = c.duplicates;
    report.out_of_order = c.out_of_order;
    report.acks_sent = c.acks_sent;
    report.jitter_us = c.jitter_us;
    report.lost = sent.map_or(0, |s| s.saturating_sub(c.messages));
    report.elapsed_ns = span_ns(c.first_at, c.last_at);
    report.idle_after_last_ns = c.last_at.map(|t| duration_ns(t.elapsed())).unwrap_or(0);
}

/// `-O`: how long after its transfer began an end takes its omit mark.
pub(super) fn omit_span(p: &SessionParams) -> Option<Duration> {
    p.omit_us.map(Duration::from_micros)
}

/// The record of an omit mark, its time counted from `first` (the first byte moved; the mark
/// itself when none moved).
pub(super) fn omitted(
    mark: Option<interval::Mark>,
    first: Option<Instant>,
    p: &SessionParams,
) -> Option<wirebench_core::wire::proto::Omitted> {
    mark.map(|m| m.omitted(first.unwrap_or(m.at), p.msg_size))
}

/// Waits until the control connection ends or carries something unexpected mid-session.
pub(super) async fn watch_control<R: AsyncRead + Unpin>(rd: &mut R) -> String {
    match control::recv(rd).await {
        Ok(None) => "client closed the control connection".into(),
        Ok(Some(m)) => format!("unexpected {} mid-session", kind_name(&m)),
        Err(e) => stop_reason(&e).unwrap_or_else(|| format!("control connection failed: {e:#}")),
    }
}

pub(super) fn abort(mut report: ServerReport, reason: String) -> ServerReport {
    report.aborted = true;
    report.abort_reason = Some(reason);
    report
}

fn kind_name(m: &ControlMessage) -> &'static str {
    match m {
        ControlMessage::SessionRequest(_) => "session request",
        ControlMessage::Accepted { .. } => "accepted message",
        ControlMessage::Rejected { .. } => "rejected message",
        ControlMessage::SenderDone { .. } => "done message",
        ControlMessage::Report(_) => "report",
        ControlMessage::Error { .. } => "error message",
        ControlMessage::RrRequest(_) => "request-response session request",
        ControlMessage::AuthChallenge { .. } => "authentication challenge",
        ControlMessage::AuthResponse { .. } => "authentication response",
        ControlMessage::AuthOk { .. } => "authentication confirmation",
        ControlMessage::Receipt { .. } => "receipt",
    }
}

fn span_ns(first: Option<Instant>, last: Option<Instant>) -> u64 {
    match (first, last) {
        (Some(f), Some(l)) => duration_ns(l.saturating_duration_since(f)),
        _ => 0,
    }
}

/// Accepts one QUIC connection, reads the preamble of its first stream and hands the stream
/// to its session.
pub(super) async fn attach_quic(
    incoming: quinn::Incoming,
    registry: &Registry,
    psk_required: bool,
) -> Result<()> {
    let peer = incoming.remote_address();
    let connecting = incoming.accept().context("QUIC handshake failed")?;
    // Take the stream as soon as the client's first flight is in (0.5-RTT): a resumed client
    // that sent its preamble and first request as 0-RTT data is answered without waiting for
    // the rest of the handshake. Without early data the stream arrives after the handshake.
    let connection = match connecting.into_0rtt() {
        Ok((connection, _accepted)) => connection,
        Err(connecting) => connecting.await.context("QUIC handshake failed")?,
    };
    if crate::flows::perf::server::is_perf(&connection) && psk_required {
        // A perf client has no control connection, so it cannot present the key.
        connection.close(quinn::VarInt::from_u32(1), b"pre-shared key required");
        bail!("QUIC perf client refused: this server requires a pre-shared key (--psk)");
    }
    if crate::flows::perf::server::is_perf(&connection) {
        return crate::flows::perf::server::serve(connection).await;
    }
    let (send, mut recv) = tokio::time::timeout(SETUP_TIMEOUT, connection.accept_bi())
        .await
        .context("the client opened no QUIC stream in time")?
        .context("while accepting the QUIC stream")?;
    let preamble = tokio::time::timeout(SETUP_TIMEOUT, control::read_preamble(&mut recv))
        .await
        .context("the client sent no preamble on its QUIC stream in time")??;
    if preamble.kind != wirebench_core::wire::proto::ConnKind::Data {
        bail!("the QUIC stream did not open with a data preamble");
    }
    registry
        .attach_stream(
            &preamble,
            peer.ip(),
            DataStream::Quic {
                connection,
                send,
                recv,
            },
        )
        .map_err(anyhow::Error::from)
}
