//! The server's half of pre-shared-key authentication: after the client's request, challenge
//! it with a fresh nonce, check its MAC in constant time, prove the key in return. Refusals are
//! answered on the control connection and reported as notices. It decides nothing about the
//! session itself.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::io::{AsyncRead, AsyncWrite};
use wirebench_core::security::auth::{self, Psk, CLIENT_LABEL, MAC_LEN, NONCE_LEN, SERVER_LABEL};
use wirebench_core::wire::proto::ControlMessage;

use super::shared::Shared;
use crate::transport::control;

/// The reason a client with the wrong key (or a replayed response) is given.
pub const AUTH_FAILED: &str = "authentication failed";

/// The connection was refused during authentication; the client has been told and a notice
/// sent, so the caller only closes the connection.
#[derive(Debug, thiserror::Error)]
#[error("authentication refused")]
pub struct Refused;

/// Reads the client's request and, on a server with a key, authenticates the client before
/// returning it; [`Refused`] (inside the error) means the refusal is already handled.
pub(super) async fn recv_request<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
) -> Result<ControlMessage>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (request, body) = control::recv_raw_max(rd, shared.options.limits.max_control_size)
        .await?
        .context("peer closed the control connection")?;
    let Some(psk) = shared.options.psk.as_deref() else {
        return Ok(request);
    };
    // Anything but a request gets the caller's usual error, which reveals nothing.
    if !matches!(
        request,
        ControlMessage::SessionRequest(_) | ControlMessage::RrRequest(_)
    ) {
        return Ok(request);
    }
    match challenge(rd, wr, psk, &body).await {
        Ok(()) => Ok(request),
        Err((to_client, notice)) => {
            if let Some(reason) = to_client {
                let _ = control::send(wr, &ControlMessage::Rejected { reason }).await;
            }
            shared.gate.notice(peer, notice);
            Err(Refused.into())
        }
    }
}

/// Runs the challenge; the error is (what to tell the client, the notice).
async fn challenge<R, W>(
    rd: &mut R,
    wr: &mut W,
    psk: &Psk,
    request: &[u8],
) -> Result<(), (Option<String>, String)>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let failed = |why: &str| {
        (
            Some(AUTH_FAILED.to_owned()),
            format!("{AUTH_FAILED}: {why}"),
        )
    };
    let server_nonce = crate::transport::control::auth::nonce()
        .map_err(|e| (Some("internal error".to_owned()), format!("{e:#}")))?;
    control::send(
        wr,
        &ControlMessage::AuthChallenge {
            nonce: auth::to_hex(&server_nonce),
        },
    )
    .await
    .map_err(|e| (None, format!("authentication not completed: {e:#}")))?;
    let (nonce, mac) = match control::recv_setup(rd).await {
        Ok(ControlMessage::AuthResponse { nonce, mac }) => (nonce, mac),
        Ok(ControlMessage::Error { reason }) => {
            return Err((None, format!("authentication refused: {reason}")))
        }
        Ok(_) => return Err(failed("the client sent no authentication response")),
        Err(e) => {
            return Err((
                None,
                format!("authentication not completed (does the client have --psk?): {e:#}"),
            ))
        }
    };
    let client_nonce = auth::from_hex::<NONCE_LEN>(&nonce, "the client's nonce")
        .map_err(|e| failed(&e.to_string()))?;
    let mac =
        auth::from_hex::<MAC_LEN>(&mac, "the client's MAC").map_err(|e| failed(&e.to_string()))?;
    psk.verify(CLIENT_LABEL, &server_nonce, &client_nonce, request, &mac)
        .map_err(|_| failed("wrong pre-shared key, or a replayed response"))?;
    let proof = psk.mac(SERVER_LABEL, &server_nonce, &client_nonce, request);
    control::send(
        wr,
        &ControlMessage::AuthOk {
            mac: auth::to_hex(&proof),
        },
    )
    .await
    .map_err(|e| (None, format!("authentication not completed: {e:#}")))
}
