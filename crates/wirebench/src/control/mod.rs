//! The framed control connection: reads and writes preambles and length-prefixed control
//! messages over any async byte stream. It knows the framing, not what a session does.

pub mod auth;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use wirebench_core::proto::{self, ControlMessage, Preamble, PREAMBLE_LEN};

/// How long a peer may take to send its preamble or a control message we are waiting for
/// during set-up, before we give up on it.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads the 16-byte preamble that opens every connection and decodes it. It waits as long as
/// the peer takes: callers bound it (the server's --hello-timeout, [`SETUP_TIMEOUT`]).
pub async fn read_preamble<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Preamble> {
    let mut raw = [0u8; PREAMBLE_LEN];
    reader
        .read_exact(&mut raw)
        .await
        .context("while reading the connection preamble")?;
    Ok(Preamble::decode(&raw)?)
}

/// Writes a preamble.
pub async fn write_preamble<W: AsyncWrite + Unpin>(writer: &mut W, p: &Preamble) -> Result<()> {
    writer
        .write_all(&p.encode())
        .await
        .context("while writing the connection preamble")
}

/// Writes one control message as a frame and flushes it.
pub async fn send<W: AsyncWrite + Unpin>(writer: &mut W, msg: &ControlMessage) -> Result<()> {
    let mut frame = Vec::with_capacity(256);
    proto::encode_frame(msg, &mut frame);
    writer
        .write_all(&frame)
        .await
        .context("while sending a control message")?;
    writer
        .flush()
        .await
        .context("while sending a control message")
}

/// Reads one control message. `Ok(None)` means the peer closed the connection cleanly between
/// frames; a close inside a frame, an oversized or malformed frame is an error.
pub async fn recv<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Option<ControlMessage>> {
    Ok(recv_raw(reader).await?.map(|(msg, _body)| msg))
}

/// Like [`recv`], refusing a frame whose body is longer than `max` bytes before reading it (a
/// server's `--max-control-size`).
pub async fn recv_max<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<ControlMessage>> {
    Ok(recv_raw_max(reader, max).await?.map(|(msg, _body)| msg))
}

/// Like [`recv`], also returning the frame's body exactly as received (what a pre-shared-key
/// MAC covers).
pub async fn recv_raw<R: AsyncRead + Unpin>(
    reader: &mut R,
) -> Result<Option<(ControlMessage, Vec<u8>)>> {
    recv_raw_max(reader, proto::MAX_CONTROL_FRAME).await
}

/// [`recv_raw`] with a limit of `max` body bytes.
pub async fn recv_raw_max<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<(ControlMessage, Vec<u8>)>> {
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < header.len() {
        let n = reader
            .read(&mut header[got..])
            .await
            .context("while reading a control message")?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            bail!("control connection closed inside a frame header");
        }
        got += n;
    }
    let len = proto::frame_len(header)?;
    if len > max {
        bail!("control message of {len} bytes is longer than this server allows: at most {max} bytes (--max-control-size)");
    }
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .await
        .context("control connection closed inside a frame")?;
    let msg = proto::decode_body(&body)?;
    Ok(Some((msg, body)))
}

/// Reads one control message within [`SETUP_TIMEOUT`]; a closed connection is an error here.
pub async fn recv_setup<R: AsyncRead + Unpin>(reader: &mut R) -> Result<ControlMessage> {
    match tokio::time::timeout(SETUP_TIMEOUT, recv(reader)).await {
        Err(_) => bail!("peer sent no control message within {SETUP_TIMEOUT:?}"),
        Ok(r) => r?.context("peer closed the control connection"),
    }
}

/// How long a closing connection may keep sending before we stop draining it.
const CLOSE_DRAIN: Duration = Duration::from_secs(1);

/// Closes a TCP connection so that what we wrote last (an error frame, a report) reaches the
/// peer: closing with unread input would make the kernel send a reset that can destroy it. We
/// send FIN, then discard input until the peer closes, 1 MiB, or one second has passed.
pub async fn close_gracefully(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let mut budget: usize = 1 << 20;
    let _ = tokio::time::timeout(CLOSE_DRAIN, async {
        while budget > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => budget = budget.saturating_sub(n),
            }
        }
    })
    .await;
}

/// What the server answered to a session request: the session's id and token, and for QUIC the
/// certificate to pin.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The session id, for data preambles and UDP headers.
    pub session: u32,
    /// The token data connections present.
    pub token: u32,
    /// QUIC: the server's certificate (DER).
    pub quic_cert: Option<Vec<u8>>,
}

/// Opens a control connection to `server` and asks for a session with `request`; returns the
/// connection and what the server granted, or the server's refusal as the error.
pub async fn request_session(
    server: std::net::SocketAddr,
    request: &ControlMessage,
) -> Result<(TcpStream, Accepted)> {
    request_session_auth(server, request, None).await
}

/// Like [`request_session`]; with a pre-shared key, answers the server's challenge and checks
/// the server's proof (see [`auth`]), and refuses a server that never asks for the key.
pub async fn request_session_auth(
    server: std::net::SocketAddr,
    request: &ControlMessage,
    psk: Option<&wirebench_core::auth::Psk>,
) -> Result<(TcpStream, Accepted)> {
    let mut ctrl = TcpStream::connect(server)
        .await
        .with_context(|| format!("cannot connect to the server at {server}"))?;
    // Control messages are small and answered at once: Nagle would only delay them.
    let _ = ctrl.set_nodelay(true);
    write_preamble(&mut ctrl, &Preamble::control()).await?;
    // The request's exact bytes are part of what a pre-shared-key MAC covers.
    let mut frame = Vec::with_capacity(256);
    proto::encode_frame(request, &mut frame);
    ctrl.write_all(&frame)
        .await
        .context("while sending a control message")?;
    let answer = recv_setup(&mut ctrl)
        .await
        .context("the server did not accept the session")?;
    let answer = auth::client_handshake(&mut ctrl, answer, &frame[4..], psk).await?;
    match answer {
        ControlMessage::Accepted {
            session,
            token,
            quic_cert,
        } => Ok((
            ctrl,
            Accepted {
                session,
                token,
                quic_cert,
            },
        )),
        ControlMessage::Rejected { reason } => bail!("the server refused the session: {reason}"),
        ControlMessage::Error { reason } => bail!("the server reported an error: {reason}"),
        _ => bail!("the server answered the session request with something unexpected"),
    }
}

/// Waits for the server's report that ends a session.
pub async fn read_report(ctrl: &mut TcpStream) -> Result<proto::ServerReport> {
    match recv(ctrl)
        .await
        .context("while waiting for the server's report")?
    {
        Some(ControlMessage::Report(r)) => Ok(*r),
        Some(ControlMessage::Error { reason }) => bail!("the server reported an error: {reason}"),
        Some(_) => bail!("the server sent something other than its report"),
        None => bail!("the server closed the control connection without a report"),
    }
}
