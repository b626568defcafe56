//! `--reverse` on the server: the server plays the sending role of a TCP or QUIC session (the
//! same engine loops the client uses forward) and reports what it sent. Must not count what
//! the client received: the client reports that.
//!
//! The server's time runs from its first byte sent until the client has read everything: over
//! TCP until the client closes the data connection (after the server's FIN), over QUIC until
//! the client has read the stream to its end. So the report never overtakes the data.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;
use wirebench_core::vocab::metrics::TransportStats;
use wirebench_core::wire::proto::{ServerReport, SessionParams};

use super::registry::DataStream;
use super::session::{omit_span, omitted, watch_control, QUIC_LINGER};
use super::Shared;
use crate::engine::blocking::{self, block_on, Blocking};
use crate::engine::interval::{self, Progress};
use crate::engine::quic_stream::QuicSink;
use crate::engine::stream::{self, WriteSink};
use crate::engine::throttle::{Pause, Throttled};
use crate::engine::SendTally;
use crate::transport::control::SETUP_TIMEOUT;
use crate::transport::counters;
use crate::transport::net;
use wirebench_core::vocab::units::duration_ns;

/// What the sending role produced.
struct Sent {
    tally: SendTally,
    elapsed: Duration,
}

/// Sends the session's data to the client over `data` and fills `report` with what was sent:
/// messages, bytes, send calls (in `read_calls`) and time. Returns the reason if it failed.
pub(super) async fn send_to_client<R: AsyncRead + Unpin>(
    data: DataStream,
    rd: &mut R,
    shared: &Shared,
    p: &SessionParams,
    report: &mut ServerReport,
) -> Result<(), String> {
    let progress = Progress::new();
    let period = p.interval_us.map(Duration::from_micros);
    let sending = async {
        match data {
            DataStream::Tcp(tcp) => {
                let rate = shared.options.limits.max_rate_bps;
                // The client's --rate: paced in the kernel, as the client paces forward.
                if let Some(asked) = p.rate_bps {
                    if let Err(e) = net::set_max_pacing_rate(&tcp, asked) {
                        return Err(format!("cannot pace the TCP data socket to --rate: {e}"));
                    }
                }
                send_tcp(tcp, rd, p, rate, report, &progress).await
            }
            DataStream::Quic {
                connection,
                mut send,
                mut recv,
            } => {
                let sink = QuicSink::new(&mut send, &connection, p);
                // The lower of the server's --max-rate and the client's --rate.
                let rate = match (shared.options.limits.max_rate_bps, p.rate_bps) {
                    (Some(max), Some(asked)) => Some(max.min(asked)),
                    (max, asked) => max.or(asked),
                };
                let mut sink = Throttled::new(sink, rate, Pause::Timer);
                let mut rtt = stream::rtt_histogram().map_err(|e| e.to_string())?;
                let started = Instant::now();
                let res = tokio::select! {
                    res = stream::send_role(&mut recv, &mut sink, p, &mut rtt, &progress.bytes) => res.map_err(|e| e.to_string()),
                    reason = watch_control(rd) => Err(reason),
                };
                let send_window = sink.get_ref().send_window();
                drop(sink);
                let res = match res {
                    Ok(tally) => {
                        let _ = send.finish();
                        // Done when the client has read the stream to its end.
                        match tokio::time::timeout(SETUP_TIMEOUT, send.stopped()).await {
                            Ok(Ok(None)) => Ok(Sent {
                                tally,
                                elapsed: started.elapsed(),
                            }),
                            Ok(Ok(Some(code))) => {
                                Err(format!("the client stopped the stream (code {code})"))
                            }
                            Ok(Err(e)) => Err(format!("the QUIC stream failed: {e}")),
                            Err(_) => Err(format!(
                                "the client did not read the stream to its end within {SETUP_TIMEOUT:?}"
                            )),
                        }
                    }
                    Err(e) => Err(e),
                };
                report.data_path = super::session::shared_udp_data_path(shared);
                report.transport = Some(TransportStats {
                    send_window_bytes: send_window,
                    ..counters::quic_stats(&connection)
                });
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(QUIC_LINGER, connection.closed()).await;
                });
                res
            }
        }
    };
    let began = Instant::now();
    let sampled = interval::sampled(sending, period, || progress.read(), |_| {});
    let ((result, intervals), mark) =
        interval::marked(sampled, omit_span(p), || progress.read().bytes).await;
    report.omitted = omitted(mark, Some(began), p);
    report.intervals = intervals;
    match result {
        Ok(sent) => {
            report.messages = sent.tally.messages;
            report.bytes = sent.tally.bytes;
            report.read_calls = sent.tally.send_calls;
            report.elapsed_ns = duration_ns(sent.elapsed);
            Ok(())
        }
        Err(reason) => {
            // What left before the failure, as far as the sender knows.
            report.bytes = progress.read().bytes;
            Err(reason)
        }
    }
}

/// TCP: the sending role on a blocking socket in a thread of its own, while this task watches
/// the control connection; if that ends first, shutting the socket down wakes the thread.
async fn send_tcp<R: AsyncRead + Unpin>(
    tcp: TcpStream,
    rd: &mut R,
    p: &SessionParams,
    rate: Option<u64>,
    report: &mut ServerReport,
    progress: &Arc<Progress>,
) -> Result<Sent, String> {
    net::apply_tcp_options(&tcp, &p.options, p.mechanism)
        .map_err(|e| format!("cannot set the TCP options: {e}"))?;
    let spin = p.options.busy_poll;
    let data = blocking::into_blocking(tcp, spin).map_err(|e| format!("data socket: {e}"))?;
    let waker = data.try_clone().map_err(|e| format!("data socket: {e}"))?;
    let params = p.clone();
    progress.watch_tcp_sender(&data);
    let progress = Arc::clone(progress);
    let mut worker = tokio::task::spawn_blocking(move || {
        let payload = vec![0u8; params.msg_size as usize];
        let started = Instant::now();
        let result = stream::rtt_histogram().and_then(|mut rtt| {
            let mut writer = Blocking::new(&data, spin);
            let sink = WriteSink {
                writer: &mut writer,
                payload: &payload,
            };
            let mut sink = Throttled::new(sink, rate, Pause::Thread);
            block_on(stream::send_role(
                &mut Blocking::new(&data, spin),
                &mut sink,
                &params,
                &mut rtt,
                &progress.bytes,
            ))
        });
        // Our FIN, then wait for the client's: it closes once it has read everything.
        let _ = data.shutdown(std::net::Shutdown::Write);
        block_on(async {
            let mut scrap = [0u8; 256];
            let mut reader = Blocking::new(&data, spin);
            while matches!(reader.read(&mut scrap).await, Ok(n) if n > 0) {}
        });
        let elapsed = started.elapsed();
        let ends = (net::tcp_data_path(&data, spin), counters::tcp_stats(&data));
        (result.map(|tally| Sent { tally, elapsed }), ends)
    });
    tokio::select! {
        joined = &mut worker => match joined {
            Ok((res, (info, transport))) => {
                (report.data_path, report.transport) = (info, transport);
                res.map_err(|e| e.to_string())
            }
            Err(e) => Err(format!("the sender thread failed: {e}")),
        },
        reason = watch_control(rd) => {
            let _ = waker.shutdown(std::net::Shutdown::Both);
            if let Ok((_, (info, transport))) = worker.await {
                (report.data_path, report.transport) = (info, transport);
            }
            Err(reason)
        }
    }
}
