//! One `run --iperf3` test as a record: our figures next to the iperf3 server's, as the
//! text (`wirebench_output::iperf3_test`) and the JSON document (`kind: "iperf3"`,
//! `schema_version` 1) show them. Pure: built from the test's results, no I/O.

use serde::Serialize;

use crate::record::bits_per_second;
use crate::wire::iperf3::TestResults;

/// Version of the JSON document of [`Iperf3Test`].
pub const SCHEMA_VERSION: u32 = 1;

/// One iperf3 client test: what was asked, and both ends' figures.
#[derive(Debug, Serialize)]
pub struct Iperf3Test {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always "iperf3".
    pub kind: &'static str,
    /// The server as named.
    pub server: String,
    /// "tcp" or "udp".
    pub protocol: &'static str,
    /// The server sent (`-R`).
    pub reverse: bool,
    /// Streams.
    pub parallel: u32,
    /// Bytes per write or datagram.
    pub block_len: u32,
    /// Byte limit, if the test was byte-limited.
    pub limit_bytes: Option<u64>,
    /// Time limit in seconds, if time-limited.
    pub limit_seconds: Option<f64>,
    /// Per-stream UDP rate in bit/s (0 = unlimited).
    pub rate_bps: u64,
    /// What wirebench measured.
    pub wirebench: Iperf3Side,
    /// What the iperf3 server reported.
    pub iperf3_server: Iperf3Side,
    /// The iperf3 server's own text (`--get-server-output`), untrusted: shown in the text
    /// block only, made safe line by line; not in the JSON document.
    #[serde(skip)]
    pub server_output: Option<String>,
}

/// One end's figures.
#[derive(Debug, Serialize, PartialEq)]
pub struct Iperf3Side {
    /// "sender" or "receiver".
    pub role: &'static str,
    /// Bytes over all streams.
    pub bytes: u64,
    /// Seconds the data took (ours: first to last byte; the server's: its longest stream).
    pub seconds: f64,
    /// bytes × 8 / seconds.
    pub throughput_bps: f64,
    /// UDP: datagrams sent (sender) or the highest datagram count seen (receiver).
    pub packets: Option<u64>,
    /// UDP receiver: datagrams lost.
    pub lost: Option<u64>,
    /// UDP receiver: jitter in milliseconds (largest over the streams).
    pub jitter_ms: Option<f64>,
    /// Per stream: id and bytes.
    pub streams: Vec<Iperf3StreamBytes>,
}

/// One stream's bytes.
#[derive(Debug, Serialize, PartialEq)]
pub struct Iperf3StreamBytes {
    /// iperf3 stream id.
    pub id: u32,
    /// Bytes.
    pub bytes: u64,
}

impl Iperf3Side {
    /// One end's figures from its test results: `role` "sender" or "receiver".
    pub fn of(role: &'static str, r: &TestResults, udp: bool) -> Iperf3Side {
        let bytes = r.total_bytes();
        let seconds = r.duration_s();
        let receiver = role == "receiver";
        Iperf3Side {
            role,
            bytes,
            seconds,
            throughput_bps: bits_per_second(bytes, seconds),
            packets: udp.then(|| r.total_packets()),
            lost: (udp && receiver).then(|| r.total_errors()),
            jitter_ms: (udp && receiver)
                .then(|| r.streams.iter().map(|s| s.jitter * 1e3).fold(0.0, f64::max)),
            streams: r
                .streams
                .iter()
                .map(|s| Iperf3StreamBytes {
                    id: s.id,
                    bytes: s.bytes,
                })
                .collect(),
        }
    }
}
