//! A forward UDP transfer session on the server: its datagrams are counted by the registry's
//! receiver (on the shared socket's thread); here it waits for the client's "done", then for
//! stragglers (at most a grace period of quiet), sends receipts to a rate-search trial, points
//! the gate's meter at the receiver, and fills the report. The gate decides its status.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{ControlMessage, ServerReport, SessionParams, MIN_RECEIPT_US};

use crate::engine::interval;
use crate::engine::udp::receiver::UdpReceiver;
use crate::flows::server::gate::Pass;
use crate::flows::server::kind::{SessionContext, SessionKind};
use crate::flows::server::kit::control::wait_sender_done_or_silence;
use crate::flows::server::kit::data_path::udp_data_path;
use crate::flows::server::kit::span::{omit_span, omitted, span_ns};
use crate::flows::server::meter::Moved;
use crate::flows::server::registry::Registration;
use crate::flows::server::shared::Shared;
use crate::transport::control;

/// A UDP session the client sends: the registry's receiver counts its datagrams.
pub(crate) struct UdpReceive;

impl SessionKind for UdpReceive {
    type Entry = Arc<UdpReceiver>;

    fn register(&self, shared: &Shared, peer: IpAddr, pass: &Pass) -> (Registration, Self::Entry) {
        let p = pass.params();
        let (registration, udp) =
            shared
                .registry
                .register_udp(peer, p.mechanism, p.total_bytes, p.msg_size);
        let counted = Arc::clone(&udp);
        pass.meter().watch(move || Moved {
            read: counted.progress().bytes,
            sent: 0,
        });
        (registration, udp)
    }

    /// Receives a forward UDP session to its end.
    async fn serve<R, W>(
        self,
        ctx: &mut SessionContext<'_, R, W>,
        registration: Registration,
        udp: Self::Entry,
        report: &mut ServerReport,
    ) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let p = ctx.pass.params();
        let period = p.interval_us.map(Duration::from_micros);
        let (rd, wr) = (&mut *ctx.rd, &mut *ctx.wr);
        // Stragglers belong to the series too: it ends when the session's counting does.
        let receiving = async {
            // --rate max trials ask for the counts so far while they send, to end a failed trial
            // early; the reports stop when the client is done.
            let arrived = || udp.counts().first_at.is_some();
            let sent = match receipt_period(p) {
                None => wait_sender_done_or_silence(rd, arrived).await?,
                Some(every) => tokio::select! {
                    sent = wait_sender_done_or_silence(rd, arrived) => sent?,
                    never = send_receipts(wr, &udp, every) => match never {},
                },
            };
            udp.sender_done(sent);
            udp.wait_for_stragglers(Duration::from_micros(p.grace_us))
                .await;
            anyhow::Ok(sent)
        };
        let sampled = interval::sampled(receiving, period, || udp.progress(), |_| {});
        let ((done, intervals), mark) =
            interval::marked(sampled, omit_span(p), || udp.progress().bytes).await;
        report.omitted = omitted(mark, udp.counts().first_at, p);
        report.intervals = intervals;
        report.data_path = udp_data_path(ctx.shared, &registration);
        let sent = match done {
            Ok(sent) => sent,
            Err(e) => {
                fill_udp(report, &udp, None);
                return Err(format!("{e:#}"));
            }
        };
        // The sender is done and the stragglers are in: where the lane's drop counter stands
        // now says whether the tail that never came was dropped here.
        let end = registration.drop_mark();
        drop(registration);
        fill_udp(report, &udp, Some(sent));
        report.dropped_by_host = udp.dropped_by_host(sent, end);
        Ok(())
    }
}

/// How often a forward UDP streaming session reports its receive counts: when its client
/// asked (`receipt_us`), at most every `MIN_RECEIPT_US`.
fn receipt_period(p: &SessionParams) -> Option<Duration> {
    let us = p.options.receipt_us?;
    (p.mechanism == Mechanism::Stream && !p.reverse)
        .then(|| Duration::from_micros(us.max(MIN_RECEIPT_US)))
}

/// Sends what `udp` has received so far every `every` until the session ends; if the control
/// connection cannot take them, stops sending them (the done message's reader sees why).
async fn send_receipts<W>(
    wr: &mut W,
    udp: &UdpReceiver,
    every: Duration,
) -> std::convert::Infallible
where
    W: AsyncWrite + Unpin,
{
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let (messages, bytes, next_seq) = udp.receipt();
        let receipt = ControlMessage::Receipt {
            messages,
            bytes,
            next_seq,
        };
        if control::send(wr, &receipt).await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// The report's figures from what the receiver counted (`sent`: the client's count, once it
/// said).
fn fill_udp(report: &mut ServerReport, udp: &UdpReceiver, sent: Option<u64>) {
    let c = udp.counts();
    report.messages = c.messages;
    report.bytes = c.bytes;
    report.read_calls = c.datagrams;
    report.duplicates = c.duplicates;
    report.out_of_order = c.out_of_order;
    report.acks_sent = c.acks_sent;
    report.jitter_us = c.jitter_us;
    report.lost = sent.map_or(0, |s| s.saturating_sub(c.messages));
    report.elapsed_ns = span_ns(c.first_at, c.last_at);
    report.idle_after_last_ns = c.last_at.map(|t| duration_ns(t.elapsed())).unwrap_or(0);
}
