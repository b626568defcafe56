//! The record of one measured run, both sides: what `run` stores, exports, prints and reports.
//! Owns the field layout (units in the names) and the conversions from what the ends report;
//! must not judge a run (see [`super::headline`]) or render it.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::rate::bits_per_second;
use super::relay::RelayCounts;
use crate::vocab::counters::{CpuUsage, IntervalSample, TransportStats};
use crate::vocab::plan::{Mechanism, Protocol};
use crate::wire::proto::{DataPathInfo, DataPathOptions, Omitted, ServerReport};

/// The run parameters of a campaign: what was asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parameters {
    /// Server address used.
    pub server: String,
    /// Whether the server was started in-process.
    pub embedded_server: bool,
    /// Protocols, in run order.
    pub protocols: Vec<Protocol>,
    /// Mechanisms, in run order.
    pub mechanisms: Vec<Mechanism>,
    /// Message size in bytes.
    pub msg_size: u32,
    /// Total bytes per run.
    pub total_bytes: u64,
    /// Runs per combination.
    pub repeat: u32,
    /// Fixed UDP stop-and-wait timeout (µs), null when adaptive.
    pub rto_us: Option<u64>,
    /// UDP pacing (bit/s), null when unpaced.
    pub rate_bps: Option<u64>,
    /// UDP grace period (µs).
    pub grace_us: u64,
    /// Data-path options requested.
    /// (Absent in results stored before it existed: defaults.)
    #[serde(default)]
    pub options: DataPathOptions,
    /// Concurrent flows per run (-P); 1 in results stored before it existed.
    #[serde(default = "one")]
    pub parallel: u32,
    /// The server sent and the client received (-R): the client's figures are then what it
    /// read, the server's what it sent. False in results stored before it existed.
    #[serde(default)]
    pub reverse: bool,
    /// `run -t`: how long each run was asked to send (µs); absent when runs end by their
    /// total (and in results stored before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// `run --bidir`: both directions ran at once (each run's `server_to_client` holds the
    /// second). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bidir: bool,
    /// `run -O`: the span at the start of each run left out of its figures (µs); absent
    /// without -O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omit_us: Option<u64>,
}

fn one() -> u32 {
    1
}

/// One run, both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Protocol.
    pub protocol: Protocol,
    /// Mechanism.
    pub mechanism: Mechanism,
    /// 0-based repeat index.
    pub repeat_index: u32,
    /// The server's session id.
    pub session: u32,
    /// The client's figures.
    pub client: ClientRecord,
    /// The server's figures.
    pub server: ServerRecord,
    /// `run --impair`: what the impairment relay did during this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<RelayCounts>,
    /// With -P N > 1: each flow's figures (the ones above are their sums); absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowRecord>,
    /// The server sent and the client received (-R). False in records made before it was
    /// kept per run (the campaign's parameters say it for those).
    #[serde(default)]
    pub reverse: bool,
    /// Which limit ended the run: its total (`-n`) or its time (`-t`). "bytes" in records made
    /// before it was kept.
    #[serde(default)]
    pub ended_by: EndedBy,
    /// `run --latency-probe`: round trips of probes beside the run, idle and under its load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_latency: Option<super::loaded_latency::LoadedLatency>,
    /// `--bidir`: the server → client direction, run at the same time as the client → server
    /// one that `client` and `server` above hold (with `reverse` false). Its client figures
    /// are what the client read, its server figures what the server sent, as in a `-R` run.
    /// Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_to_client: Option<Box<DirectionRecord>>,
    /// `run --rate max`: the search that found the rate this run was paced at (one search per
    /// message size × total; the repeats of it share it). Absent when the rate was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_search: Option<super::ratesearch::RateSearchRecord>,
}

/// One direction of a `--bidir` run, summed over its flows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionRecord {
    /// The server's session id of this direction (its first flow's).
    pub session: u32,
    /// The client's figures of this direction.
    pub client: ClientRecord,
    /// The server's figures of this direction.
    pub server: ServerRecord,
}

/// The limit that ended a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndedBy {
    /// The sender sent its total (`-n`).
    #[default]
    Bytes,
    /// The sender's time was up (`-t`).
    Time,
}

impl EndedBy {
    /// The limit's name as records spell it: `bytes` or `time`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndedBy::Bytes => "bytes",
            EndedBy::Time => "time",
        }
    }
}

/// One flow of a parallel run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// The server's session id for this flow.
    pub session: u32,
    /// The client's figures of this flow.
    pub client: ClientRecord,
    /// The server's figures of this flow.
    pub server: ServerRecord,
    /// `--bidir`: this flow ran server → client (as with -R); absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
}

/// The client's figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRecord {
    /// Messages sent (each once); with -R, messages received.
    pub messages: u64,
    /// Payload bytes sent (each once); with -R, unique bytes received.
    pub bytes: u64,
    /// The client's span of the run, seconds: first byte sent until the last was
    /// acknowledged (stop-and-wait: the server's acknowledgement message; TCP and QUIC
    /// streaming: the transport's acknowledgement, no later than the report's arrival) or,
    /// UDP streaming, until the last datagram was sent; with -R, first byte read to last. The
    /// run's transfer time is this span or, streaming, the server's if longer: see
    /// `headline::transfer_span_ns`.
    pub seconds: f64,
    /// The same, in nanoseconds.
    pub elapsed_ns: u64,
    /// `bytes` × 8 / `seconds`: the rate the client sent at (the offered load), or with -R
    /// received at. Not the goodput of a forward run: see the run's headline figures.
    #[serde(alias = "throughput_bps")]
    pub rate_bps: f64,
    /// Send calls.
    pub send_calls: u64,
    /// UDP datagrams put on the wire (with retransmissions).
    pub datagrams: u64,
    /// UDP stop-and-wait retransmissions.
    pub retransmissions: u64,
    /// UDP stop-and-wait timer expiries.
    pub timeouts: u64,
    /// Sends the OS refused.
    pub send_errors: u64,
    /// UDP streaming: messages the client numbered that its host refused to send (a full
    /// device queue, `ENOBUFS`): counted in `messages` (sent) and lost; absent when none.
    #[serde(default, skip_serializing_if = "crate::wire::proto::is_zero")]
    pub not_sent: u64,
    /// Stop-and-wait round-trip times, null for streaming.
    pub rtt: Option<RttFigures>,
    /// What the client's data path ran with.
    /// (Absent in results stored before it existed: defaults.)
    #[serde(default)]
    pub data_path: DataPathInfo,
    /// Transport counters, CPU time and interval series of the client.
    #[serde(flatten)]
    pub measured: EndMetrics,
    /// UDP with -R: what the client, as the receiver, found missing, repeated and out of
    /// order, and the jitter; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_received: Option<UdpReceipt>,
    /// `-O`: what the client had moved at its omit mark, which the headline leaves out (the
    /// counts above are the whole run's); absent without -O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
}

/// The server's figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRecord {
    /// Protocol the server saw.
    pub protocol: Protocol,
    /// Mechanism the server ran.
    pub mechanism: Mechanism,
    /// Messages read (UDP: unique datagrams); with -R, messages sent.
    pub messages: u64,
    /// Payload bytes read (unique); with -R, bytes sent.
    pub bytes: u64,
    /// The server's span on its own clock, seconds: first to last byte read; with -R, first
    /// byte sent until the client acknowledged the last (TCP and QUIC streaming), until the
    /// last datagram was sent (UDP streaming) or until the client had read everything. Usually shorter than the client's; `headline::transfer_span_ns` says when
    /// it is the run's transfer time.
    pub seconds: f64,
    /// The same, in nanoseconds.
    pub elapsed_ns: u64,
    /// `bytes` × 8 / `seconds`, over the server's own span.
    #[serde(alias = "throughput_bps")]
    pub rate_bps: f64,
    /// Read calls (TCP/QUIC) or datagrams received including duplicates (UDP).
    pub read_calls: u64,
    /// UDP: messages sent but never received.
    pub lost: u64,
    /// UDP streaming: of `lost`, the messages the server's host dropped (its socket buffer
    /// was full); absent where its socket does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_by_host: Option<u64>,
    /// UDP with -R: messages the server numbered that its host refused to send; absent when
    /// none.
    #[serde(default, skip_serializing_if = "crate::wire::proto::is_zero")]
    pub not_sent: u64,
    /// UDP: extra copies of messages already received.
    pub duplicates: u64,
    /// UDP: new messages that arrived after a later one.
    pub out_of_order: u64,
    /// UDP: interarrival jitter (RFC 3550), microseconds.
    #[serde(default)]
    pub jitter_us: Option<f64>,
    /// Stop-and-wait acknowledgements sent.
    pub acks_sent: u64,
    /// Whether the session ended early.
    pub aborted: bool,
    /// Why, if it did.
    pub abort_reason: Option<String>,
    /// What the server's data path ran with.
    /// (Absent in results stored before it existed: defaults.)
    #[serde(default)]
    pub data_path: DataPathInfo,
    /// Transport counters, CPU time and interval series of the server.
    #[serde(flatten)]
    pub measured: EndMetrics,
    /// `-O`: what the server had moved at its omit mark, which the headline leaves out (the
    /// counts above are the whole run's); absent without -O.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<Omitted>,
}

/// What one end measured besides its counts: the same fields for the client and the server.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EndMetrics {
    /// Share of the data packets this end sent again or lost (`transport.retrans_rate`),
    /// comparable across TCP, QUIC and UDP; null when unknown (and for a UDP server).
    #[serde(default)]
    pub retrans_rate: Option<f64>,
    /// This end's transport counters.
    #[serde(default)]
    pub transport: Option<TransportRecord>,
    /// CPU time of this end's process during the session.
    #[serde(default)]
    pub cpu: Option<CpuRecord>,
    /// With `-i`: what this end sent (client, all flows together) or read (server) per
    /// interval, and for a UDP server what it found missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalRecord>,
}

impl EndMetrics {
    /// The metrics of an end that moved `bytes` of payload.
    pub fn of(
        transport: Option<&TransportStats>,
        cpu: Option<&CpuUsage>,
        bytes: u64,
        intervals: &[IntervalSample],
    ) -> Self {
        EndMetrics {
            retrans_rate: transport.and_then(TransportStats::retrans_rate),
            transport: transport.map(TransportRecord::of),
            cpu: cpu.map(|c| CpuRecord::of(c, bytes)),
            intervals: intervals.iter().map(IntervalRecord::of).collect(),
        }
    }
}

/// One interval of a run, with its rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalRecord {
    /// Start, end, bytes and (UDP receiver) loss.
    #[serde(flatten)]
    pub sample: IntervalSample,
    /// bytes × 8 / (end − start), bit/s.
    pub bits_per_second: f64,
}

impl IntervalRecord {
    /// The record of one interval sample.
    pub fn of(s: &IntervalSample) -> Self {
        IntervalRecord {
            sample: *s,
            bits_per_second: s.bits_per_second(),
        }
    }
}

/// One end's transport counters with the derived retransmission rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportRecord {
    /// The counters as read.
    #[serde(flatten)]
    pub stats: TransportStats,
    /// `packets_retransmitted / packets_sent`; null when nothing was sent.
    pub retrans_rate: Option<f64>,
}

impl TransportRecord {
    /// The record of transport counters.
    pub fn of(t: &TransportStats) -> Self {
        TransportRecord {
            stats: t.clone(),
            retrans_rate: t.retrans_rate(),
        }
    }
}

/// CPU time of one process during a session, with its cost per GiB moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuRecord {
    /// User and system microseconds, and whether client and server shared the process.
    #[serde(flatten)]
    pub usage: CpuUsage,
    /// User plus system, seconds.
    pub seconds: f64,
    /// CPU seconds per GiB (2^30 bytes) of payload moved; null when no byte moved.
    pub seconds_per_gib: Option<f64>,
}

impl CpuRecord {
    /// The record of a CPU figure for a session that moved `bytes` of payload.
    pub fn of(c: &CpuUsage, bytes: u64) -> Self {
        CpuRecord {
            usage: *c,
            seconds: c.total_seconds(),
            seconds_per_gib: c.seconds_per_gib(bytes),
        }
    }
}

/// Round-trip times of a stop-and-wait run (nanoseconds), from an HDR histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RttFigures {
    /// Round trips measured (first transmissions only: Karn's rule).
    pub samples: u64,
    /// Smallest.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Population standard deviation (0 when absent from records made before it existed).
    #[serde(default)]
    pub stddev_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile (0 when absent from older records).
    #[serde(default)]
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile (0 when absent from older records).
    #[serde(default)]
    pub p999_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl RttFigures {
    /// Summarises a histogram; `None` when it is empty.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| RttFigures {
            samples: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            stddev_ns: h.stdev(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        })
    }
}

/// What a client receiving UDP (`--reverse`) counted beyond messages and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct UdpReceipt {
    /// Messages the server sent that never arrived.
    pub lost: u64,
    /// Of `lost`, the messages the client's host dropped (its socket buffer was full); absent
    /// where its socket does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_by_host: Option<u64>,
    /// Copies of messages already received.
    pub duplicates: u64,
    /// New messages that arrived after a later one.
    pub out_of_order: u64,
    /// Interarrival jitter (RFC 3550), microseconds.
    pub jitter_us: Option<f64>,
}

impl ServerRecord {
    /// The record of a server's report.
    pub fn of(r: &ServerReport) -> Self {
        let seconds = r.elapsed_ns as f64 / 1e9;
        ServerRecord {
            protocol: r.protocol,
            mechanism: r.mechanism,
            messages: r.messages,
            bytes: r.bytes,
            seconds,
            elapsed_ns: r.elapsed_ns,
            rate_bps: bits_per_second(r.bytes, seconds),
            read_calls: r.read_calls,
            lost: r.lost,
            dropped_by_host: r.dropped_by_host,
            not_sent: r.not_sent,
            duplicates: r.duplicates,
            out_of_order: r.out_of_order,
            jitter_us: r.jitter_us,
            acks_sent: r.acks_sent,
            aborted: r.aborted,
            abort_reason: r.abort_reason.clone(),
            data_path: r.data_path.clone(),
            measured: EndMetrics::of(r.transport.as_ref(), r.cpu.as_ref(), r.bytes, &r.intervals),
            omitted: r.omitted,
        }
    }
}

/// The per-session JSON line of `wirebench server --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionLine {
    /// Session id (text prints the same decimal number).
    pub session: u32,
    /// Client control address.
    pub peer: String,
    /// Message size requested.
    pub msg_size: u32,
    /// Total requested.
    pub total_bytes: u64,
    /// The figures.
    #[serde(flatten)]
    pub server: ServerRecord,
}
