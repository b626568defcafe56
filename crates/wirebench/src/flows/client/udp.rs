//! The client's UDP transfer: datagrams to the server's port, the end agreed on the control
//! connection. One piece per job: receiving (`--reverse`), streaming (watched by a judge in a
//! `--rate max` trial), stop-and-wait (spinning or on the runtime), and the end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use wirebench_core::machine::rto::{
    RtoEstimator, DEFAULT_INITIAL_RTO, DEFAULT_MAX_RTO, DEFAULT_MIN_RTO,
};
use wirebench_core::machine::saw::RtoPolicy;
use wirebench_core::record::UdpReceipt;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::plan::{Mechanism, Messages};
use wirebench_core::vocab::units::BitRate;
use wirebench_core::wire::proto::{ControlMessage, DataPathInfo};

use super::leg::{Leg, Transfer};
use crate::engine::liveness::{self, Judge, Judged, Watched};
use crate::engine::stream::blocking::block_on;
use crate::engine::udp::reverse::Waiting;
use crate::engine::udp::saw::{self as udp_saw, BlockingPort, DatagramPort, SpinPort};
use crate::engine::udp::UdpClient;
use crate::engine::udp::{hello as udp_hello, reverse as udp_reverse};
use crate::engine::SendTally;
use crate::transport::{control, net};

/// What a sending transfer did: its tally, when it started and when its last datagram left
/// (stop-and-wait: was acknowledged): the client's span of the run.
type Sent = (SendTally, Instant, Instant);

/// Connects the socket, then receives (`--reverse`) or sends and agrees the end.
pub(super) async fn run(
    t: &mut Transfer<'_>,
    (session, token): (u32, u32),
    judge: Option<Judge<'_>>,
    sole: bool,
) -> Result<Leg> {
    let udp = UdpClient::connect(t.server, t.p.options.window).await?;
    let mut data_path = DataPathInfo {
        busy_poll: t.p.options.busy_poll,
        ..udp.data_path()
    };
    if t.p.reverse {
        let waiting = if super::runs_on_own_thread(t.p, judge.is_some(), sole) {
            Waiting::NapOwnThread
        } else {
            Waiting::OnSocket
        };
        return receive(t, &udp, (session, token), data_path, waiting).await;
    }
    // The server answers nothing from this socket until it has echoed the token (docs/protocol.md).
    udp_hello::validate(udp.socket(), session, token).await?;
    let sent = match t.p.mechanism {
        Mechanism::Stream if judge.is_none() && sole => {
            stream_on_thread(t, udp, session, &mut data_path).await?
        }
        Mechanism::Stream => stream(t, &udp, session, judge, &mut data_path).await?,
        Mechanism::StopAndWait => stop_and_wait(t, udp, session, &mut data_path).await?,
    };
    finish(t, sent, data_path).await
}

/// `--reverse`: counts the server's datagrams until its "sent N messages" and the stragglers
/// are in; the client is the receiver, so it reports loss, duplicates, order and jitter.
async fn receive(
    t: &mut Transfer<'_>,
    udp: &UdpClient,
    ids: (u32, u32),
    mut data_path: DataPathInfo,
    waiting: Waiting,
) -> Result<Leg> {
    let ctrl = &mut *t.ctrl;
    let wait_done = async {
        match control::recv(ctrl).await? {
            Some(ControlMessage::SenderDone { messages_sent, .. }) => Ok(messages_sent),
            Some(ControlMessage::Report(r)) => bail!(
                "the server ended the session: {}",
                r.abort_reason.as_deref().unwrap_or("no reason given")
            ),
            Some(ControlMessage::Error { reason }) => {
                bail!("the server reported an error: {reason}")
            }
            Some(_) => bail!("the server sent something other than its done message"),
            None => {
                bail!("the server is gone: it closed the control connection before it was done")
            }
        }
    };
    let (counts, sent, dropped_by_host) =
        udp_reverse::receive(udp, ids, t.p, t.progress, wait_done, waiting).await?;
    data_path.cpu = net::current_cpu();
    let report = t.report().await?;
    let lost = sent.saturating_sub(counts.messages);
    let started = counts.first_at.unwrap_or_else(Instant::now);
    Ok(Leg {
        tally: SendTally {
            messages: counts.messages,
            bytes: counts.bytes,
            send_calls: counts.datagrams,
            ..SendTally::default()
        },
        started,
        elapsed: counts
            .last_at
            .map_or(Duration::ZERO, |l| l.saturating_duration_since(started)),
        report,
        data_path,
        // As forward: what the sender put on the wire that had to be resent or was lost.
        transport: (t.p.mechanism == Mechanism::Stream)
            .then(|| TransportStats::from_udp(sent, lost)),
        udp_received: Some(UdpReceipt {
            lost,
            dropped_by_host,
            duplicates: counts.duplicates,
            out_of_order: counts.out_of_order,
            jitter_us: counts.jitter_us,
        }),
    })
}

/// Streaming on the runtime: every message once, paced to `--rate`; with a judge (a `--rate
/// max` trial), each of the server's receipts goes to it, and the sending stops when it says so
/// (dropping the send between two batches).
async fn stream(
    t: &mut Transfer<'_>,
    udp: &UdpClient,
    session: u32,
    judge: Option<Judge<'_>>,
    data_path: &mut DataPathInfo,
) -> Result<Sent> {
    let p = t.p;
    let started = Instant::now();
    let sending = udp.send_stream(
        session,
        (p.messages(), p.deadline(started)),
        p.rate_bps.map(BitRate),
        &t.progress.bytes,
    );
    let tally = match judge {
        None => match liveness::watch(t.ctrl, sending).await {
            Watched::Done(Ok(tally)) => tally,
            Watched::Done(Err(e)) => return Err(t.explain_failure(e).await),
            Watched::Gone { reason, .. } => return Err(t.gone(reason)),
        },
        Some(judge) => {
            let watched = (started, &t.progress.bytes);
            match liveness::watch_receipts(t.ctrl, sending, watched, judge).await {
                Judged::Done(Ok(tally)) => tally,
                Judged::Done(Err(e)) => return Err(t.explain_failure(e).await),
                // Dropped between sends: the progress counter is exactly what left.
                Judged::Stopped => {
                    let bytes = t.progress.bytes.load(Ordering::Relaxed);
                    let messages = Messages {
                        total_bytes: bytes,
                        msg_size: p.msg_size,
                    }
                    .count();
                    SendTally {
                        messages,
                        bytes,
                        datagrams: messages,
                        ..SendTally::default()
                    }
                }
                Judged::Gone(reason) => return Err(t.gone(reason)),
            }
        }
    };
    data_path.cpu = net::current_cpu();
    Ok((tally, started, Instant::now()))
}

/// Streaming of a run's only flow, without a judge (not a `--rate max` trial): every message
/// once, paced to `--rate`, from a blocking socket on a thread of its own (see
/// `engine::udp::SendSocket::Blocking`) while the control connection is watched; a server that
/// goes away ends the sender by a shutdown of its socket.
async fn stream_on_thread(
    t: &mut Transfer<'_>,
    udp: UdpClient,
    session: u32,
    data_path: &mut DataPathInfo,
) -> Result<Sent> {
    let sender = udp
        .into_blocking()
        .context("while preparing the UDP socket")?;
    let stopper = sender.stopper().context("while preparing the UDP socket")?;
    let params = t.p.clone();
    let progress = Arc::clone(t.progress);
    let sending = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let sent = block_on(sender.sender().send_stream(
            session,
            (params.messages(), params.deadline(started)),
            params.rate_bps.map(BitRate),
            &progress.bytes,
        ));
        (sent, started, Instant::now(), net::current_cpu())
    });
    let stop = move || {
        let _ = socket2::SockRef::from(&stopper).shutdown(std::net::Shutdown::Both);
    };
    let joined = match liveness::watch_stoppable(t.ctrl, sending, stop).await {
        Watched::Done(joined) => joined,
        Watched::Gone { reason, .. } => return Err(t.gone(reason)),
    };
    let (sent, started, done_at, cpu) = joined.context("the UDP sender thread failed")?;
    let tally = match sent {
        Ok(tally) => tally,
        Err(e) => return Err(t.explain_failure(e).await),
    };
    data_path.cpu = cpu;
    Ok((tally, started, done_at))
}

/// Stop-and-wait: one datagram in flight, retransmitted on timeout (`--rto`, or adaptive), on
/// a thread of its own that waits in `recv` itself (one wake-up per round trip, no hop through
/// the runtime) or, with busy-poll, spins on the socket.
async fn stop_and_wait(
    t: &mut Transfer<'_>,
    udp: UdpClient,
    session: u32,
    data_path: &mut DataPathInfo,
) -> Result<Sent> {
    let p = t.p;
    let policy = match p.rto_us {
        Some(us) => RtoPolicy::Fixed(Duration::from_micros(us)),
        None => RtoPolicy::Adaptive(RtoEstimator::new(
            DEFAULT_INITIAL_RTO,
            DEFAULT_MIN_RTO,
            DEFAULT_MAX_RTO,
        )),
    };
    let socket = udp.into_std().context("while preparing the UDP socket")?;
    if p.options.busy_poll {
        let halt = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&halt);
        let port = SpinPort(socket, halt);
        on_thread(t, session, policy, port, move || {
            stop.store(true, Ordering::Relaxed)
        })
        .await
    } else {
        let port = BlockingPort::new(socket).context("while preparing the UDP socket")?;
        let stop = port.stopper().context("while preparing the UDP socket")?;
        on_thread(t, session, policy, port, stop).await
    }
    .map(|(sent, cpu)| {
        data_path.cpu = cpu;
        sent
    })
}

/// Runs the stop-and-wait sender over `port` on a blocking thread while the control connection
/// is watched; `stop` ends the sender when the server is gone. Returns what was sent and the
/// CPU the thread ended on.
async fn on_thread<P>(
    t: &mut Transfer<'_>,
    session: u32,
    policy: RtoPolicy,
    mut port: P,
    stop: impl FnOnce(),
) -> Result<(Sent, Option<u32>)>
where
    P: DatagramPort + Send + 'static,
{
    // The thread owns a copy of the histogram and hands it back.
    let mut hist = t.rtt.clone();
    let progress = Arc::clone(t.progress);
    let params = t.p.clone();
    let sender = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let result = block_on(udp_saw::send_stop_and_wait(
            &mut port,
            session,
            (params.messages(), params.deadline(started)),
            policy,
            &mut hist,
            &progress.bytes,
        ));
        (result, started, Instant::now(), net::current_cpu(), hist)
    });
    let joined = match liveness::watch_stoppable(t.ctrl, sender, stop).await {
        Watched::Done(joined) => joined,
        Watched::Gone { reason, .. } => return Err(t.gone(reason)),
    };
    let (result, started, acked_at, cpu, hist) = joined.context("the UDP sender thread failed")?;
    *t.rtt = hist;
    match result {
        Ok(tally) => Ok(((tally, started, acked_at), cpu)),
        Err(e) => Err(t.explain_failure(e).await),
    }
}

/// The end of a sending transfer: says what was sent and waits for the report. The client's
/// span ends at its last acknowledgement (stop-and-wait) or its last datagram sent
/// (streaming: with no acknowledgements, the server's span to its last arrival says when the
/// data was delivered; see `wirebench_core::record::headline::transfer_span_ns`), never at
/// the report, whose way back is no part of the transfer.
async fn finish(t: &mut Transfer<'_>, sent: Sent, data_path: DataPathInfo) -> Result<Leg> {
    let (tally, started, acked_at) = sent;
    control::send(
        t.ctrl,
        &ControlMessage::SenderDone {
            messages_sent: tally.messages,
            bytes_sent: tally.bytes,
        },
    )
    .await?;
    let report = t.report().await?;
    let elapsed = acked_at.saturating_duration_since(started);
    let resent_or_lost = match t.p.mechanism {
        Mechanism::StopAndWait => tally.retransmissions,
        Mechanism::Stream => report.lost,
    };
    Ok(Leg {
        tally,
        started,
        elapsed,
        report,
        data_path,
        // Of the datagrams numbered (those the host refused too), the share resent or lost.
        transport: Some(TransportStats::from_udp(
            tally.datagrams + tally.not_sent,
            resent_or_lost,
        )),
        udp_received: None,
    })
}
