//! UDP data-plane header: owns the 16-byte datagram header layout and its encode/decode; must not do I/O,
//! allocate, or decide what to send.
//!
//! Layout (big endian): `kind u8 | flags u8 | reserved u16 | session u32 | seq u64`. The top two bits of
//! `kind` are always 0 so a datagram never looks like QUIC (which sets 0x40) on a shared port.

/// Length of the header at the start of every wirebench UDP datagram, in bytes.
pub const HEADER_LEN: usize = 16;
/// Largest UDP payload over IPv4 (65535 − 20 IP − 8 UDP), in bytes.
pub const MAX_UDP_PAYLOAD_V4: usize = 65507;
/// Largest UDP payload over IPv6 (65535 − 8 UDP; the IPv6 header is not counted in its length), in bytes.
pub const MAX_UDP_PAYLOAD_V6: usize = 65527;
/// Flags bit 0: this copy is a retransmission.
pub const FLAG_RETRANSMIT: u8 = 0x01;

/// Largest message (payload after the header) that fits one UDP datagram, in bytes.
pub fn max_message_size(ipv6: bool) -> u32 {
    let payload = if ipv6 {
        MAX_UDP_PAYLOAD_V6
    } else {
        MAX_UDP_PAYLOAD_V4
    };
    // Both payload limits are constants below 65536, so the cast cannot truncate.
    (payload - HEADER_LEN) as u32
}

/// Whether a datagram starting with `first_byte` may be ours rather than QUIC (which always sets bit 0x40).
pub fn looks_like_ours(first_byte: u8) -> bool {
    first_byte & 0xC0 == 0
}

/// What a datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A message: the header is followed by the payload (0x01).
    Data,
    /// An acknowledgement of the data datagram with the same seq; no payload (0x02).
    Ack,
    /// A request-response session's request: the header is followed by the request bytes (0x03).
    Request,
    /// The answer to the request with the same seq: the header is followed by the response bytes (0x04).
    Response,
    /// Address validation (0x05): a client's hello, carrying the session's token after the
    /// header, or the server's echo of it (header only); see `crate::security::amplification`. A reversed
    /// session's data goes to the latest valid hello's source address.
    Hello,
}

/// The decoded header of one wirebench UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Header {
    /// Data or acknowledgement.
    pub kind: Kind,
    /// This copy is a retransmission (flags bit 0).
    pub retransmit: bool,
    /// Session id given by the server's `Accepted` message.
    pub session: u32,
    /// Message index, 0-based.
    pub seq: u64,
}

/// Why bytes are not a wirebench datagram header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer than [`HEADER_LEN`] bytes.
    #[error("datagram of {len} bytes is shorter than the 16-byte wirebench header")]
    TooShort {
        /// The length that was available.
        len: usize,
    },
    /// The kind byte is none of 0x01 (data), 0x02 (ack), 0x03 (request), 0x04 (response),
    /// 0x05 (hello).
    #[error(
        "datagram kind 0x{0:02x} is not a wirebench kind (expected 0x01 data, 0x02 ack, 0x03 request, 0x04 response or 0x05 hello)"
    )]
    UnknownKind(u8),
}

impl Kind {
    /// The byte on the wire.
    pub fn to_byte(self) -> u8 {
        match self {
            Kind::Data => 0x01,
            Kind::Ack => 0x02,
            Kind::Request => 0x03,
            Kind::Response => 0x04,
            Kind::Hello => 0x05,
        }
    }

    /// The kind for a byte on the wire.
    pub fn from_byte(byte: u8) -> Result<Kind, WireError> {
        match byte {
            0x01 => Ok(Kind::Data),
            0x02 => Ok(Kind::Ack),
            0x03 => Ok(Kind::Request),
            0x04 => Ok(Kind::Response),
            0x05 => Ok(Kind::Hello),
            other => Err(WireError::UnknownKind(other)),
        }
    }
}

impl Header {
    /// A data header for the first copy of message `seq`.
    pub fn data(session: u32, seq: u64) -> Header {
        Header {
            kind: Kind::Data,
            retransmit: false,
            session,
            seq,
        }
    }

    /// An acknowledgement header for message `seq`.
    pub fn ack(session: u32, seq: u64) -> Header {
        Header {
            kind: Kind::Ack,
            retransmit: false,
            session,
            seq,
        }
    }

    /// Writes the header; reserved bits and unused flags are written as 0.
    pub fn encode(&self, out: &mut [u8; HEADER_LEN]) {
        out[0] = self.kind.to_byte();
        out[1] = if self.retransmit { FLAG_RETRANSMIT } else { 0 };
        out[2..4].copy_from_slice(&[0, 0]);
        out[4..8].copy_from_slice(&self.session.to_be_bytes());
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf` (the rest is left as is).
    pub fn write_to(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let len = buf.len();
        let out: &mut [u8; HEADER_LEN] = buf
            .get_mut(..HEADER_LEN)
            .and_then(|head| head.try_into().ok())
            .ok_or(WireError::TooShort { len })?;
        self.encode(out);
        Ok(())
    }

    /// Reads the header from the start of `buf`; unknown flags and the reserved field are ignored so later
    /// versions can use them.
    pub fn decode(buf: &[u8]) -> Result<Header, WireError> {
        let bytes: &[u8; HEADER_LEN] = buf
            .get(..HEADER_LEN)
            .and_then(|head| head.try_into().ok())
            .ok_or(WireError::TooShort { len: buf.len() })?;
        let kind = Kind::from_byte(bytes[0])?;
        let [_, flags, _, _, s0, s1, s2, s3, q0, q1, q2, q3, q4, q5, q6, q7] = *bytes;
        Ok(Header {
            kind,
            retransmit: flags & FLAG_RETRANSMIT != 0,
            session: u32::from_be_bytes([s0, s1, s2, s3]),
            seq: u64::from_be_bytes([q0, q1, q2, q3, q4, q5, q6, q7]),
        })
    }
}

/// Whether a datagram of `datagram_len` bytes with this header is a data message of the session
/// `session` that moves `total_bytes` in messages of `msg_size`: kind data, the session's id, a
/// seq below the session's message count, and exactly that message's length. The receiver counts
/// anything else as malformed.
pub fn is_session_data(
    header: &Header,
    datagram_len: usize,
    session: u32,
    total_bytes: u64,
    msg_size: u32,
) -> bool {
    header.kind == Kind::Data
        && header.session == session
        && header.seq < crate::vocab::plan::message_count(total_bytes, msg_size)
        && datagram_len
            == HEADER_LEN
                + crate::vocab::plan::message_len(header.seq, total_bytes, msg_size) as usize
}

/// Bytes of a data payload that carry the sender's timestamp (when the payload has that many).
pub const TIMESTAMP_LEN: usize = 4;

/// Writes the sender's timestamp (microseconds since its session started, modulo 2^32) at the
/// start of a data payload, for the receiver's jitter estimate; a payload shorter than
/// [`TIMESTAMP_LEN`] carries none.
pub fn write_timestamp(payload: &mut [u8], sent_us: u32) {
    if let Some(slot) = payload.get_mut(..TIMESTAMP_LEN) {
        slot.copy_from_slice(&sent_us.to_be_bytes());
    }
}

/// The sender's timestamp at the start of a data payload; `None` for a shorter payload.
pub fn read_timestamp(payload: &[u8]) -> Option<u32> {
    let bytes: [u8; TIMESTAMP_LEN] = payload.get(..TIMESTAMP_LEN)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

/// Bytes at the start of a request-response answer that carry the server's stamps when the
/// client asked for them ([`RrParams::stamps`](crate::wire::proto::RrParams::stamps)): when
/// the request arrived and when the answer left, each `i64` nanoseconds since the Unix epoch on
/// the server's clock, big endian.
pub const STAMPS_LEN: usize = 16;

/// Writes the server's stamps at the start of an answer's payload; false when the payload is
/// shorter than [`STAMPS_LEN`].
pub fn write_stamps(payload: &mut [u8], received_ns: i64, sent_ns: i64) -> bool {
    let Some(slot) = payload.get_mut(..STAMPS_LEN) else {
        return false;
    };
    slot[..8].copy_from_slice(&received_ns.to_be_bytes());
    slot[8..].copy_from_slice(&sent_ns.to_be_bytes());
    true
}

/// The server's stamps (received, sent) at the start of an answer's payload; `None` for a
/// shorter payload.
pub fn read_stamps(payload: &[u8]) -> Option<(i64, i64)> {
    let received: [u8; 8] = payload.get(..8)?.try_into().ok()?;
    let sent: [u8; 8] = payload.get(8..STAMPS_LEN)?.try_into().ok()?;
    Some((i64::from_be_bytes(received), i64::from_be_bytes(sent)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_exact_bytes() {
        let header = Header {
            kind: Kind::Data,
            retransmit: true,
            session: 0x0102_0304,
            seq: 0x1122_3344_5566_7788,
        };
        let mut out = [0xAA; HEADER_LEN];
        header.encode(&mut out);
        assert_eq!(
            out,
            [
                0x01, 0x01, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                0x88
            ]
        );
        Header::ack(7, 1).encode(&mut out);
        assert_eq!(out, [0x02, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn round_trip() {
        for header in [
            Header::data(0, 0),
            Header::ack(u32::MAX, u64::MAX),
            Header {
                kind: Kind::Data,
                retransmit: true,
                session: 42,
                seq: 1 << 40,
            },
        ] {
            let mut out = [0; HEADER_LEN];
            header.encode(&mut out);
            assert_eq!(Header::decode(&out), Ok(header));
        }
    }

    #[test]
    fn write_to_leaves_payload_alone() {
        let mut buf = [0xEE; 20];
        Header::data(1, 2).write_to(&mut buf).unwrap();
        assert_eq!(
            buf[..HEADER_LEN],
            [1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
        );
        assert_eq!(buf[HEADER_LEN..], [0xEE; 4]);
        assert_eq!(
            Header::data(1, 2).write_to(&mut [0; 15]),
            Err(WireError::TooShort { len: 15 })
        );
    }

    #[test]
    fn decode_ignores_payload_unknown_flags_and_reserved() {
        let mut buf = vec![0x01, 0xFE, 0xAB, 0xCD, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 3];
        buf.extend_from_slice(b"payload");
        assert_eq!(Header::decode(&buf), Ok(Header::data(9, 3)));
    }

    #[test]
    fn decode_rejects_short_and_unknown() {
        assert_eq!(Header::decode(&[]), Err(WireError::TooShort { len: 0 }));
        assert_eq!(
            Header::decode(&[1; 15]),
            Err(WireError::TooShort { len: 15 })
        );
        let mut quic_like = [0u8; HEADER_LEN];
        quic_like[0] = 0x40;
        assert_eq!(
            Header::decode(&quic_like),
            Err(WireError::UnknownKind(0x40))
        );
        assert_eq!(
            Header::decode(&[0; HEADER_LEN]),
            Err(WireError::UnknownKind(0))
        );
        assert_eq!(
            WireError::UnknownKind(0xC3).to_string(),
            "datagram kind 0xc3 is not a wirebench kind (expected 0x01 data, 0x02 ack, 0x03 request, 0x04 response or 0x05 hello)"
        );
    }

    #[test]
    fn demultiplexing_from_quic() {
        assert!(looks_like_ours(Kind::Data.to_byte()));
        assert!(looks_like_ours(Kind::Ack.to_byte()));
        assert!(!looks_like_ours(0x40));
        assert!(!looks_like_ours(0xC0));
        assert!(!looks_like_ours(0x80));
        assert!(looks_like_ours(0x3F));
    }

    #[test]
    fn request_and_response_kinds() {
        let mut out = [0u8; HEADER_LEN];
        let request = Header {
            kind: Kind::Request,
            retransmit: true,
            session: 5,
            seq: 9,
        };
        request.encode(&mut out);
        assert_eq!(out, [0x03, 0x01, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9]);
        assert_eq!(Header::decode(&out), Ok(request));
        out[0] = 0x04;
        assert_eq!(Header::decode(&out).map(|h| h.kind), Ok(Kind::Response));
        assert!(looks_like_ours(Kind::Request.to_byte()));
        assert!(looks_like_ours(Kind::Response.to_byte()));
        assert_eq!(Kind::from_byte(0x05), Ok(Kind::Hello));
        assert!(looks_like_ours(Kind::Hello.to_byte()));
        assert_eq!(Kind::from_byte(0x06), Err(WireError::UnknownKind(0x06)));
    }

    #[test]
    fn session_data_checks() {
        // 250 bytes in messages of 100: seqs 0 and 1 of 100 bytes, seq 2 of 50.
        let ok = |h: Header, len: usize| is_session_data(&h, len, 7, 250, 100);
        assert!(ok(Header::data(7, 0), 116));
        assert!(ok(Header::data(7, 2), 66));
        assert!(!ok(Header::data(7, 2), 116), "the last message is shorter");
        assert!(!ok(Header::data(7, 3), 16), "beyond the session");
        assert!(!ok(Header::data(7, u64::MAX), 16));
        assert!(!ok(Header::data(8, 0), 116), "another session");
        assert!(!ok(Header::ack(7, 0), 116), "not data");
        // A huge session: the count and lengths do not overflow.
        assert!(is_session_data(
            &Header::data(1, u64::MAX - 1),
            17,
            1,
            u64::MAX,
            1
        ));
    }

    #[test]
    fn message_size_limits() {
        assert_eq!(max_message_size(false), 65_491);
        assert_eq!(max_message_size(true), 65_511);
    }

    #[test]
    fn timestamps_ride_in_payloads_of_four_bytes_or_more() {
        let mut payload = [0u8; 6];
        write_timestamp(&mut payload, 0xDEAD_BEEF);
        assert_eq!(read_timestamp(&payload), Some(0xDEAD_BEEF));
        let mut short = [0u8; 3];
        write_timestamp(&mut short, 7);
        assert_eq!(short, [0; 3], "too short: left alone");
        assert_eq!(read_timestamp(&short), None);
    }

    #[test]
    fn stamps_round_trip_and_need_room() {
        let mut payload = [0u8; STAMPS_LEN + 3];
        assert!(write_stamps(&mut payload, 1_800_000_000_123_456_789, -5));
        assert_eq!(read_stamps(&payload), Some((1_800_000_000_123_456_789, -5)));
        assert!(!write_stamps(&mut payload[..STAMPS_LEN - 1], 1, 2));
        assert_eq!(read_stamps(&payload[..STAMPS_LEN - 1]), None);
    }
}
