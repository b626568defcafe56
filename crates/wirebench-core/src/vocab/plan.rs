//! Run plan: owns protocol and mechanism names, list parsing, message arithmetic and the run matrix; must not
//! do I/O or validate a whole configuration (the app's config rejects invalid combinations once).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Smallest message size accepted for any protocol, in bytes.
pub const MIN_MSG_SIZE: u32 = 1;
/// Largest user-facing message size for every protocol (1..=65535), in bytes; UDP is further limited by
/// [`crate::wire::datagram::max_message_size`].
pub const MAX_DATAGRAM_MSG_SIZE: u32 = 65535;
/// Largest message size for the stream protocols (TCP and QUIC only), in bytes.
pub const MAX_STREAM_MSG_SIZE: u32 = 16 * 1024 * 1024;

/// Transport protocol of a run.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP: one connection per session for the data.
    #[default]
    Tcp,
    /// UDP: one message per datagram, with the [`crate::wire::datagram`] header.
    Udp,
    /// QUIC: one bidirectional stream for the data.
    Quic,
}

/// How messages are moved: back to back, or one at a time waiting for each acknowledgement.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub enum Mechanism {
    /// Send every message as fast as the transport (or pacing) allows.
    #[default]
    #[serde(rename = "stream")]
    Stream,
    /// Send one message, wait for its acknowledgement, then send the next.
    #[serde(rename = "saw")]
    StopAndWait,
}

/// One cell of the run matrix: a protocol with a mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Combination {
    /// The transport protocol.
    pub protocol: Protocol,
    /// The transfer mechanism.
    pub mechanism: Mechanism,
}

impl Combination {
    /// Whether this cell streams over a byte stream (TCP or QUIC), where a message is one
    /// write of any size: bulk data, as against a round trip or a UDP datagram.
    pub fn is_bulk_stream(&self) -> bool {
        self.mechanism == Mechanism::Stream && self.protocol != Protocol::Udp
    }
}

/// Why a protocol, mechanism or list could not be parsed; each message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Not one of tcp, udp, quic.
    #[error("unknown protocol \"{0}\": expected one of tcp, udp, quic")]
    UnknownProtocol(String),
    /// Not one of the mechanism names.
    #[error("unknown mechanism \"{0}\": expected stream (or streaming) or saw (or stop-and-wait)")]
    UnknownMechanism(String),
    /// A comma-separated list had an empty item.
    #[error(transparent)]
    EmptyListItem(#[from] EmptyListItem),
}

/// A comma-separated list had an empty item (`"tcp,,udp"`, `"tcp,"` or `""`).
///
/// Every error type used with [`parse_list`] converts from this one ([`PlanError`], [`crate::vocab::units::UnitError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("empty item in list \"{list}\": separate values with single commas, with no leading or trailing comma")]
pub struct EmptyListItem {
    /// The whole list as given.
    pub list: String,
}

impl Protocol {
    /// Every protocol, in the default matrix order.
    pub const ALL: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Quic];

    /// The lowercase name, as in serde and `Display`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Quic => "quic",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Protocol {
    type Err = PlanError;

    /// Case-insensitive `tcp`, `udp` or `quic`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        Protocol::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| PlanError::UnknownProtocol(name.to_owned()))
    }
}

impl Mechanism {
    /// Every mechanism, in the default matrix order.
    pub const ALL: [Mechanism; 2] = [Mechanism::Stream, Mechanism::StopAndWait];

    /// The short name, as in serde and `Display`: `"stream"` or `"saw"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Stream => "stream",
            Mechanism::StopAndWait => "saw",
        }
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mechanism {
    type Err = PlanError;

    /// Case-insensitive `stream`/`streaming` or `saw`/`stop-and-wait`/`stop_and_wait`/`stopandwait`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        match name.to_ascii_lowercase().as_str() {
            "stream" | "streaming" => Ok(Mechanism::Stream),
            "saw" | "stop-and-wait" | "stop_and_wait" | "stopandwait" => Ok(Mechanism::StopAndWait),
            _ => Err(PlanError::UnknownMechanism(name.to_owned())),
        }
    }
}

impl fmt::Display for Combination {
    /// `"udp/saw"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.protocol, self.mechanism)
    }
}

/// Parses a comma-separated list, trimming each item and dropping later duplicates (first occurrence order kept).
///
/// An empty item is an error rather than skipped, since `"tcp,,udp"` is more likely a typo than a wish.
/// Beyond the spec's `T: FromStr`, deduplication needs `T: PartialEq`, and the empty-item error needs
/// `T::Err: From<EmptyListItem>` (implemented by [`PlanError`] and [`crate::vocab::units::UnitError`]).
pub fn parse_list<T>(s: &str) -> Result<Vec<T>, T::Err>
where
    T: FromStr + PartialEq,
    T::Err: From<EmptyListItem>,
{
    let mut values: Vec<T> = Vec::new();
    for item in s.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(EmptyListItem { list: s.to_owned() }.into());
        }
        let value = item.parse::<T>()?;
        // Lists are a handful of items: a linear scan beats requiring Hash.
        if !values.contains(&value) {
            values.push(value);
        }
    }
    Ok(values)
}

/// Number of messages needed to carry `total_bytes` in messages of `msg_size` bytes: `ceil(total / size)`.
///
/// `msg_size` must be at least 1 (config guarantees it); 0 is treated as 1 rather than dividing by zero.
pub fn message_count(total_bytes: u64, msg_size: u32) -> u64 {
    total_bytes.div_ceil(u64::from(msg_size.max(MIN_MSG_SIZE)))
}

/// Length of message `index` (0-based): `msg_size`, except the last, which carries the remainder.
///
/// Returns 0 for an index at or beyond [`message_count`]; `msg_size` 0 is treated as 1 as in `message_count`.
pub fn message_len(index: u64, total_bytes: u64, msg_size: u32) -> u32 {
    let size = msg_size.max(MIN_MSG_SIZE);
    let start = index.saturating_mul(u64::from(size));
    let remaining = total_bytes.saturating_sub(start);
    // A remainder too large for u32 is certainly larger than one message.
    u32::try_from(remaining).map_or(size, |r| r.min(size))
}

/// The messages of `total_bytes` in `msg_size`-byte messages, in order: each one's 0-based index
/// and length ([`message_len`]), [`message_count`] of them.
pub fn messages(total_bytes: u64, msg_size: u32) -> impl Iterator<Item = (u64, u32)> {
    (0..message_count(total_bytes, msg_size))
        .map(move |index| (index, message_len(index, total_bytes, msg_size)))
}

/// The messages of one session's transfer as one value: `total_bytes` in `msg_size`-byte
/// messages, the last one carrying the remainder. What the sending and receiving loops take,
/// so they read counts and lengths from the plan rather than recomputing them from loose sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Messages {
    /// Payload bytes in all.
    pub total_bytes: u64,
    /// Bytes per message (the last one may carry fewer).
    pub msg_size: u32,
}

impl Messages {
    /// How many messages there are ([`message_count`]).
    pub fn count(&self) -> u64 {
        message_count(self.total_bytes, self.msg_size)
    }

    /// The length of message `index` ([`message_len`]).
    pub fn len_of(&self, index: u64) -> u32 {
        message_len(index, self.total_bytes, self.msg_size)
    }

    /// Each message's index and length, in order ([`messages`]).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> {
        messages(self.total_bytes, self.msg_size)
    }
}

/// Splits one run's `total_bytes` of `msg_size`-byte messages across `flows` parallel flows by
/// whole messages: flow i gets ⌊M/flows⌋ messages, the first M mod flows one more, and only the
/// last flow's last message carries the remainder. So the flows' totals add up to `total_bytes`
/// and their message counts to M = [`message_count`], exactly. `None` when there are more flows
/// than messages (a flow would carry nothing) or `flows` is 0.
pub fn split_flows(total_bytes: u64, msg_size: u32, flows: u32) -> Option<Vec<u64>> {
    let messages = message_count(total_bytes, msg_size);
    let n = u64::from(flows);
    if n == 0 || n > messages {
        return None;
    }
    let size = u64::from(msg_size.max(MIN_MSG_SIZE));
    let short_by = messages * size - total_bytes;
    Some(
        (0..n)
            .map(|i| {
                let count = messages / n + u64::from(i < messages % n);
                let bytes = count * size;
                if i == n - 1 {
                    bytes - short_by
                } else {
                    bytes
                }
            })
            .collect(),
    )
}

/// The run matrix: protocols in the order given (outer loop), mechanisms in the order given (inner loop).
pub fn matrix(protocols: &[Protocol], mechanisms: &[Mechanism]) -> Vec<Combination> {
    protocols
        .iter()
        .flat_map(|&protocol| {
            mechanisms.iter().map(move |&mechanism| Combination {
                protocol,
                mechanism,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::units::{ByteSize, UnitError};

    #[test]
    fn messages_are_whole_but_the_last_and_add_up_to_the_total() {
        let all: Vec<(u64, u32)> = messages(2500, 1000).collect();
        assert_eq!(all, [(0, 1000), (1, 1000), (2, 500)]);
        assert_eq!(messages(3000, 1000).last(), Some((2, 1000)));
        assert_eq!(messages(0, 1000).count(), 0);
        // A timed run's unbounded total is never walked to its end.
        assert_eq!(
            messages(u64::MAX, 1).nth(5_000_000),
            Some((5_000_000, 1)),
            "lazy"
        );
    }

    #[test]
    fn protocol_names() {
        assert_eq!("tcp".parse::<Protocol>().unwrap(), Protocol::Tcp);
        assert_eq!("UDP".parse::<Protocol>().unwrap(), Protocol::Udp);
        assert_eq!(" Quic ".parse::<Protocol>().unwrap(), Protocol::Quic);
        assert_eq!(Protocol::Quic.to_string(), "quic");
        assert_eq!(
            "sctp".parse::<Protocol>().unwrap_err().to_string(),
            "unknown protocol \"sctp\": expected one of tcp, udp, quic"
        );
        assert_eq!(serde_json::to_string(&Protocol::Udp).unwrap(), "\"udp\"");
        assert_eq!(
            serde_json::from_str::<Protocol>("\"quic\"").unwrap(),
            Protocol::Quic
        );
        assert_eq!(Protocol::default(), Protocol::Tcp);
    }

    #[test]
    fn mechanism_names() {
        for name in ["stream", "streaming", "STREAM", "Streaming"] {
            assert_eq!(
                name.parse::<Mechanism>().unwrap(),
                Mechanism::Stream,
                "{name}"
            );
        }
        for name in [
            "saw",
            "SAW",
            "stop-and-wait",
            "stop_and_wait",
            "stopandwait",
            "Stop-And-Wait",
        ] {
            assert_eq!(
                name.parse::<Mechanism>().unwrap(),
                Mechanism::StopAndWait,
                "{name}"
            );
        }
        assert_eq!(
            "burst".parse::<Mechanism>(),
            Err(PlanError::UnknownMechanism("burst".into()))
        );
        assert_eq!(Mechanism::StopAndWait.to_string(), "saw");
        assert_eq!(Mechanism::Stream.to_string(), "stream");
        assert_eq!(
            serde_json::to_string(&Mechanism::StopAndWait).unwrap(),
            "\"saw\""
        );
        assert_eq!(
            serde_json::to_string(&Mechanism::Stream).unwrap(),
            "\"stream\""
        );
        assert_eq!(
            serde_json::from_str::<Mechanism>("\"saw\"").unwrap(),
            Mechanism::StopAndWait
        );
        assert_eq!(Mechanism::default(), Mechanism::Stream);
    }

    #[test]
    fn lists_trim_and_dedup_in_first_order() {
        assert_eq!(
            parse_list::<Protocol>("udp, TCP ,udp,quic,tcp").unwrap(),
            vec![Protocol::Udp, Protocol::Tcp, Protocol::Quic]
        );
        assert_eq!(
            parse_list::<Mechanism>("saw,stop-and-wait,stream").unwrap(),
            vec![Mechanism::StopAndWait, Mechanism::Stream]
        );
        // Deduplication is by value, so two spellings of one size collapse.
        assert_eq!(
            parse_list::<ByteSize>("1KiB,1024,64K").unwrap(),
            vec![ByteSize(1024), ByteSize(65_536)]
        );
    }

    #[test]
    fn lists_reject_empty_and_bad_items() {
        for list in ["", "tcp,,udp", "tcp,", ",tcp", " , "] {
            assert_eq!(
                parse_list::<Protocol>(list),
                Err(PlanError::EmptyListItem(EmptyListItem {
                    list: list.to_owned()
                })),
                "{list:?}"
            );
        }
        assert_eq!(
            parse_list::<Protocol>("tcp,,udp").unwrap_err().to_string(),
            "empty item in list \"tcp,,udp\": separate values with single commas, with no leading or trailing comma"
        );
        assert_eq!(
            parse_list::<Protocol>("tcp,ip"),
            Err(PlanError::UnknownProtocol("ip".into()))
        );
        assert_eq!(
            parse_list::<ByteSize>("1K,2X"),
            Err(UnitError::InvalidSize("2X".into()))
        );
        assert!(matches!(
            parse_list::<ByteSize>("1K,"),
            Err(UnitError::EmptyListItem(_))
        ));
    }

    #[test]
    fn message_arithmetic() {
        assert_eq!(message_count(0, 1024), 0);
        assert_eq!(message_count(1, 1024), 1);
        assert_eq!(message_count(1024, 1024), 1);
        assert_eq!(message_count(1025, 1024), 2);
        assert_eq!(message_count(10, 4), 3);
        assert_eq!(message_count(10, 0), 10);
        assert_eq!(message_count(u64::MAX, 1), u64::MAX);
        // (2^64 - 1) / (2^32 - 1) = 2^32 + 1 exactly.
        assert_eq!(message_count(u64::MAX, u32::MAX), 4_294_967_297);

        assert_eq!(message_len(0, 10, 4), 4);
        assert_eq!(message_len(1, 10, 4), 4);
        assert_eq!(message_len(2, 10, 4), 2);
        assert_eq!(message_len(3, 10, 4), 0);
        assert_eq!(message_len(1, 8, 4), 4);
        assert_eq!(message_len(0, 3, 1024), 3);
        assert_eq!(message_len(0, 0, 1024), 0);
        assert_eq!(message_len(u64::MAX, u64::MAX, 1), 0);
        assert_eq!(message_len(0, u64::MAX, u32::MAX), u32::MAX);
        // The last of 2^32 + 1 messages is a full one: 2^64 - 1 is an exact multiple.
        assert_eq!(message_len(4_294_967_296, u64::MAX, u32::MAX), u32::MAX);
        assert_eq!(message_len(4_294_967_297, u64::MAX, u32::MAX), 0);
    }

    #[test]
    fn message_lengths_add_up() {
        for (total, size) in [
            (0u64, 1u32),
            (10, 4),
            (1_000_000, 65_535),
            (65_536, 65_536),
            (7, 100),
        ] {
            let sum: u64 = (0..message_count(total, size))
                .map(|i| u64::from(message_len(i, total, size)))
                .sum();
            assert_eq!(sum, total, "total {total} size {size}");
        }
    }

    #[test]
    fn a_message_plan_reads_as_the_free_functions_compute() {
        for (total, size) in [(0u64, 1u32), (10, 4), (1_000_000, 65_535), (7, 100)] {
            let plan = Messages {
                total_bytes: total,
                msg_size: size,
            };
            assert_eq!(plan.count(), message_count(total, size));
            let listed: Vec<_> = plan.iter().collect();
            assert_eq!(listed.len() as u64, plan.count());
            for (index, len) in listed {
                assert_eq!(len, plan.len_of(index));
            }
            let sum: u64 = plan.iter().map(|(_, len)| u64::from(len)).sum();
            assert_eq!(sum, total, "total {total} size {size}");
        }
    }

    #[test]
    fn matrix_order_is_protocol_outer_mechanism_inner() {
        let cells = matrix(
            &[Protocol::Udp, Protocol::Tcp],
            &[Mechanism::StopAndWait, Mechanism::Stream],
        );
        let names: Vec<String> = cells.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["udp/saw", "udp/stream", "tcp/saw", "tcp/stream"]);
        assert_eq!(matrix(&Protocol::ALL, &Mechanism::ALL).len(), 6);
        assert!(matrix(&[], &Mechanism::ALL).is_empty());
    }

    #[test]
    fn limits() {
        assert_eq!(MIN_MSG_SIZE, 1);
        assert_eq!(MAX_DATAGRAM_MSG_SIZE, 65_535);
        assert_eq!(MAX_STREAM_MSG_SIZE, 16_777_216);
    }

    #[test]
    fn flows_split_the_total_exactly_by_whole_messages() {
        for (total, size, flows) in [
            (1_000_003u64, 1024u32, 4u32),
            (10, 3, 4),
            (4096, 1024, 4),
            (7, 1, 7),
        ] {
            let split = split_flows(total, size, flows).expect("enough messages");
            assert_eq!(split.len(), flows as usize);
            assert_eq!(split.iter().sum::<u64>(), total, "{total}/{size}/{flows}");
            let messages: u64 = split.iter().map(|&t| message_count(t, size)).sum();
            assert_eq!(messages, message_count(total, size));
            // Every flow but the last carries whole messages only.
            for t in &split[..split.len() - 1] {
                assert_eq!(t % u64::from(size), 0);
            }
        }
        assert_eq!(split_flows(10, 3, 4), Some(vec![3, 3, 3, 1]));
        assert_eq!(
            split_flows(10, 3, 5),
            None,
            "4 messages cannot make 5 flows"
        );
        assert_eq!(split_flows(10, 3, 0), None);
    }
}
