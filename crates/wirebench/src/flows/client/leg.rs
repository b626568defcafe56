//! What every protocol's transfer shares: the session as a transfer sees it ([`Transfer`]),
//! what it leaves behind ([`Leg`]), where the server's report is read, when the clock stops
//! (the transfer time `wirebench_core::record::headline` defines), and the error of a
//! transfer cut short.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use hdrhistogram::Histogram;
use tokio::net::TcpStream;
use wirebench_core::record::UdpReceipt;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::proto::{DataPathInfo, ServerReport, SessionParams};

use crate::engine::interval::Progress;
use crate::engine::liveness;
use crate::engine::stream::ReadTally;
use crate::engine::SendTally;
use crate::transport::control;

/// One session's data transfer as a protocol's code sees it.
pub(super) struct Transfer<'a> {
    /// The server's address (the data connection goes to the same port).
    pub server: SocketAddr,
    /// What was asked of the server.
    pub p: &'a SessionParams,
    /// The control connection: watched for a vanished server; the report arrives on it.
    pub ctrl: &'a mut TcpStream,
    /// Stop-and-wait round trips, nanoseconds.
    pub rtt: &'a mut Histogram<u64>,
    /// The payload bytes moved so far, read on other tasks.
    pub progress: &'a Arc<Progress>,
}

/// What one data transfer produced on the client.
pub(super) struct Leg {
    pub tally: SendTally,
    pub started: Instant,
    pub elapsed: Duration,
    pub report: ServerReport,
    pub data_path: DataPathInfo,
    pub transport: Option<TransportStats>,
    pub udp_received: Option<UdpReceipt>,
}

/// How long a failed transfer looks at the control connection for a better reason.
const FAILURE_LOOK: Duration = Duration::from_millis(500);

/// How long a streaming sender still waits, once the report is in, to learn when its last
/// byte was acknowledged (a watcher delayed by a busy machine; a peer that delays its last
/// acknowledgement makes the report's arrival the end).
const ACK_AFTER_REPORT: Duration = Duration::from_millis(250);

impl Transfer<'_> {
    /// The server's report: every protocol's transfer reads it here, once its data is done.
    pub async fn report(&mut self) -> Result<ServerReport> {
        control::read_report(self.ctrl).await
    }

    /// Stops the clock of a TCP or QUIC sending transfer (the one place either does; UDP has
    /// no acknowledgements and ends in `udp::finish`) and
    /// reads the server's report. Stop-and-wait ends at its last acknowledgement (`done_at`).
    /// Streaming ends when the last byte was delivered, as the sender's transport learnt it
    /// (`delivered`: TCP's acknowledgement of the last byte, QUIC's of the stream's end), and
    /// never later than the report's arrival, the server's own word that everything arrived,
    /// which stands in where the transport cannot say. Neither end's scheduling after the
    /// data arrived moves it, as the report's arrival alone would (a busy machine lowered
    /// goodput by 2.6 % through a 100 Mbit/s router that way). Returns the elapsed time from
    /// `started` and the report.
    pub async fn finish_timing(
        &mut self,
        started: Instant,
        done_at: Instant,
        delivered: impl Future<Output = Option<Instant>>,
    ) -> Result<(Duration, ServerReport)> {
        if self.p.mechanism == Mechanism::StopAndWait {
            let report = self.report().await?;
            return Ok((done_at.saturating_duration_since(started), report));
        }
        let mut delivered = std::pin::pin!(delivered);
        let mut acknowledged = None;
        let mut settled = false;
        let report = {
            let reading = self.report();
            let mut reading = std::pin::pin!(reading);
            loop {
                tokio::select! {
                    biased;
                    at = &mut delivered, if !settled => (acknowledged, settled) = (at, true),
                    report = &mut reading => break report,
                }
            }
        };
        let report_at = Instant::now();
        let report = report?;
        if !settled {
            // The acknowledgement precedes the report on the wire (the server acknowledges
            // before it reports); a watcher that looked late dates it right all the same.
            acknowledged = tokio::time::timeout(ACK_AFTER_REPORT, delivered)
                .await
                .ok()
                .flatten();
        }
        let end = acknowledged.map_or(report_at, |at| at.min(report_at));
        Ok((end.saturating_duration_since(started), report))
    }

    /// The error of a transfer stopped because the server went away: why, and what the
    /// client had sent (stop-and-wait: had acknowledged; `--reverse`: had received) by then.
    pub fn gone(&self, reason: String) -> anyhow::Error {
        let bytes = self.progress.bytes.load(Ordering::Relaxed);
        let what = match (self.p.reverse, self.p.mechanism) {
            (true, _) => "received",
            (false, Mechanism::Stream) => "sent (what arrived is unknown: no report came)",
            (false, Mechanism::StopAndWait) => "sent and acknowledged",
        };
        anyhow!("{reason}; the transfer stopped after {bytes} B {what}")
    }

    /// A transfer that failed on its own (a reset data connection, a closed UDP port): when
    /// the control connection says the server is gone, that is the error; otherwise the
    /// failure's.
    pub async fn explain_failure(&mut self, e: impl Into<anyhow::Error>) -> anyhow::Error {
        let e = e.into();
        match liveness::server_gone(self.ctrl, FAILURE_LOOK).await {
            Some(reason) => self.gone(format!("{reason} ({e:#})")),
            None => e,
        }
    }
}

/// What a client that received over a stream (`--reverse`) reports: messages and bytes read,
/// read calls in place of send calls, and the time from the first byte read to the last (the
/// receiver's span; the server's report carries the sender's, and the run's transfer time is
/// the longer of the two: see `wirebench_core::record::headline`).
pub(super) fn received_leg(
    t: &ReadTally,
    report: ServerReport,
    data_path: DataPathInfo,
    transport: Option<TransportStats>,
) -> Leg {
    let started = t.first_at.unwrap_or_else(Instant::now);
    Leg {
        tally: SendTally {
            messages: t.messages,
            bytes: t.bytes,
            send_calls: t.read_calls,
            ..SendTally::default()
        },
        started,
        elapsed: t
            .last_at
            .map_or(Duration::ZERO, |l| l.saturating_duration_since(started)),
        report,
        data_path,
        transport,
        udp_received: None,
    }
}
