//! iperf3's JSON documents: the client's test parameters (and the plan they ask for), the results
//! each end sends at the end, and the stream ids they name.

use serde::{Deserialize, Deserializer, Serialize};

use super::error::Iperf3Error;
use super::limits::{
    MAX_MSS, MAX_OMIT_S, MAX_PARALLEL, MAX_TCP_BLOCK, MAX_TIME_S, MAX_UDP_BLOCK, MAX_WINDOW,
};
use super::udp::udp_header_len;

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
    /// An SCTP test (not served: refused with iperf3's "no SCTP support").
    #[serde(default, skip_serializing_if = "is_false")]
    pub sctp: bool,
    /// Seconds at the start both ends leave out of their figures (`-O`).
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
    /// Both ends send at once (`--bidir`): `parallel` streams each way.
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
    /// Pacing of each sending stream in the kernel, bit/s (`--fq-rate`, SO_MAX_PACING_RATE).
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "is_zero"
    )]
    pub fqrate: u64,
    /// Socket buffer size of the data sockets, bytes (`-w`).
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "is_zero"
    )]
    pub window: u64,
    /// TCP maximum segment size of the data sockets, bytes (`-M`).
    #[serde(
        default,
        rename = "MSS",
        deserialize_with = "lenient_u64",
        skip_serializing_if = "is_zero"
    )]
    pub mss: u64,
    /// TCP_NODELAY on the data sockets (`-N`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub nodelay: bool,
    /// IP type of service of the data packets (`-S`).
    #[serde(
        default,
        rename = "TOS",
        deserialize_with = "lenient_u64",
        skip_serializing_if = "is_zero"
    )]
    pub tos: u64,
    /// TCP congestion control of the data sockets (`-C`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    /// The client wants the server's own output in the results (`--get-server-output`).
    #[serde(
        default,
        deserialize_with = "lenient_u64",
        skip_serializing_if = "is_zero"
    )]
    pub get_server_output: u64,
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
    /// Both ends send at once: `parallel` streams each way, the client's sending ones first.
    pub bidir: bool,
    /// Seconds at the start left out of the figures.
    pub omit_s: u64,
    /// Kernel pacing of each stream the server sends on, bit/s (0 = none).
    pub fq_rate_bps: u64,
    /// Socket buffer size of the data sockets, bytes.
    pub window: Option<u32>,
    /// TCP maximum segment size of the data sockets, bytes.
    pub mss: Option<u32>,
    /// TCP_NODELAY on the data sockets.
    pub nodelay: bool,
    /// IP type of service of the data packets.
    pub tos: Option<u8>,
    /// TCP congestion control of the data sockets (checked: a kernel algorithm's name).
    pub congestion: Option<String>,
    /// The client wants the server's output with the results.
    pub server_output: bool,
}

impl TestPlan {
    /// Streams the server receives on: all of a forward test's, none of a reverse one's, the
    /// first half of a bidirectional one's (the client opens its sending streams first).
    pub fn receiving_streams(&self) -> u32 {
        match (self.bidir, self.reverse) {
            (true, _) => self.parallel,
            (false, true) => 0,
            (false, false) => self.parallel,
        }
    }

    /// Data streams of the test: `parallel`, twice that when bidirectional.
    pub fn streams(&self) -> u32 {
        if self.bidir {
            self.parallel.saturating_mul(2)
        } else {
            self.parallel
        }
    }

    /// Whether the server sends on its `index`-th stream (0-based, in the order the client
    /// opened them).
    pub fn server_sends(&self, index: u32) -> bool {
        index >= self.receiving_streams()
    }
}

impl TestParams {
    /// Checks the parameters a client sent; says what is not supported.
    pub fn plan(&self) -> Result<TestPlan, Iperf3Error> {
        let unsupported = |what: &str| Err(Iperf3Error::Unsupported(what.to_string()));
        if self.sctp {
            return Err(Iperf3Error::NoSctp);
        }
        if self.tcp == self.udp {
            return unsupported("the test must be exactly one of TCP and UDP");
        }
        if self.bidirectional && self.reverse {
            return unsupported("a test is either -R or --bidir, not both");
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
        let out_of_range = |flag: &str, value: u64, min: u64, max: u64| {
            Err(Iperf3Error::Unsupported(format!(
                "{flag} {value} is out of range: allowed {min} to {max}"
            )))
        };
        if self.omit > MAX_OMIT_S {
            return out_of_range("-O", self.omit, 0, MAX_OMIT_S);
        }
        if self.time > MAX_TIME_S {
            return out_of_range("-t", self.time, 0, MAX_TIME_S);
        }
        if self.window > MAX_WINDOW {
            return out_of_range("-w", self.window, 0, MAX_WINDOW);
        }
        if self.mss > MAX_MSS {
            return out_of_range("-M", self.mss, 0, MAX_MSS);
        }
        if self.tos > 255 {
            return out_of_range("-S", self.tos, 0, 255);
        }
        let congestion =
            match &self.congestion {
                None => None,
                Some(name) if crate::wire::proto::is_congestion_name(name) => Some(name.clone()),
                Some(_) => return unsupported(
                    "-C names no congestion control: allowed 1 to 15 letters, digits, '_' or '-'",
                ),
            };
        // Every value below was range-checked above against limits under u32::MAX.
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
            bidir: self.bidirectional,
            omit_s: self.omit,
            fq_rate_bps: self.fqrate,
            window: (self.window > 0).then_some(self.window as u32),
            mss: (self.mss > 0).then_some(self.mss as u32),
            nodelay: self.nodelay,
            tos: (self.tos > 0).then_some(self.tos as u8),
            congestion,
            server_output: self.get_server_output != 0,
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
    /// The server's own output of the test as text, when the client asked for it
    /// (`--get-server-output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
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
    /// UDP datagrams lost during the omitted seconds (receiver); iperf3 3.14+ subtracts it
    /// from `errors`.
    #[serde(
        default,
        deserialize_with = "lenient_opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub omitted_errors: Option<i64>,
    /// UDP datagrams sent (sender) or the highest count seen (receiver).
    #[serde(default, deserialize_with = "lenient_i64")]
    pub packets: i64,
    /// What `packets` was at the end of the omitted seconds; iperf3 3.14+ subtracts it, and
    /// without it takes a sender's packets as all omitted (its rows then say 0/0).
    #[serde(
        default,
        deserialize_with = "lenient_opt_i64",
        skip_serializing_if = "Option::is_none"
    )]
    pub omitted_packets: Option<i64>,
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

fn lenient_opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    lenient_i64(d).map(Some)
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
