//! iperf3's wire formats: owns the control-connection state bytes, the 37-byte cookie, the
//! length-prefixed JSON framing and the UDP connect magic here, the JSON parameter and result
//! documents in `json.rs`, the UDP datagram header and the receiver's UDP loss/jitter
//! accounting in `udp.rs`, the bounds on what a peer may send or ask for in `limits.rs` and
//! the refusals (with iperf3's error numbers) in `error.rs`; must not do I/O or read clocks.
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
use serde::Serialize;

mod error;
pub use error::*;
mod json;
pub use json::*;
mod limits;
pub use limits::*;
mod udp;
pub use udp::*;

/// The port iperf3 servers listen on by default.
pub const DEFAULT_PORT: u16 = 5201;
/// Length of the cookie that opens every TCP connection, NUL included.
pub const COOKIE_LEN: usize = 37;
/// First datagram of a UDP stream, client to server.
pub const UDP_CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's answer to [`UDP_CONNECT_MSG`].
pub const UDP_CONNECT_REPLY: [u8; 4] = *b"6789";
/// What old iperf3 clients send instead of [`UDP_CONNECT_MSG`] (123456789 in x86 byte order).
pub const LEGACY_UDP_CONNECT_MSG: [u8; 4] = 123_456_789u32.to_le_bytes();
/// What old iperf3 servers answer instead of [`UDP_CONNECT_REPLY`] (987654321 in x86 byte order).
pub const LEGACY_UDP_CONNECT_REPLY: [u8; 4] = 987_654_321u32.to_le_bytes();

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
        .map_err(|e| Iperf3Error::Json(crate::vocab::text::peer_text(&e.to_string())))
}

#[cfg(test)]
mod tests;
