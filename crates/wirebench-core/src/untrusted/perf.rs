//! Harness for the 8-byte request that opens a QUIC perf stream (what any perf client may send
//! the server): owns feeding it in arbitrary pieces to the request reader and checking it
//! decodes to what the encoder makes; must not do I/O.

use super::cursor::Cursor;
use crate::wire::perf::{decode_request, encode_request, RequestReader, REQUEST_LEN};

/// Feeds `data` to a request reader in pieces whose sizes the input picks; the request, once
/// complete, must be the first eight bytes and round-trip through the encoder.
pub fn perf_requests(data: &[u8]) {
    let mut sizes = Cursor::new(data);
    let mut reader = RequestReader::default();
    let mut fed = 0usize;
    let mut request = None;
    while fed < data.len() && request.is_none() {
        let piece = usize::from(sizes.u8() % 4) + 1;
        let given = piece.min(data.len() - fed);
        let (took, done) = reader.feed(&data[fed..fed + given]);
        if done.is_none() {
            assert_eq!(took, given, "an incomplete request left bytes untaken");
        }
        assert!(took <= given, "the reader took more than it was given");
        fed += took;
        request = done;
    }
    if let Some(wanted) = request {
        assert_eq!(fed, REQUEST_LEN);
        let mut head = [0u8; REQUEST_LEN];
        head.copy_from_slice(&data[..REQUEST_LEN]);
        assert_eq!(wanted, decode_request(head));
        assert_eq!(encode_request(wanted), head);
    } else {
        assert!(data.len() < REQUEST_LEN && !reader.is_complete());
    }
}
