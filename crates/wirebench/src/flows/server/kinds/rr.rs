//! One request-response session on the server (`wirebench ping` and `rr`): validates the
//! request, answers every request of `request` bytes with `response` bytes — on any number of
//! TCP or QUIC data connections, or one datagram per request for UDP — until the client says it
//! is done, then reports how many it answered. It never decides what the client measures.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinSet;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::proto::{RrParams, ServerReport};

use crate::engine::quic::inline_server::{Accepted, ServeStop};
use crate::engine::rr::{answer_stream, AnswerCounters};
use crate::engine::stream::blocking::{self, block_on, block_on_parked, Blocking};
use crate::flows::server::gate::Pass;
use crate::flows::server::kind::{SessionContext, SessionKind};
use crate::flows::server::kit::control::{wait_sender_done, wait_sender_done_or_silence};
use crate::flows::server::kit::data_path::{shared_udp_data_path, udp_data_path};
use crate::flows::server::kit::quic::QUIC_LINGER;
use crate::flows::server::meter::{Meter, MeteredWrite, Moved};
use crate::flows::server::registry::{DataStream, QuicData, Registration, RrUdpSession};
use crate::flows::server::shared::Shared;
use wirebench_core::vocab::units::duration_ns;

/// TCP connections of one session answered on a blocking socket in a thread of their own (one
/// wake-up less per request, as for transfers); further ones, and every connection of a
/// new-connection-per-request session, run on the runtime, so many flows cannot exhaust the
/// blocking thread pool.
const BLOCKING_CONNECTIONS: usize = 4;

/// A TCP or QUIC request-response session: answers on every data connection the client opens
/// until it is done.
pub(crate) struct RrStreams<'a> {
    /// What the client asked for.
    pub(crate) rr: &'a RrParams,
}

impl SessionKind for RrStreams<'_> {
    type Entry = (UnboundedReceiver<DataStream>, Arc<AnswerCounters>);

    fn quic(&self) -> bool {
        self.rr.protocol == Protocol::Quic
    }

    fn register(&self, shared: &Shared, peer: IpAddr, pass: &Pass) -> (Registration, Self::Entry) {
        let (registration, connections) = shared.registry.register_rr_stream(peer);
        let counters = Arc::new(AnswerCounters::default());
        let read = Arc::clone(&counters);
        // Responses are counted by the gate's writer; requests by the answer loops.
        pass.meter().watch(move || Moved {
            read: read.request_bytes.load(Ordering::Relaxed),
            sent: 0,
        });
        (registration, (connections, counters))
    }

    async fn serve<R, W>(
        self,
        ctx: &mut SessionContext<'_, R, W>,
        registration: Registration,
        (connections, counters): Self::Entry,
        report: &mut ServerReport,
    ) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let rr = self.rr;
        let started = Instant::now();
        let result = answer_until_done(ctx, rr, registration, connections, &counters).await;
        report.messages = counters.answered.load(Ordering::Relaxed);
        report.bytes = counters.request_bytes.load(Ordering::Relaxed);
        report.read_calls = counters.read_calls.load(Ordering::Relaxed);
        report.acks_sent = report.messages;
        report.elapsed_ns = duration_ns(started.elapsed());
        if rr.protocol == Protocol::Quic {
            report.data_path = shared_udp_data_path(ctx.shared);
        } else {
            report.data_path.nodelay = true;
        }
        result
    }
}

/// Answers every data connection the registry hands over until the client says it is done;
/// then the session leaves the registry and the connections answered on threads are shut
/// down (those on the runtime end with their set).
async fn answer_until_done<R, W>(
    ctx: &mut SessionContext<'_, R, W>,
    rr: &RrParams,
    registration: Registration,
    mut connections: UnboundedReceiver<DataStream>,
    counters: &Arc<AnswerCounters>,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let pass = ctx.pass;
    // Dropping the set (when the session ends) aborts connections still open.
    let mut tasks = JoinSet::new();
    // Clones of the sockets answered on blocking threads: shutting them down wakes the threads.
    let mut blocking_sockets: Vec<std::net::TcpStream> = Vec::new();
    // The stops of QUIC connections answered inline, each on its own thread.
    let mut inline_stops: Vec<ServeStop> = Vec::new();
    // A paced session answers on the runtime, where the gate's writer can wait.
    let on_threads = if pass.max_rate_bps().is_some() {
        0
    } else {
        BLOCKING_CONNECTIONS
    };
    let most = declared_connections(rr);
    let (mut taken, mut refused) = (0u64, 0u64);
    let (gate, peer) = (Arc::clone(&ctx.shared.gate), ctx.peer);
    let done = wait_sender_done(ctx.rd);
    tokio::pin!(done);
    let result = loop {
        tokio::select! {
            r = &mut done => break r.map(|_| ()).map_err(|e| format!("{e:#}")),
            Some(data) = connections.recv() => {
                // The connections the session declared and no more: past them, one is closed
                // at once (4,000 connections presenting one session's id and token were held
                // until its end). A new connection per request counts those open now.
                while tasks.try_join_next().is_some() {}
                let open = if rr.new_connection { tasks.len() as u64 } else { taken };
                if open >= most {
                    drop(data);
                    refused += 1;
                    if refused.is_power_of_two() {
                        gate.notice(peer, format!(
                            "rr session {:#010x}: data connection closed, the session declared at most {most} at once ({refused} so far)",
                            pass.session()
                        ));
                    }
                    continue;
                }
                taken += 1;
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
                    DataStream::QuicInline(accepted) => {
                        inline_stops.push(answer_inline(*accepted, rr, counters.clone(), meter));
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
    for stop in &inline_stops {
        stop.stop();
    }
    result
}

/// The data connections a session may hold: one per flow and one for QUIC's resumption probe;
/// with a new connection per request, twice the requests in flight (a client's next connection
/// can arrive before the server has seen its last one close) and a few more.
fn declared_connections(rr: &RrParams) -> u64 {
    let flows = u64::from(rr.flows.max(1));
    if rr.new_connection {
        2 * flows * u64::from(rr.concurrency.max(1)) + 8
    } else {
        flows + 1
    }
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
            let _ = answer_stream(&mut r, &mut w, (req, resp), rr.stamps, &counters).await;
        }
        DataStream::Quic(QuicData {
            connection,
            send,
            mut recv,
            ..
        }) => {
            let mut send = MeteredWrite::new(send, &meter);
            let _ = answer_stream(&mut recv, &mut send, (req, resp), rr.stamps, &counters).await;
            let mut send = send.into_inner();
            let _ = send.finish();
            let _ = tokio::time::timeout(QUIC_LINGER, connection.closed()).await;
        }
        // Answered on its own thread (`answer_inline`), never here.
        DataStream::QuicInline(accepted) => drop(accepted),
    }
}

/// Answers a QUIC connection served inline (`engine::quic::inline_server`, a client with one
/// request outstanding) on its own thread, through the gate's writer as every answer goes;
/// returns what stops the thread.
fn answer_inline(
    accepted: Accepted,
    rr: &RrParams,
    counters: Arc<AnswerCounters>,
    meter: Arc<Meter>,
) -> ServeStop {
    let (sizes, stamps) = ((rr.request as usize, rr.response as usize), rr.stamps);
    let (_outcome, stop) = accepted.serve(QUIC_LINGER, move |reader, writer| {
        let mut writer = MeteredWrite::new(writer, &meter);
        // Parked, not spinning, while the meter pauses a paced session's answers.
        let _ = block_on_parked(answer_stream(reader, &mut writer, sizes, stamps, &counters));
        let _ = writer.into_inner().finish();
    });
    stop
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
    let (sizes, stamps) = ((rr.request as usize, rr.response as usize), rr.stamps);
    tokio::task::spawn_blocking(move || {
        let mut writer = MeteredWrite::new(Blocking::new(&socket, false), &meter);
        let _ = block_on(answer_stream(
            &mut Blocking::new(&socket, false),
            &mut writer,
            sizes,
            stamps,
            &counters,
        ));
    });
    Ok(waker)
}

/// A UDP request-response session: the registry hands request datagrams to its
/// [`RrUdpSession`] entry, which answers them; here we wait for the client's "done". The
/// answers leave from the shared socket's thread, which cannot wait: each is charged to the
/// session's meter first, and one past `--max-bytes` or `--max-rate` is not sent (the meter
/// trips and the gate ends the session with the reason).
pub(crate) struct RrUdp<'a> {
    /// What the client asked for.
    pub(crate) rr: &'a RrParams,
}

impl SessionKind for RrUdp<'_> {
    type Entry = Arc<RrUdpSession>;

    fn register(&self, shared: &Shared, peer: IpAddr, pass: &Pass) -> (Registration, Self::Entry) {
        let rr = self.rr;
        // The entry counts requests into the meter and charges each answer to it as it goes.
        let (registration, udp) =
            shared
                .registry
                .register_rr_udp(peer, rr, Arc::clone(pass.meter()));
        (registration, udp)
    }

    async fn serve<R, W>(
        self,
        ctx: &mut SessionContext<'_, R, W>,
        registration: Registration,
        udp: Self::Entry,
        report: &mut ServerReport,
    ) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let started = Instant::now();
        let result = wait_sender_done_or_silence(ctx.rd, || udp.counts().datagrams > 0)
            .await
            .map(|_| ())
            .map_err(|e| format!("{e:#}"));
        report.data_path = udp_data_path(ctx.shared, &registration);
        drop(registration);
        let c = udp.counts();
        report.messages = c.answered;
        report.bytes = c.answered * u64::from(self.rr.request);
        report.read_calls = c.datagrams;
        report.acks_sent = c.answered;
        report.duplicates = c.retransmissions;
        report.elapsed_ns = duration_ns(started.elapsed());
        result
    }
}
