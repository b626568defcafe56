//! The pre-shared key on the client's side and the I/O around it: loads `--psk FILE`, draws
//! nonces from the OS, and runs the client's half of the challenge-response on a control
//! connection. The MAC itself and its exact input live in `wirebench_core::security::auth`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rand::RngCore;
use tokio::net::TcpStream;
use wirebench_core::security::auth::{self, Psk, CLIENT_LABEL, MAC_LEN, NONCE_LEN, SERVER_LABEL};
use wirebench_core::wire::proto::ControlMessage;

use super::frame;
use wirebench_core::vocab::error::UsageError;

/// What a client without a key tells a server that challenges it (and the server's notice).
pub const NO_KEY_REASON: &str = "the client has no pre-shared key (it must pass --psk FILE)";

/// Reads a key file (`--psk FILE`, format in `wirebench_core::security::auth::Psk::from_file_contents`);
/// an unreadable file or a short key is a usage error naming the file.
pub fn load_psk(path: &Path) -> Result<Arc<Psk>, UsageError> {
    let contents =
        crate::transport::files::read_at_most(path, crate::transport::files::KEY_FILE_MAX)
            .map_err(|e| {
                UsageError(format!(
                    "--psk {}: cannot read the key file: {e}",
                    path.display()
                ))
            })?;
    Psk::from_file_contents(&contents)
        .map(Arc::new)
        .map_err(|e| UsageError(format!("--psk {}: {e}", path.display())))
}

/// A fresh random nonce from the OS.
pub fn nonce() -> Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    rand::rngs::OsRng
        .try_fill_bytes(&mut n)
        .context("cannot draw a random nonce from the OS")?;
    Ok(n)
}

/// The client's half: `answer` is the server's first reply to the request whose frame body is
/// `request`. A challenge is answered with the key (or refused without one), the server's
/// proof is checked, and the server's next message (accepted or rejected) is returned. Without
/// a challenge, `answer` is returned as is, unless the client holds a key: then the server is
/// refused, since it proved nothing.
pub async fn client_handshake(
    ctrl: &mut TcpStream,
    answer: ControlMessage,
    request: &[u8],
    psk: Option<&Psk>,
) -> Result<ControlMessage> {
    let server_nonce = match (answer, psk) {
        (ControlMessage::AuthChallenge { nonce }, Some(_)) => {
            auth::from_hex::<NONCE_LEN>(&nonce, "the server's nonce")?
        }
        (ControlMessage::AuthChallenge { .. }, None) => {
            let _ = frame::send(
                ctrl,
                &ControlMessage::Error {
                    reason: NO_KEY_REASON.into(),
                },
            )
            .await;
            bail!("this server requires a pre-shared key: pass --psk FILE");
        }
        (m @ (ControlMessage::Rejected { .. } | ControlMessage::Error { .. }), _) => return Ok(m),
        (_, Some(_)) => bail!(
            "the server did not ask for the pre-shared key: it runs without --psk, or it is not the server you expect"
        ),
        (other, None) => return Ok(other),
    };
    let Some(psk) = psk else {
        bail!("this server requires a pre-shared key: pass --psk FILE");
    };
    let client_nonce = nonce()?;
    let mac = psk.mac(CLIENT_LABEL, &server_nonce, &client_nonce, request);
    frame::send(
        ctrl,
        &ControlMessage::AuthResponse {
            nonce: auth::to_hex(&client_nonce),
            mac: auth::to_hex(&mac),
        },
    )
    .await?;
    match frame::recv_setup(ctrl)
        .await
        .context("the server did not answer the authentication")?
    {
        ControlMessage::AuthOk { mac } => {
            let mac = auth::from_hex::<MAC_LEN>(&mac, "the server's MAC")?;
            psk.verify(SERVER_LABEL, &server_nonce, &client_nonce, request, &mac)
                .map_err(|_| {
                    anyhow::anyhow!(
                        "authentication failed: the server does not hold the same pre-shared key"
                    )
                })?;
        }
        ControlMessage::Rejected { reason } => bail!("the server refused the session: {reason}"),
        ControlMessage::Error { reason } => bail!("the server reported an error: {reason}"),
        _ => bail!("the server answered the authentication with something unexpected"),
    }
    frame::recv_setup(ctrl)
        .await
        .context("the server did not accept the session")
}
