//! One control connection on the server, from its request to the report sent back: reads the
//! request (authenticated when the server has a key), passes it through the gate, hands the
//! admitted session to its kind (a transfer by protocol and direction, or a request-response
//! exchange) and sends the report the gate ended it with. The helpers every kind shares (the
//! control watch, `accepted`, the client's "done") live here too.

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{ControlMessage, DataPathInfo, ServerReport, SessionParams};

use super::gate::{Ask, Pass};
use super::registry::{QuicData, Registration};
use super::stop::{stop_reason, Interruptible};
use super::Shared;
use crate::engine::interval;
use crate::transport::control;
use crate::transport::net;

/// How the kinds end: the report so far, and why the session failed (if it did).
pub(super) type Ended = (ServerReport, Result<(), String>);

/// Serves one control connection to its end.
pub(super) async fn serve(
    stream: &mut TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    hello_deadline: tokio::time::Instant,
) {
    let notice = |message: String| shared.gate.notice(peer, message);
    let limits = &shared.options.limits;
    let (mut rd, mut wr) = stream.split();
    // The request (and, with a pre-shared key, the client's proof) must be in before the
    // hello deadline.
    let request = tokio::time::timeout_at(
        hello_deadline,
        super::auth::recv_request(&mut rd, &mut wr, peer, shared),
    )
    .await
    .unwrap_or_else(|_| {
        Err(anyhow::anyhow!(
            "no session request within {:?} (the server's --hello-timeout)",
            limits.hello_timeout
        ))
    });
    let request = match request {
        Ok(m @ (ControlMessage::SessionRequest(_) | ControlMessage::RrRequest(_))) => m,
        Ok(other) => {
            let reason = format!("expected a session request, got {}", kind_name(&other));
            refuse(
                &mut wr,
                ControlMessage::Error {
                    reason: reason.clone(),
                },
            )
            .await;
            notice(format!("connection closed: {reason}"));
            return;
        }
        // Authentication refused: the client has been told, the notice is sent.
        Err(e) if e.is::<super::auth::Refused>() => return,
        Err(e) => {
            let reason = format!("{e:#}");
            refuse(
                &mut wr,
                ControlMessage::Error {
                    reason: reason.clone(),
                },
            )
            .await;
            notice(format!("connection closed: {reason}"));
            return;
        }
    };
    let ask = match &request {
        ControlMessage::RrRequest(rr) => Ask::Exchange(rr),
        ControlMessage::SessionRequest(p) => Ask::Transfer(p),
        _ => return,
    };
    // Every session passes the gate before anything is allocated for it, and holds its place
    // until its report is sent (the pass is dropped last).
    let mut pass = match shared.gate.admit(peer, ask) {
        Ok(pass) => pass,
        Err(reason) => {
            refuse(&mut wr, ControlMessage::Rejected { reason }).await;
            return;
        }
    };
    // From here on the gate's stop (duration, limits, shutdown) interrupts the session.
    let mut rd = Interruptible::new(rd, pass.stop());
    let (report, outcome) = match request {
        ControlMessage::RrRequest(rr) => {
            super::rr_session::serve(&mut rd, &mut wr, peer, shared, &pass, &rr).await
        }
        _ => transfer(&mut rd, &mut wr, peer, shared, &pass).await,
    };
    // A client that is gone did not see its session to its end, whatever the data said.
    let outcome = match outcome {
        Ok(()) => client_left(&mut rd).await.map_or(Ok(()), Err),
        failed => failed,
    };
    let report = pass.end(report, outcome);
    let _ = control::send(&mut wr, &ControlMessage::Report(Box::new(report))).await;
    drop(pass);
}

/// A transfer, by protocol and direction.
async fn transfer<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    pass: &Pass,
) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let p = pass.params();
    match p.protocol {
        Protocol::Tcp | Protocol::Quic => {
            super::stream_session::serve(rd, wr, peer, shared, pass).await
        }
        Protocol::Udp if p.reverse => super::reverse_udp::serve(rd, wr, peer, shared, pass).await,
        Protocol::Udp => super::udp_session::serve(rd, wr, peer, shared, pass).await,
    }
}

/// Whether the client closed its control connection: it is gone (killed, or stopped) and did
/// not wait for its report. A client that is still there is silent now, so nothing is read.
async fn client_left<R: AsyncRead + Unpin>(rd: &mut R) -> Option<String> {
    match tokio::time::timeout(Duration::ZERO, control::recv(rd)).await {
        Ok(Ok(None)) => Some("the client closed its control connection before its report".into()),
        Ok(Err(e)) if stop_reason(&e).is_none() => Some(format!(
            "the client's control connection failed before its report: {e:#}"
        )),
        _ => None,
    }
}

/// Sends a refusal (or an error) to the client; the connection ends after it.
async fn refuse<W: AsyncWrite + Unpin>(wr: &mut W, answer: ControlMessage) {
    let _ = control::send(wr, &answer).await;
}

/// Tells the client its session exists (and, for QUIC, which certificate to expect); the
/// reason when the client is already gone.
pub(super) async fn send_accepted<W: AsyncWrite + Unpin>(
    wr: &mut W,
    registration: &Registration,
    quic_cert: Option<Vec<u8>>,
) -> Result<(), String> {
    let accepted = ControlMessage::Accepted {
        session: registration.id,
        token: registration.token,
        quic_cert,
    };
    control::send(wr, &accepted)
        .await
        .map_err(|e| format!("the client left before its session was accepted: {e:#}"))
}

/// Waits for the client's "done" message; a session stopped from outside fails with the reason
/// alone.
pub(super) async fn wait_sender_done<R: AsyncRead + Unpin>(rd: &mut R) -> Result<u64> {
    let message = match control::recv(rd).await {
        Ok(m) => m,
        Err(e) => match stop_reason(&e) {
            Some(reason) => bail!("{reason}"),
            None => return Err(e),
        },
    };
    match message {
        Some(ControlMessage::SenderDone { messages_sent, .. }) => Ok(messages_sent),
        Some(other) => bail!(
            "expected the client's done message, got {}",
            kind_name(&other)
        ),
        None => bail!("client closed the control connection before it was done"),
    }
}

/// Waits until the control connection ends or carries something unexpected mid-session.
pub(super) async fn watch_control<R: AsyncRead + Unpin>(rd: &mut R) -> String {
    match control::recv(rd).await {
        Ok(None) => "client closed the control connection".into(),
        Ok(Some(m)) => format!("unexpected {} mid-session", kind_name(&m)),
        Err(e) => stop_reason(&e).unwrap_or_else(|| format!("control connection failed: {e:#}")),
    }
}

/// Tells a QUIC session's work on its connection's home ([`on_home`]) that the control
/// connection ended, and why.
pub(super) struct ControlEnded {
    told: tokio::sync::oneshot::Receiver<String>,
    reason: Option<String>,
}

impl ControlEnded {
    /// Waits until the control connection has ended (or the session's task is gone); the
    /// reason, as [`watch_control`] gives it. May be awaited again after it answered.
    pub(super) async fn reason(&mut self) -> String {
        if let Some(reason) = &self.reason {
            return reason.clone();
        }
        let reason = (&mut self.told)
            .await
            .unwrap_or_else(|_| "the session ended".to_string());
        self.reason = Some(reason.clone());
        reason
    }
}

/// Runs a QUIC session's data work on its connection's home thread (`engine::quic::home`),
/// where quinn drives the connection, while this task watches the control connection. If that
/// ends first the work is told why through its [`ControlEnded`], and its own ending is still
/// waited for, so what it counted reaches the report. Fails only if the work could not run
/// (its thread is gone, or it panicked).
pub(super) async fn on_home<R, W, F>(
    quic: QuicData,
    rd: &mut R,
    work: W,
) -> Result<F::Output, String>
where
    R: AsyncRead + Unpin,
    W: FnOnce(QuicData, ControlEnded) -> F,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tell, told) = tokio::sync::oneshot::channel();
    let home = quic.home.clone();
    let mut job = home.spawn(work(quic, ControlEnded { told, reason: None }));
    let joined = tokio::select! {
        joined = &mut job => joined,
        reason = watch_control(rd) => {
            let _ = tell.send(reason);
            job.await
        }
    };
    joined.map_err(|e| format!("the session's work on its QUIC connection's thread failed: {e}"))
}

/// What the shared UDP socket (UDP and QUIC sessions) runs with.
pub(super) fn shared_udp_data_path(shared: &Shared) -> DataPathInfo {
    DataPathInfo {
        recv_buffer: shared.udp_buffers.0,
        send_buffer: shared.udp_buffers.1,
        cpu: net::current_cpu(),
        ..DataPathInfo::default()
    }
}

/// What a UDP session's data path ran with: the shared socket's buffers, and the receive
/// lane its datagrams met (of how many), if the server runs lanes.
pub(super) fn udp_data_path(shared: &Shared, registration: &Registration) -> DataPathInfo {
    let (receive_lane, receive_lanes) = registration
        .lane()
        .map_or((None, 0), |(lane, lanes)| (Some(lane), lanes));
    DataPathInfo {
        receive_lane,
        receive_lanes,
        ..shared_udp_data_path(shared)
    }
}

/// `-O`: how long after its transfer began an end takes its omit mark.
pub(super) fn omit_span(p: &SessionParams) -> Option<Duration> {
    p.omit_us.map(Duration::from_micros)
}

/// The record of an omit mark, its time counted from `first` (the first byte moved; the mark
/// itself when none moved).
pub(super) fn omitted(
    mark: Option<interval::Mark>,
    first: Option<Instant>,
    p: &SessionParams,
) -> Option<wirebench_core::wire::proto::Omitted> {
    mark.map(|m| m.omitted(first.unwrap_or(m.at), p.msg_size))
}

/// First to last, in nanoseconds (0 when either is missing).
pub(super) fn span_ns(first: Option<Instant>, last: Option<Instant>) -> u64 {
    match (first, last) {
        (Some(f), Some(l)) => duration_ns(l.saturating_duration_since(f)),
        _ => 0,
    }
}

fn kind_name(m: &ControlMessage) -> &'static str {
    match m {
        ControlMessage::SessionRequest(_) => "session request",
        ControlMessage::Accepted { .. } => "accepted message",
        ControlMessage::Rejected { .. } => "rejected message",
        ControlMessage::SenderDone { .. } => "done message",
        ControlMessage::Report(_) => "report",
        ControlMessage::Error { .. } => "error message",
        ControlMessage::RrRequest(_) => "request-response session request",
        ControlMessage::AuthChallenge { .. } => "authentication challenge",
        ControlMessage::AuthResponse { .. } => "authentication response",
        ControlMessage::AuthOk { .. } => "authentication confirmation",
        ControlMessage::Receipt { .. } => "receipt",
    }
}
