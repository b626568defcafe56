//! One request-response session from the client's side (`wirebench ping` and `rr`): the control
//! exchange, T flows (each its own TCP connection, QUIC connection or UDP socket) with K requests
//! outstanding, or a fresh connection per request, connection set-up times (TCP connect, QUIC
//! handshake, QUIC resumed with 0-RTT), and the server's report. It measures; it never prints.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ClientConfig, Endpoint, EndpointConfig};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use wirebench_core::machine::rr::{RequestTracker, RrCounts};
use wirebench_core::record::one_way::{ClockFit, OneWayDelay};
use wirebench_core::record::plausibility::{check_report, ClientView, ReportIssue};
use wirebench_core::vocab::clock_offset::{ClockInfo, Exchange};
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::proto::{ControlMessage, Preamble, RrParams, ServerReport};

use crate::engine::quic;
use crate::engine::quic::inline::{InlineConnection, InlineStream};
use crate::engine::rr::{self, FlowTally, Plan, Shape};
use crate::engine::rr_blocking_udp;
use crate::engine::stream::blocking;
use crate::engine::stream::rtt_histogram;
use crate::engine::udp::UdpClient;
use crate::engine::wall_clock::{local_clock_info, ExchangeLog, WallAnchor};
use crate::transport::{control, counters, tls};
use wirebench_core::record::rr::ResumedFigures;
use wirebench_core::record::RttFigures;
use wirebench_core::vocab::units::duration_ns;

/// What to run: the session's parameters and when each flow stops.
#[derive(Debug, Clone)]
pub struct RrSpec {
    /// Transport, sizes, flows, concurrency, new connection per request.
    pub params: RrParams,
    /// Requests per flow; `None` runs for `duration`.
    pub count: Option<u64>,
    /// How long flows issue new requests; `None` runs `count` requests.
    pub duration: Option<Duration>,
    /// Pause after issuing each request (per flow).
    pub interval: Option<Duration>,
    /// UDP: how long a request copy waits for its response.
    pub timeout: Duration,
    /// UDP: copies sent again after a timeout before the request is lost.
    pub retries: u32,
    /// QUIC: after the flows, measure a resumed connection with 0-RTT (one extra request).
    pub resumption_probe: bool,
    /// List every timed probe's delays in the one-way figures (`ping --per-probe`).
    pub per_probe: bool,
}

/// Both sides of one request-response session.
#[derive(Debug, Clone)]
pub struct RrOutcome {
    /// The server's session id.
    pub session: u32,
    /// Requests sent, answered, lost, late, retries, summed over flows (measured requests only).
    pub counts: RrCounts,
    /// Sends the OS refused (UDP).
    pub send_errors: u64,
    /// First request → last answer (or loss), all flows; connection set-up before the first
    /// request and the 0-RTT probe after the last are not part of it.
    pub elapsed: Duration,
    /// Each direction's delays (stamped answers: `RrParams::stamps`).
    pub one_way: Option<OneWayDelay>,
    /// Response time of every answered request (ns): request sent → response read.
    pub response: Option<RttFigures>,
    /// TCP connect or QUIC handshake time (ns), one sample per connection: per flow, or per
    /// request with a new connection per request. None for UDP.
    pub connect: Option<RttFigures>,
    /// QUIC resumed with 0-RTT, when probed.
    pub resumed: Option<ResumedFigures>,
    /// Requests the server answered outside the measured ones (the 0-RTT probe).
    pub setup_requests: u64,
    /// The server's figures (`messages` = requests it answered).
    pub server: ServerReport,
    /// The client's transport counters over all its connections (TCP_INFO, QUIC stats; UDP:
    /// request datagrams sent and retried), summed.
    pub transport: Option<TransportStats>,
}

/// What one flow (or worker) brings back.
struct FlowResult {
    tally: FlowTally,
    /// First request sent → last request done (connection set-up before it excluded, except
    /// with a new connection per request, where each handshake is part of its request).
    span: (Instant, Instant),
    hist: Histogram<u64>,
    connect: Histogram<u64>,
    resumed: Option<ResumedFigures>,
    /// What the transport counted on this flow's connections (TCP_INFO, QUIC stats).
    transport: Option<TransportStats>,
    /// Exchanges timed at both ends (with the server's stamps), for one-way delays.
    exchanges: Vec<Exchange>,
}

/// Runs one request-response session against the server at `server`.
pub async fn run_rr(server: SocketAddr, spec: &RrSpec) -> Result<RrOutcome> {
    run_rr_auth(server, spec, None).await
}

/// Like [`run_rr`], proving to the server that we hold `psk` when given.
pub async fn run_rr_auth(
    server: SocketAddr,
    spec: &RrSpec,
    psk: Option<&wirebench_core::security::auth::Psk>,
) -> Result<RrOutcome> {
    let p = &spec.params;
    if p.new_connection && p.protocol == Protocol::Udp {
        bail!("--new-connection applies to TCP and QUIC, not UDP");
    }
    let asked_at = Instant::now();
    let (mut ctrl, granted) =
        control::request_session_auth(server, &ControlMessage::RrRequest(p.clone()), psk).await?;
    let (session, token) = (granted.session, granted.token);
    let (quic_cert, server_clock) = (granted.quic_cert, granted.clock);
    let preamble = Preamble::data(session, token);
    let quic_cfg = match p.protocol {
        Protocol::Quic => Some(quic_client_config(
            quic_cert.context("the server announced no QUIC certificate")?,
        )?),
        _ => None,
    };
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let plan = Plan {
        count: spec.count,
        until: spec.duration.map(|d| started + d),
        interval: spec.interval,
        stop: Some(Arc::clone(&stop)),
    };
    let tasks = spawn_flows(server, spec, (session, token), preamble, quic_cfg, plan)?;
    let (collected, server_ended) = collect_or_stop(tasks, &ctrl, &stop).await;
    let Collected {
        counts,
        send_errors,
        hist,
        connect,
        resumed,
        elapsed,
        transport,
        exchanges,
    } = collected?;
    let setup_requests = u64::from(resumed.is_some_and(|r| r.first_response_ns.is_some()));
    if !server_ended {
        control::send(
            &mut ctrl,
            &ControlMessage::SenderDone {
                messages_sent: counts.sent + setup_requests,
                bytes_sent: (counts.sent + setup_requests) * u64::from(p.request),
            },
        )
        .await?;
    }
    let server_report = control::read_report(&mut ctrl).await?;
    // Answers the server cannot have given are no result; an aborted session is recorded as
    // such (`aborted`) with its figures.
    let requests = counts.sent + counts.retries + setup_requests;
    if let Err(e @ ReportIssue::Inconsistent(_)) = check_report(
        ClientView::Requests { sent: requests },
        duration_ns(asked_at.elapsed()),
        &server_report,
    ) {
        return Err(anyhow::Error::new(e));
    }
    Ok(RrOutcome {
        session,
        counts,
        send_errors,
        elapsed,
        response: RttFigures::of(&hist),
        connect: RttFigures::of(&connect),
        resumed,
        setup_requests,
        server: server_report,
        transport,
        one_way: p
            .stamps
            .then(|| one_way_delay(&exchanges, server_clock.as_ref(), spec.per_probe)),
    })
}

/// Each direction's delays from the timed exchanges, with what both kernels say of their
/// clocks where the server said it.
fn one_way_delay(exchanges: &[Exchange], server: Option<&ClockInfo>, each: bool) -> OneWayDelay {
    let Some(server) = server else {
        return OneWayDelay::unavailable(
            exchanges.len() as u64,
            "the server does not stamp its answers (a wirebench server older than one-way delays)",
        );
    };
    // A fresh pairing of the clocks says how far apart two readings of one clock may be.
    let read_error = WallAnchor::now().read_error_ns.saturating_mul(2);
    let claim = ClockInfo::claim(&local_clock_info(), server, read_error);
    let fit = ClockFit::of(exchanges, claim);
    let figures = OneWayDelay::within(&fit, exchanges);
    if each {
        figures.with_probes(&fit, exchanges)
    } else {
        figures
    }
}

/// Starts every flow of the session: one task per flow (TCP, QUIC with the resumption probe on
/// the first, or UDP), or with a new connection per request one worker per request in flight.
fn spawn_flows(
    server: SocketAddr,
    spec: &RrSpec,
    (session, token): (u32, u32),
    preamble: Preamble,
    quic_cfg: Option<ClientConfig>,
    plan: Plan,
) -> Result<JoinSet<Result<FlowResult>>> {
    let p = &spec.params;
    let mut tasks: JoinSet<Result<FlowResult>> = JoinSet::new();
    if p.new_connection {
        let claims = Arc::new(AtomicU64::new(0));
        // Every flow's K outstanding requests are K workers, each on its own connections.
        let total = spec.count.map(|n| n.saturating_mul(u64::from(p.flows)));
        for _ in 0..p.flows.max(1) * p.concurrency.max(1) {
            let plan = Plan {
                count: total,
                ..plan.clone()
            };
            tasks.spawn(new_connection_worker(
                server,
                p.clone(),
                preamble,
                quic_cfg.clone(),
                plan,
                claims.clone(),
            ));
        }
    } else {
        for flow in 0..p.flows.max(1) {
            let probe = spec.resumption_probe && flow == 0;
            match p.protocol {
                Protocol::Tcp => {
                    tasks.spawn(tcp_flow(
                        server,
                        p.clone(),
                        preamble,
                        plan.clone(),
                        p.stamps.then(WallAnchor::now),
                    ));
                }
                Protocol::Quic => {
                    let cfg = quic_cfg.clone().context("no QUIC configuration")?;
                    tasks.spawn(quic_flow(
                        server,
                        p.clone(),
                        preamble,
                        cfg,
                        plan.clone(),
                        (probe, p.stamps.then(WallAnchor::now)),
                    ));
                }
                Protocol::Udp => {
                    tasks.spawn(udp_flow(
                        server,
                        p.clone(),
                        (session, token),
                        plan.clone(),
                        (spec.timeout, spec.retries),
                        p.stamps.then(WallAnchor::now),
                    ));
                }
            }
        }
    }
    Ok(tasks)
}

/// Waits for the flows while watching the control connection: a server that ends the session
/// early (a limit of its own) sends its report at once, and the flows are stopped then instead
/// of sending into a session that is over (a UDP rr client went on for 7 s). Whether the server
/// spoke first is returned beside what the flows did; its report is read by the caller.
async fn collect_or_stop(
    tasks: JoinSet<Result<FlowResult>>,
    ctrl: &tokio::net::TcpStream,
    stop: &AtomicBool,
) -> (Result<Collected>, bool) {
    let flows = collect_flows(tasks);
    tokio::pin!(flows);
    let mut byte = [0u8; 1];
    tokio::select! {
        collected = &mut flows => (collected, false),
        // `peek` takes nothing off the connection, and a dropped peek loses nothing.
        _ = ctrl.peek(&mut byte) => {
            stop.store(true, Ordering::Relaxed);
            (flows.await, true)
        }
    }
}

/// What the flows of a session did, summed.
struct Collected {
    counts: RrCounts,
    send_errors: u64,
    hist: Histogram<u64>,
    connect: Histogram<u64>,
    resumed: Option<ResumedFigures>,
    elapsed: Duration,
    transport: Option<TransportStats>,
    exchanges: Vec<Exchange>,
}

/// Waits for every flow and sums what they did; the first flow that failed fails the session.
async fn collect_flows(mut tasks: JoinSet<Result<FlowResult>>) -> Result<Collected> {
    let mut counts = RrCounts::default();
    let mut send_errors = 0;
    let mut hist = rtt_histogram()?;
    let mut connect = rtt_histogram()?;
    let mut resumed = None;
    let mut failure = None;
    let mut span: Option<(Instant, Instant)> = None;
    let mut transport: Option<TransportStats> = None;
    let mut exchanges = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(r)) => {
                span = Some(match span {
                    None => r.span,
                    Some((a, b)) => (a.min(r.span.0), b.max(r.span.1)),
                });
                add_counts(&mut counts, &r.tally.counts);
                send_errors += r.tally.send_errors;
                hist.add(&r.hist).context("while merging response times")?;
                connect
                    .add(&r.connect)
                    .context("while merging connection times")?;
                resumed = resumed.or(r.resumed);
                transport = sum_transport(transport, r.transport);
                exchanges.extend(r.exchanges);
            }
            Ok(Err(e)) => {
                failure.get_or_insert(e);
            }
            Err(e) => {
                failure.get_or_insert(anyhow::anyhow!("a flow failed: {e}"));
            }
        }
    }
    let elapsed = span.map_or(Duration::ZERO, |(a, b)| b.saturating_duration_since(a));
    if let Some(e) = failure {
        return Err(e.context("the request-response run failed"));
    }
    Ok(Collected {
        counts,
        send_errors,
        hist,
        connect,
        resumed,
        elapsed,
        transport,
        exchanges,
    })
}

/// Packet counts of connections add up; per-connection figures (RTT, window) are left out of a
/// sum of more than one.
pub(crate) fn sum_transport(
    a: Option<TransportStats>,
    b: Option<TransportStats>,
) -> Option<TransportStats> {
    match (a, b) {
        (Some(a), Some(b)) => Some(TransportStats {
            packets_sent: a.packets_sent + b.packets_sent,
            packets_retransmitted: a.packets_retransmitted + b.packets_retransmitted,
            tcp_total_retrans: a
                .tcp_total_retrans
                .zip(b.tcp_total_retrans)
                .map(|(x, y)| x + y),
            tcp_dsack_dups: a.tcp_dsack_dups.zip(b.tcp_dsack_dups).map(|(x, y)| x + y),
            congestion_events: a
                .congestion_events
                .zip(b.congestion_events)
                .map(|(x, y)| x + y),
            srtt_us: None,
            cwnd_bytes: None,
            send_window_bytes: None,
            ..a
        }),
        (a, b) => a.or(b),
    }
}

fn add_counts(sum: &mut RrCounts, c: &RrCounts) {
    sum.sent += c.sent;
    sum.answered += c.answered;
    sum.lost += c.lost;
    sum.late += c.late;
    sum.retries += c.retries;
    sum.duplicates += c.duplicates;
    sum.unknown += c.unknown;
}

fn histograms() -> Result<(Histogram<u64>, Histogram<u64>)> {
    Ok((rtt_histogram()?, rtt_histogram()?))
}

fn shape(p: &RrParams) -> Shape {
    Shape {
        request: p.request as usize,
        response: p.response as usize,
        concurrency: p.concurrency as usize,
    }
}

/// TCP: one connection, K requests pipelined on it.
async fn tcp_flow(
    server: SocketAddr,
    p: RrParams,
    preamble: Preamble,
    plan: Plan,
    anchor: Option<WallAnchor>,
) -> Result<FlowResult> {
    let (mut hist, mut connect) = histograms()?;
    let mut log = anchor.map(ExchangeLog::new);
    let at = Instant::now();
    let mut tcp = TcpStream::connect(server)
        .await
        .with_context(|| format!("cannot open a TCP data connection to {server}"))?;
    connect.saturating_record(duration_ns(at.elapsed()));
    tcp.set_nodelay(true)
        .context("while setting TCP_NODELAY on the data connection")?;
    control::write_preamble(&mut tcp, &preamble).await?;
    if p.concurrency <= 1 {
        // One request outstanding: a blocking socket in a thread of its own.
        let tcp = blocking::into_blocking(tcp, false).context("while preparing the data socket")?;
        let shape = shape(&p);
        let (tally, span, (hist, log), transport) = tokio::task::spawn_blocking(move || {
            let begun = Instant::now();
            let tally = rr::blocking_flow(&tcp, shape, plan, &mut hist, log.as_mut());
            let span = (begun, Instant::now());
            let transport = counters::tcp_stats(&tcp);
            let _ = tcp.shutdown(std::net::Shutdown::Write);
            (tally, span, (hist, log), transport)
        })
        .await
        .context("the TCP request-response thread failed")?;
        let tally = tally.context("the TCP request-response flow failed")?;
        return Ok(FlowResult {
            tally,
            span,
            hist,
            connect,
            resumed: None,
            transport,
            exchanges: log.map(|l| l.exchanges).unwrap_or_default(),
        });
    }
    let (mut rd, mut wr) = tcp.into_split();
    let begun = Instant::now();
    let tally = rr::stream_flow(&mut rd, &mut wr, shape(&p), plan, &mut hist, log.as_mut())
        .await
        .context("the TCP request-response flow failed")?;
    let span = (begun, Instant::now());
    let transport = counters::tcp_stats(wr.as_ref());
    let _ = wr.shutdown().await;
    Ok(FlowResult {
        tally,
        span,
        hist,
        connect,
        resumed: None,
        transport,
        exchanges: log.map(|l| l.exchanges).unwrap_or_default(),
    })
}

/// QUIC: one connection (its own endpoint), one stream, K requests pipelined; flow 0 of a ping
/// then probes a resumed connection with 0-RTT.
async fn quic_flow(
    server: SocketAddr,
    p: RrParams,
    preamble: Preamble,
    cfg: ClientConfig,
    plan: Plan,
    (probe, anchor): (bool, Option<WallAnchor>),
) -> Result<FlowResult> {
    if p.concurrency <= 1 {
        return quic_flow_inline(server, p, preamble, cfg, plan, (probe, anchor)).await;
    }
    let (mut hist, mut connect) = histograms()?;
    let mut log = anchor.map(ExchangeLog::new);
    let endpoint = quic_endpoint(server)?;
    let at = Instant::now();
    let connection = endpoint
        .connect_with(cfg.clone(), server, tls::SERVER_NAME)
        .context("while starting the QUIC handshake")?
        .await
        .with_context(|| format!("QUIC handshake with {server} failed"))?;
    connect.saturating_record(duration_ns(at.elapsed()));
    let (mut send, mut recv) = connection
        .open_bi()
        .await
        .context("while opening the QUIC stream")?;
    control::write_preamble(&mut send, &preamble).await?;
    let begun = Instant::now();
    let tally = rr::stream_flow(
        &mut recv,
        &mut send,
        shape(&p),
        plan,
        &mut hist,
        log.as_mut(),
    )
    .await
    .context("the QUIC request-response flow failed")?;
    let span = (begun, Instant::now());
    let transport = Some(counters::quic_stats(&connection));
    let _ = send.finish();
    connection.close(0u32.into(), b"done");
    let resumed = if probe {
        Some(resumed_probe(&endpoint, server, &cfg, &p, &preamble).await)
    } else {
        None
    };
    quic::drain(&endpoint).await;
    Ok(FlowResult {
        tally,
        span,
        hist,
        connect,
        resumed,
        transport,
        exchanges: log.map(|l| l.exchanges).unwrap_or_default(),
    })
}

/// QUIC with one request outstanding (ping): the connection driven inline on a thread of its
/// own (`engine::quic::inline`), as stop-and-wait's, the exchanges through the blocking loop
/// TCP's ping uses; its server serves it inline too. Flow 0 of a ping then probes a resumed
/// connection with 0-RTT on quinn, with the ticket this one got (the configuration holds it).
async fn quic_flow_inline(
    server: SocketAddr,
    p: RrParams,
    preamble: Preamble,
    cfg: ClientConfig,
    plan: Plan,
    (probe, anchor): (bool, Option<WallAnchor>),
) -> Result<FlowResult> {
    let (mut hist, mut connect) = histograms()?;
    let mut log = anchor.map(ExchangeLog::new);
    let socket = InlineConnection::socket(server)?;
    let mut endpoint_cfg = EndpointConfig::default();
    endpoint_cfg.grease_quic_bit(false);
    let configs = (endpoint_cfg, cfg.clone());
    let shape = shape(&p);
    let flow = tokio::task::spawn_blocking(move || {
        let at = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let mut c = InlineConnection::connect_with(socket, server, configs, stop)?;
        connect.saturating_record(duration_ns(at.elapsed()));
        let stream = c.open_bi()?;
        c.write_all(stream, &preamble.encode())
            .context("while writing the connection preamble")?;
        let conn = std::sync::Mutex::new(c);
        let (mut reader, mut writer) = (
            InlineStream::new(&conn, stream),
            InlineStream::new(&conn, stream),
        );
        let begun = Instant::now();
        let pause = |interval| {
            conn.lock()
                .map_err(|_| std::io::Error::other("a QUIC connection's thread panicked"))?
                .pause(interval)
        };
        let tally = rr::blocking_exchanges(
            (&mut reader, &mut writer, pause),
            shape,
            plan,
            &mut hist,
            log.as_mut(),
        );
        let span = (begun, Instant::now());
        let _ = writer.finish();
        let c = conn
            .into_inner()
            .map_err(|_| anyhow::anyhow!("the QUIC thread panicked"))?;
        let transport = counters::quic_stats_of(&c.stats());
        c.close(b"done");
        let tally = tally.context("the QUIC request-response flow failed")?;
        anyhow::Ok((tally, span, (hist, connect, log), transport))
    });
    let (tally, span, (hist, connect, log), transport) = flow
        .await
        .context("the QUIC request-response thread failed")??;
    let resumed = if probe {
        let endpoint = quic_endpoint(server)?;
        let figures = resumed_probe(&endpoint, server, &cfg, &p, &preamble).await;
        quic::drain(&endpoint).await;
        Some(figures)
    } else {
        None
    };
    Ok(FlowResult {
        tally,
        span,
        hist,
        connect,
        resumed,
        transport: Some(transport),
        exchanges: log.map(|l| l.exchanges).unwrap_or_default(),
    })
}

/// A second QUIC connection on the same endpoint and configuration (so it holds the session
/// ticket of the first): its one request goes out as 0-RTT data when the ticket allows.
async fn resumed_probe(
    endpoint: &Endpoint,
    server: SocketAddr,
    cfg: &ClientConfig,
    p: &RrParams,
    preamble: &Preamble,
) -> ResumedFigures {
    let mut figures = ResumedFigures {
        zero_rtt_sent: false,
        zero_rtt_accepted: false,
        first_response_ns: None,
        handshake_ns: None,
    };
    let mut first = preamble.encode().to_vec();
    first.resize(first.len() + p.request as usize, 0);
    let mut response = vec![0u8; p.response as usize];
    let at = Instant::now();
    let Ok(connecting) = endpoint.connect_with(cfg.clone(), server, tls::SERVER_NAME) else {
        return figures;
    };
    let (connection, accepted) = match connecting.into_0rtt() {
        Ok((connection, accepted)) => {
            figures.zero_rtt_sent = true;
            (connection, Some(accepted))
        }
        Err(connecting) => match connecting.await {
            Ok(c) => {
                figures.handshake_ns = Some(duration_ns(at.elapsed()));
                (c, None)
            }
            Err(_) => return figures,
        },
    };
    if let Ok((mut send, mut recv)) = connection.open_bi().await {
        if rr::single_exchange(&mut recv, &mut send, &first, &mut response)
            .await
            .is_ok()
        {
            figures.first_response_ns = Some(duration_ns(at.elapsed()));
        }
        let _ = send.finish();
    }
    if let Some(accepted) = accepted {
        figures.zero_rtt_accepted = accepted.await;
        // The handshake is complete once the server's acceptance (or refusal) is known.
        figures.handshake_ns = Some(duration_ns(at.elapsed()));
    }
    connection.close(0u32.into(), b"done");
    figures
}

/// UDP: one connected socket, K requests outstanding, timeouts and retries by the tracker.
async fn udp_flow(
    server: SocketAddr,
    p: RrParams,
    (session, token): (u32, u32),
    plan: Plan,
    (timeout, retries): (Duration, u32),
    anchor: Option<WallAnchor>,
) -> Result<FlowResult> {
    let (mut hist, connect) = histograms()?;
    let mut log = anchor.map(ExchangeLog::new);
    let udp = UdpClient::connect(server, None).await?;
    // The server answers no request from this socket until it has echoed the token.
    crate::engine::udp::hello::validate(udp.socket(), session, token).await?;
    let mut tracker = RequestTracker::new(timeout, retries);
    let (tally, span) = if p.concurrency <= 1 {
        // One request outstanding (ping): a blocking socket on a thread of its own, one
        // wake-up less per round trip, as for TCP.
        let socket = udp
            .into_std()
            .context("while preparing the UDP socket for blocking use")?;
        let shape = shape(&p);
        let (tally, span, returned) = tokio::task::spawn_blocking(move || {
            let begun = Instant::now();
            let tally = rr_blocking_udp::flow(
                &socket,
                session,
                shape,
                plan,
                &mut tracker,
                &mut hist,
                log.as_mut(),
            );
            (tally, (begun, Instant::now()), (hist, log))
        })
        .await
        .context("the UDP request-response thread failed")?;
        (hist, log) = returned;
        (tally.context("the UDP request-response flow failed")?, span)
    } else {
        let begun = Instant::now();
        let tally = rr::udp_flow(
            udp.socket(),
            session,
            shape(&p),
            plan,
            &mut tracker,
            &mut hist,
            log.as_mut(),
        )
        .await
        .context("the UDP request-response flow failed")?;
        (tally, (begun, Instant::now()))
    };
    Ok(FlowResult {
        tally,
        span,
        hist,
        connect,
        resumed: None,
        // As for UDP stop-and-wait runs: datagrams sent again over datagrams sent.
        transport: Some(TransportStats::from_udp(
            tally.counts.sent + tally.counts.retries,
            tally.counts.retries,
        )),
        exchanges: log.map(|l| l.exchanges).unwrap_or_default(),
    })
}

/// A new connection per request (TCP_CRR style): connect, send preamble and request in one
/// write, read the response, close; repeated while requests remain to be claimed.
async fn new_connection_worker(
    server: SocketAddr,
    p: RrParams,
    preamble: Preamble,
    quic_cfg: Option<ClientConfig>,
    plan: Plan,
    claims: Arc<AtomicU64>,
) -> Result<FlowResult> {
    let (mut hist, mut connect) = histograms()?;
    let mut first = preamble.encode().to_vec();
    first.resize(first.len() + p.request as usize, 0);
    let mut response = vec![0u8; p.response as usize];
    let endpoint = match p.protocol {
        Protocol::Quic => Some(quic_endpoint(server)?),
        _ => None,
    };
    let mut tally = FlowTally::default();
    let mut transport: Option<TransportStats> = None;
    let begun = Instant::now();
    loop {
        let claim = claims.fetch_add(1, Ordering::Relaxed);
        if !plan.more(claim, Instant::now()) {
            break;
        }
        tally.counts.sent += 1;
        let at = Instant::now();
        let took = match (&endpoint, &quic_cfg) {
            (Some(endpoint), Some(cfg)) => {
                let connection = endpoint
                    .connect_with(cfg.clone(), server, tls::SERVER_NAME)
                    .context("while starting the QUIC handshake")?
                    .await
                    .with_context(|| format!("QUIC handshake with {server} failed"))?;
                connect.saturating_record(duration_ns(at.elapsed()));
                let (mut send, mut recv) = connection
                    .open_bi()
                    .await
                    .context("while opening the QUIC stream")?;
                let took = rr::single_exchange(&mut recv, &mut send, &first, &mut response)
                    .await
                    .context("a QUIC request on a new connection failed")?;
                transport = sum_transport(transport, Some(counters::quic_stats(&connection)));
                let _ = send.finish();
                connection.close(0u32.into(), b"done");
                took
            }
            _ => {
                let mut tcp = TcpStream::connect(server)
                    .await
                    .with_context(|| format!("cannot open a TCP connection to {server}"))?;
                connect.saturating_record(duration_ns(at.elapsed()));
                tcp.set_nodelay(true)
                    .context("while setting TCP_NODELAY on the data connection")?;
                let (mut rd, mut wr) = tcp.split();
                let took = rr::single_exchange(&mut rd, &mut wr, &first, &mut response)
                    .await
                    .context("a TCP request on a new connection failed")?;
                transport = sum_transport(transport, counters::tcp_stats(&tcp));
                let _ = tcp.shutdown().await;
                took
            }
        };
        hist.saturating_record(duration_ns(took));
        tally.counts.answered += 1;
        if let Some(pause) = plan.interval {
            tokio::time::sleep(pause).await;
        }
    }
    let span = (begun, Instant::now());
    if let Some(endpoint) = endpoint {
        quic::drain(&endpoint).await;
    }
    Ok(FlowResult {
        tally,
        span,
        hist,
        connect,
        resumed: None,
        transport,
        exchanges: Vec::new(),
    })
}

/// The QUIC client configuration every connection of a session shares: it pins the server's
/// certificate, keeps session tickets (resumption) and may send 0-RTT data.
pub(crate) fn quic_client_config(cert: Vec<u8>) -> Result<ClientConfig> {
    let mut crypto = tls::client_crypto(cert)?;
    crypto.enable_early_data = true;
    let crypto = QuicClientConfig::try_from(crypto).context("while configuring QUIC TLS")?;
    let mut cfg = ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(quic::client_transport(quic::DEFAULT_MTU));
    Ok(cfg)
}

/// A client endpoint on a fresh UDP socket of the server's address family.
pub(crate) fn quic_endpoint(server: SocketAddr) -> Result<Endpoint> {
    let socket = crate::transport::net::udp_socket(server.is_ipv6(), None, None)?;
    quic::client_endpoint(socket, EndpointConfig::default())
}
