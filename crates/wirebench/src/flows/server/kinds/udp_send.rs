//! `--reverse` over UDP on the server: learns where the client wants the data (its hello
//! datagrams), sends the session's datagrams from the shared port (streaming in GSO batches,
//! or stop-and-wait with acknowledgements routed here by the registry), then tells the client
//! on the control connection how much it sent. Must not count what the client received.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use wirebench_core::machine::rto::{
    RtoEstimator, DEFAULT_INITIAL_RTO, DEFAULT_MAX_RTO, DEFAULT_MIN_RTO,
};
use wirebench_core::machine::saw::RtoPolicy;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::vocab::units::BitRate;
use wirebench_core::wire::datagram::{Header, HEADER_LEN};
use wirebench_core::wire::proto::{ControlMessage, ServerReport, SessionParams};

use crate::engine::interval::{self, Progress};
use crate::engine::stream::rtt_histogram;
use crate::engine::udp::saw::{self as udp_saw, DatagramPort};
use crate::engine::udp::{DatagramSender, SendSocket};
use crate::engine::SendTally;
use crate::flows::server::gate::Pass;
use crate::flows::server::kind::{SessionContext, SessionKind};
use crate::flows::server::kit::control::watch_control;
use crate::flows::server::kit::data_path::udp_data_path;
use crate::flows::server::kit::span::{omit_span, omitted};
use crate::flows::server::meter::Moved;
use crate::flows::server::registry::{Registration, ReverseUdp};
use crate::flows::server::shared::Shared;
use crate::flows::server::udp_tx::UdpTx;
use crate::transport::control::{self, SETUP_TIMEOUT};
use wirebench_core::vocab::units::duration_ns;

/// A UDP session the server sends (`--reverse`): the registry routes its client's hellos and
/// acknowledgements to its [`ReverseUdp`] entry.
pub(crate) struct UdpSend;

impl SessionKind for UdpSend {
    type Entry = (Arc<ReverseUdp>, mpsc::UnboundedReceiver<u64>);

    fn register(&self, shared: &Shared, peer: IpAddr, _: &Pass) -> (Registration, Self::Entry) {
        let (registration, slot, acks) = shared.registry.register_udp_reverse(peer);
        (registration, (slot, acks))
    }

    /// Serves a reversed UDP session: waits for the client's hello, sends every message, tells
    /// the client what was sent (`sender_done` on the control connection), and fills the report
    /// with what the server sent (messages, bytes, send calls in `read_calls`, time, and the
    /// datagrams and retransmissions in `transport`) — also when it stopped early.
    async fn serve<R, W>(
        self,
        ctx: &mut SessionContext<'_, R, W>,
        registration: Registration,
        (slot, mut acks): Self::Entry,
        report: &mut ServerReport,
    ) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let result = send_to_client(&slot, &mut acks, ctx, report).await;
        report.data_path = udp_data_path(ctx.shared, &registration);
        result
    }
}

async fn send_to_client<R, W>(
    slot: &ReverseUdp,
    acks: &mut mpsc::UnboundedReceiver<u64>,
    ctx: &mut SessionContext<'_, R, W>,
    report: &mut ServerReport,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (pass, shared) = (ctx.pass, ctx.shared);
    let p = pass.params();
    let client = tokio::select! {
        c = tokio::time::timeout(SETUP_TIMEOUT, slot.client()) => c.map_err(|_| {
            format!("the client sent no hello datagram within {SETUP_TIMEOUT:?}")
        })?,
        reason = watch_control(ctx.rd) => return Err(reason),
    };
    let progress = Progress::new();
    let sent_so_far = Arc::clone(&progress);
    pass.meter().watch(move || Moved {
        read: 0,
        sent: sent_so_far.bytes.load(std::sync::atomic::Ordering::Relaxed),
    });
    let period = p.interval_us.map(Duration::from_micros);
    let sent_as = capped(p, pass.max_rate_bps());
    let mut port_counts = PortCounts::default();
    let started = Instant::now();
    let sending = async {
        tokio::select! {
            r = send(slot.id(), &shared.udp_tx, client, acks, &sent_as, &progress.bytes, &mut port_counts) => r.map_err(|e| format!("{e:#}")),
            reason = watch_control(ctx.rd) => Err(reason),
        }
    };
    let sampled = interval::sampled(sending, period, || progress.read(), |_| {});
    let ((result, intervals), mark) =
        interval::marked(sampled, omit_span(p), || progress.read().bytes).await;
    let elapsed = started.elapsed();
    report.omitted = omitted(mark, Some(started), p);
    report.intervals = intervals;
    report.elapsed_ns = duration_ns(elapsed);
    let tally = match result {
        Ok(tally) => tally,
        Err(reason) => {
            // The engine hands back no tally when it is stopped: what left is what its
            // progress counter (bytes, each message whole but the last) and this session's
            // own port (stop-and-wait sends) saw.
            let bytes = progress.read().bytes;
            report.bytes = bytes;
            report.messages = bytes.div_ceil(u64::from(p.msg_size.max(1)));
            report.read_calls = match p.mechanism {
                Mechanism::StopAndWait => port_counts.datagrams,
                Mechanism::Stream => stream_send_calls(report.messages, p.msg_size, &shared.udp_tx),
            };
            return Err(reason);
        }
    };
    fill_sent(report, &tally, p.mechanism);
    control::send(
        ctx.wr,
        &ControlMessage::SenderDone {
            messages_sent: tally.messages,
            bytes_sent: tally.bytes,
        },
    )
    .await
    .map_err(|e| format!("cannot tell the client the data is sent: {e:#}"))
}

/// The report's figures from the tally of a send that finished.
fn fill_sent(report: &mut ServerReport, tally: &SendTally, mechanism: Mechanism) {
    report.messages = tally.messages;
    report.bytes = tally.bytes;
    report.read_calls = tally.send_calls;
    report.not_sent = tally.not_sent;
    let resent = match mechanism {
        Mechanism::StopAndWait => tally.retransmissions,
        // Streaming resends nothing; what was lost the client counts.
        Mechanism::Stream => 0,
    };
    report.transport = Some(TransportStats::from_udp(
        tally.datagrams + tally.not_sent,
        resent,
    ));
}

/// The sendmsg calls a streaming sender made for `messages` datagrams: one per segmentation
/// batch (as many datagrams as fit 64 KiB and the socket's segment limit).
fn stream_send_calls(messages: u64, msg_size: u32, tx: &UdpTx) -> u64 {
    let segment = HEADER_LEN + msg_size as usize;
    let per_call = (wirebench_core::wire::datagram::MAX_UDP_PAYLOAD_V4 / segment)
        .min(tx.state().max_gso_segments())
        .max(1);
    messages.div_ceil(per_call as u64)
}

/// The session as the server sends it: a streaming rate above the server's --max-rate (or an
/// unpaced one) comes down to it.
fn capped(p: &SessionParams, max_rate_bps: Option<u64>) -> SessionParams {
    let mut p = p.clone();
    if let Some(max) = max_rate_bps {
        p.rate_bps = Some(p.rate_bps.map_or(max, |r| r.min(max)));
    }
    p
}

/// What this session's stop-and-wait port sent.
#[derive(Debug, Default)]
struct PortCounts {
    datagrams: u64,
}

async fn send(
    session: u32,
    tx: &UdpTx,
    client: SocketAddr,
    acks: &mut mpsc::UnboundedReceiver<u64>,
    p: &SessionParams,
    progress: &AtomicU64,
    counts: &mut PortCounts,
) -> anyhow::Result<SendTally> {
    let socket = tx
        .for_session()
        .context("while registering the shared UDP socket for sending")?;
    let deadline = p.deadline(std::time::Instant::now());
    match p.mechanism {
        Mechanism::Stream => {
            let sender = DatagramSender {
                socket: SendSocket::Runtime(&socket),
                state: tx.state(),
                destination: client,
            };
            sender
                .send_stream(
                    session,
                    (p.messages(), deadline),
                    p.rate_bps.map(BitRate),
                    progress,
                )
                .await
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
            let mut port = AckPort {
                session,
                socket: &socket,
                client,
                acks,
                counts,
            };
            let mut rtt = rtt_histogram()?;
            udp_saw::send_stop_and_wait(
                &mut port,
                session,
                (p.messages(), deadline),
                policy,
                &mut rtt,
                progress,
            )
            .await
        }
    }
}

/// Stop-and-wait from the shared socket: datagrams go to the client; its acknowledgements
/// arrive through the registry, as sequence numbers.
struct AckPort<'a> {
    session: u32,
    socket: &'a UdpSocket,
    client: SocketAddr,
    acks: &'a mut mpsc::UnboundedReceiver<u64>,
    counts: &'a mut PortCounts,
}

impl DatagramPort for AckPort<'_> {
    async fn send(&mut self, datagram: &[u8]) -> io::Result<usize> {
        let sent = self.socket.send_to(datagram, self.client).await?;
        self.counts.datagrams += 1;
        Ok(sent)
    }

    async fn recv_until(&mut self, buf: &mut [u8], deadline: Instant) -> Option<io::Result<usize>> {
        match tokio::time::timeout_at(deadline.into(), self.acks.recv()).await {
            Ok(Some(seq)) => {
                // Handed over as the acknowledgement datagram it came in.
                let written = Header::ack(self.session, seq)
                    .write_to(buf)
                    .map(|()| HEADER_LEN);
                Some(written.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)))
            }
            Ok(None) => Some(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the session's acknowledgement channel closed",
            ))),
            Err(_) => None,
        }
    }
}
