//! Control protocol: owns the connection preamble, the control messages and their length-prefixed JSON
//! framing; must not do I/O or decide how a session runs.
//!
//! Every TCP connection to the server, and the first bytes of the QUIC data stream, start with a 16-byte
//! preamble (magic, version, kind, session, token) so a stray client fails with a clear message.

use serde::{Deserialize, Serialize};

use crate::vocab::clock_offset::ClockInfo;
use crate::vocab::counters::{CpuUsage, IntervalSample, TransportStats};
use crate::vocab::plan::{Mechanism, Protocol};
use crate::vocab::text::{make_safe, peer_text};

/// First four bytes of every wirebench connection.
pub const MAGIC: [u8; 4] = *b"WBNC";
/// Version of the preamble and control messages this build speaks.
pub const PROTOCOL_VERSION: u16 = 2;
/// Length of the connection preamble, in bytes.
pub const PREAMBLE_LEN: usize = 16;
/// Largest control frame body a reader accepts by default (and a server's default
/// `--max-control-size`), in bytes: every message a client sends fits in it.
pub const MAX_CONTROL_FRAME: usize = 64 * 1024;
/// Largest frame body of any kind, in bytes: a server's report with its interval series
/// (at most [`MAX_INTERVAL_SAMPLES`] samples) fits in it. Only the reader of a report accepts
/// more than [`MAX_CONTROL_FRAME`].
pub const MAX_REPORT_FRAME: usize = 16 << 20;

mod params;
pub use params::*;
mod validate;
pub use validate::*;

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnKind {
    /// Carries framed [`ControlMessage`]s (kind byte 1).
    Control,
    /// Carries the data of an accepted session (kind byte 2).
    Data,
}

/// The 16 bytes that open every connection:
/// `magic [4] | version u16 | kind u8 | reserved u8 | session u32 | token u32`, big endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Preamble {
    /// Protocol version of the sender.
    pub version: u16,
    /// Control or data connection.
    pub kind: ConnKind,
    /// Session id for data connections, 0 for control.
    pub session: u32,
    /// Per-session random token proving a data connection belongs to the session, 0 for control.
    pub token: u32,
}

/// A control message; on the wire, a `u32` big-endian body length followed by the JSON body.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlMessage {
    /// Client → server: start a session with these parameters.
    SessionRequest(SessionParams),
    /// Server → client: the session exists; attach data with this id and token.
    Accepted {
        /// Session id to put in data preambles and UDP headers.
        session: u32,
        /// Token to put in the data preamble.
        token: u32,
        /// QUIC sessions: the server's self-signed certificate (DER), which the client pins for the data
        /// connection; None otherwise. Not in the original spec: the app needs it to trust the server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quic_cert: Option<Vec<u8>>,
        /// What the server's kernel says of its clock (for one-way delays); absent from a
        /// server older than this field.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        clock: Option<ClockInfo>,
    },
    /// Server → client: the session was refused; the reason is for the user.
    Rejected {
        /// Why, in words for the user.
        reason: String,
    },
    /// Client → server: the client has sent everything.
    SenderDone {
        /// Messages the client sent (UDP: distinct messages, not counting retransmissions).
        messages_sent: u64,
        /// Payload bytes the client sent (not counting retransmissions or headers).
        bytes_sent: u64,
    },
    /// Server → client: what the server read in this session.
    Report(Box<ServerReport>),
    /// Either side: a protocol error, for the user.
    Error {
        /// What went wrong, in words for the user.
        reason: String,
    },
    /// Client → server: start a request-response session (`wirebench ping` and `rr`) instead of a
    /// transfer. Answered like [`ControlMessage::SessionRequest`] (`accepted` or `rejected`); the client
    /// ends it with [`ControlMessage::SenderDone`] and gets a [`ControlMessage::Report`]. A server from
    /// before this variant cannot decode it and answers with an error frame.
    RrRequest(RrParams),
    /// Server → client, only on a server with a pre-shared key, right after the client's request:
    /// prove you hold the key. `nonce` is 32 fresh random bytes, hex (see [`crate::security::auth`]).
    AuthChallenge {
        /// The server's nonce for this connection, 64 hex digits.
        nonce: String,
    },
    /// Client → server: the answer to [`ControlMessage::AuthChallenge`]: the client's own nonce
    /// and `HMAC-SHA256(key, transcript)` under the client label, both hex.
    AuthResponse {
        /// The client's nonce, 64 hex digits.
        nonce: String,
        /// The client's MAC, 64 hex digits.
        mac: String,
    },
    /// Server → client: the client's MAC was right; the server's own MAC (server label) proves
    /// it holds the key too. `accepted` or `rejected` follows.
    AuthOk {
        /// The server's MAC, 64 hex digits.
        mac: String,
    },
    /// Server → client, only in a UDP streaming session whose client asked for it
    /// ([`DataPathOptions::receipt_us`]): what the server has received so far, sent
    /// periodically until the client's [`ControlMessage::SenderDone`] arrives (one may cross
    /// it; the client skips them before the report). A rate-search trial ends as soon as
    /// these decide it has failed.
    Receipt {
        /// Unique messages received so far.
        messages: u64,
        /// Unique payload bytes received so far.
        bytes: u64,
        /// One above the highest sequence number received so far (0: none yet): the messages
        /// below it that have not arrived are lost or late.
        next_seq: u64,
    },
}

/// What one end's data path actually ran with, as the OS reports it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DataPathInfo {
    /// Effective socket receive buffer, bytes (0 when not applicable).
    pub recv_buffer: u64,
    /// Effective socket send buffer, bytes (0 when not applicable).
    pub send_buffer: u64,
    /// TCP congestion control in use, if TCP.
    pub congestion: Option<String>,
    /// TCP_NODELAY set on the data socket.
    pub nodelay: bool,
    /// The data path spun instead of sleeping.
    pub busy_poll: bool,
    /// UDP GSO: most datagrams one send carried (1 = no segmentation offload); 0 when not UDP.
    pub gso_segments: u32,
    /// CPU the data path last ran on, if known.
    pub cpu: Option<u32>,
    /// UDP on the server: which of its receive lanes (a socket on the shared port read by a
    /// thread of its own) received the session's datagrams, counted from 0; absent when the
    /// shared socket or a socket of the session's own received them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_lane: Option<u32>,
    /// UDP on the server: the session's datagrams arrived on a socket of its own, connected to
    /// the client and read by a thread of its own (round trips, one request outstanding).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_socket: bool,
    /// How many receive lanes the server runs (0: none, every datagram on the shared socket).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub receive_lanes: u32,
    /// The data socket's own address, `IP:PORT` (iperf3's `connected[].local_host` and
    /// `local_port`); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_addr: Option<String>,
    /// TCP: the data connection's maximum segment size (TCP_MAXSEG) as the kernel reports it
    /// (iperf3's `tcp_mss_default`); absent when not TCP or unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
}

/// Whether a small count is zero (left out when it is).
fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// What the server read in one session, sent in [`ControlMessage::Report`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct ServerReport {
    /// Transport protocol of the session.
    pub protocol: Protocol,
    /// Transfer mechanism of the session.
    pub mechanism: Mechanism,
    /// Application messages read (UDP: unique datagrams delivered).
    pub messages: u64,
    /// Application payload bytes read (unique).
    pub bytes: u64,
    /// Read calls that returned data (TCP/QUIC) or datagrams received including duplicates (UDP).
    pub read_calls: u64,
    /// First byte read → last byte read, on the server's monotonic clock, in nanoseconds;
    /// reversed (the server sends), first byte sent → the client's acknowledgement of the
    /// last (TCP and QUIC streaming) or the client's end of the transfer.
    pub elapsed_ns: u64,
    /// Time between the last data arrival and the moment the report was made, in nanoseconds.
    pub idle_after_last_ns: u64,
    /// Messages sent but never delivered (UDP).
    pub lost: u64,
    /// UDP streaming: of `lost`, the messages this host dropped (its receiving socket's buffer
    /// was full), judged from the socket's drop counter (`machine::seq`); absent where the
    /// socket does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_by_host: Option<u64>,
    /// UDP with `--reverse`: messages the server numbered that its host refused to send (a
    /// full device queue, `ENOBUFS`); they count as sent and lost.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub not_sent: u64,
    /// Copies of already delivered messages (UDP).
    pub duplicates: u64,
    /// New messages that arrived after a higher one (UDP).
    pub out_of_order: u64,
    /// Interarrival jitter of the data datagrams, RFC 3550 estimator, microseconds (UDP, with
    /// messages of 4 bytes or more, which carry the sender's timestamp).
    #[serde(default)]
    pub jitter_us: Option<f64>,
    /// Acknowledgements the server sent (stop-and-wait).
    pub acks_sent: u64,
    /// The session ended before all data arrived.
    pub aborted: bool,
    /// Why the session was aborted, for the user.
    pub abort_reason: Option<String>,
    /// What the server's data path ran with.
    #[serde(default)]
    pub data_path: DataPathInfo,
    /// What the server's transport reported (TCP_INFO of the data socket, QUIC connection
    /// stats); None for UDP, whose loss the figures above already give.
    #[serde(default)]
    pub transport: Option<TransportStats>,
    /// CPU time the server process spent while the session ran (getrusage).
    #[serde(default)]
    pub cpu: Option<CpuUsage>,
    /// What the server read per interval, when the client asked for intervals (`-i`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalSample>,
    /// With `omit_us` asked (`-O`): what the server had moved at its omit mark; None otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
}

/// Whether a count is zero (left out of a report or record when it is).
pub fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What one end had moved at its omit mark (`run -O`): the span the figures leave out.
/// A run that ended before the mark has everything in it.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Omitted {
    /// Payload bytes sent (stop-and-wait: acknowledged) or read before the mark.
    pub bytes: u64,
    /// Whole messages in those bytes.
    pub messages: u64,
    /// From the start of this end's transfer to the mark, nanoseconds (shorter than the
    /// omit span when the run ended before the mark).
    pub elapsed_ns: u64,
}

/// Why a preamble or control frame was refused; messages are one line, for users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The peer did not open with [`MAGIC`].
    #[error("peer is not a wirebench endpoint (bad magic \"{}\")", found.escape_ascii())]
    BadMagic {
        /// The four bytes received instead.
        found: [u8; 4],
    },
    /// The peer speaks another protocol version.
    #[error("peer speaks protocol version {found}, this wirebench speaks {supported}")]
    UnsupportedVersion {
        /// The peer's version.
        found: u16,
        /// Ours, [`PROTOCOL_VERSION`].
        supported: u16,
    },
    /// The connection kind byte is neither 1 (control) nor 2 (data).
    #[error("peer opened a connection of unknown kind {0} (expected 1 for control or 2 for data)")]
    BadKind(u8),
    /// A control frame longer than its reader accepts ([`MAX_CONTROL_FRAME`] unless it said
    /// otherwise).
    #[error("control message of {len} bytes exceeds the {limit}-byte limit")]
    Oversized {
        /// The announced body length.
        len: usize,
        /// The reader's limit.
        limit: usize,
    },
    /// An empty frame, or a body that is not a valid [`ControlMessage`].
    #[error("malformed control message: {0}")]
    Malformed(String),
}

impl ConnKind {
    /// The byte on the wire.
    pub fn to_byte(self) -> u8 {
        match self {
            ConnKind::Control => 1,
            ConnKind::Data => 2,
        }
    }

    /// The kind for a byte on the wire.
    pub fn from_byte(byte: u8) -> Result<ConnKind, ProtoError> {
        match byte {
            1 => Ok(ConnKind::Control),
            2 => Ok(ConnKind::Data),
            other => Err(ProtoError::BadKind(other)),
        }
    }
}

impl Preamble {
    /// The preamble of a control connection (session and token 0).
    pub fn control() -> Preamble {
        Preamble {
            version: PROTOCOL_VERSION,
            kind: ConnKind::Control,
            session: 0,
            token: 0,
        }
    }

    /// The preamble of a data connection for an accepted session.
    pub fn data(session: u32, token: u32) -> Preamble {
        Preamble {
            version: PROTOCOL_VERSION,
            kind: ConnKind::Data,
            session,
            token,
        }
    }

    /// The 16 bytes on the wire.
    pub fn encode(&self) -> [u8; PREAMBLE_LEN] {
        let mut out = [0u8; PREAMBLE_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&self.version.to_be_bytes());
        out[6] = self.kind.to_byte();
        out[7] = 0;
        out[8..12].copy_from_slice(&self.session.to_be_bytes());
        out[12..16].copy_from_slice(&self.token.to_be_bytes());
        out
    }

    /// Parses and checks a preamble: magic first (so a non-wirebench peer gets the clearest error), then
    /// version, then kind. The reserved byte is ignored.
    pub fn decode(bytes: &[u8; PREAMBLE_LEN]) -> Result<Preamble, ProtoError> {
        let [m0, m1, m2, m3, v0, v1, kind, _reserved, s0, s1, s2, s3, t0, t1, t2, t3] = *bytes;
        let found = [m0, m1, m2, m3];
        if found != MAGIC {
            return Err(ProtoError::BadMagic { found });
        }
        let version = u16::from_be_bytes([v0, v1]);
        if version != PROTOCOL_VERSION {
            return Err(ProtoError::UnsupportedVersion {
                found: version,
                supported: PROTOCOL_VERSION,
            });
        }
        Ok(Preamble {
            version,
            kind: ConnKind::from_byte(kind)?,
            session: u32::from_be_bytes([s0, s1, s2, s3]),
            token: u32::from_be_bytes([t0, t1, t2, t3]),
        })
    }
}

/// Appends one frame (`u32` BE body length, then the JSON body) to `out`.
///
/// Reasons are free text: keep them short, since a body over [`MAX_CONTROL_FRAME`] is written but refused
/// by the peer.
pub fn encode_frame(msg: &ControlMessage, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    // Serializing these types into a Vec cannot fail (plain structs, strings and integers, no maps, and Vec
    // writes are infallible); should it ever, send a well-formed error frame rather than panic or send junk.
    if serde_json::to_writer(&mut *out, msg).is_err() {
        out.truncate(start + 4);
        out.extend_from_slice(
            br#"{"type":"error","reason":"internal error: could not encode a control message"}"#,
        );
    }
    let body_len = u32::try_from(out.len() - start - 4).unwrap_or(u32::MAX);
    out[start..start + 4].copy_from_slice(&body_len.to_be_bytes());
}

/// Body length announced by a frame's 4-byte header; 0 is malformed and more than [`MAX_CONTROL_FRAME`]
/// is oversized, so a reader never allocates what a peer merely claims.
pub fn frame_len(header: [u8; 4]) -> Result<usize, ProtoError> {
    frame_len_within(header, MAX_CONTROL_FRAME)
}

/// [`frame_len`] for a reader that accepts up to `limit` bytes (at most [`MAX_REPORT_FRAME`]:
/// a client reading its server's report).
pub fn frame_len_within(header: [u8; 4], limit: usize) -> Result<usize, ProtoError> {
    let len = usize::try_from(u32::from_be_bytes(header)).unwrap_or(usize::MAX);
    check_len(len, limit.min(MAX_REPORT_FRAME))?;
    Ok(len)
}

/// Parses a frame body (without its length header) into a message. This is where a peer's
/// text enters: every string in the message (reasons, a congestion-control name) comes out
/// made safe to show ([`crate::vocab::text::peer_text`]), and so do the decoder's own
/// errors, which quote what the peer sent (an unknown `type`, say).
pub fn decode_body(body: &[u8]) -> Result<ControlMessage, ProtoError> {
    check_len(body.len(), MAX_REPORT_FRAME)?;
    let mut msg: ControlMessage = serde_json::from_slice(body)
        .map_err(|e| ProtoError::Malformed(peer_text(&e.to_string())))?;
    msg.make_text_safe();
    Ok(msg)
}

impl ControlMessage {
    /// Escapes control characters in, and bounds the length of, every string of the message.
    fn make_text_safe(&mut self) {
        match self {
            ControlMessage::SessionRequest(p) => {
                if let Some(cc) = &mut p.options.congestion {
                    make_safe(cc);
                }
            }
            ControlMessage::Rejected { reason } | ControlMessage::Error { reason } => {
                make_safe(reason)
            }
            ControlMessage::Report(r) => {
                if let Some(reason) = &mut r.abort_reason {
                    make_safe(reason);
                }
                if let Some(cc) = &mut r.data_path.congestion {
                    make_safe(cc);
                }
            }
            ControlMessage::AuthChallenge { nonce } => make_safe(nonce),
            ControlMessage::AuthResponse { nonce, mac } => {
                make_safe(nonce);
                make_safe(mac);
            }
            ControlMessage::AuthOk { mac } => make_safe(mac),
            ControlMessage::Accepted {
                clock: Some(clock), ..
            } => {
                if let Some(id) = &mut clock.boot_id {
                    make_safe(id);
                }
            }
            ControlMessage::Accepted { .. }
            | ControlMessage::SenderDone { .. }
            | ControlMessage::RrRequest(_)
            | ControlMessage::Receipt { .. } => {}
        }
    }
}

fn check_len(len: usize, limit: usize) -> Result<(), ProtoError> {
    if len == 0 {
        return Err(ProtoError::Malformed("empty frame (length 0)".to_owned()));
    }
    if len > limit {
        return Err(ProtoError::Oversized { len, limit });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
