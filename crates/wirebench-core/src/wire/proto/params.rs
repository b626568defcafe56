//! What a client asks of a session, as the control messages carry it: a transfer session's
//! parameters with the data-path options both ends apply, and a request-response session's;
//! the ranges a server accepts for them are `validate.rs`'s.

use serde::{Deserialize, Serialize};

use std::time::{Duration, Instant};

use crate::vocab::plan::{Mechanism, Messages, Protocol};

/// Parameters of a request-response session, sent in [`ControlMessage::RrRequest`](super::ControlMessage::RrRequest): for every request of
/// `request` bytes the server answers with `response` bytes (on the same stream, or one datagram each).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct RrParams {
    /// Transport protocol of the requests.
    pub protocol: Protocol,
    /// Request size in bytes (UDP: the payload after the 16-byte header).
    pub request: u32,
    /// Response size in bytes (UDP: the payload after the 16-byte header).
    pub response: u32,
    /// Flows (connections or sockets) the client opens; for the server's summary only.
    pub flows: u32,
    /// Requests outstanding per flow; for the server's summary only.
    pub concurrency: u32,
    /// Each request on a fresh TCP or QUIC connection (the server then accepts many data connections).
    #[serde(default)]
    pub new_connection: bool,
    /// The server writes when each request arrived and when its answer left at the start of
    /// every answer ([`STAMPS_LEN`](crate::wire::datagram::STAMPS_LEN) bytes; the response must
    /// be that long), for one-way delays: UDP, and TCP and QUIC streams (arrival: the read that
    /// completed the request). Omitted on the wire when false; a server older than this field
    /// answers without stamps and announces no clock in `accepted`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stamps: bool,
}

/// Parameters of one session, sent by the client in [`ControlMessage::SessionRequest`](super::ControlMessage::SessionRequest).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct SessionParams {
    /// Transport protocol of the data.
    pub protocol: Protocol,
    /// Transfer mechanism.
    pub mechanism: Mechanism,
    /// Message size in bytes (the last message may be shorter).
    pub msg_size: u32,
    /// Total payload to transfer, in bytes.
    pub total_bytes: u64,
    /// Fixed UDP stop-and-wait retransmission timeout in microseconds; None = adaptive.
    pub rto_us: Option<u64>,
    /// UDP streaming pacing in bit/s; None = unpaced.
    pub rate_bps: Option<u64>,
    /// UDP streaming: how long the server waits for late datagrams after the sender is done, microseconds.
    pub grace_us: u64,
    /// Data-path options both ends apply (absent fields mean defaults, so older peers interoperate).
    #[serde(default)]
    pub options: DataPathOptions,
    /// Period of the interval series (`-i`) the server keeps and reports, microseconds; None
    /// keeps none. Omitted on the wire when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_us: Option<u64>,
    /// The server sends and the client receives (`-R`; TCP and QUIC). Omitted on the wire when
    /// false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
    /// A timed session (`run -t`): the sender sends whole messages for this many microseconds,
    /// then ends the session as usual (closing or finishing the stream, or `SenderDone`), and
    /// `total_bytes` is only an upper bound ([`UNBOUNDED_TOTAL`]). Omitted on the wire when
    /// None. A server older than this field ignores it and refuses the unbounded total
    /// against its `--max-bytes` limit (or, without one, reports the session truncated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// `run -O/--omit`: each end notes what it has moved this many microseconds after its
    /// transfer began (the omit mark) and reports it in [`ServerReport::omitted`](super::ServerReport::omitted), so the
    /// figures can leave the first span out, as iperf3's `-O`. Omitted on the wire when None;
    /// a server older than this field reports no mark (and the client refuses its figures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omit_us: Option<u64>,
}

/// The `total_bytes` of a timed session: no byte limit, in a number that still fits the
/// signed 64-bit integers the results store keeps.
pub const UNBOUNDED_TOTAL: u64 = i64::MAX as u64;

impl SessionParams {
    /// Whether the session ends by time (`duration_us`) rather than by `total_bytes`.
    pub fn timed(&self) -> bool {
        self.duration_us.is_some()
    }

    /// How many whole messages of this session `bytes` of payload make (what a transfer cut
    /// short, or an `-O` mark, counts).
    pub fn whole_messages(&self, bytes: u64) -> u64 {
        bytes / u64::from(self.msg_size.max(1))
    }

    /// The session's messages: `total_bytes` in `msg_size`-byte messages.
    pub fn messages(&self) -> Messages {
        Messages {
            total_bytes: self.total_bytes,
            msg_size: self.msg_size,
        }
    }

    /// When a timed session's sender stops sending, counted from `start` (the time is passed
    /// in: this crate reads no clock); None for a session that ends by its total.
    pub fn deadline(&self, start: Instant) -> Option<Instant> {
        self.duration_us.map(|us| {
            start
                .checked_add(Duration::from_micros(us))
                .unwrap_or(start)
        })
    }
}

/// Socket and scheduling options of a session's data path, requested by the user.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct DataPathOptions {
    /// Socket send and receive buffer size in bytes for TCP data sockets on both ends and the
    /// client's UDP socket (`-w`); None = the OS default (autotuning for TCP).
    #[serde(default)]
    pub window: Option<u32>,
    /// TCP congestion control algorithm on both ends (`-C`); None = the system default.
    #[serde(default)]
    pub congestion: Option<String>,
    /// TCP_NODELAY on TCP data sockets also when streaming (stop-and-wait always sets it).
    #[serde(default)]
    pub nodelay: bool,
    /// Spin on non-blocking sockets instead of sleeping (stop-and-wait latency runs).
    #[serde(default)]
    pub busy_poll: bool,
    /// UDP streaming (`run --rate max` trials): the server reports what it has received so far
    /// ([`ControlMessage::Receipt`](super::ControlMessage::Receipt)) on the control connection every this many microseconds
    /// until the client is done (at most every [`MIN_RECEIPT_US`]). Omitted on the wire when
    /// None; a server older than this field ignores it and sends none, so a trial then runs
    /// its whole length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_us: Option<u64>,
    /// QUIC: the largest UDP payload either end may send (`--quic-mtu`); None = discover up to
    /// what the path carries. Applied by the client, which advertises it to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic_mtu: Option<u16>,
    /// TCP maximum segment size of the data connection on both ends (`-M`, TCP_MAXSEG);
    /// None = the path's. Omitted on the wire when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    /// IP type of service of the data packets (`-S`): the TCP data connection on both ends
    /// (the client sets it on all its sockets). Omitted on the wire when None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
}

/// The shortest period a server sends [`ControlMessage::Receipt`](super::ControlMessage::Receipt) at, microseconds: a client
/// asking for less gets this, so it cannot make the server flood the control connection.
pub const MIN_RECEIPT_US: u64 = 5_000;
