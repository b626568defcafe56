//! The control-connection steps the session kinds share: `accepted`, the wait for the data
//! connection, the client's "done", the watch for a control connection that ends mid-session.
//! Says why a step failed; never decides a session's status (the gate does).

use std::time::Duration;

use anyhow::{bail, Result};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use wirebench_core::wire::proto::ControlMessage;

use crate::flows::server::registry::{DataStream, Registration};
use crate::flows::server::stop::stop_reason;
use crate::transport::control::{self, SETUP_TIMEOUT};

/// Tells the client its session exists (and, for QUIC, which certificate to expect, and what
/// the kernel says of the server's clock, for one-way delays); the reason when the client is
/// already gone.
pub(crate) async fn send_accepted<W: AsyncWrite + Unpin>(
    wr: &mut W,
    registration: &Registration,
    quic_cert: Option<Vec<u8>>,
) -> Result<(), String> {
    let accepted = ControlMessage::Accepted {
        session: registration.id,
        token: registration.token,
        quic_cert,
        clock: Some(crate::engine::wall_clock::local_clock_info()),
    };
    control::send(wr, &accepted)
        .await
        .map_err(|e| format!("the client left before its session was accepted: {e:#}"))
}

/// Waits for the data connection the registry hands over (`attach`), at most
/// [`SETUP_TIMEOUT`], while watching the control connection.
pub(crate) async fn data_connection<R: AsyncRead + Unpin>(
    attach: oneshot::Receiver<DataStream>,
    rd: &mut R,
) -> Result<DataStream, String> {
    tokio::select! {
        r = tokio::time::timeout(SETUP_TIMEOUT, attach) => match r {
            Ok(Ok(d)) => Ok(d),
            _ => Err(format!("the client opened no data connection within {SETUP_TIMEOUT:?}")),
        },
        reason = watch_control(rd) => Err(reason),
    }
}

/// Waits for the client's "done" message; a session stopped from outside fails with the reason
/// alone.
pub(crate) async fn wait_sender_done<R: AsyncRead + Unpin>(rd: &mut R) -> Result<u64> {
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

/// Waits for the client's "done" message like [`wait_sender_done`], for a UDP session whose
/// datagrams the registry counts: a client that sent no datagram at all within
/// [`SETUP_TIMEOUT`] (`arrived` still false) ends it then, as a TCP or QUIC session without a
/// data connection within the same time ends, instead of holding its place until
/// `--max-duration`.
pub(crate) async fn wait_sender_done_or_silence<R: AsyncRead + Unpin>(
    rd: &mut R,
    arrived: impl Fn() -> bool,
) -> Result<u64> {
    let limit = SETUP_TIMEOUT;
    let silence = async {
        let deadline = tokio::time::Instant::now() + limit;
        // The registry counts datagrams on the receiving thread; a tenth of a second is early
        // enough to notice the first, and nothing is looked at once it came.
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        while tokio::time::Instant::now() < deadline {
            tick.tick().await;
            if arrived() {
                return std::future::pending().await;
            }
        }
        if arrived() {
            return std::future::pending().await;
        }
        format!("the client sent no datagram within {limit:?}")
    };
    tokio::select! {
        done = wait_sender_done(rd) => done,
        why = silence => bail!("{why}"),
    }
}

/// Waits until the control connection ends or carries something unexpected mid-session.
pub(crate) async fn watch_control<R: AsyncRead + Unpin>(rd: &mut R) -> String {
    match control::recv(rd).await {
        Ok(None) => "client closed the control connection".into(),
        Ok(Some(m)) => format!("unexpected {} mid-session", kind_name(&m)),
        Err(e) => stop_reason(&e).unwrap_or_else(|| format!("control connection failed: {e:#}")),
    }
}

/// A control message's name, as the server's messages say it.
pub(crate) fn kind_name(m: &ControlMessage) -> &'static str {
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
