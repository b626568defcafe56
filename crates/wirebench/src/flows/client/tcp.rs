//! The client's TCP transfer: a second connection to the server's port, driven on a blocking
//! (or spinning) socket in a thread of its own (see engine::stream::blocking), sending or, with
//! `--reverse`, receiving; the loops are the ones QUIC uses.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::proto::{DataPathInfo, Preamble, SessionParams};

use super::leg::{received_leg, Leg, Transfer};
use crate::engine::liveness::{self, Watched};
use crate::engine::stream::blocking;
use crate::engine::stream::ReadTally;
use crate::transport::counters;
use crate::transport::delivery::{self, Acknowledged};
use crate::transport::{control, net};

/// Opens the data connection, then plays the session's role on it.
pub(super) async fn run(t: &mut Transfer<'_>, preamble: &Preamble) -> Result<Leg> {
    let data = connect(t.server, t.p, preamble).await?;
    if t.p.reverse {
        receive(t, data).await
    } else {
        send(t, data).await
    }
}

/// The data connection with the session's options (the pacing rate only when we send),
/// announced by `preamble`, handed over off the runtime (the role sets its mode).
async fn connect(
    server: std::net::SocketAddr,
    p: &SessionParams,
    preamble: &Preamble,
) -> Result<std::net::TcpStream> {
    let pacing = p.rate_bps.filter(|_| !p.reverse);
    let mut data = net::connect_tcp_data(server, &p.options, p.mechanism, pacing).await?;
    control::write_preamble(&mut data, preamble).await?;
    data.into_std().context("while preparing the data socket")
}

/// The sending role in a thread of its own; the clock stops as [`Transfer::finish_timing`]
/// says (streaming: when the server's acknowledgement of the last byte arrived, read from
/// TCP_INFO).
async fn send(t: &mut Transfer<'_>, data: std::net::TcpStream) -> Result<Leg> {
    t.progress.watch_tcp_sender(&data);
    // A second handle, to stop the sender thread (shutdown wakes a blocked write or read) if
    // the server goes away mid-transfer.
    let stopper = data
        .try_clone()
        .context("while preparing the data socket")?;
    let params = t.p.clone();
    // The thread owns a copy of the histogram and hands it back.
    let mut hist = t.rtt.clone();
    let progress = Arc::clone(t.progress);
    let sender = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let result = blocking::send_role(&data, &params, &mut hist, &progress.bytes)
            .context("the data transfer failed");
        let done_at = Instant::now();
        // What the server will have acknowledged once the last byte arrived: read before our
        // FIN, whose acknowledgement follows the server's schedule rather than the data's.
        let streamed = result.is_ok() && params.mechanism == Mechanism::Stream;
        let target = delivery::ack_target(&data).filter(|_| streamed);
        if params.timed() && params.mechanism == Mechanism::Stream {
            // A timed stream ends by the sender closing its side (the receiver cannot know
            // the total); the socket stays open for the acknowledgements and TCP_INFO.
            let _ = data.shutdown(std::net::Shutdown::Write);
        }
        let data_path = DataPathInfo {
            busy_poll: params.options.busy_poll,
            ..net::tcp_data_path(&data)
        };
        (result, started, done_at, target, data_path, hist, data)
    });
    let stop = || {
        let _ = stopper.shutdown(std::net::Shutdown::Both);
    };
    let joined = match liveness::watch_stoppable(t.ctrl, sender, stop).await {
        Watched::Done(joined) => joined,
        Watched::Gone { reason, .. } => return Err(t.gone(reason)),
    };
    let (result, started, done_at, target, data_path, hist, data) =
        joined.context("the TCP sender thread failed")?;
    if t.p.mechanism == Mechanism::StopAndWait {
        // Stop-and-wait ends by our closing our side, and the server reports only then: sent
        // here, once the watch above has the transfer's end, so the report can never
        // overtake it (no grace to run out on a busy machine).
        let _ = data.shutdown(std::net::Shutdown::Write);
    }
    *t.rtt = hist;
    let tally = match result {
        Ok(tally) => tally,
        Err(e) => return Err(t.explain_failure(e).await),
    };
    // Streaming: the clock stops when the server's acknowledgement of the last byte arrived.
    let watch = match (target, data.try_clone()) {
        (Some(target), Ok(handle)) => Some(Acknowledged::watch(handle, target)),
        _ => None,
    };
    let delivered = async move {
        match watch {
            Some(watch) => watch.at().await,
            None => None,
        }
    };
    let (elapsed, report) = t.finish_timing(started, done_at, delivered).await?;
    // Read after the server's report, once the last acknowledgements (and the D-SACKs that
    // unmask spurious retransmissions) are in.
    let transport = counters::tcp_sender_stats(&data).await;
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

/// `--reverse`: the receiving role in a thread of its own, then the data connection closed,
/// which tells the server everything arrived.
async fn receive(t: &mut Transfer<'_>, data: std::net::TcpStream) -> Result<Leg> {
    let params = t.p.clone();
    // A second handle, to stop the receiver thread if the server goes away mid-transfer.
    let stopper = data
        .try_clone()
        .context("while preparing the data socket")?;
    let progress = Arc::clone(t.progress);
    let receiver = tokio::task::spawn_blocking(move || {
        let mut tally = ReadTally::default();
        let result = blocking::receive_role(&data, &params, &mut tally, &progress.bytes);
        let transport = counters::tcp_stats(&data);
        let data_path = DataPathInfo {
            busy_poll: params.options.busy_poll,
            ..net::tcp_data_path(&data)
        };
        (result, tally, data_path, transport)
        // `data` is closed here, before the report is awaited.
    });
    let stop = || {
        let _ = stopper.shutdown(std::net::Shutdown::Both);
    };
    let joined = match liveness::watch_stoppable(t.ctrl, receiver, stop).await {
        Watched::Done(joined) => joined,
        Watched::Gone { reason, .. } => return Err(t.gone(reason)),
    };
    // The server waits for the client to close the data connection (its FIN says everything
    // arrived): with the thread's handle gone, this last one closes it.
    drop(stopper);
    let (result, tally, data_path, transport) = joined.context("the TCP receiver thread failed")?;
    if let Err(e) = result {
        let e = anyhow::Error::from(e).context("the data transfer failed");
        return Err(t.explain_failure(e).await);
    }
    let report = t.report().await?;
    Ok(received_leg(&tally, report, data_path, transport))
}
