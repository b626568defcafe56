//! The client's QUIC transfer: a connection to the server's UDP port, one bidirectional
//! stream. Streaming runs on quinn, its messages slices of one shared payload buffer;
//! stop-and-wait runs on a connection of its own thread driven inline on quinn-proto
//! (`engine::quic::inline`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use quinn::{Connection, Endpoint, RecvStream, SendStream};
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::proto::{DataPathInfo, Preamble};

use super::leg::{received_leg, Leg, Transfer};
use crate::engine::liveness::{self, Watched};
use crate::engine::quic;
use crate::engine::quic::inline::{self, PlayedRole};
use crate::engine::quic::stream::QuicSource;
use crate::engine::stream::{self, ReadTally};
use crate::transport::{control, counters, net};

/// How long a receiver waits for the stream's end after the last byte it expected (the
/// server finishes its stream right after its last write).
const STREAM_END_WAIT: Duration = Duration::from_secs(1);

/// Connects, opens the stream, announces the session on it, then plays the session's role.
pub(super) async fn run(t: &mut Transfer<'_>, preamble: &Preamble, cert: Vec<u8>) -> Result<Leg> {
    if t.p.mechanism == Mechanism::StopAndWait {
        return stop_and_wait_inline(t, preamble, cert).await;
    }
    let (endpoint, connection, data_path) =
        quic::connect(t.server, cert, t.p.options.quic_mtu).await?;
    let (mut send, mut recv) = connection
        .open_bi()
        .await
        .context("while opening the QUIC stream")?;
    control::write_preamble(&mut send, preamble).await?;
    let path = (&endpoint, &connection, data_path);
    if t.p.reverse {
        receive(t, path, &mut send, &mut recv).await
    } else {
        send_messages(t, path, &mut send, &mut recv).await
    }
}

/// `--reverse`: reads the stream, acknowledging on `send` for stop-and-wait.
async fn receive(
    t: &mut Transfer<'_>,
    (endpoint, connection, mut data_path): (&Endpoint, &Connection, DataPathInfo),
    send: &mut SendStream,
    recv: &mut RecvStream,
) -> Result<Leg> {
    let mut source = QuicSource::new(recv);
    let mut tally = ReadTally::default();
    let receiving = stream::receive_role(&mut source, send, t.p, &mut tally, &t.progress.bytes);
    let received = match liveness::watch(t.ctrl, receiving).await {
        Watched::Done(received) => received,
        Watched::Gone { reason, .. } => {
            connection.close(0u32.into(), b"server gone");
            return Err(t.gone(reason));
        }
    };
    if let Err(e) = received {
        connection.close(0u32.into(), b"failed");
        let e = anyhow::Error::from(e).context("the data transfer failed");
        return Err(t.explain_failure(e).await);
    }
    data_path.cpu = net::current_cpu();
    if t.p.mechanism == Mechanism::Stream {
        // The server's clock stops at our acknowledgement of its stream's end: read up to
        // that end, then finish our side, whose packet carries the acknowledgement now rather
        // than at quinn's delayed-ACK timer.
        let _ = tokio::time::timeout(STREAM_END_WAIT, recv.read_chunk(1, true)).await;
        let _ = send.finish();
    }
    let report = t.report().await;
    let transport = Some(counters::quic_stats(connection));
    connection.close(0u32.into(), b"done");
    quic::drain(endpoint).await;
    Ok(received_leg(&tally, report?, data_path, transport))
}

/// Sends the messages (paced by the application with `--rate`: quinn's own pacer follows its
/// congestion window), stop-and-wait acknowledgements coming back on `recv`.
async fn send_messages(
    t: &mut Transfer<'_>,
    (endpoint, connection, mut data_path): (&Endpoint, &Connection, DataPathInfo),
    send: &mut SendStream,
    recv: &mut RecvStream,
) -> Result<Leg> {
    let started = Instant::now();
    let sending = quic::stream::send_role(send, recv, connection, t.p, t.rtt, &t.progress.bytes);
    let sent = match liveness::watch(t.ctrl, sending).await {
        Watched::Done(sent) => sent,
        Watched::Gone { reason, .. } => {
            // No drain: nobody is left to acknowledge the close.
            connection.close(0u32.into(), b"server gone");
            return Err(t.gone(reason));
        }
    };
    let (tally, send_window) = match sent {
        Ok(sent) => sent,
        Err(e) => {
            connection.close(0u32.into(), b"failed");
            let e = anyhow::Error::from(e).context("the data transfer failed");
            return Err(t.explain_failure(e).await);
        }
    };
    let done_at = Instant::now();
    data_path.cpu = net::current_cpu();
    let _ = send.finish();
    // Streaming: the clock stops when the server acknowledged the stream's end (everything
    // up to its FIN), as quinn learnt it.
    let delivered = async {
        match send.stopped().await {
            Ok(None) => Some(Instant::now()),
            _ => None,
        }
    };
    let result = t.finish_timing(started, done_at, delivered).await;
    let transport = Some(TransportStats {
        send_window_bytes: send_window,
        ..counters::quic_stats(connection)
    });
    connection.close(0u32.into(), b"done");
    quic::drain(endpoint).await;
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

/// Stop-and-wait either way on a connection of its own thread, driven inline on quinn-proto
/// (`engine::quic::inline`): one wake-up per round trip, as UDP's stop-and-wait. The
/// connection stays up until the server's report is in.
async fn stop_and_wait_inline(
    t: &mut Transfer<'_>,
    preamble: &Preamble,
    cert: Vec<u8>,
) -> Result<Leg> {
    let (played, control) = inline::start_stop_and_wait(
        t.server,
        cert,
        t.p,
        preamble.encode().to_vec(),
        t.rtt.clone(),
        Arc::clone(t.progress),
    )?;
    let watched = liveness::watch_stoppable(t.ctrl, played, || control.stop()).await;
    let played = match watched {
        Watched::Done(Ok(played)) => played,
        Watched::Done(Err(_)) => Err(anyhow::anyhow!("the QUIC thread failed")),
        Watched::Gone { reason, .. } => {
            let _ = control.close().await;
            return Err(t.gone(reason));
        }
    };
    let (role, cpu) = match played {
        Ok(played) => played,
        Err(e) => {
            let _ = control.close().await;
            return Err(t.explain_failure(e).await);
        }
    };
    let report = match &role {
        PlayedRole::Sent {
            started, done_at, ..
        } => {
            t.finish_timing(*started, *done_at, std::future::ready(None))
                .await
        }
        PlayedRole::Received(_) => t.report().await.map(|report| (Duration::ZERO, report)),
    };
    let (stats, mut data_path) = control
        .close()
        .await?
        .context("the QUIC thread ended without its connection")?;
    data_path.cpu = cpu;
    let transport = Some(counters::quic_stats_of(&stats));
    let (elapsed, report) = report?;
    Ok(match role {
        PlayedRole::Sent {
            tally,
            started,
            rtt_ns,
            ..
        } => {
            *t.rtt = rtt_ns;
            Leg {
                tally,
                started,
                elapsed,
                report,
                data_path,
                transport,
                udp_received: None,
            }
        }
        PlayedRole::Received(tally) => received_leg(&tally, report, data_path, transport),
    })
}
