//! Validates the flags of `wirebench ping` and `wirebench rr` into an [`RrConfig`]; rejects
//! impossible combinations once, with a message that says what is allowed; and turns a
//! configuration into each run's session spec and result record (`spec`, `rr_result`, shared by
//! the `ping`/`rr` commands and the exporter's ping probes). No I/O beyond resolving the server
//! name.

use std::time::Duration;

use wirebench_core::vocab::plan::{self, Protocol, MAX_STREAM_MSG_SIZE, MIN_MSG_SIZE};
use wirebench_core::vocab::units::{parse_duration, ByteSize};
use wirebench_core::wire::datagram;

use super::error::usage;
use crate::runner::Target;
use wirebench_core::record::rr::{RrResult, ServerRr};
use wirebench_core::record::TransportRecord;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::error::UsageError;
use wirebench_core::wire::datagram::STAMPS_LEN;
use wirebench_core::wire::proto::{RrParams, MAX_RR_CONCURRENCY, MAX_RR_FLOWS};

use crate::cli::{ExchangeArgs, PingArgs, RrArgs};
use crate::flows::rr_client::{RrOutcome, RrSpec};
use wirebench_core::vocab::units::duration_ns;

/// Probes a ping sends when neither --count nor --time is given.
pub const DEFAULT_PING_COUNT: u64 = 100;
/// How long rr runs when neither --count nor --time is given.
pub const DEFAULT_RR_DURATION: Duration = Duration::from_secs(5);
/// Most connections opening at once with --new-connection (flows x concurrency).
pub const MAX_CONNECTIONS: u64 = 4096;
/// Largest --retries.
pub const MAX_RETRIES: u32 = 100;
/// Longest --path-note, bytes.
pub const MAX_PATH_NOTE: usize = 200;

/// Which subcommand: they differ in defaults, output and the 0-RTT probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExchangeKind {
    /// `wirebench ping`.
    Ping,
    /// `wirebench rr`.
    Rr,
}

/// Everything `ping` and `rr` need, validated.
#[derive(Debug, Clone)]
pub struct RrConfig {
    /// Ping or rr.
    pub kind: ExchangeKind,
    /// Server to test against.
    pub target: Target,
    /// Protocols, in the order they run.
    pub protocols: Vec<Protocol>,
    /// Request size, bytes.
    pub request: u32,
    /// Response size, bytes.
    pub response: u32,
    /// Requests outstanding per flow; one run per value, in order.
    pub concurrency: Vec<u32>,
    /// Flows; one run per value (each with every concurrency), in order.
    pub flows: Vec<u32>,
    /// A fresh connection per request.
    pub new_connection: bool,
    /// Requests per flow; `None` runs for `duration`.
    pub count: Option<u64>,
    /// How long to issue requests; `None` runs `count`.
    pub duration: Option<Duration>,
    /// Pause after each request, per flow.
    pub interval: Option<Duration>,
    /// UDP request timeout.
    pub timeout: Duration,
    /// UDP retries per request.
    pub retries: u32,
    /// One JSON document instead of text.
    pub json: bool,
    /// Pre-shared key to authenticate with (`--psk`); the embedded server requires it too.
    pub psk: Option<std::sync::Arc<wirebench_core::security::auth::Psk>>,
    /// What path the requests cross (`rr --path-note`), recorded with every result.
    pub path_note: Option<String>,
    /// `ping --per-probe`: every probe's delays listed in the result.
    pub per_probe: bool,
}

impl RrConfig {
    /// Validates `wirebench ping` flags.
    pub fn from_ping(args: &PingArgs) -> Result<Self, UsageError> {
        // The positional SERVER (as ping(8)'s target) or --server; clap refuses both.
        let server = args.target.as_deref().or(args.common.server.as_deref());
        let (target, protocols) = target_and_protocols(&args.common, server)?;
        let size = parse_size("-l/--msg-size", &args.size, &protocols, target.is_ipv6())?;
        if args.per_probe && (size as usize) < STAMPS_LEN {
            return Err(usage(format!(
                "--per-probe lists each probe's delays, which the server stamps into its answer: give -l {STAMPS_LEN} or more (got {size})"
            )));
        }
        let mut cfg = finish(
            ExchangeKind::Ping,
            &args.common,
            target,
            protocols,
            (size, size),
            vec![1],
            vec![1],
            false,
        )?;
        cfg.per_probe = args.per_probe;
        Ok(cfg)
    }

    /// Validates `wirebench rr` flags.
    pub fn from_rr(args: &RrArgs) -> Result<Self, UsageError> {
        let (target, protocols) =
            target_and_protocols(&args.common, args.common.server.as_deref())?;
        let ipv6 = target.is_ipv6();
        let request = parse_size("--request", &args.request, &protocols, ipv6)?;
        let response = parse_size("--response", &args.response, &protocols, ipv6)?;
        let concurrency = parse_list("--concurrency", &args.concurrency, MAX_RR_CONCURRENCY)?;
        let flows = parse_list("--flows", &args.flows, MAX_RR_FLOWS)?;
        let most_k = concurrency.iter().copied().max().unwrap_or(1);
        let most_t = flows.iter().copied().max().unwrap_or(1);
        if args.new_connection && u64::from(most_t) * u64::from(most_k) > MAX_CONNECTIONS {
            return Err(usage(format!(
                "--new-connection with --flows {most_t} x --concurrency {most_k} would keep {} connections opening at once: allowed up to {MAX_CONNECTIONS}",
                u64::from(most_t) * u64::from(most_k)
            )));
        }
        if args.new_connection && protocols.contains(&Protocol::Udp) {
            return Err(usage(
                "--new-connection applies to TCP and QUIC, not UDP (UDP has no connection to open)",
            ));
        }
        let path_note = match args.path_note.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(note) if note.len() > MAX_PATH_NOTE || note.contains(['\n', '\r']) => {
                return Err(usage(format!(
                    "--path-note: one line of at most {MAX_PATH_NOTE} bytes, e.g. \"netns lab: tbf rate 50mbit limit 32kb, MTU 1500\""
                )))
            }
            Some(note) => Some(note.to_string()),
        };
        let mut cfg = finish(
            ExchangeKind::Rr,
            &args.common,
            target,
            protocols,
            (request, response),
            concurrency,
            flows,
            args.new_connection,
        )?;
        cfg.path_note = path_note;
        Ok(cfg)
    }
}

impl RrConfig {
    /// The most flows any of its runs opens (the bound a volume or a connection count takes).
    pub fn most_flows(&self) -> u32 {
        self.flows.iter().copied().max().unwrap_or(1)
    }

    /// Its runs of one protocol, in order: every flows value, each with every concurrency.
    pub fn points(&self) -> impl Iterator<Item = RrPoint> + '_ {
        self.flows.iter().flat_map(move |&flows| {
            self.concurrency
                .iter()
                .map(move |&concurrency| RrPoint { flows, concurrency })
        })
    }
}

/// The load of one run: flows × requests outstanding per flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrPoint {
    /// Flows (connections or sockets).
    pub flows: u32,
    /// Requests outstanding per flow.
    pub concurrency: u32,
}

/// The result record of one run of `cfg` over `protocol` at `at`.
pub fn rr_result(cfg: &RrConfig, protocol: Protocol, at: RrPoint, out: &RrOutcome) -> RrResult {
    let RrPoint { flows, concurrency } = at;
    let c = &out.counts;
    let elapsed_ns = duration_ns(out.elapsed);
    let secs = out.elapsed.as_secs_f64();
    RrResult {
        protocol,
        request_bytes: cfg.request,
        response_bytes: cfg.response,
        flows,
        concurrency,
        new_connection: cfg.new_connection,
        count_per_flow: cfg.count,
        duration_ns: cfg.duration.map(duration_ns),
        timeout_ns: duration_ns(cfg.timeout),
        retries_allowed: cfg.retries,
        sent: c.sent,
        answered: c.answered,
        lost: c.lost,
        late: c.late,
        retries: c.retries,
        duplicates: c.duplicates,
        send_errors: out.send_errors,
        loss_ratio: if c.sent == 0 {
            0.0
        } else {
            c.lost as f64 / c.sent as f64
        },
        elapsed_ns,
        requests_per_second: if secs > 0.0 {
            c.answered as f64 / secs
        } else {
            0.0
        },
        response: out.response,
        connect: out.connect,
        resumed: out.resumed,
        setup_requests: out.setup_requests,
        retrans_rate: out
            .transport
            .as_ref()
            .and_then(TransportStats::retrans_rate),
        transport: out.transport.as_ref().map(TransportRecord::of),
        server: ServerRr {
            answered: out.server.messages,
            request_bytes: out.server.bytes,
            read_calls: out.server.read_calls,
            retransmitted_requests: out.server.duplicates,
            aborted: out.server.aborted,
            abort_reason: out.server.abort_reason.clone(),
        },
        path_note: cfg.path_note.clone(),
        one_way: out.one_way.clone(),
    }
}

/// The session and stop rule of one protocol × flows × concurrency run.
pub fn spec(cfg: &RrConfig, protocol: Protocol, at: RrPoint) -> RrSpec {
    RrSpec {
        params: RrParams {
            protocol,
            request: cfg.request,
            response: cfg.response,
            flows: at.flows,
            concurrency: at.concurrency,
            new_connection: cfg.new_connection,
            // ping times each direction: the server stamps its answers.
            stamps: cfg.kind == ExchangeKind::Ping && cfg.response as usize >= STAMPS_LEN,
        },
        count: cfg.count,
        duration: cfg.duration,
        interval: cfg.interval,
        timeout: cfg.timeout,
        retries: cfg.retries,
        resumption_probe: cfg.kind == ExchangeKind::Ping && protocol == Protocol::Quic,
        per_probe: cfg.per_probe,
    }
}

/// Parses `--concurrency` or `--flows` (`flag`): one whole number or a comma list of them,
/// each 1 to `max`.
pub(super) fn parse_list(flag: &str, text: &str, max: u32) -> Result<Vec<u32>, UsageError> {
    let list = text
        .split(',')
        .map(|item| {
            item.trim().parse::<u32>().map_err(|_| {
                usage(format!(
                    "{flag} {text:?}: expected whole numbers separated by commas, e.g. 1,2,4"
                ))
            })
        })
        .collect::<Result<Vec<u32>, UsageError>>()?;
    if let Some(bad) = list.iter().find(|&&n| n == 0 || n > max) {
        return Err(usage(format!(
            "{flag} {bad} is out of range: allowed 1 to {max} (or a comma list of such)"
        )));
    }
    Ok(list)
}

fn target_and_protocols(
    common: &ExchangeArgs,
    server: Option<&str>,
) -> Result<(Target, Vec<Protocol>), UsageError> {
    let protocols: Vec<Protocol> =
        plan::parse_list(&common.protocols).map_err(|e| usage(format!("--proto: {e}")))?;
    let target = super::address::resolve_target(server, &common.address)?;
    Ok((target, protocols))
}

/// Parses a request or response size and checks it against every protocol that will run.
fn parse_size(
    flag: &str,
    text: &str,
    protocols: &[Protocol],
    ipv6: bool,
) -> Result<u32, UsageError> {
    let size: ByteSize = text.parse().map_err(|e| usage(format!("{flag}: {e}")))?;
    let max = if protocols.contains(&Protocol::Udp) {
        datagram::max_message_size(ipv6)
    } else {
        MAX_STREAM_MSG_SIZE
    };
    if size.0 < u64::from(MIN_MSG_SIZE) || size.0 > u64::from(max) {
        let why = if protocols.contains(&Protocol::Udp) {
            " (one UDP datagram after the 16-byte header)"
        } else {
            ""
        };
        return Err(usage(format!(
            "{flag} {} is out of range: allowed {MIN_MSG_SIZE} to {max} bytes{why}",
            size.0
        )));
    }
    // Checked against max above, which fits u32.
    Ok(size.0 as u32)
}

#[allow(clippy::too_many_arguments)]
fn finish(
    kind: ExchangeKind,
    common: &ExchangeArgs,
    target: Target,
    protocols: Vec<Protocol>,
    (request, response): (u32, u32),
    concurrency: Vec<u32>,
    flows: Vec<u32>,
    new_connection: bool,
) -> Result<RrConfig, UsageError> {
    if common.count == Some(0) {
        return Err(usage("--count must be at least 1"));
    }
    let duration = match &common.duration {
        None => None,
        Some(s) => {
            // As on `run`: a bare number is seconds (`-t 10`), as in iperf3.
            let d = super::run::parse_run_time(s)?;
            if d.is_zero() {
                return Err(usage("-t/--time must be more than 0 (e.g. 5s)"));
            }
            Some(d)
        }
    };
    let interval = match &common.interval {
        None => None,
        Some(s) => Some(parse_duration(s).map_err(|e| usage(format!("--gap: {e}")))?),
    }
    .filter(|d| !d.is_zero());
    let timeout = parse_duration(&common.timeout).map_err(|e| usage(format!("--timeout: {e}")))?;
    if timeout < Duration::from_micros(100) || timeout > Duration::from_secs(60) {
        return Err(usage(format!(
            "--timeout {} is out of range: allowed 100us to 60s",
            common.timeout
        )));
    }
    if common.retries > MAX_RETRIES {
        return Err(usage(format!(
            "--retries {} is out of range: allowed 0 to {MAX_RETRIES}",
            common.retries
        )));
    }
    let (count, duration) = match (common.count, duration, kind) {
        (None, None, ExchangeKind::Ping) => (Some(DEFAULT_PING_COUNT), None),
        (None, None, ExchangeKind::Rr) => (None, Some(DEFAULT_RR_DURATION)),
        (c, d, _) => (c, d),
    };
    Ok(RrConfig {
        kind,
        target,
        protocols,
        request,
        response,
        concurrency,
        flows,
        new_connection,
        count,
        duration,
        interval,
        timeout,
        retries: common.retries,
        json: common.json,
        psk: common
            .psk
            .as_deref()
            .map(crate::transport::control::auth::load_psk)
            .transpose()?,
        path_note: None,
        per_probe: false,
    })
}
