//! One request-response session on the server (`wirebench ping` and `rr`): validates the
//! request, answers every request of `request` bytes with `response` bytes — on any number of
//! TCP or QUIC data connections, or one datagram per request for UDP — until the client says it
//! is done, then reports how many it answered. It never decides what the client measures.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use wirebench_core::vocab::plan::{Mechanism, Protocol, MAX_STREAM_MSG_SIZE, MIN_MSG_SIZE};
use wirebench_core::wire::datagram::{self, Header, Kind, HEADER_LEN};
use wirebench_core::wire::proto::{ControlMessage, RrParams, ServerReport, SessionParams};

use super::registry::DataStream;
use super::session::{abort, send_accepted, shared_udp_data_path, wait_sender_done};
use super::{ServerEvent, ServerNotice, SessionSummary, Shared};
use crate::engine::blocking::{self, block_on, Blocking};
use crate::engine::rr::{answer_stream, AnswerCounters};
use crate::transport::control;
use crate::transport::net::canonical_ip;
use wirebench_core::vocab::units::duration_ns;

/// How long the server keeps a QUIC connection whose requests are done open, so its last
/// responses are acknowledged, unless the client closes it first.
const QUIC_LINGER: Duration = Duration::from_secs(5);

/// TCP connections of one session answered on a blocking socket in a thread of their own (one
/// wake-up less per request, as for transfers); further ones, and every connection of a
/// new-connection-per-request session, run on the runtime, so many flows cannot exhaust the
/// blocking thread pool.
const BLOCKING_CONNECTIONS: usize = 4;

/// Serves a request-response session to its end and reports it like any other session.
pub(super) async fn serve<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    events: &UnboundedSender<ServerEvent>,
    rr: RrParams,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    // The summary line shows the session as a stop-and-wait exchange of `request`-byte messages.
    let mut params = SessionParams {
        duration_us: None,
        omit_us: None,
        protocol: rr.protocol,
        mechanism: Mechanism::StopAndWait,
        msg_size: rr.request,
        total_bytes: 0,
        rto_us: None,
        rate_bps: None,
        grace_us: 0,
        options: Default::default(),
        interval_us: None,
        reverse: false,
    };
    if let Err(reason) = validate(&rr, peer) {
        let _ = control::send(
            wr,
            &ControlMessage::Rejected {
                reason: reason.clone(),
            },
        )
        .await;
        shared.metrics.refused(&reason);
        let _ = events.send(ServerEvent::Notice(ServerNotice {
            peer,
            message: format!("session refused: {reason}"),
        }));
        return;
    }
    shared.metrics.started();
    let mut report = ServerReport {
        protocol: rr.protocol,
        mechanism: Mechanism::StopAndWait,
        ..ServerReport::default()
    };
    let outcome = match rr.protocol {
        Protocol::Tcp | Protocol::Quic => {
            serve_streams(rd, wr, peer, shared, &rr, &mut report).await
        }
        Protocol::Udp => serve_udp(rd, wr, peer, shared, &rr, &mut report).await,
    };
    let Some((session, result)) = outcome else {
        return;
    };
    if let Err(reason) = result {
        report = abort(report, reason);
    }
    params.total_bytes = report.bytes;
    shared.metrics.ended(&params, &report);
    let _ = events.send(ServerEvent::Session(Box::new(SessionSummary {
        session,
        peer,
        params,
        report: report.clone(),
    })));
    let _ = control::send(wr, &ControlMessage::Report(Box::new(report))).await;
}

/// Checks a request-response session against what this server allows; the error is for the user.
fn validate(rr: &RrParams, peer: SocketAddr) -> Result<(), String> {
    let max = match rr.protocol {
        Protocol::Tcp | Protocol::Quic => MAX_STREAM_MSG_SIZE,
        Protocol::Udp => datagram::max_message_size(canonical_ip(peer.ip()).is_ipv6()),
    };
    for (name, size) in [("request", rr.request), ("response", rr.response)] {
        if !(MIN_MSG_SIZE..=max).contains(&size) {
            return Err(format!(
                "{name} size {size} is out of range for {}: allowed {MIN_MSG_SIZE} to {max} bytes",
                rr.protocol
            ));
        }
    }
    if rr.new_connection && rr.protocol == Protocol::Udp {
        return Err("a new connection per request applies to TCP and QUIC, not UDP".into());
    }
    Ok(())
}

type Outcome = Option<(u32, Result<(), String>)>;

/// TCP or QUIC: answers on every data connection the client opens until it is done.
async fn serve_streams<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    rr: &RrParams,
    report: &mut ServerReport,
) -> Outcome
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (registration, mut connections) = shared.registry.register_rr_stream(peer.ip());
    let session = registration.id;
    let cert = (rr.protocol == Protocol::Quic).then(|| shared.cert_der.clone());
    if !send_accepted(wr, &registration, cert).await {
        return None;
    }
    let started = Instant::now();
    let counters = Arc::new(AnswerCounters::default());
    // Dropping the set (when the session ends) aborts connections still open.
    let mut tasks = JoinSet::new();
    // Clones of the sockets answered on blocking threads: shutting them down wakes the threads.
    let mut blocking_sockets: Vec<std::net::TcpStream> = Vec::new();
    let done = wait_sender_done(rd);
    tokio::pin!(done);
    let result = loop {
        tokio::select! {
            r = &mut done => break r.map(|_| ()).map_err(|e| format!("{e:#}")),
            Some(data) = connections.recv() => {
                match data {
                    DataStream::Tcp(tcp) if !rr.new_connection && blocking_sockets.len() < BLOCKING_CONNECTIONS => {
                        if let Ok(waker) = answer_on_thread(tcp, rr, counters.clone()) {
                            blocking_sockets.push(waker);
                        }
                    }
                    other => {
                        tasks.spawn(answer_connection(other, rr.clone(), counters.clone()));
                    }
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    };
    drop(registration);
    for socket in &blocking_sockets {
        let _ = socket.shutdown(std::net::Shutdown::Both);
    }
    report.messages = counters.answered.load(Ordering::Relaxed);
    report.bytes = counters.request_bytes.load(Ordering::Relaxed);
    report.read_calls = counters.read_calls.load(Ordering::Relaxed);
    report.acks_sent = report.messages;
    report.elapsed_ns = duration_ns(started.elapsed());
    if rr.protocol == Protocol::Quic {
        report.data_path = shared_udp_data_path(shared);
    } else {
        report.data_path.nodelay = true;
    }
    Some((session, result))
}

/// Answers the requests of one data connection until the client closes it.
async fn answer_connection(data: DataStream, rr: RrParams, counters: Arc<AnswerCounters>) {
    let (req, resp) = (rr.request as usize, rr.response as usize);
    match data {
        DataStream::Tcp(tcp) => {
            // Every response is one small write that must leave at once.
            let _ = tcp.set_nodelay(true);
            let (mut r, mut w) = tcp.into_split();
            let _ = answer_stream(&mut r, &mut w, req, resp, &counters).await;
        }
        DataStream::Quic {
            connection,
            mut send,
            mut recv,
        } => {
            let _ = answer_stream(&mut recv, &mut send, req, resp, &counters).await;
            let _ = send.finish();
            let _ = tokio::time::timeout(QUIC_LINGER, connection.closed()).await;
        }
    }
}

/// Answers a TCP connection on a blocking socket in a thread of its own; returns a clone of the
/// socket whose shutdown ends the thread. On an error (the OS refused to convert the socket)
/// the connection is closed, and the client's flow fails with that.
fn answer_on_thread(
    tcp: tokio::net::TcpStream,
    rr: &RrParams,
    counters: Arc<AnswerCounters>,
) -> std::io::Result<std::net::TcpStream> {
    let _ = tcp.set_nodelay(true);
    let socket = blocking::into_blocking(tcp, false)?;
    let waker = socket.try_clone()?;
    let (req, resp) = (rr.request as usize, rr.response as usize);
    tokio::task::spawn_blocking(move || {
        let _ = block_on(answer_stream(
            &mut Blocking::new(&socket, false),
            &mut Blocking::new(&socket, false),
            req,
            resp,
            &counters,
        ));
    });
    Ok(waker)
}

/// UDP: the registry hands request datagrams to the [`RrUdpSession`], which answers them; here
/// we wait for the client's "done".
async fn serve_udp<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    rr: &RrParams,
    report: &mut ServerReport,
) -> Outcome
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (registration, udp) = shared
        .registry
        .register_rr_udp(peer.ip(), rr.request, rr.response);
    let session = registration.id;
    if !send_accepted(wr, &registration, None).await {
        return None;
    }
    let started = Instant::now();
    let result = wait_sender_done(rd)
        .await
        .map(|_| ())
        .map_err(|e| format!("{e:#}"));
    drop(registration);
    let c = udp.counts();
    report.messages = c.answered;
    report.bytes = c.answered * u64::from(rr.request);
    report.read_calls = c.datagrams;
    report.acks_sent = c.answered;
    report.duplicates = c.retransmissions;
    report.elapsed_ns = duration_ns(started.elapsed());
    report.data_path = shared_udp_data_path(shared);
    Some((session, result))
}

/// Counters of a UDP request-response session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RrUdpCounts {
    /// Request datagrams of this session received (well-formed or not).
    pub datagrams: u64,
    /// Requests answered: a response datagram the kernel took.
    pub answered: u64,
    /// Answered requests whose copy was marked as a retransmission.
    pub retransmissions: u64,
    /// Datagrams that did not fit the session (wrong kind or length).
    pub malformed: u64,
    /// Responses the kernel refused to send.
    pub reply_errors: u64,
}

#[derive(Debug)]
struct RrUdpState {
    counts: RrUdpCounts,
    /// One response datagram, rewritten in place for each answer.
    reply: Vec<u8>,
}

/// The server side of one UDP request-response session: answers every request datagram.
#[derive(Debug)]
pub struct RrUdpSession {
    id: u32,
    request: u32,
    state: Mutex<RrUdpState>,
}

impl RrUdpSession {
    /// A session answering `request`-byte requests with `response`-byte responses.
    pub fn new(id: u32, request: u32, response: u32) -> Self {
        RrUdpSession {
            id,
            request,
            state: Mutex::new(RrUdpState {
                counts: RrUdpCounts::default(),
                reply: vec![0u8; HEADER_LEN + response as usize],
            }),
        }
    }

    /// Answers the request datagrams of one receive (with GRO several, `stride` bytes apart):
    /// one lock per batch, no allocation.
    pub fn on_datagrams(&self, data: &[u8], stride: usize, reply: &mut dyn FnMut(&[u8]) -> bool) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let state = &mut *state;
        for datagram in data.chunks(stride.max(1)) {
            state.counts.datagrams += 1;
            let header = match Header::decode(datagram) {
                Ok(h)
                    if h.kind == Kind::Request
                        && h.session == self.id
                        && datagram.len() == HEADER_LEN + self.request as usize =>
                {
                    h
                }
                _ => {
                    state.counts.malformed += 1;
                    continue;
                }
            };
            let answer = Header {
                kind: Kind::Response,
                ..header
            };
            if answer.write_to(&mut state.reply).is_err() {
                state.counts.malformed += 1;
                continue;
            }
            if reply(&state.reply) {
                state.counts.answered += 1;
                state.counts.retransmissions += u64::from(header.retransmit);
            } else {
                state.counts.reply_errors += 1;
            }
        }
    }

    /// A snapshot of the counters.
    pub fn counts(&self) -> RrUdpCounts {
        self.state.lock().map(|s| s.counts).unwrap_or_default()
    }
}
