//! A TCP or QUIC transfer session the client sends, on the server: waits for its data
//! connection, then receives through `engine::stream` with the gate's meter on the data path's
//! own progress counter, and fills the report with what was read. Decides nothing about the
//! session's status: it says why it failed, the gate does the rest.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{DataPathInfo, ServerReport, SessionParams};

use crate::engine::interval::{self, Progress};
use crate::engine::quic::inline_server::Accepted;
use crate::engine::quic::stream::QuicSource;
use crate::engine::stream::blocking::{self, block_on, Blocking, TcpSource};
use crate::engine::stream::{self, ReadSource, ReadTally, ReceiveError};
use crate::engine::throttle::{Pause, Throttled};
use crate::flows::server::gate::Pass;
use crate::flows::server::kind::{SessionContext, SessionKind};
use crate::flows::server::kit::control::{data_connection, watch_control};
use crate::flows::server::kit::data_path::shared_udp_data_path;
use crate::flows::server::kit::quic::{
    linger, on_home, served_or_gone, ControlEnded, INLINE_THREAD_FAILED, QUIC_LINGER,
};
use crate::flows::server::kit::span::{omit_span, omitted, span_ns};
use crate::flows::server::meter::Moved;
use crate::flows::server::registry::{DataStream, QuicData, Registration};
use crate::flows::server::shared::Shared;
use crate::transport::control::SETUP_TIMEOUT;
use crate::transport::counters;
use crate::transport::delivery;
use crate::transport::net;

/// A TCP or QUIC session the client sends: waits for its data connection, then receives.
pub(crate) struct StreamReceive {
    /// Whether its data connection is QUIC (TCP otherwise).
    pub(crate) quic: bool,
}

impl SessionKind for StreamReceive {
    type Entry = oneshot::Receiver<DataStream>;

    fn quic(&self) -> bool {
        self.quic
    }

    fn register(&self, shared: &Shared, peer: IpAddr, _: &Pass) -> (Registration, Self::Entry) {
        shared.registry.register_stream(peer)
    }

    async fn serve<R, W>(
        self,
        ctx: &mut SessionContext<'_, R, W>,
        registration: Registration,
        attach: Self::Entry,
        report: &mut ServerReport,
    ) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let data = data_connection(attach, ctx.rd).await?;
        drop(registration);
        receive(data, ctx.rd, ctx.shared, ctx.pass, report).await
    }
}

/// The forward direction: the client sends, the server reads.
async fn receive<R: AsyncRead + Unpin>(
    data: DataStream,
    rd: &mut R,
    shared: &Shared,
    pass: &Pass,
    report: &mut ServerReport,
) -> Result<(), String> {
    let p = pass.params();
    let mut tally = ReadTally::default();
    let progress = Progress::new();
    let read_so_far = Arc::clone(&progress);
    pass.meter().watch(move || Moved {
        read: read_so_far.bytes.load(std::sync::atomic::Ordering::Relaxed),
        sent: 0,
    });
    let period = p.interval_us.map(Duration::from_micros);
    let rate = pass.max_rate_bps();
    let receiving = async {
        match data {
            DataStream::Tcp(tcp) => match net::apply_tcp_options(&tcp, &p.options, p.mechanism) {
                Ok(()) => {
                    receive_tcp_blocking(tcp, rd, p, rate, &mut tally, report, &progress).await
                }
                Err(e) => Err(format!("cannot set the TCP options: {e}")),
            },
            DataStream::Quic(quic) => {
                let (params, progress) = (p.clone(), Arc::clone(&progress));
                let work = move |quic, ended| receive_quic(quic, ended, params, rate, progress);
                let received = on_home(quic, rd, work).await;
                report.data_path = shared_udp_data_path(shared);
                match received {
                    Ok(received) => {
                        tally = received.tally;
                        report.data_path.cpu = received.cpu;
                        report.transport = Some(received.transport);
                        received.result
                    }
                    Err(e) => Err(e),
                }
            }
            DataStream::QuicInline(accepted) => {
                let receiving = receive_quic_inline(*accepted, rd, p, rate, &progress, report);
                let (t, res) = receiving.await;
                tally = t;
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
        Ok(()) if p.timed() && tally.bytes >= p.total_bytes => Err(format!(
            "the timed session reached this server's limit of {} bytes (--max-bytes)",
            p.total_bytes
        )),
        other => other,
    }
}

/// What the QUIC receiving role ended with.
struct QuicReceived {
    /// The outcome.
    result: Result<(), String>,
    /// What was read.
    tally: ReadTally,
    /// The connection's figures.
    transport: TransportStats,
    /// The CPU the receiving ran on last.
    cpu: Option<u32>,
}

/// QUIC: the receiving role on the connection's home, until the client has finished its
/// stream; the connection then lingers there for its last acknowledgements.
async fn receive_quic(
    mut quic: QuicData,
    mut ended: ControlEnded,
    p: SessionParams,
    rate: Option<u64>,
    progress: Arc<Progress>,
) -> QuicReceived {
    let QuicData { send, recv, .. } = &mut quic;
    let mut tally = ReadTally::default();
    let res = {
        let mut source = Throttled::new(QuicSource::new(recv), rate, Pause::Timer);
        tokio::select! {
            res = stream::receive_role(&mut source, send, &p, &mut tally, &progress.bytes) => res.map_err(|e| e.to_string()),
            reason = ended.reason() => Err(reason),
        }
    };
    // Report once the client has finished its stream (a timed session ends there anyway).
    // Stop-and-wait: the client has its last acknowledgement by then; a report that overtook
    // it would look like the server ending the session early. Streaming: finishing our side
    // then acknowledges the client's stream end at once, which stops the client's clock.
    let result = match res {
        Ok(()) if !p.timed() => {
            tokio::select! {
                end = tokio::time::timeout(SETUP_TIMEOUT, recv.read_chunk(1, true)) => match end {
                    Ok(Ok(None)) => Ok(()),
                    Ok(Ok(Some(_))) => Err("the client sent more than its total".to_string()),
                    Ok(Err(e)) => Err(format!("the QUIC stream failed after the last message: {e}")),
                    Err(_) => Err(format!("the client did not finish its stream within {SETUP_TIMEOUT:?} of its last message")),
                },
                reason = ended.reason() => Err(reason),
            }
        }
        other => other,
    };
    // Our stream's end carries the acknowledgement of the client's, now.
    let _ = send.finish();
    let received = QuicReceived {
        result,
        tally,
        transport: counters::quic_stats(&quic.connection),
        cpu: net::current_cpu(),
    };
    linger(quic);
    received
}

/// QUIC driven inline (`engine::quic::inline_server`): the receiving role on the connection's
/// own thread, through the same loop as TCP's, while this task watches the control connection;
/// if that ends first, the thread is stopped and what it read is still reported. Returns what
/// was read and the outcome; the connection's figures go into `report`.
async fn receive_quic_inline<R: AsyncRead + Unpin>(
    accepted: Accepted,
    rd: &mut R,
    p: &SessionParams,
    rate: Option<u64>,
    progress: &Arc<Progress>,
    report: &mut ServerReport,
) -> (ReadTally, Result<(), String>) {
    let (params, progress) = (p.clone(), Arc::clone(progress));
    let (served, stopper) = accepted.serve(QUIC_LINGER, move |reader, writer| {
        let mut tally = ReadTally::default();
        let buf = vec![0u8; stream::receive_buffer_len(params.mechanism, params.msg_size)];
        let source = ReadSource { reader, buf };
        let mut source = Throttled::new(source, rate, Pause::Thread);
        let received =
            stream::receive_role(&mut source, writer, &params, &mut tally, &progress.bytes);
        let res = block_on(received).map_err(|e| e.to_string());
        drop(source);
        // As over quinn: report once the client has finished its stream, and acknowledge
        // its end with ours.
        let res = match res {
            Ok(()) if !params.timed() => reader.wait_end(SETUP_TIMEOUT).map_err(|e| {
                format!("the client did not finish its stream after its last message: {e}")
            }),
            other => other,
        };
        let _ = writer.finish();
        (tally, res)
    });
    let (served, gone) = served_or_gone(served, stopper, rd).await;
    let Some(s) = served else {
        let why = gone.unwrap_or_else(|| INLINE_THREAD_FAILED.into());
        return (ReadTally::default(), Err(why));
    };
    report.data_path = s.data_path;
    report.transport = Some(counters::quic_stats_of(&s.stats));
    let (tally, res) = s.value;
    (tally, gone.map_or(res, Err))
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

/// Receives a TCP session on a blocking socket in a thread of its own (see engine::stream::blocking),
/// while this task watches the control connection; if that ends first, shutting the socket
/// down wakes the thread.
async fn receive_tcp_blocking<R: AsyncRead + Unpin>(
    tcp: TcpStream,
    rd: &mut R,
    p: &SessionParams,
    rate: Option<u64>,
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
        let source = TcpSource::for_session(&data, &params);
        let mut source = Throttled::new(source, rate, Pause::Thread);
        let res = block_on(stream::receive_role(
            &mut source,
            &mut Blocking::new(&data, spin),
            &params,
            &mut t,
            &progress.bytes,
        ));
        // The client's clock stops at our acknowledgement of its last byte: send it now.
        delivery::acknowledge_now(&data);
        // Stop-and-wait: report once the client has read its last acknowledgement, which it
        // says by closing its side (a timed session ended there already); a report that
        // overtook that acknowledgement would look like the server ending the session early.
        let res = match res {
            Ok(()) if params.mechanism == Mechanism::StopAndWait && !params.timed() => {
                net::wait_for_end(&data, SETUP_TIMEOUT).map_err(ReceiveError::Io)
            }
            other => other,
        };
        let path = DataPathInfo {
            busy_poll: spin,
            ..net::tcp_data_path(&data)
        };
        let ends = (path, counters::tcp_stats(&data));
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
