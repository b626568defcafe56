//! `--reverse` over TCP or QUIC on the server: once the client's data connection is in, the
//! server plays the sending role of the session (the
//! same engine loops the client uses forward) and reports what it sent — also when the client
//! vanishes mid-transfer: the messages, bytes and send calls that left and the time they took,
//! counted by [`Counted`] as they go. Must not count what the client received: the client
//! reports that.
//!
//! The server's time runs from its first byte sent until the client has read everything: over
//! TCP until the client closes the data connection (after the server's FIN), over QUIC until
//! the client has acknowledged the stream to its end. So the report never overtakes the data.
//! Streaming, its time ends instead when the client acknowledged its last byte, read from
//! TCP_INFO or quinn rather than from the client's messages: the sender's span of the run's
//! transfer time (`wirebench_core::record::headline`).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{DataPathInfo, ServerReport, SessionParams};

use crate::engine::interval::{self, Progress};
use crate::engine::quic::inline_server::Accepted;
use crate::engine::quic::stream::QuicSink;
use crate::engine::stream::blocking::{self, block_on, Blocking};
use crate::engine::stream::{self, MessageSink, WriteSink};
use crate::engine::throttle::{Pause, Throttled};
use crate::flows::server::gate::Pass;
use crate::flows::server::kind::{SessionContext, SessionKind};
use crate::flows::server::kit::control::{data_connection, watch_control};
use crate::flows::server::kit::data_path::shared_udp_data_path;
use crate::flows::server::kit::quic::{
    linger, on_home, served_or_gone, ControlEnded, INLINE_THREAD_FAILED, QUIC_LINGER,
};
use crate::flows::server::kit::span::{omit_span, omitted};
use crate::flows::server::meter::Moved;
use crate::flows::server::registry::{DataStream, QuicData, Registration};
use crate::flows::server::shared::Shared;
use crate::transport::control::SETUP_TIMEOUT;
use crate::transport::counters;
use crate::transport::delivery;
use crate::transport::net;

/// What the sending role has put on the data path so far, counted per message (plain atomics:
/// no lock, no allocation), readable from the session's task while a thread sends.
#[derive(Debug, Default)]
struct SentSoFar {
    messages: AtomicU64,
    bytes: AtomicU64,
    send_calls: AtomicU64,
    first_at: std::sync::OnceLock<Instant>,
}

/// A message sink that counts into a [`SentSoFar`].
struct Counted<'c, S> {
    inner: S,
    counts: &'c SentSoFar,
}

impl<S: MessageSink + Send> MessageSink for Counted<'_, S> {
    async fn send_message(&mut self, len: usize) -> std::io::Result<u64> {
        self.counts.first_at.get_or_init(Instant::now);
        let calls = self.inner.send_message(len).await?;
        self.counts.messages.fetch_add(1, Ordering::Relaxed);
        self.counts.bytes.fetch_add(len as u64, Ordering::Relaxed);
        self.counts.send_calls.fetch_add(calls, Ordering::Relaxed);
        Ok(calls)
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().await
    }
}

/// A TCP or QUIC session the server sends (`--reverse`): waits for its data connection, then
/// sends.
pub(crate) struct StreamSend {
    /// Whether its data connection is QUIC (TCP otherwise).
    pub(crate) quic: bool,
}

impl SessionKind for StreamSend {
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
        send_to_client(data, ctx.rd, ctx.shared, ctx.pass, report).await
    }
}

/// Sends the session's data to the client over `data` and fills `report` with what was sent:
/// messages, bytes, send calls (in `read_calls`) and time. Returns the reason if it failed.
async fn send_to_client<R: AsyncRead + Unpin>(
    data: DataStream,
    rd: &mut R,
    shared: &Shared,
    pass: &Pass,
    report: &mut ServerReport,
) -> Result<(), String> {
    let p = pass.params();
    let progress = Progress::new();
    let counts = Arc::new(SentSoFar::default());
    let sent_so_far = Arc::clone(&progress);
    pass.meter().watch(move || Moved {
        read: 0,
        sent: sent_so_far.bytes.load(Ordering::Relaxed),
    });
    let period = p.interval_us.map(Duration::from_micros);
    // The lower of the server's --max-rate and the client's --rate.
    let rate = match (pass.max_rate_bps(), p.rate_bps) {
        (Some(max), Some(asked)) => Some(max.min(asked)),
        (max, asked) => max.or(asked),
    };
    let sending = async {
        match data {
            DataStream::Tcp(tcp) => {
                // The client's --rate: paced in the kernel, as the client paces forward.
                if let Some(asked) = p.rate_bps {
                    if let Err(e) = net::set_max_pacing_rate(&tcp, asked) {
                        let e = format!("cannot pace the TCP data socket to --rate: {e}");
                        return (Err(e), None);
                    }
                }
                let sender = Sender {
                    rate: pass.max_rate_bps(),
                    counts: Arc::clone(&counts),
                };
                send_tcp(tcp, rd, p, sender, report, &progress).await
            }
            DataStream::Quic(quic) => {
                let (params, counts, progress) =
                    (p.clone(), Arc::clone(&counts), Arc::clone(&progress));
                let work =
                    move |quic, ended| send_quic(quic, ended, params, rate, counts, progress);
                let sent = on_home(quic, rd, work).await;
                report.data_path = shared_udp_data_path(shared);
                match sent {
                    Ok(sent) => {
                        report.data_path.cpu = sent.cpu;
                        report.transport = Some(sent.transport);
                        (sent.result, sent.acknowledged)
                    }
                    Err(e) => (Err(e), None),
                }
            }
            DataStream::QuicInline(accepted) => {
                let sender = Sender {
                    rate,
                    counts: Arc::clone(&counts),
                };
                send_quic_inline(*accepted, rd, p, sender, report, &progress).await
            }
        }
    };
    let began = Instant::now();
    let sampled = interval::sampled(sending, period, || progress.read(), |_| {});
    let (((result, acknowledged), intervals), mark) =
        interval::marked(sampled, omit_span(p), || progress.read().bytes).await;
    report.omitted = omitted(mark, Some(began), p);
    report.intervals = intervals;
    // What left, as far as the sender knows, whether it finished or not.
    report.messages = counts.messages.load(Ordering::Relaxed);
    report.bytes = counts.bytes.load(Ordering::Relaxed);
    report.read_calls = counts.send_calls.load(Ordering::Relaxed);
    let first = counts.first_at.get().copied().unwrap_or(began);
    // Streaming: until the client acknowledged the last byte (the run's transfer time, as
    // wirebench_core::record::headline takes it); otherwise until the client had read it all.
    let end = acknowledged.unwrap_or_else(Instant::now);
    report.elapsed_ns = duration_ns(end.saturating_duration_since(first));
    result
}

/// What the QUIC sending role ended with.
struct QuicSent {
    /// The outcome.
    result: Result<(), String>,
    /// Streaming: when the client acknowledged the stream to its end.
    acknowledged: Option<Instant>,
    /// The connection's figures, with the send window the sender ended with.
    transport: TransportStats,
    /// The CPU the sending ran on last.
    cpu: Option<u32>,
}

/// QUIC: the sending role on the connection's home, then the wait until the client has
/// acknowledged the stream to its end; the connection then lingers there for its last
/// acknowledgements.
async fn send_quic(
    mut quic: QuicData,
    mut ended: ControlEnded,
    p: SessionParams,
    rate: Option<u64>,
    counts: Arc<SentSoFar>,
    progress: Arc<Progress>,
) -> QuicSent {
    let (result, window, acknowledged) =
        send_and_wait(&mut quic, &mut ended, &p, rate, &counts, &progress).await;
    let sent = QuicSent {
        result,
        acknowledged,
        transport: TransportStats {
            send_window_bytes: window,
            ..counters::quic_stats(&quic.connection)
        },
        cpu: net::current_cpu(),
    };
    linger(quic);
    sent
}

/// Sends, then waits for the client's acknowledgement of the stream's end. Returns the
/// outcome, the send window it ended with and (streaming) when that acknowledgement came.
async fn send_and_wait(
    quic: &mut QuicData,
    ended: &mut ControlEnded,
    p: &SessionParams,
    rate: Option<u64>,
    counts: &SentSoFar,
    progress: &Progress,
) -> (Result<(), String>, Option<u64>, Option<Instant>) {
    let QuicData {
        connection,
        send,
        recv,
        ..
    } = quic;
    let sink = QuicSink::new(send, connection, p);
    let mut sink = Counted {
        inner: Throttled::new(sink, rate, Pause::Timer),
        counts,
    };
    let mut rtt = match stream::rtt_histogram() {
        Ok(h) => h,
        Err(e) => return (Err(e.to_string()), None, None),
    };
    let res = tokio::select! {
        res = stream::send_role(recv, &mut sink, p, &mut rtt, &progress.bytes) => res.map_err(|e| e.to_string()),
        reason = ended.reason() => Err(reason),
    };
    let window = sink.inner.get_ref().send_window();
    drop(sink);
    if let Err(e) = res {
        return (Err(e), window, None);
    }
    let _ = send.finish();
    // Done when the client has acknowledged the stream to its end.
    let read = tokio::select! {
        r = tokio::time::timeout(SETUP_TIMEOUT, send.stopped()) => r,
        reason = ended.reason() => return (Err(reason), window, None),
    };
    let acknowledged = matches!(read, Ok(Ok(None))).then(Instant::now);
    let res = match read {
        Ok(Ok(None)) => Ok(()),
        Ok(Ok(Some(code))) => Err(format!("the client stopped the stream (code {code})")),
        Ok(Err(e)) => Err(format!("the QUIC stream failed: {e}")),
        Err(_) => Err(format!(
            "the client did not read the stream to its end within {SETUP_TIMEOUT:?}"
        )),
    };
    let streamed = p.mechanism == Mechanism::Stream;
    (res, window, acknowledged.filter(|_| streamed))
}

/// QUIC driven inline (`engine::quic::inline_server`): the sending role on the connection's
/// own thread, through the same loop as TCP's, then the wait until the client has acknowledged
/// the stream to its end; this task watches the control connection meanwhile, and stops the
/// thread if that ends first. Returns the outcome and (streaming) when that acknowledgement came.
async fn send_quic_inline<R: AsyncRead + Unpin>(
    accepted: Accepted,
    rd: &mut R,
    p: &SessionParams,
    sender: Sender,
    report: &mut ServerReport,
    progress: &Arc<Progress>,
) -> (Result<(), String>, Option<Instant>) {
    let (params, progress) = (p.clone(), Arc::clone(progress));
    let (served, stopper) = accepted.serve(QUIC_LINGER, move |acks, writer| {
        let payload = vec![0u8; params.msg_size as usize];
        let sent = stream::rtt_histogram().and_then(|mut rtt| {
            let sink = WriteSink {
                writer: &mut *writer,
                payload: &payload,
            };
            let mut sink = Counted {
                inner: Throttled::new(sink, sender.rate, Pause::Thread),
                counts: &sender.counts,
            };
            block_on(stream::send_role(
                acks,
                &mut sink,
                &params,
                &mut rtt,
                &progress.bytes,
            ))
        });
        let res = sent.map_err(|e| e.to_string()).and_then(|_| {
            writer
                .finish_acknowledged(SETUP_TIMEOUT)
                .map_err(|e| format!("the client did not acknowledge the stream to its end: {e}"))
        });
        let streamed = params.mechanism == Mechanism::Stream;
        let acknowledged = (res.is_ok() && streamed).then(Instant::now);
        (res, acknowledged)
    });
    let (served, gone) = served_or_gone(served, stopper, rd).await;
    let Some(s) = served else {
        return (
            Err(gone.unwrap_or_else(|| INLINE_THREAD_FAILED.into())),
            None,
        );
    };
    report.data_path = s.data_path;
    report.transport = Some(counters::quic_stats_of(&s.stats));
    match gone {
        Some(reason) => (Err(reason), None),
        None => s.value,
    }
}

/// How the TCP sending thread runs: the server's --max-rate and where it counts.
struct Sender {
    rate: Option<u64>,
    counts: Arc<SentSoFar>,
}

/// TCP: the sending role on a blocking socket in a thread of its own, while this task watches
/// the control connection; if that ends first, shutting the socket down wakes the thread.
/// Returns the outcome and (streaming) when the client acknowledged the last byte.
async fn send_tcp<R: AsyncRead + Unpin>(
    tcp: TcpStream,
    rd: &mut R,
    p: &SessionParams,
    sender: Sender,
    report: &mut ServerReport,
    progress: &Arc<Progress>,
) -> (Result<(), String>, Option<Instant>) {
    let prepared = net::apply_tcp_options(&tcp, &p.options, p.mechanism)
        .map_err(|e| format!("cannot set the TCP options: {e}"))
        .and_then(|()| {
            let data = blocking::into_blocking(tcp, p.options.busy_poll);
            let data = data.map_err(|e| format!("data socket: {e}"))?;
            let waker = data.try_clone().map_err(|e| format!("data socket: {e}"))?;
            Ok((data, waker))
        });
    let (data, waker) = match prepared {
        Ok(both) => both,
        Err(e) => return (Err(e), None),
    };
    let spin = p.options.busy_poll;
    // Raised when the client is gone: nobody is left to acknowledge what we sent.
    let stop = Arc::new(AtomicBool::new(false));
    let halt = Arc::clone(&stop);
    let params = p.clone();
    progress.watch_tcp_sender(&data);
    let progress = Arc::clone(progress);
    let mut worker = tokio::task::spawn_blocking(move || {
        let payload = vec![0u8; params.msg_size as usize];
        let result = stream::rtt_histogram().and_then(|mut rtt| {
            let mut writer = Blocking::new(&data, spin);
            let sink = WriteSink {
                writer: &mut writer,
                payload: &payload,
            };
            let mut sink = Counted {
                inner: Throttled::new(sink, sender.rate, Pause::Thread),
                counts: &sender.counts,
            };
            block_on(stream::send_role(
                &mut Blocking::new(&data, spin),
                &mut sink,
                &params,
                &mut rtt,
                &progress.bytes,
            ))
        });
        // Streaming: what the client will have acknowledged once our last byte arrived,
        // read before our FIN (acknowledged on the client's schedule, not the data's).
        let streamed = result.is_ok() && params.mechanism == Mechanism::Stream;
        let target = delivery::ack_target(&data).filter(|_| streamed);
        // Our FIN, then the acknowledgement of our last byte, then the client's FIN: it
        // closes once it has read everything.
        let _ = data.shutdown(std::net::Shutdown::Write);
        let acknowledged = target.and_then(|t| delivery::wait_acknowledged(&data, t, &halt));
        block_on(async {
            let mut scrap = [0u8; 256];
            let mut reader = Blocking::new(&data, spin);
            while matches!(reader.read(&mut scrap).await, Ok(n) if n > 0) {}
        });
        let path = DataPathInfo {
            busy_poll: spin,
            ..net::tcp_data_path(&data)
        };
        let ends = (path, counters::tcp_stats(&data));
        (result.map(|_| ()), ends, acknowledged)
    });
    tokio::select! {
        joined = &mut worker => match joined {
            Ok((res, (info, transport), acknowledged)) => {
                (report.data_path, report.transport) = (info, transport);
                (res.map_err(|e| e.to_string()), acknowledged)
            }
            Err(e) => (Err(format!("the sender thread failed: {e}")), None),
        },
        reason = watch_control(rd) => {
            stop.store(true, Ordering::Relaxed);
            let _ = waker.shutdown(std::net::Shutdown::Both);
            if let Ok((_, (info, transport), _)) = worker.await {
                (report.data_path, report.transport) = (info, transport);
            }
            (Err(reason), None)
        }
    }
}
