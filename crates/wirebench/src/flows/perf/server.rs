//! The perf side of the wirebench server's QUIC endpoint: a connection that negotiated ALPN
//! `perf` gets, per client-opened bidirectional stream, the draft's request/response (read the
//! 8-byte size, drain the upload to FIN, send that many bytes, finish). Owns only that; must
//! not touch wirebench sessions.

use anyhow::{Context, Result};
use quinn::VarInt;
use wirebench_core::wire::perf::{self, REQUEST_LEN};

/// Application error code sent when a stream breaks the protocol (ends inside its request).
const PROTOCOL_ERROR: u32 = 1;

/// Whether the connection negotiated the perf ALPN.
pub fn is_perf(connection: &quinn::Connection) -> bool {
    connection
        .handshake_data()
        .and_then(|h| h.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|h| h.protocol)
        .is_some_and(|p| p == perf::ALPN)
}

/// Serves every stream of one perf connection until the client closes it. A misbehaving
/// stream is reset; it never ends the connection or the server.
pub async fn serve(connection: quinn::Connection) -> Result<()> {
    loop {
        let (send, recv) = match connection.accept_bi().await {
            Ok(s) => s,
            // The client closing the connection is how a perf session ends.
            Err(quinn::ConnectionError::ApplicationClosed(_))
            | Err(quinn::ConnectionError::LocallyClosed) => return Ok(()),
            Err(e) => return Err(anyhow::Error::from(e).context("perf connection ended")),
        };
        tokio::spawn(async move {
            let _ = serve_stream(send, recv).await;
        });
    }
}

/// One request: size, upload to FIN, response, FIN.
async fn serve_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream) -> Result<()> {
    let mut request = [0u8; REQUEST_LEN];
    if recv.read_exact(&mut request).await.is_err() {
        let _ = send.reset(VarInt::from_u32(PROTOCOL_ERROR));
        let _ = recv.stop(VarInt::from_u32(PROTOCOL_ERROR));
        anyhow::bail!("a perf stream ended inside its 8-byte request");
    }
    let wanted = perf::decode_request(request);
    super::drain(&mut recv)
        .await
        .context("while reading a perf upload")?;
    super::send_bytes(&mut send, wanted)
        .await
        .context("while sending a perf response")?;
    send.finish().context("while finishing a perf response")?;
    // Wait until the client has it all (or gave up), so the FIN is not cut by a close.
    let _ = send.stopped().await;
    Ok(())
}
