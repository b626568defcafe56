//! The JSON document `wirebench run --json` prints (schema: docs/run-output.schema.json) and
//! the JSON line `wirebench server --json` prints per session. Field names carry their units.

use serde::{Deserialize, Serialize};
use wirebench_core::metrics::{CpuUsage, IntervalSample, TransportStats};
use wirebench_core::plan::{self, Combination, Mechanism, Protocol};
use wirebench_core::proto::{DataPathInfo, DataPathOptions, ServerReport};
use wirebench_core::stats::Summary;

use super::text::bits_per_second;
use crate::client::{ClientFigures, RttFigures, UdpReceipt};
use crate::config::{RunConfig, Target};
use crate::runner::{self, Campaign, RunRecord};
use crate::server::SessionSummary;

/// Version of the run document's layout; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole `run --json` document.
#[derive(Debug, Serialize)]
pub struct RunDocument {
    /// Layout version.
    pub schema_version: u32,
    /// Which program wrote it.
    pub tool: Tool,
    /// What was asked.
    pub parameters: Parameters,
    /// Every finished run, in order.
    pub runs: Vec<RunJson>,
    /// Min/mean/median/max/stddev per combination.
    pub summary: Vec<CombinationSummary>,
    /// Why the campaign stopped early, if it did.
    pub error: Option<String>,
}

/// Program name and version.
#[derive(Debug, Serialize)]
pub struct Tool {
    /// Always "wirebench".
    pub name: &'static str,
    /// Crate version.
    pub version: &'static str,
}

/// The run parameters.
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
}

fn one() -> u32 {
    1
}

/// One run, both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunJson {
    /// Protocol.
    pub protocol: Protocol,
    /// Mechanism.
    pub mechanism: Mechanism,
    /// 0-based repeat index.
    pub repeat_index: u32,
    /// The server's session id.
    pub session: u32,
    /// The client's figures.
    pub client: ClientJson,
    /// The server's figures.
    pub server: ServerJson,
    /// `run --impair`: what the impairment relay did during this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<crate::relay::RelayCounts>,
    /// With -P N > 1: each flow's figures (the ones above are their sums); absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowJson>,
}

/// One flow of a parallel run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowJson {
    /// The server's session id for this flow.
    pub session: u32,
    /// The client's figures of this flow.
    pub client: ClientJson,
    /// The server's figures of this flow.
    pub server: ServerJson,
}

/// The client's figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientJson {
    /// Messages sent (each once).
    pub messages: u64,
    /// Payload bytes sent (each once).
    pub bytes: u64,
    /// Transmission time in seconds.
    pub seconds: f64,
    /// Transmission time in nanoseconds.
    pub elapsed_ns: u64,
    /// Goodput in bit/s.
    pub throughput_bps: f64,
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
    pub transport: Option<TransportJson>,
    /// CPU time of this end's process during the session.
    #[serde(default)]
    pub cpu: Option<CpuJson>,
    /// With `-i`: what this end sent (client, all flows together) or read (server) per
    /// interval, and for a UDP server what it found missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalJson>,
}

impl EndMetrics {
    /// The metrics of an end that moved `bytes` of payload.
    fn of(
        transport: Option<&TransportStats>,
        cpu: Option<&CpuUsage>,
        bytes: u64,
        intervals: &[IntervalSample],
    ) -> Self {
        EndMetrics {
            retrans_rate: transport.and_then(TransportStats::retrans_rate),
            transport: transport.map(transport_json),
            cpu: cpu.map(|c| cpu_json(c, bytes)),
            intervals: intervals_json(intervals),
        }
    }
}

/// One interval of a run, with its rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalJson {
    /// Start, end, bytes and (UDP receiver) loss.
    #[serde(flatten)]
    pub sample: IntervalSample,
    /// bytes × 8 / (end − start), bit/s.
    pub bits_per_second: f64,
}

fn intervals_json(samples: &[IntervalSample]) -> Vec<IntervalJson> {
    samples
        .iter()
        .map(|s| IntervalJson {
            sample: *s,
            bits_per_second: s.bits_per_second(),
        })
        .collect()
}

/// One end's transport counters with the derived retransmission rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportJson {
    /// The counters as read.
    #[serde(flatten)]
    pub stats: TransportStats,
    /// `packets_retransmitted / packets_sent`; null when nothing was sent.
    pub retrans_rate: Option<f64>,
}

/// CPU time of one process during a session, with its cost per GiB moved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuJson {
    /// User and system microseconds, and whether client and server shared the process.
    #[serde(flatten)]
    pub usage: CpuUsage,
    /// User plus system, seconds.
    pub seconds: f64,
    /// CPU seconds per GiB (2^30 bytes) of payload moved; null when no byte moved.
    pub seconds_per_gib: Option<f64>,
}

/// The JSON form of transport counters.
pub fn transport_json(t: &TransportStats) -> TransportJson {
    TransportJson {
        stats: t.clone(),
        retrans_rate: t.retrans_rate(),
    }
}

/// The JSON form of a CPU figure for a session that moved `bytes` of payload.
pub fn cpu_json(c: &CpuUsage, bytes: u64) -> CpuJson {
    CpuJson {
        usage: *c,
        seconds: c.total_seconds(),
        seconds_per_gib: c.seconds_per_gib(bytes),
    }
}

/// The server's figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerJson {
    /// Protocol the server saw.
    pub protocol: Protocol,
    /// Mechanism the server ran.
    pub mechanism: Mechanism,
    /// Messages read (UDP: unique datagrams).
    pub messages: u64,
    /// Payload bytes read (unique).
    pub bytes: u64,
    /// First to last byte read, seconds.
    pub seconds: f64,
    /// First to last byte read, nanoseconds.
    pub elapsed_ns: u64,
    /// Goodput in bit/s over `seconds`.
    pub throughput_bps: f64,
    /// Read calls (TCP/QUIC) or datagrams received including duplicates (UDP).
    pub read_calls: u64,
    /// UDP: messages sent but never received.
    pub lost: u64,
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
}

/// Statistics of one combination over its repeats.
#[derive(Debug, Serialize)]
pub struct CombinationSummary {
    /// Protocol.
    pub protocol: Protocol,
    /// Mechanism.
    pub mechanism: Mechanism,
    /// Runs summarised.
    pub runs: usize,
    /// Client view.
    pub client: ViewSummary,
    /// Server view.
    pub server: ViewSummary,
}

/// Summaries of one side's figures.
#[derive(Debug, Serialize)]
pub struct ViewSummary {
    /// Messages.
    pub messages: Summary,
    /// Bytes.
    pub bytes: Summary,
    /// Seconds.
    pub seconds: Summary,
    /// bit/s.
    pub throughput_bps: Summary,
}

/// The per-session JSON line of `wirebench server --json`.
#[derive(Debug, Serialize)]
pub struct SessionLine {
    /// Session id.
    pub session: u32,
    /// Client control address.
    pub peer: String,
    /// Message size requested.
    pub msg_size: u32,
    /// Total requested.
    pub total_bytes: u64,
    /// The figures.
    #[serde(flatten)]
    pub server: ServerJson,
}

/// Converts a server report.
pub fn server_json(r: &ServerReport) -> ServerJson {
    let seconds = r.elapsed_ns as f64 / 1e9;
    ServerJson {
        protocol: r.protocol,
        mechanism: r.mechanism,
        messages: r.messages,
        bytes: r.bytes,
        seconds,
        elapsed_ns: r.elapsed_ns,
        throughput_bps: bits_per_second(r.bytes, seconds),
        read_calls: r.read_calls,
        lost: r.lost,
        duplicates: r.duplicates,
        out_of_order: r.out_of_order,
        jitter_us: r.jitter_us,
        acks_sent: r.acks_sent,
        aborted: r.aborted,
        abort_reason: r.abort_reason.clone(),
        data_path: r.data_path.clone(),
        measured: EndMetrics::of(r.transport.as_ref(), r.cpu.as_ref(), r.bytes, &r.intervals),
    }
}

/// The JSON line for one server session.
pub fn session_line(s: &SessionSummary) -> SessionLine {
    SessionLine {
        session: s.session,
        peer: s.peer.to_string(),
        msg_size: s.params.msg_size,
        total_bytes: s.params.total_bytes,
        server: server_json(&s.report),
    }
}

/// Converts one finished run into its JSON form (as stored and exported).
pub fn run_json(r: &RunRecord) -> RunJson {
    RunJson {
        protocol: r.combination.protocol,
        mechanism: r.combination.mechanism,
        repeat_index: r.repeat_index,
        session: r.outcome.session,
        client: client_json(&r.outcome.client),
        server: server_json(&r.outcome.server),
        relay: None,
        flows: r
            .flows
            .iter()
            .map(|f| FlowJson {
                session: f.session,
                client: client_json(&f.client),
                server: server_json(&f.server),
            })
            .collect(),
    }
}

/// Converts the client's figures.
pub fn client_json(c: &ClientFigures) -> ClientJson {
    let seconds = c.elapsed.as_secs_f64();
    ClientJson {
        messages: c.tally.messages,
        bytes: c.tally.bytes,
        seconds,
        elapsed_ns: u64::try_from(c.elapsed.as_nanos()).unwrap_or(u64::MAX),
        throughput_bps: bits_per_second(c.tally.bytes, seconds),
        send_calls: c.tally.send_calls,
        datagrams: c.tally.datagrams,
        retransmissions: c.tally.retransmissions,
        timeouts: c.tally.timeouts,
        send_errors: c.tally.send_errors,
        rtt: c.rtt,
        data_path: c.data_path.clone(),
        measured: EndMetrics::of(
            c.transport.as_ref(),
            c.cpu.as_ref(),
            c.tally.bytes,
            &c.intervals,
        ),
        udp_received: c.udp_received,
    }
}

fn view(runs: &[&RunJson], pick: impl Fn(&RunJson) -> (f64, f64, f64, f64)) -> Option<ViewSummary> {
    let values: Vec<(f64, f64, f64, f64)> = runs.iter().map(|r| pick(r)).collect();
    Some(ViewSummary {
        messages: Summary::of(&values.iter().map(|v| v.0).collect::<Vec<_>>())?,
        bytes: Summary::of(&values.iter().map(|v| v.1).collect::<Vec<_>>())?,
        seconds: Summary::of(&values.iter().map(|v| v.2).collect::<Vec<_>>())?,
        throughput_bps: Summary::of(&values.iter().map(|v| v.3).collect::<Vec<_>>())?,
    })
}

/// Min/mean/median/max/stddev per combination, in the order of `combinations`; a combination
/// without runs is left out.
pub fn summaries(combinations: &[Combination], runs: &[RunJson]) -> Vec<CombinationSummary> {
    combinations
        .iter()
        .filter_map(|combo| {
            let these: Vec<&RunJson> = runs
                .iter()
                .filter(|r| r.protocol == combo.protocol && r.mechanism == combo.mechanism)
                .collect();
            Some(CombinationSummary {
                protocol: combo.protocol,
                mechanism: combo.mechanism,
                runs: these.len(),
                client: view(&these, |r| {
                    let c = &r.client;
                    (
                        c.messages as f64,
                        c.bytes as f64,
                        c.seconds,
                        c.throughput_bps,
                    )
                })?,
                server: view(&these, |r| {
                    let s = &r.server;
                    (
                        s.messages as f64,
                        s.bytes as f64,
                        s.seconds,
                        s.throughput_bps,
                    )
                })?,
            })
        })
        .collect()
}

/// Builds the run document from a configuration and what the campaign produced.
pub fn run_document(cfg: &RunConfig, server: &str, campaign: &Campaign) -> RunDocument {
    let runs: Vec<RunJson> = campaign.runs.iter().map(run_json).collect();
    document(parameters(cfg, server), runs, campaign.failure.clone())
}

/// The parameters block of a run configuration.
pub fn parameters(cfg: &RunConfig, server: &str) -> Parameters {
    let mut protocols = Vec::new();
    let mut mechanisms = Vec::new();
    for c in &cfg.combinations {
        if !protocols.contains(&c.protocol) {
            protocols.push(c.protocol);
        }
        if !mechanisms.contains(&c.mechanism) {
            mechanisms.push(c.mechanism);
        }
    }
    // What every session of the plan is asked for, whatever its combination.
    let any = cfg.combinations.first().copied().unwrap_or(Combination {
        protocol: Protocol::Tcp,
        mechanism: Mechanism::Stream,
    });
    let session = runner::session_params(cfg, any);
    Parameters {
        server: server.to_string(),
        embedded_server: matches!(cfg.target, Target::Embedded(_)),
        protocols,
        mechanisms,
        msg_size: cfg.msg_size,
        total_bytes: cfg.total_bytes,
        repeat: cfg.repeat,
        rto_us: session.rto_us,
        rate_bps: session.rate_bps,
        grace_us: session.grace_us,
        options: session.options,
        parallel: cfg.parallel,
        reverse: cfg.reverse,
    }
}

/// Builds a run document from its parts (a live campaign, or one loaded from the store).
pub fn document(parameters: Parameters, runs: Vec<RunJson>, error: Option<String>) -> RunDocument {
    let combinations = plan::matrix(&parameters.protocols, &parameters.mechanisms);
    RunDocument {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "wirebench",
            version: env!("CARGO_PKG_VERSION"),
        },
        summary: summaries(&combinations, &runs),
        parameters,
        runs,
        error,
    }
}
