//! One request-response session on the server (`wirebench ping` and `rr`): validates the
//! request, answers every request of `request` bytes with `response` bytes — on any number of
//! TCP or QUIC data connections, or one datagram per request for UDP — until the client says it
//! is done, then reports how many it answered. It never decides what the client measures.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::datagram::{Header, Kind, HEADER_LEN};
use wirebench_core::wire::proto::{RrParams, ServerReport};

use super::gate::Pass;
use super::meter::{Meter, MeteredWrite, Moved};
use super::registry::{DataStream, QuicData};
use super::session::{send_accepted, shared_udp_data_path, udp_data_path, wait_sender_done, Ended};
use super::stream_session::QUIC_LINGER;
use super::Shared;
use crate::engine::blocking::{self, block_on, Blocking};
use crate::engine::rr::{answer_stream, AnswerCounters};
use wirebench_core::vocab::units::duration_ns;

/// TCP connections of one session answered on a blocking socket in a thread of their own (one
/// wake-up less per request, as for transfers); further ones, and every connection of a
/// new-connection-per-request session, run on the runtime, so many flows cannot exhaust the
/// blocking thread pool.
const BLOCKING_CONNECTIONS: usize = 4;

/// Serves a request-response session to its end; the gate reports it like any other.
pub(super) async fn serve<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    pass: &Pass,
    rr: &RrParams,
) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut report = pass.empty_report();
    let result = match rr.protocol {
        Protocol::Tcp | Protocol::Quic => {
            serve_streams(rd, wr, peer, shared, pass, rr, &mut report).await
        }
        Protocol::Udp => serve_udp(rd, wr, peer, shared, pass, rr, &mut report).await,
    };
    (report, result)
}

/// TCP or QUIC: answers on every data connection the client opens until it is done.
async fn serve_streams<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    pass: &Pass,
    rr: &RrParams,
    report: &mut ServerReport,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (registration, mut connections) = shared.registry.register_rr_stream(peer.ip());
    pass.set_session(registration.id);
    let counters = Arc::new(AnswerCounters::default());
    let read = Arc::clone(&counters);
    // Responses are counted by the gate's writer; requests by the answer loops.
    pass.meter().watch(move || Moved {
        read: read.request_bytes.load(Ordering::Relaxed),
        sent: 0,
    });
    let cert = (rr.protocol == Protocol::Quic).then(|| shared.cert_der.clone());
    send_accepted(wr, &registration, cert).await?;
    let started = Instant::now();
    // Dropping the set (when the session ends) aborts connections still open.
    let mut tasks = JoinSet::new();
    // Clones of the sockets answered on blocking threads: shutting them down wakes the threads.
    let mut blocking_sockets: Vec<std::net::TcpStream> = Vec::new();
    // A paced session answers on the runtime, where the gate's writer can wait.
    let on_threads = if pass.max_rate_bps().is_some() {
        0
    } else {
        BLOCKING_CONNECTIONS
    };
    let done = wait_sender_done(rd);
    tokio::pin!(done);
    let result = loop {
        tokio::select! {
            r = &mut done => break r.map(|_| ()).map_err(|e| format!("{e:#}")),
            Some(data) = connections.recv() => {
                let meter = Arc::clone(pass.meter());
                match data {
                    DataStream::Tcp(tcp) if !rr.new_connection && blocking_sockets.len() < on_threads => {
                        if let Ok(waker) = answer_on_thread(tcp, rr, counters.clone(), meter) {
                            blocking_sockets.push(waker);
                        }
                    }
                    DataStream::Quic(quic) => {
                        // On the connection's home, where quinn drives it.
                        let home = quic.home.handle().clone();
                        let quic = DataStream::Quic(quic);
                        let answering = answer_connection(quic, rr.clone(), counters.clone(), meter);
                        tasks.spawn_on(answering, &home);
                    }
                    tcp => {
                        tasks.spawn(answer_connection(tcp, rr.clone(), counters.clone(), meter));
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
    result
}

/// Answers the requests of one data connection until the client closes it; its responses go
/// through the gate's writer (`--max-bytes`, `--max-rate`).
async fn answer_connection(
    data: DataStream,
    rr: RrParams,
    counters: Arc<AnswerCounters>,
    meter: Arc<Meter>,
) {
    let (req, resp) = (rr.request as usize, rr.response as usize);
    match data {
        DataStream::Tcp(tcp) => {
            // Every response is one small write that must leave at once.
            let _ = tcp.set_nodelay(true);
            let (mut r, w) = tcp.into_split();
            let mut w = MeteredWrite::new(w, &meter);
            let _ = answer_stream(&mut r, &mut w, req, resp, &counters).await;
        }
        DataStream::Quic(QuicData {
            connection,
            send,
            mut recv,
            ..
        }) => {
            let mut send = MeteredWrite::new(send, &meter);
            let _ = answer_stream(&mut recv, &mut send, req, resp, &counters).await;
            let mut send = send.into_inner();
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
    meter: Arc<Meter>,
) -> std::io::Result<std::net::TcpStream> {
    let _ = tcp.set_nodelay(true);
    let socket = blocking::into_blocking(tcp, false)?;
    let waker = socket.try_clone()?;
    let (req, resp) = (rr.request as usize, rr.response as usize);
    tokio::task::spawn_blocking(move || {
        let mut writer = MeteredWrite::new(Blocking::new(&socket, false), &meter);
        let _ = block_on(answer_stream(
            &mut Blocking::new(&socket, false),
            &mut writer,
            req,
            resp,
            &counters,
        ));
    });
    Ok(waker)
}

/// UDP: the registry hands request datagrams to the [`RrUdpSession`], which answers them; here
/// we wait for the client's "done". The answers leave from the shared socket's thread, so the
/// gate meters them from the session's counts (and stops a session whose answers run far
/// above `--max-rate`).
async fn serve_udp<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    pass: &Pass,
    rr: &RrParams,
    report: &mut ServerReport,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (registration, udp) = shared
        .registry
        .register_rr_udp(peer.ip(), rr.request, rr.response);
    pass.set_session(registration.id);
    let counted = Arc::clone(&udp);
    let (request, response) = (u64::from(rr.request), u64::from(rr.response));
    pass.meter().watch(move || {
        let answered = counted.counts().answered;
        Moved {
            read: answered * request,
            sent: answered * response,
        }
    });
    send_accepted(wr, &registration, None).await?;
    let started = Instant::now();
    let result = wait_sender_done(rd)
        .await
        .map(|_| ())
        .map_err(|e| format!("{e:#}"));
    report.data_path = udp_data_path(shared, &registration);
    drop(registration);
    let c = udp.counts();
    report.messages = c.answered;
    report.bytes = c.answered * u64::from(rr.request);
    report.read_calls = c.datagrams;
    report.acks_sent = c.answered;
    report.duplicates = c.retransmissions;
    report.elapsed_ns = duration_ns(started.elapsed());
    result
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
