//! The perf side of the wirebench server's QUIC endpoint, as far as the protocol goes: which
//! connections speak the draft (ALPN `perf`), how a stream's request is read and how a broken
//! stream is refused. Serving them — one session per connection, through the server's gate —
//! is `flows::server`'s; this module must not touch wirebench sessions.

use quinn::VarInt;
use wirebench_core::wire::perf::{self, REQUEST_LEN};

/// Application error code sent when a stream breaks the protocol (ends inside its request).
pub const PROTOCOL_ERROR: u32 = 1;

/// Application error code of a connection or stream the server refused (a limit).
pub const REFUSED: u32 = 2;

/// Whether the connection negotiated the perf ALPN.
pub fn is_perf(connection: &quinn::Connection) -> bool {
    connection
        .handshake_data()
        .and_then(|h| h.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|h| h.protocol)
        .is_some_and(|p| p == perf::ALPN)
}

/// Reads a stream's 8-byte request: the bytes the client wants back. A stream that ends
/// inside it is reset both ways and the error says so.
pub async fn read_request(
    send: &mut quinn::SendStream,
    recv: &mut quinn::RecvStream,
) -> Result<u64, String> {
    let mut request = [0u8; REQUEST_LEN];
    if recv.read_exact(&mut request).await.is_err() {
        let _ = send.reset(VarInt::from_u32(PROTOCOL_ERROR));
        let _ = recv.stop(VarInt::from_u32(PROTOCOL_ERROR));
        return Err("a perf stream ended inside its 8-byte request".into());
    }
    Ok(perf::decode_request(request))
}
