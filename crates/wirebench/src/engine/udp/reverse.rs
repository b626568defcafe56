//! The client's side of a reversed UDP session (`--reverse`): says where to send (hello
//! datagrams, repeated until data arrives), receives with GRO, counts and acknowledges through
//! the same [`UdpReceiver`] the server uses forward, and stops when the server has said on the
//! control connection how much it sent and the stragglers are in (or a grace period passed).

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{bail, Result};
use tokio::io::Interest;
use wirebench_core::machine::seq::DropMark;
use wirebench_core::wire::proto::SessionParams;

use super::batch_recv::{self as udp_recv, RecvBatch};
use super::nap;
use super::receiver::{UdpCounts, UdpReceiver};
use super::UdpClient;
use crate::engine::interval::Progress;

/// How often the client repeats its hello until the first datagram arrives.
const HELLO_INTERVAL: Duration = Duration::from_millis(100);

/// Hellos sent without any datagram coming back before the client gives up.
const MAX_HELLOS: u32 = 100;

/// Buffers one receive takes at most (each up to 64 KiB, a GRO batch).
const RECEIVE_SLOTS: usize = 4;

/// How a reversed session's receive waits between a fast stream's batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// On the socket, through the runtime: the session shares its runtime with others.
    OnSocket,
    /// A nap on this thread after a fast stream's batch ([`nap::naps_after`]), then on the
    /// socket: the session has its thread and runtime to itself, which a nap of microseconds
    /// (shorter than the runtime's timers can) holds up and nothing else.
    NapOwnThread,
}

/// Receives a reversed session on `udp` until `sender_done` (the server's "sent N messages"
/// on the control connection) resolves and the stragglers are in; returns the counts, N, and
/// how many of the N this host dropped (None where its socket does not say).
pub async fn receive<D>(
    udp: &UdpClient,
    (session, token): (u32, u32),
    p: &SessionParams,
    progress: &Progress,
    sender_done: D,
    waiting: Waiting,
) -> Result<(UdpCounts, u64, Option<u64>)>
where
    D: Future<Output = Result<u64>>,
{
    if waiting == Waiting::NapOwnThread {
        nap::prepare_thread();
    }
    let receiver = UdpReceiver::new(session, p.mechanism, p.total_bytes, p.msg_size);
    // The hello carries the session's token: the server sends nothing to an address before.
    let hello = wirebench_core::security::amplification::encode_hello(session, token, 0);
    let socket = udp.socket();
    // This socket is the session's alone: its drop counter says what this host dropped.
    let marks = udp_recv::enable_drop_marks(socket);
    let mark_now = || udp_recv::drops_now(socket).map(|dropped| DropMark { socket: 0, dropped });
    if let Some(mark) = mark_now() {
        receiver.baseline(mark);
    }
    // One receive may hold a whole GRO batch of this session's datagrams.
    let mut batch = RecvBatch::new(RECEIVE_SLOTS, marks);
    // Receives and counts one batch (or one error, which is left to the next batch or hello).
    let mut receive_batch = async || {
        let got = socket
            .async_io(Interest::READABLE, || batch.recv(socket, false))
            .await;
        // An ICMP error from an earlier hello surfaces here as an error; the next hello or
        // datagram decides.
        let buffers = match got {
            Ok(n) if n > 0 => n,
            _ => return,
        };
        let mut ack = |bytes: &[u8]| socket.try_send(bytes).is_ok();
        for (data, r) in batch.received() {
            receiver.on_datagrams(data, r.stride, r.mark(0), &mut ack);
        }
        let so_far = receiver.progress();
        progress.bytes.store(so_far.bytes, Ordering::Relaxed);
        if let Some(lost) = so_far.lost {
            progress.set_receipt(lost, so_far.jitter_ns);
        }
        if waiting == Waiting::NapOwnThread && nap::naps_after(&batch, buffers) {
            nap::take();
        }
    };
    let mut hellos = tokio::time::interval(HELLO_INTERVAL);
    let mut sent_hellos = 0u32;
    let mut sender_done = std::pin::pin!(sender_done);
    let sent = loop {
        tokio::select! {
            () = receive_batch() => {}
            // Until the first message is in (read from the progress counter: no lock per batch).
            _ = hellos.tick(), if progress.bytes.load(Ordering::Relaxed) == 0 => {
                if sent_hellos == MAX_HELLOS {
                    bail!("the server sent no data after {MAX_HELLOS} hello datagrams: is UDP to and from its port blocked?");
                }
                // A lost hello is sent again at the next tick; an error here is no different.
                let _ = socket.send(&hello).await;
                sent_hellos += 1;
            }
            done = &mut sender_done => break done?,
        }
    };
    receiver.sender_done(sent);
    // Stop-and-wait must keep acknowledging while it waits: its last ack may have been lost.
    tokio::select! {
        () = receiver.wait_for_stragglers(Duration::from_micros(p.grace_us)) => {}
        () = async { loop { receive_batch().await } } => {}
    }
    let dropped = receiver.dropped_by_host(sent, mark_now());
    Ok((receiver.counts(), sent, dropped))
}
