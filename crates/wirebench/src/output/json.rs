//! The JSON document `wirebench run --json` prints (schema: docs/run-output.schema.json) and
//! the JSON line `wirebench server --json` prints per session. Field names carry their units.

use serde::{Deserialize, Serialize};
use wirebench_core::plan::{self, Combination, Mechanism, Protocol};
use wirebench_core::proto::{DataPathInfo, DataPathOptions, ServerReport};
use wirebench_core::stats::Summary;

use super::text::bits_per_second;
use crate::client::RttFigures;
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
        acks_sent: r.acks_sent,
        aborted: r.aborted,
        abort_reason: r.abort_reason.clone(),
        data_path: r.data_path.clone(),
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
    let c = &r.outcome.client;
    let seconds = c.elapsed.as_secs_f64();
    RunJson {
        protocol: r.combination.protocol,
        mechanism: r.combination.mechanism,
        repeat_index: r.repeat_index,
        session: r.outcome.session,
        client: ClientJson {
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
        },
        server: server_json(&r.outcome.server),
        relay: None,
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
