//! QUIC perf interoperability (draft-banks-quic-performance-00, ALPN `perf`): owns the perf
//! client of `wirebench run --proto quic --perf-server` and the protocol pieces of the
//! server's perf side (which `flows::server` serves through its gate); must not define the
//! framing (that is `wirebench_core::wire::perf`) nor touch wirebench's own QUIC sessions.

pub mod client;
pub mod server;

use bytes::Bytes;

/// Size of the shared payload buffer that uploads and responses are sliced from.
pub(crate) const CHUNK: usize = 64 * 1024;

/// The payload both ends send: one buffer, sliced without copying.
pub(crate) fn payload() -> Bytes {
    Bytes::from(
        (0..CHUNK)
            .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
            .collect::<Vec<u8>>(),
    )
}

/// Writes exactly `n` bytes of payload to `stream`.
async fn send_bytes(stream: &mut quinn::SendStream, mut n: u64) -> Result<(), quinn::WriteError> {
    let data = payload();
    while n > 0 {
        let take = n.min(CHUNK as u64) as usize;
        stream.write_chunk(data.slice(..take)).await?;
        n -= take as u64;
    }
    Ok(())
}

/// Reads `stream` to its FIN, counting bytes without copying them.
async fn drain(stream: &mut quinn::RecvStream) -> Result<u64, quinn::ReadError> {
    let mut total = 0u64;
    while let Some(chunk) = stream.read_chunk(usize::MAX, true).await? {
        total += chunk.bytes.len() as u64;
    }
    Ok(total)
}
