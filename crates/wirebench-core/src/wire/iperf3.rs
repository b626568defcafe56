//! iperf3's wire formats: owns the control-connection state bytes, the 37-byte cookie, the
//! length-prefixed JSON parameter and result documents, the UDP connect magic, the UDP datagram
//! header and the receiver's UDP loss/jitter accounting; must not do I/O or read clocks.
//!
//! Written from iperf3's observable behaviour (Debian's iperf3 3.12 on loopback) and public
//! descriptions of its protocol, not from its source:
//! - every TCP connection (control and data) opens with a 37-byte cookie: 36 printable
//!   characters and a NUL; data connections repeat the control connection's cookie;
//! - the server drives the test with one signed state byte per step ([`State`]); the client
//!   answers `PARAM_EXCHANGE` with its parameters and ends with `TEST_END` / `IPERF_DONE`;
//! - JSON documents travel as a 4-byte big-endian length and the JSON text;
//! - a UDP stream starts with the client's 4-byte datagram `9876` and the server's reply `6789`;
//! - every UDP datagram starts with `sec u32 | usec u32 | count u32` (or `count u64` with
//!   64-bit counters), big endian, the count starting at 1.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

/// The port iperf3 servers listen on by default.
pub const DEFAULT_PORT: u16 = 5201;
/// Length of the cookie that opens every TCP connection, NUL included.
pub const COOKIE_LEN: usize = 37;
/// Largest JSON document accepted on the control connection (iperf3's own are a few KiB).
pub const MAX_JSON_LEN: u32 = 1 << 20;
/// First datagram of a UDP stream, client to server.
pub const UDP_CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's answer to [`UDP_CONNECT_MSG`].
pub const UDP_CONNECT_REPLY: [u8; 4] = *b"6789";
/// What old iperf3 clients send instead of [`UDP_CONNECT_MSG`] (123456789 in x86 byte order).
pub const LEGACY_UDP_CONNECT_MSG: [u8; 4] = 123_456_789u32.to_le_bytes();
/// What old iperf3 servers answer instead of [`UDP_CONNECT_REPLY`] (987654321 in x86 byte order).
pub const LEGACY_UDP_CONNECT_REPLY: [u8; 4] = 987_654_321u32.to_le_bytes();
/// Largest number of parallel streams a test may ask for (iperf3's own limit is 128).
pub const MAX_PARALLEL: u32 = 128;
/// Largest TCP block length accepted from a client.
pub const MAX_TCP_BLOCK: u32 = 16 << 20;
/// Largest UDP datagram payload (IPv4).
pub const MAX_UDP_BLOCK: u32 = 65_507;

/// Characters a cookie is made of (iperf3's own cookies use this base-32 alphabet).
const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// One step of an iperf3 test, sent as one signed byte on the control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Streams are set up; the test is about to start (1).
    TestStart,
    /// Data may flow (2).
    TestRunning,
    /// The client is done sending or receiving (4).
    TestEnd,
    /// The server asks for the client's parameters (9).
    ParamExchange,
    /// The server waits for the data streams (10).
    CreateStreams,
    /// The server is shutting down (11).
    ServerTerminate,
    /// The client is shutting down (12).
    ClientTerminate,
    /// Both ends send their results (13).
    ExchangeResults,
    /// The client may print its results (14).
    DisplayResults,
    /// Start of the protocol (15), never sent by 3.x peers on the wire.
    IperfStart,
    /// The client is finished (16).
    IperfDone,
    /// The server is busy with another test (-1).
    AccessDenied,
    /// The server failed; two 4-byte error codes follow (-2).
    ServerError,
}

impl State {
    /// The byte on the wire.
    pub fn to_byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfStart => 15,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        v as u8
    }

    /// Decodes a state byte.
    pub fn from_byte(b: u8) -> Result<State, Iperf3Error> {
        Ok(match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            15 => State::IperfStart,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            other => return Err(Iperf3Error::UnknownState(other)),
        })
    }
}

/// Why bytes from an iperf3 peer were refused; one line, for users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Iperf3Error {
    /// A state byte iperf3 does not define.
    #[error("iperf3 peer sent unknown state {0}")]
    UnknownState(i8),
    /// The cookie is not 36 printable characters and a NUL.
    #[error("not an iperf3 cookie (expected 36 printable characters and a NUL)")]
    BadCookie,
    /// A JSON document longer than [`MAX_JSON_LEN`] (or empty).
    #[error("iperf3 peer announced a JSON document of {0} bytes (allowed 1 to 1048576)")]
    JsonLength(u32),
    /// The JSON text does not parse into what was expected.
    #[error("iperf3 peer sent invalid JSON: {0}")]
    Json(String),
    /// The parameters ask for something this implementation does not do.
    #[error("unsupported iperf3 test: {0}")]
    Unsupported(String),
    /// A UDP datagram too short for its header.
    #[error("UDP datagram of {0} bytes is shorter than the iperf3 header")]
    ShortDatagram(usize),
}

/// Makes a cookie from 36 random bytes (the caller owns the randomness).
pub fn make_cookie(random: &[u8; COOKIE_LEN - 1]) -> [u8; COOKIE_LEN] {
    let mut cookie = [0u8; COOKIE_LEN];
    for (c, r) in cookie.iter_mut().zip(random.iter()) {
        *c = COOKIE_ALPHABET[usize::from(*r) % COOKIE_ALPHABET.len()];
    }
    cookie
}

/// Checks that 37 bytes look like a cookie: printable ASCII, then a NUL.
pub fn check_cookie(cookie: &[u8; COOKIE_LEN]) -> Result<(), Iperf3Error> {
    let (body, nul) = cookie.split_at(COOKIE_LEN - 1);
    if nul == [0] && body.iter().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(Iperf3Error::BadCookie)
    }
}

/// Encodes a JSON document with its 4-byte big-endian length in front.
pub fn encode_json<T: Serialize>(value: &T) -> Result<Vec<u8>, Iperf3Error> {
    let text = serde_json::to_vec(value).map_err(|e| Iperf3Error::Json(e.to_string()))?;
    let len = u32::try_from(text.len())
        .ok()
        .filter(|&l| l <= MAX_JSON_LEN)
        .ok_or(Iperf3Error::JsonLength(u32::MAX))?;
    let mut out = Vec::with_capacity(4 + text.len());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&text);
    Ok(out)
}

/// Decodes the 4-byte length prefix of a JSON document, refusing empty and oversized ones.
pub fn json_len(prefix: [u8; 4]) -> Result<usize, Iperf3Error> {
    let len = u32::from_be_bytes(prefix);
    if len == 0 || len > MAX_JSON_LEN {
        return Err(Iperf3Error::JsonLength(len));
    }
    // At most MAX_JSON_LEN, which fits every usize this crate builds for.
    Ok(len as usize)
}

/// Parses the JSON text of a document (after its length prefix). Some iperf3 builds end the
/// text with a NUL; it is ignored.
pub fn decode_json<T: DeserializeOwned>(text: &[u8]) -> Result<T, Iperf3Error> {
    let text = text.strip_suffix(&[0]).unwrap_or(text);
    // serde quotes what the peer sent: made safe to show where it enters.
    serde_json::from_slice(text)
        .map_err(|e| Iperf3Error::Json(crate::security::text::peer_text(&e.to_string())))
}

/// The client's test parameters, sent after `PARAM_EXCHANGE`. Only the fields wirebench uses are
/// typed; the rest are kept (and refused where they change the test) in `other`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct TestParams {
    /// A TCP test.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tcp: bool,
    /// A UDP test.
    #[serde(default, skip_serializing_if = "is_false")]
    pub udp: bool,
    /// Seconds omitted at the start (wirebench clients send 0; servers accept and ignore it).
    #[serde(default, deserialize_with = "lenient_u64")]
    pub omit: u64,
    /// Test length in seconds when neither `num` nor `blockcount` is set.
    #[serde(default, deserialize_with = "lenient_u64")]
    pub time: u64,
    /// Bytes to send over all streams (0 = not a byte-limited test).
    #[serde(default, deserialize_with = "lenient_u64")]
    pub num: u64,
    /// Blocks to send over all streams (0 = not a block-limited test).
    #[serde(default, deserialize_with = "lenient_u64")]
    pub blockcount: u64,
    /// Number of parallel streams.
    #[serde(default = "one", deserialize_with = "lenient_u32")]
    pub parallel: u32,
    /// The server sends, the client receives.
    #[serde(default, skip_serializing_if = "is_false")]
    pub reverse: bool,
    /// Both ends send at once (not supported by wirebench).
    #[serde(default, skip_serializing_if = "is_false")]
    pub bidirectional: bool,
    /// Block length: bytes per write (TCP) or per datagram (UDP).
    #[serde(deserialize_with = "lenient_u32")]
    pub len: u32,
    /// Target rate of each stream in bit/s (0 = unlimited; UDP clients send 1 Mbit/s by default).
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "is_zero"
    )]
    pub bandwidth: u64,
    /// UDP datagrams carry a 64-bit counter (1) instead of a 32-bit one.
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "is_zero"
    )]
    pub udp_counters_64bit: u64,
    /// How often the sender re-checks its pacing, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_timer: Option<u64>,
    /// Version string of the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
    /// Every other field, as sent.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// What a server does with a test it accepted: the validated form of [`TestParams`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestPlan {
    /// UDP instead of TCP.
    pub udp: bool,
    /// The server sends.
    pub reverse: bool,
    /// Number of streams (≥ 1).
    pub parallel: u32,
    /// Bytes per write or datagram (UDP: header included, as iperf3 counts it).
    pub len: u32,
    /// Total bytes over all streams, if byte-limited.
    pub bytes: Option<u64>,
    /// Total blocks over all streams, if block-limited.
    pub blocks: Option<u64>,
    /// Test length in seconds when neither bytes nor blocks limit it.
    pub time_s: u64,
    /// Per-stream rate in bit/s (0 = unlimited).
    pub rate_bps: u64,
    /// 64-bit UDP counters.
    pub counters_64bit: bool,
}

impl TestParams {
    /// Checks the parameters a client sent; says what is not supported.
    pub fn plan(&self) -> Result<TestPlan, Iperf3Error> {
        let unsupported = |what: &str| Err(Iperf3Error::Unsupported(what.to_string()));
        if self.tcp == self.udp {
            return unsupported("the test must be exactly one of TCP and UDP (SCTP is not served)");
        }
        if self.bidirectional {
            return unsupported("--bidir is not served; run forward and -R separately");
        }
        if self.other.contains_key("authtoken") {
            return unsupported("authentication (--username) is not served");
        }
        if self.parallel == 0 || self.parallel > MAX_PARALLEL {
            return Err(Iperf3Error::Unsupported(format!(
                "-P {} is out of range: allowed 1 to {MAX_PARALLEL}",
                self.parallel
            )));
        }
        let counters_64bit = self.udp_counters_64bit != 0;
        let (min, max) = if self.udp {
            (udp_header_len(counters_64bit) as u32, MAX_UDP_BLOCK)
        } else {
            (1, MAX_TCP_BLOCK)
        };
        if self.len < min || self.len > max {
            return Err(Iperf3Error::Unsupported(format!(
                "-l {} is out of range: allowed {min} to {max}",
                self.len
            )));
        }
        Ok(TestPlan {
            udp: self.udp,
            reverse: self.reverse,
            parallel: self.parallel,
            len: self.len,
            bytes: (self.num > 0).then_some(self.num),
            blocks: (self.num == 0 && self.blockcount > 0).then_some(self.blockcount),
            time_s: if self.time == 0 { 10 } else { self.time },
            rate_bps: self.bandwidth,
            counters_64bit,
        })
    }
}

/// One end's results, exchanged after `EXCHANGE_RESULTS`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct TestResults {
    /// CPU use of the whole process during the test, percent.
    #[serde(default)]
    pub cpu_util_total: f64,
    /// User-mode part of `cpu_util_total`, percent.
    #[serde(default)]
    pub cpu_util_user: f64,
    /// Kernel-mode part of `cpu_util_total`, percent.
    #[serde(default)]
    pub cpu_util_system: f64,
    /// 1 when this end sent TCP and counted retransmissions, 0 when it sent without, -1 when it
    /// received.
    #[serde(default, deserialize_with = "lenient_i64")]
    pub sender_has_retransmits: i64,
    /// TCP congestion control in use, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    /// Per-stream figures.
    #[serde(default)]
    pub streams: Vec<StreamResult>,
}

/// One stream's figures in [`TestResults`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct StreamResult {
    /// Stream id; the two ends number streams the same way ([`stream_id`]).
    #[serde(deserialize_with = "lenient_u32")]
    pub id: u32,
    /// Bytes this end sent (sender) or received (receiver) on the stream.
    #[serde(deserialize_with = "lenient_u64")]
    pub bytes: u64,
    /// TCP retransmissions (sender), or -1.
    #[serde(default, deserialize_with = "lenient_i64")]
    pub retransmits: i64,
    /// UDP jitter in seconds (receiver).
    #[serde(default)]
    pub jitter: f64,
    /// UDP datagrams lost (receiver).
    #[serde(default, deserialize_with = "lenient_i64")]
    pub errors: i64,
    /// UDP datagrams sent (sender) or the highest count seen (receiver).
    #[serde(default, deserialize_with = "lenient_i64")]
    pub packets: i64,
    /// Seconds from the test's start to this stream's start.
    #[serde(default)]
    pub start_time: f64,
    /// Seconds from the test's start to this stream's end.
    #[serde(default)]
    pub end_time: f64,
}

impl TestResults {
    /// Sum of `bytes` over all streams (saturating: the figures come from the peer).
    pub fn total_bytes(&self) -> u64 {
        self.streams
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.bytes))
    }

    /// Sum of `packets` over all streams (negative values count as 0; saturating).
    pub fn total_packets(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| u64::try_from(s.packets).unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }

    /// Sum of `errors` (lost datagrams) over all streams (negative values count as 0;
    /// saturating).
    pub fn total_errors(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| u64::try_from(s.errors).unwrap_or(0))
            .fold(0u64, u64::saturating_add)
    }

    /// Longest `end_time` over all streams, seconds.
    pub fn duration_s(&self) -> f64 {
        self.streams.iter().map(|s| s.end_time).fold(0.0, f64::max)
    }
}

/// Id of the `index`-th stream (0-based): iperf3 numbers streams 1, 3, 4, 5, … on both ends.
pub fn stream_id(index: u32) -> u32 {
    if index == 0 {
        1
    } else {
        index.saturating_add(2)
    }
}

/// Length of the UDP datagram header, bytes.
pub fn udp_header_len(counters_64bit: bool) -> usize {
    if counters_64bit {
        16
    } else {
        12
    }
}

/// The header at the start of every iperf3 UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Sender's clock when sending: seconds.
    pub sec: u32,
    /// Sender's clock when sending: microseconds within the second.
    pub usec: u32,
    /// Datagram count, 1 for the first.
    pub count: u64,
}

impl UdpHeader {
    /// Writes the header at the start of `buf` (which must hold [`udp_header_len`] bytes); a
    /// 32-bit count wraps. Returns the header length, or None when `buf` is too short.
    pub fn encode(&self, counters_64bit: bool, buf: &mut [u8]) -> Option<usize> {
        let len = udp_header_len(counters_64bit);
        let head = buf.get_mut(..len)?;
        head[0..4].copy_from_slice(&self.sec.to_be_bytes());
        head[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters_64bit {
            head[8..16].copy_from_slice(&self.count.to_be_bytes());
        } else {
            // 32-bit counters wrap by design; the 64-bit option exists for long runs.
            head[8..12].copy_from_slice(&(self.count as u32).to_be_bytes());
        }
        Some(len)
    }

    /// Reads the header at the start of a datagram.
    pub fn decode(datagram: &[u8], counters_64bit: bool) -> Result<UdpHeader, Iperf3Error> {
        let len = udp_header_len(counters_64bit);
        let Some(head) = datagram.get(..len) else {
            return Err(Iperf3Error::ShortDatagram(datagram.len()));
        };
        let word = |i: usize| u32::from_be_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let count = if counters_64bit {
            (u64::from(word(8)) << 32) | u64::from(word(12))
        } else {
            u64::from(word(8))
        };
        Ok(UdpHeader {
            sec: word(0),
            usec: word(4),
            count,
        })
    }

    /// The send time in seconds.
    pub fn sent_s(&self) -> f64 {
        f64::from(self.sec) + f64::from(self.usec) / 1e6
    }
}

/// A UDP receiver's accounting of one stream: datagrams, highest count, losses, reordering
/// and RFC 3550 interarrival jitter, with arrival times passed in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpReceiver {
    /// Datagrams received, duplicates and late ones included.
    pub datagrams: u64,
    /// Payload bytes received (whole datagrams, as iperf3 counts them).
    pub bytes: u64,
    /// Highest count seen (what iperf3 reports as the receiver's `packets`).
    pub highest: u64,
    /// Counts skipped so far, minus late arrivals that filled a gap.
    pub lost: u64,
    /// Datagrams that arrived with a count at or below the highest already seen.
    pub out_of_order: u64,
    /// Interarrival jitter estimate, seconds.
    pub jitter_s: f64,
    prev_transit_s: Option<f64>,
}

impl UdpReceiver {
    /// Accounts one datagram of `len` bytes carrying `header`, which arrived at `arrival_s` on
    /// the receiver's clock (any origin: only differences matter).
    pub fn on_datagram(&mut self, header: &UdpHeader, len: usize, arrival_s: f64) {
        self.datagrams += 1;
        self.bytes += len as u64;
        if header.count > self.highest {
            self.lost += header.count - self.highest - 1;
            self.highest = header.count;
        } else {
            // A late or repeated datagram: it may fill a gap counted as lost.
            self.out_of_order += 1;
            self.lost = self.lost.saturating_sub(1);
        }
        // RFC 3550 §6.4.1: J += (|D| - J) / 16, D the change in transit time.
        let transit = arrival_s - header.sent_s();
        if let Some(prev) = self.prev_transit_s {
            let d = (transit - prev).abs();
            self.jitter_s += (d - self.jitter_s) / 16.0;
        }
        self.prev_transit_s = Some(transit);
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn one() -> u32 {
    1
}

/// A JSON number as iperf3 writes it: an integer, a float (cJSON prints large integers as
/// floats) or u64::MAX standing for -1.
fn number(value: serde_json::Value) -> Option<f64> {
    match value {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    if let Some(i) = value.as_i64() {
        return Ok(i);
    }
    let f = number(value).ok_or_else(|| serde::de::Error::custom("expected a number"))?;
    // u64::MAX (and its float rendering) is how iperf3 writes -1.
    Ok(if f >= 9.2e18 || !f.is_finite() {
        -1
    } else {
        f as i64
    })
}

fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    if let Some(u) = value.as_u64() {
        return Ok(u);
    }
    let f = number(value).ok_or_else(|| serde::de::Error::custom("expected a number"))?;
    if (0.0..1.8e19).contains(&f) {
        Ok(f as u64)
    } else {
        Err(serde::de::Error::custom("expected a non-negative number"))
    }
}

fn lenient_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = lenient_u64(d)?;
    u32::try_from(v).map_err(|_| serde::de::Error::custom("number too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_bytes_match_the_protocol() {
        let table: [(State, u8); 13] = [
            (State::TestStart, 1),
            (State::TestRunning, 2),
            (State::TestEnd, 4),
            (State::ParamExchange, 9),
            (State::CreateStreams, 10),
            (State::ServerTerminate, 11),
            (State::ClientTerminate, 12),
            (State::ExchangeResults, 13),
            (State::DisplayResults, 14),
            (State::IperfStart, 15),
            (State::IperfDone, 16),
            (State::AccessDenied, 0xff),
            (State::ServerError, 0xfe),
        ];
        for (state, byte) in table {
            assert_eq!(state.to_byte(), byte);
            assert_eq!(State::from_byte(byte), Ok(state));
        }
        assert_eq!(State::from_byte(3), Err(Iperf3Error::UnknownState(3)));
        assert_eq!(State::from_byte(0x80), Err(Iperf3Error::UnknownState(-128)));
    }

    #[test]
    fn totals_of_a_peers_results_saturate() {
        // Found with the iperf3_control harness: a peer's figures summed past u64::MAX panicked.
        let results: TestResults = decode_json(
            br#"{"streams":[{"id":1,"bytes":18446744073709551615,"packets":9223372036854775807,"errors":9223372036854775807},{"id":3,"bytes":1,"packets":9223372036854775807,"errors":9223372036854775807}]}"#,
        )
        .unwrap();
        assert_eq!(results.total_bytes(), u64::MAX);
        assert_eq!(results.total_packets(), u64::MAX - 1);
        assert_eq!(results.total_errors(), u64::MAX - 1);
        let three: TestResults = decode_json(
            br#"{"streams":[{"id":1,"bytes":1,"packets":9223372036854775807},{"id":3,"bytes":2,"packets":9223372036854775807},{"id":4,"bytes":3,"packets":2}]}"#,
        )
        .unwrap();
        assert_eq!(three.total_bytes(), 6);
        assert_eq!(three.total_packets(), u64::MAX);
    }

    #[test]
    fn cookies_are_36_base32_characters_and_a_nul() {
        let cookie = make_cookie(&[0xff; 36]);
        assert_eq!(cookie.len(), 37);
        assert_eq!(cookie[36], 0);
        assert!(cookie[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
        assert_eq!(check_cookie(&cookie), Ok(()));
        let mut bad = cookie;
        bad[36] = b'x';
        assert_eq!(check_cookie(&bad), Err(Iperf3Error::BadCookie));
        let mut bad = cookie;
        bad[3] = 0;
        assert_eq!(check_cookie(&bad), Err(Iperf3Error::BadCookie));
        // A real iperf3 3.12 cookie, as seen on the wire.
        let real: [u8; 37] = *b"aaz7gfymuwuzraqthz7lnhp2l2aqmt56jobi\0";
        assert_eq!(check_cookie(&real), Ok(()));
    }

    #[test]
    fn json_documents_are_length_prefixed_big_endian() {
        let framed = encode_json(&serde_json::json!({"a": 1})).unwrap();
        assert_eq!(&framed[..4], &[0, 0, 0, 7]);
        assert_eq!(&framed[4..], br#"{"a":1}"#);
        assert_eq!(json_len([0, 0, 1, 3]), Ok(259));
        assert_eq!(json_len([0, 0, 0, 0]), Err(Iperf3Error::JsonLength(0)));
        assert_eq!(
            json_len([0xff, 0, 0, 0]),
            Err(Iperf3Error::JsonLength(0xff00_0000))
        );
    }

    #[test]
    fn real_client_parameters_parse_and_plan() {
        // Sent by iperf3 3.12 for `-u -R -P 2 -n 30000 -l 1000 -b 10M`.
        let text = br#"{"udp":true,"omit":0,"time":0,"num":30000,"blockcount":0,"parallel":2,
            "reverse":true,"len":1000,"bandwidth":10000000,"pacing_timer":1000,"client_version":"3.12"}"#;
        let params: TestParams = decode_json(text).unwrap();
        let plan = params.plan().unwrap();
        assert_eq!(
            plan,
            TestPlan {
                udp: true,
                reverse: true,
                parallel: 2,
                len: 1000,
                bytes: Some(30000),
                blocks: None,
                time_s: 10,
                rate_bps: 10_000_000,
                counters_64bit: false,
            }
        );
        let tcp: TestParams = decode_json(
            br#"{"tcp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":1,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#,
        )
        .unwrap();
        let plan = tcp.plan().unwrap();
        assert!(!plan.udp && !plan.reverse);
        assert_eq!((plan.time_s, plan.bytes, plan.len), (3, None, 131072));
    }

    #[test]
    fn unsupported_parameters_say_why() {
        let base = TestParams {
            tcp: true,
            parallel: 1,
            len: 1000,
            ..TestParams::default()
        };
        let mut p = base.clone();
        p.bidirectional = true;
        assert!(matches!(p.plan(), Err(Iperf3Error::Unsupported(m)) if m.contains("bidir")));
        let mut p = base.clone();
        p.udp = true;
        assert!(p.plan().is_err());
        let mut p = base.clone();
        p.parallel = 129;
        assert!(p.plan().is_err());
        let mut p = base.clone();
        p.tcp = false;
        p.udp = true;
        p.len = 11;
        assert!(matches!(p.plan(), Err(Iperf3Error::Unsupported(m)) if m.contains("12 to 65507")));
        let mut p = base;
        p.other
            .insert("authtoken".into(), serde_json::Value::String("x".into()));
        assert!(p.plan().is_err());
    }

    #[test]
    fn our_parameters_encode_as_iperf3_expects() {
        let params = TestParams {
            tcp: true,
            time: 0,
            num: 1000,
            parallel: 2,
            reverse: true,
            len: 100,
            ..TestParams::default()
        };
        let v: serde_json::Value =
            serde_json::from_slice(&encode_json(&params).unwrap()[4..]).unwrap();
        assert_eq!(v["tcp"], true);
        assert_eq!(v["reverse"], true);
        assert_eq!(v["num"], 1000);
        assert_eq!(v["parallel"], 2);
        assert_eq!(v["len"], 100);
        assert!(v.get("udp").is_none() && v.get("bandwidth").is_none());
    }

    #[test]
    fn results_accept_iperf3s_number_spellings() {
        // From iperf3 3.12: -1 written as u64::MAX, as an integer or as a float.
        let text = br#"{"cpu_util_total":67.2,"cpu_util_user":0,"cpu_util_system":66.9,
            "sender_has_retransmits":18446744073709551615,"congestion_used":"bbr",
            "streams":[{"id":1,"bytes":1000000,"retransmits":1.8446744073709552e+19,"jitter":0,
            "errors":0,"packets":0,"start_time":0,"end_time":0.00057},
            {"id":3,"bytes":15000,"retransmits":0,"jitter":7.8e-06,"errors":2,"packets":15,
            "start_time":0,"end_time":0.0122}]}"#;
        let r: TestResults = decode_json(text).unwrap();
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.total_bytes(), 1_015_000);
        assert_eq!(r.total_packets(), 15);
        assert_eq!(r.total_errors(), 2);
        assert_eq!(r.duration_s(), 0.0122);
        assert_eq!(r.congestion_used.as_deref(), Some("bbr"));
        assert!(decode_json::<TestResults>(b"{\"streams\":[{\"id\":\"x\",\"bytes\":1}]}").is_err());
        // A trailing NUL is tolerated.
        assert!(decode_json::<TestResults>(b"{}\0").is_ok());
    }

    #[test]
    fn stream_ids_skip_two() {
        let ids: Vec<u32> = (0..4).map(stream_id).collect();
        assert_eq!(ids, [1, 3, 4, 5]);
    }

    #[test]
    fn udp_header_round_trips_in_both_widths() {
        // The first datagram of a real iperf3 3.12 client: sec 410, usec 566250, count 1.
        let real = [0, 0, 1, 0x9a, 0, 8, 0xa3, 0xea, 0, 0, 0, 1, 0x47];
        let h = UdpHeader::decode(&real, false).unwrap();
        assert_eq!(
            h,
            UdpHeader {
                sec: 410,
                usec: 566_250,
                count: 1
            }
        );
        let mut buf = [0u8; 16];
        assert_eq!(h.encode(false, &mut buf), Some(12));
        assert_eq!(&buf[..12], &real[..12]);
        let big = UdpHeader {
            sec: 1,
            usec: 2,
            count: (7 << 32) | 9,
        };
        assert_eq!(big.encode(true, &mut buf), Some(16));
        assert_eq!(&buf[8..16], &[0, 0, 0, 7, 0, 0, 0, 9]);
        assert_eq!(UdpHeader::decode(&buf, true), Ok(big));
        assert_eq!(big.encode(true, &mut [0u8; 15]), None);
        assert_eq!(
            UdpHeader::decode(&buf[..11], false),
            Err(Iperf3Error::ShortDatagram(11))
        );
    }

    #[test]
    fn udp_receiver_counts_loss_reordering_and_jitter() {
        let mut r = UdpReceiver::default();
        let at = |count: u64, sent_us: u32| UdpHeader {
            sec: 0,
            usec: sent_us,
            count,
        };
        // 1, 2, 5 (3 and 4 missing), then 3 arrives late.
        r.on_datagram(&at(1, 0), 100, 0.001);
        r.on_datagram(&at(2, 1000), 100, 0.002);
        r.on_datagram(&at(5, 4000), 100, 0.005);
        assert_eq!((r.highest, r.lost, r.out_of_order), (5, 2, 0));
        r.on_datagram(&at(3, 2000), 100, 0.0065);
        assert_eq!((r.highest, r.lost, r.out_of_order), (5, 1, 1));
        assert_eq!((r.datagrams, r.bytes), (4, 400));
        // Constant transit (1 ms) until the late one (4.5 ms): jitter = 3.5 ms / 16.
        assert!((r.jitter_s - 0.0035 / 16.0).abs() < 1e-12, "{}", r.jitter_s);
    }

    #[test]
    fn connect_magic_is_what_iperf3_sends() {
        assert_eq!(UDP_CONNECT_MSG, [0x39, 0x38, 0x37, 0x36]);
        assert_eq!(UDP_CONNECT_REPLY, [0x36, 0x37, 0x38, 0x39]);
        assert_eq!(LEGACY_UDP_CONNECT_MSG, [0x15, 0xcd, 0x5b, 0x07]);
    }
}
