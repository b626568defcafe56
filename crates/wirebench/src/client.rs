//! One session from the client's side: control hello, session request, the data transfer
//! through an engine, and the server's report. Timing runs on the monotonic clock from the first
//! byte sent to the last acknowledgement (stop-and-wait) or the server's confirmation
//! (streaming); connection set-up is not part of it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use tokio::net::{TcpSocket, TcpStream};
use wirebench_core::plan::{Mechanism, Protocol};
use wirebench_core::proto::{ControlMessage, DataPathInfo, Preamble, ServerReport, SessionParams};
use wirebench_core::rto::{RtoEstimator, DEFAULT_INITIAL_RTO, DEFAULT_MAX_RTO, DEFAULT_MIN_RTO};
use wirebench_core::saw::RtoPolicy;
use wirebench_core::units::BitRate;

use bytes::Bytes;

use crate::engine::blocking::{self, block_on, Blocking};
use crate::engine::quic::{self, QuicSink};
use crate::engine::stream::{self, MessageSink, WriteSink};
use crate::engine::udp::{self, AsyncPort, SpinPort, UdpClient};
use crate::engine::SendTally;
use crate::{control, net};

/// Round-trip times of a stop-and-wait run (nanoseconds), from an HDR histogram.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RttFigures {
    /// Round trips measured (first transmissions only: Karn's rule).
    pub samples: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Population standard deviation (0 when absent from records made before it existed).
    #[serde(default)]
    pub stddev_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile (0 when absent from older records).
    #[serde(default)]
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile (0 when absent from older records).
    #[serde(default)]
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl RttFigures {
    /// Summarises a histogram; `None` when it is empty.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| RttFigures {
            samples: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            stddev_ns: h.stdev(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        })
    }
}

/// What the client measured in one session.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFigures {
    /// What the sender did.
    pub tally: SendTally,
    /// Transmission time.
    pub elapsed: Duration,
    /// Stop-and-wait round trips.
    pub rtt: Option<RttFigures>,
    /// What the client's data path ran with.
    pub data_path: DataPathInfo,
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

/// Runs one session against the server at `server`.
pub async fn run_session(server: SocketAddr, params: &SessionParams) -> Result<SessionOutcome> {
    let mut ctrl = TcpStream::connect(server)
        .await
        .with_context(|| format!("cannot connect to the server at {server}"))?;
    let _ = ctrl.set_nodelay(true);
    control::write_preamble(&mut ctrl, &Preamble::control()).await?;
    control::send(&mut ctrl, &ControlMessage::SessionRequest(params.clone())).await?;
    let (session, token, quic_cert) = match control::recv_setup(&mut ctrl)
        .await
        .context("the server did not accept the session")?
    {
        ControlMessage::Accepted {
            session,
            token,
            quic_cert,
        } => (session, token, quic_cert),
        ControlMessage::Rejected { reason } => bail!("the server refused the session: {reason}"),
        ControlMessage::Error { reason } => bail!("the server reported an error: {reason}"),
        _ => bail!("the server answered the session request with something unexpected"),
    };
    let data = Preamble::data(session, token);
    let mut rtt = stream::rtt_histogram()?;
    let leg = match params.protocol {
        Protocol::Tcp => run_tcp(server, params, &data, &mut ctrl, &mut rtt).await?,
        Protocol::Quic => {
            let cert = quic_cert.context("the server announced no QUIC certificate")?;
            run_quic(server, params, &data, cert, &mut ctrl, &mut rtt).await?
        }
        Protocol::Udp => run_udp(server, params, session, &mut ctrl, &mut rtt).await?,
    };
    Ok(SessionOutcome {
        session,
        client: ClientFigures {
            tally: leg.tally,
            elapsed: leg.elapsed,
            rtt: RttFigures::of(&rtt),
            data_path: leg.data_path,
        },
        server: leg.report,
    })
}

/// What one data transfer produced on the client.
struct Leg {
    tally: SendTally,
    elapsed: Duration,
    report: ServerReport,
    data_path: DataPathInfo,
}

/// TCP: a second connection to the same port, driven on a blocking (or spinning) socket in a
/// thread of its own (see engine::blocking); the loops are the ones QUIC uses.
async fn run_tcp(
    server: SocketAddr,
    p: &SessionParams,
    preamble: &Preamble,
    ctrl: &mut TcpStream,
    rtt: &mut Histogram<u64>,
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
    control::write_preamble(&mut data, preamble).await?;
    let data =
        blocking::into_blocking(data, opts.busy_poll).context("while preparing the data socket")?;
    let params = p.clone();
    let payload = vec![0u8; p.msg_size as usize];
    // The thread owns a copy of the histogram and hands it back.
    let mut hist = rtt.clone();
    let (result, started, done_at, data_path, hist) = tokio::task::spawn_blocking(move || {
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
        ));
        let done_at = Instant::now();
        (
            result,
            started,
            done_at,
            net::tcp_data_path(&data, spin),
            hist,
        )
    })
    .await
    .context("the TCP sender thread failed")?;
    *rtt = hist;
    let tally = result?;
    let (elapsed, report) = finish_timing(p.mechanism, started, done_at, ctrl).await?;
    Ok(Leg {
        tally,
        elapsed,
        report,
        data_path,
    })
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
) -> Result<Leg> {
    let (endpoint, connection, mut data_path) = quic::connect(server, cert).await?;
    let (mut send, mut recv) = connection
        .open_bi()
        .await
        .context("while opening the QUIC stream")?;
    control::write_preamble(&mut send, preamble).await?;
    let mut sink = QuicSink {
        stream: &mut send,
        payload: Bytes::from(vec![0u8; p.msg_size as usize]),
    };
    let started = Instant::now();
    let tally = send_on_stream(&mut recv, &mut sink, p, rtt).await?;
    let done_at = Instant::now();
    data_path.cpu = net::current_cpu();
    let _ = send.finish();
    let result = finish_timing(p.mechanism, started, done_at, ctrl).await;
    connection.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    let (elapsed, report) = result?;
    Ok(Leg {
        tally,
        elapsed,
        report,
        data_path,
    })
}

/// UDP: datagrams to the same port; the end is agreed on the control connection.
async fn run_udp(
    server: SocketAddr,
    p: &SessionParams,
    session: u32,
    ctrl: &mut TcpStream,
    rtt: &mut Histogram<u64>,
) -> Result<Leg> {
    let udp = UdpClient::connect(server, p.options.window).await?;
    let mut data_path = udp.data_path(p.options.busy_poll);
    let (tally, started, acked_at) = match p.mechanism {
        Mechanism::Stream => {
            let started = Instant::now();
            let tally = udp
                .send_stream(session, p.total_bytes, p.msg_size, p.rate_bps.map(BitRate))
                .await?;
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
                let mut port = SpinPort(udp.into_std().context("while preparing the UDP socket")?);
                // The thread owns a copy of the histogram and hands it back.
                let mut hist = rtt.clone();
                let (result, started, acked_at, cpu, hist) =
                    tokio::task::spawn_blocking(move || {
                        let started = Instant::now();
                        let result = block_on(udp::send_stop_and_wait(
                            &mut port, session, total, size, policy, &mut hist,
                        ));
                        (result, started, Instant::now(), net::current_cpu(), hist)
                    })
                    .await
                    .context("the UDP sender thread failed")?;
                *rtt = hist;
                data_path.cpu = cpu;
                (result?, started, acked_at)
            } else {
                let started = Instant::now();
                let mut port = AsyncPort(udp.socket());
                let tally =
                    udp::send_stop_and_wait(&mut port, session, total, size, policy, rtt).await?;
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
    let report = read_report(ctrl).await?;
    let elapsed = match p.mechanism {
        Mechanism::StopAndWait => acked_at - started,
        // Up to the server's confirmation, less the time the server then spent waiting for
        // stragglers after the last datagram arrived (a duration on its own clock).
        Mechanism::Stream => started
            .elapsed()
            .saturating_sub(Duration::from_nanos(report.idle_after_last_ns)),
    };
    Ok(Leg {
        tally,
        elapsed,
        report,
        data_path,
    })
}

async fn send_on_stream<R, S>(
    acks: &mut R,
    sink: &mut S,
    p: &SessionParams,
    rtt: &mut Histogram<u64>,
) -> Result<SendTally>
where
    R: tokio::io::AsyncRead + Unpin,
    S: MessageSink,
{
    let result = match p.mechanism {
        Mechanism::Stream => stream::send_stream(sink, p.total_bytes, p.msg_size).await,
        Mechanism::StopAndWait => {
            stream::send_stop_and_wait(acks, sink, p.total_bytes, p.msg_size, rtt).await
        }
    };
    result.context("the data transfer failed")
}

/// Stops the clock: stop-and-wait is done at its last acknowledgement (`done_at`); streaming
/// when the server confirms it has read everything. Returns the elapsed time and the report.
async fn finish_timing(
    mechanism: Mechanism,
    started: Instant,
    done_at: Instant,
    ctrl: &mut TcpStream,
) -> Result<(Duration, ServerReport)> {
    let report = read_report(ctrl).await?;
    let elapsed = match mechanism {
        Mechanism::StopAndWait => done_at - started,
        Mechanism::Stream => started.elapsed(),
    };
    Ok((elapsed, report))
}

async fn read_report(ctrl: &mut TcpStream) -> Result<ServerReport> {
    match control::recv(ctrl)
        .await
        .context("while waiting for the server's report")?
    {
        Some(ControlMessage::Report(r)) => Ok(r),
        Some(ControlMessage::Error { reason }) => bail!("the server reported an error: {reason}"),
        Some(_) => bail!("the server sent something other than its report"),
        None => bail!("the server closed the control connection without a report"),
    }
}
