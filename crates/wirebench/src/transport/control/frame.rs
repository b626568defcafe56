//! The control connection's framing: reads and writes preambles and length-prefixed control
//! messages over any async byte stream. It knows the framing, not what a session does.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use wirebench_core::wire::proto::{self, ControlMessage, Preamble, PREAMBLE_LEN};

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
    // One check against the smaller of the flag and the protocol's own bound; a frame over a
    // flag set below that bound is named by the flag.
    let len = match proto::frame_len_within(header, max) {
        Ok(len) => len,
        Err(proto::ProtoError::Oversized { len, limit })
            if limit == max && max < proto::MAX_CONTROL_FRAME =>
        {
            bail!("control message of {len} bytes is longer than this server allows: at most {max} bytes (--max-control-size)")
        }
        Err(e) => return Err(e.into()),
    };
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
