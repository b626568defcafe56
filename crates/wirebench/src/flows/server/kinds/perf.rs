//! A QUIC `perf` connection on the server, as one session through the gate: admitted (places
//! in all and per client), each stream's request answered within `--max-bytes` (both ways)
//! and paced to `--max-rate` (uploads read no faster, so QUIC's flow control slows the
//! client), stopped by the gate's stop, and ended with one session line: streams served as
//! messages, bytes of the larger direction (shown reversed when the server sent more).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use quinn::VarInt;
use tokio::task::JoinSet;
use wirebench_core::vocab::units::duration_ns;

use crate::flows::perf::server::{read_request, REFUSED};
use crate::flows::perf::{payload, CHUNK};
use crate::flows::server::gate::{Ask, Gate};
use crate::flows::server::kit::data_path::shared_udp_data_path;
use crate::flows::server::meter::Meter;
use crate::flows::server::shared::Shared;
use crate::transport::counters;

/// Streams one perf connection may have open at once (quinn's own limit is the peer's); a
/// client that opens more waits for QUIC flow control, as the draft's servers do.
const MAX_STREAMS_AT_ONCE: usize = 256;

/// What a perf session's streams did.
#[derive(Debug, Default)]
struct Streams {
    served: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
}

/// Serves one perf connection to its end through the gate. Not a [`SessionKind`]: a perf
/// client has no control connection, so there is no request, no `accepted`, no registry slot
/// and no "done" to drive; the gate's steps (admit, stop, end) are taken here in the same order.
///
/// [`SessionKind`]: crate::flows::server::kind::SessionKind
pub(crate) async fn serve(connection: quinn::Connection, shared: &Shared) {
    let peer: SocketAddr = connection.remote_address();
    let gate: &Arc<Gate> = &shared.gate;
    let mut pass = match gate.admit(peer, Ask::Perf) {
        Ok(pass) => pass,
        Err(reason) => {
            connection.close(VarInt::from_u32(REFUSED), reason.as_bytes());
            return;
        }
    };
    let meter = Arc::clone(pass.meter());
    let streams = Arc::new(Streams::default());
    let started = Instant::now();
    let stop = pass.stop();
    let result = tokio::select! {
        r = serve_streams(&connection, &meter, &streams) => r,
        reason = stop => Err(reason),
    };
    if let Err(reason) = &result {
        // Cut at QUIC's limit for a close reason; the session line has it whole.
        let cut = &reason.as_bytes()[..reason.len().min(1000)];
        connection.close(VarInt::from_u32(REFUSED), cut);
    }
    let moved = meter.moved();
    let mut report = pass.empty_report();
    report.messages = streams.served.load(Ordering::Relaxed);
    let (reads, writes) = (
        streams.reads.load(Ordering::Relaxed),
        streams.writes.load(Ordering::Relaxed),
    );
    // The line shows the larger direction: its calls with its bytes.
    report.read_calls = if moved.sent > moved.read {
        writes
    } else {
        reads
    };
    report.bytes = moved.read.max(moved.sent);
    report.elapsed_ns = duration_ns(started.elapsed());
    report.data_path = shared_udp_data_path(shared);
    report.transport = Some(counters::quic_stats(&connection));
    pass.show_direction(moved.sent > moved.read);
    pass.end(report, result);
}

/// Answers every stream the client opens until it closes the connection; the first stream
/// that fails a limit ends the session with the reason.
async fn serve_streams(
    connection: &quinn::Connection,
    meter: &Arc<Meter>,
    streams: &Arc<Streams>,
) -> Result<(), String> {
    let mut tasks: JoinSet<Result<(), String>> = JoinSet::new();
    loop {
        tokio::select! {
            accepted = connection.accept_bi(), if tasks.len() < MAX_STREAMS_AT_ONCE => match accepted {
                Ok((send, recv)) => {
                    let (meter, streams) = (Arc::clone(meter), Arc::clone(streams));
                    tasks.spawn(async move { serve_stream(send, recv, &meter, &streams).await });
                }
                // The client closing the connection is how a perf session ends.
                Err(quinn::ConnectionError::ApplicationClosed(_))
                | Err(quinn::ConnectionError::LocallyClosed) => return Ok(()),
                Err(e) => return Err(format!("the perf connection failed: {e}")),
            },
            Some(done) = tasks.join_next(), if !tasks.is_empty() => match done {
                Ok(Ok(())) => {}
                Ok(Err(reason)) => return Err(reason),
                Err(e) => return Err(format!("a perf stream failed inside the server: {e}")),
            },
        }
    }
}

/// One request: size, upload to FIN, response, FIN — every byte metered.
async fn serve_stream(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    meter: &Meter,
    streams: &Streams,
) -> Result<(), String> {
    let wanted = match read_request(&mut send, &mut recv).await {
        Ok(n) => n,
        // A broken stream is reset; it does not end the session.
        Err(_) => return Ok(()),
    };
    if let Err(reason) = meter.may_send(wanted) {
        let _ = send.reset(VarInt::from_u32(REFUSED));
        let _ = recv.stop(VarInt::from_u32(REFUSED));
        return Err(format!("a perf request for {wanted} bytes: {reason}"));
    }
    // The upload, to its FIN.
    loop {
        let chunk = match recv.read_chunk(CHUNK, true).await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(_) => return Ok(()),
        };
        meter.count_read(chunk.bytes.len() as u64);
        streams.reads.fetch_add(1, Ordering::Relaxed);
        meter.may_send(0)?;
        let wait = meter.read_pause();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
    // The response.
    let data = payload();
    let mut left = wanted;
    while left > 0 {
        let take = left.min(CHUNK as u64);
        meter.may_send(take)?;
        if send.write_chunk(data.slice(..take as usize)).await.is_err() {
            return Ok(());
        }
        meter.count_sent(take);
        streams.writes.fetch_add(1, Ordering::Relaxed);
        left -= take;
        let wait = meter.send_pause();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
    if send.finish().is_err() {
        return Ok(());
    }
    streams.served.fetch_add(1, Ordering::Relaxed);
    // Wait until the client has it all (or gave up), so the FIN is not cut by a close.
    let _ = send.stopped().await;
    Ok(())
}
