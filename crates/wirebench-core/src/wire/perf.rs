//! QUIC "perf" protocol framing (draft-banks-quic-performance-00): owns the ALPN name and the
//! 8-byte request on each stream; must not do I/O.
//!
//! What the draft says and we implement: the client opens a bidirectional stream, writes the
//! number of bytes it wants back as an unsigned 64-bit integer in network byte order, then
//! uploads any amount of data and finishes (FIN) the stream. The server reads the 8 bytes,
//! discards the upload until FIN, then sends the requested number of bytes and finishes. A
//! stream that ends before its 8 bytes arrived is malformed. Not implemented: the draft's
//! unidirectional-stream variant and its datagram-based tests.

/// ALPN protocol name the draft registers for perf connections.
pub const ALPN: &[u8] = b"perf";
/// The draft this module follows.
pub const DRAFT: &str = "draft-banks-quic-performance-00";
/// Length of the request at the start of each stream, bytes.
pub const REQUEST_LEN: usize = 8;

/// The request that opens a stream: how many bytes the client wants back.
pub fn encode_request(bytes_wanted: u64) -> [u8; REQUEST_LEN] {
    bytes_wanted.to_be_bytes()
}

/// Reads the request that opened a stream.
pub fn decode_request(request: [u8; REQUEST_LEN]) -> u64 {
    u64::from_be_bytes(request)
}

/// Collects the request from however the stream's first bytes arrive, then tells where the
/// upload starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestReader {
    buf: [u8; REQUEST_LEN],
    have: usize,
}

impl RequestReader {
    /// Feeds bytes read from the stream; returns the request once complete and how many bytes
    /// of `data` belonged to it (the rest is upload).
    pub fn feed(&mut self, data: &[u8]) -> (usize, Option<u64>) {
        let take = (REQUEST_LEN - self.have).min(data.len());
        self.buf[self.have..self.have + take].copy_from_slice(&data[..take]);
        self.have += take;
        let done = (self.have == REQUEST_LEN).then(|| decode_request(self.buf));
        (take, done)
    }

    /// Whether the request is complete.
    pub fn is_complete(&self) -> bool {
        self.have == REQUEST_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_an_unsigned_64_bit_integer_in_network_byte_order() {
        // "a 64-bit unsigned integer in network byte order" (draft-banks-quic-performance-00).
        assert_eq!(encode_request(1), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(
            encode_request(0x0102_0304_0506_0708),
            [1, 2, 3, 4, 5, 6, 7, 8]
        );
        assert_eq!(decode_request([0xff; 8]), u64::MAX);
        assert_eq!(decode_request(encode_request(0)), 0);
        assert_eq!(ALPN, b"perf");
    }

    #[test]
    fn request_reader_splits_request_from_upload_across_reads() {
        let mut r = RequestReader::default();
        assert_eq!(r.feed(&[0, 0, 0]), (3, None));
        assert!(!r.is_complete());
        // The rest of the request and the first upload bytes in one read.
        assert_eq!(
            r.feed(&[0, 0, 0x10, 0, 0, 0xaa, 0xbb]),
            (5, Some(0x10_0000))
        );
        assert!(r.is_complete());
        // Later reads are all upload.
        assert_eq!(r.feed(&[1, 2, 3]), (0, Some(0x10_0000)));
    }
}
