//! Output of `wirebench ping` and `wirebench rr`: the text lines and the JSON document
//! (docs/rr-output.schema.json). Formats what it is given; never measures or opens files.

use std::fmt::Write as _;

use serde::Serialize;
use wirebench_core::metrics::TransportStats;
use wirebench_core::plan::Protocol;

use super::json::{transport_json, TransportJson};
use super::text::rtt_text;
use crate::client::RttFigures;
use crate::config::rr::{ExchangeKind, RrConfig};
use crate::rr_client::{ResumedFigures, RrOutcome};

/// Version of the JSON document below; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole `--json` output of one `ping` or `rr` command.
#[derive(Debug, Serialize)]
pub struct RrDocument {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"ping"` or `"rr"`.
    pub command: &'static str,
    /// The server, as named (or `embedded ADDR`).
    pub server: String,
    /// One result per protocol × concurrency, in the order they ran.
    pub results: Vec<RrResult>,
}

/// One protocol × concurrency run, client and server figures.
#[derive(Debug, Serialize)]
pub struct RrResult {
    /// Transport protocol.
    pub protocol: Protocol,
    /// Request size, bytes.
    pub request_bytes: u32,
    /// Response size, bytes.
    pub response_bytes: u32,
    /// Flows (connections or sockets).
    pub flows: u32,
    /// Requests outstanding per flow.
    pub concurrency: u32,
    /// A fresh connection per request.
    pub new_connection: bool,
    /// Requests per flow asked for (null when run for a duration).
    pub count_per_flow: Option<u64>,
    /// How long new requests were issued, ns (null when run for a count).
    pub duration_ns: Option<u64>,
    /// UDP request timeout, ns.
    pub timeout_ns: u64,
    /// UDP retries allowed per request.
    pub retries_allowed: u32,
    /// Distinct requests sent (retries not counted).
    pub sent: u64,
    /// Requests answered in time, each once.
    pub answered: u64,
    /// UDP requests whose retries were exhausted without an answer.
    pub lost: u64,
    /// UDP answers that arrived after their request was declared lost (never a sample).
    pub late: u64,
    /// UDP copies sent again after a timeout.
    pub retries: u64,
    /// UDP answers to a request already answered (a retry and its original).
    pub duplicates: u64,
    /// Sends the OS refused.
    pub send_errors: u64,
    /// lost / sent (0 when nothing was sent).
    pub loss_ratio: f64,
    /// First request → last answer or loss, ns.
    pub elapsed_ns: u64,
    /// answered / elapsed, requests per second.
    pub requests_per_second: f64,
    /// Response time (request sent → response read), ns.
    pub response: Option<RttFigures>,
    /// TCP connect or QUIC handshake, ns: one sample per connection (null for UDP).
    pub connect: Option<RttFigures>,
    /// QUIC resumed with 0-RTT (ping over QUIC only).
    pub resumed: Option<ResumedFigures>,
    /// Requests outside the measured ones that the server answered (the 0-RTT probe).
    pub setup_requests: u64,
    /// Share of the client's packets sent again or lost, as in `run`: TCP from TCP_INFO
    /// ((total_retrans - dsack_dups) / data_segs_out, summed over connections), QUIC lost /
    /// sent packets, UDP retries / request datagrams; null when unknown.
    pub retrans_rate: Option<f64>,
    /// The client's transport counters, summed over its connections.
    pub transport: Option<TransportJson>,
    /// The server's view.
    pub server: ServerRr,
}

/// What the server reported for the session.
#[derive(Debug, Serialize)]
pub struct ServerRr {
    /// Requests it answered (UDP: request datagrams answered, retries included).
    pub answered: u64,
    /// Request bytes it read.
    pub request_bytes: u64,
    /// Read calls (TCP/QUIC) or request datagrams received (UDP).
    pub read_calls: u64,
    /// UDP: answered copies marked as retransmissions.
    pub retransmitted_requests: u64,
    /// The session ended abnormally.
    pub aborted: bool,
    /// Why.
    pub abort_reason: Option<String>,
}

impl RrResult {
    /// The result of one run of `cfg` over `protocol` with `concurrency`.
    pub fn new(cfg: &RrConfig, protocol: Protocol, concurrency: u32, out: &RrOutcome) -> Self {
        let c = &out.counts;
        let elapsed_ns = u64::try_from(out.elapsed.as_nanos()).unwrap_or(u64::MAX);
        let secs = out.elapsed.as_secs_f64();
        RrResult {
            protocol,
            request_bytes: cfg.request,
            response_bytes: cfg.response,
            flows: cfg.flows,
            concurrency,
            new_connection: cfg.new_connection,
            count_per_flow: cfg.count,
            duration_ns: cfg
                .duration
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            timeout_ns: u64::try_from(cfg.timeout.as_nanos()).unwrap_or(u64::MAX),
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
            transport: out.transport.as_ref().map(transport_json),
            server: ServerRr {
                answered: out.server.messages,
                request_bytes: out.server.bytes,
                read_calls: out.server.read_calls,
                retransmitted_requests: out.server.duplicates,
                aborted: out.server.aborted,
                abort_reason: out.server.abort_reason.clone(),
            },
        }
    }
}

/// The heading printed before the runs of one protocol.
pub fn heading(cfg: &RrConfig, protocol: Protocol, server: &str) -> String {
    let how_long = match (cfg.count, cfg.duration) {
        (Some(n), _) => format!("{n} per flow"),
        (None, Some(d)) => format!("for {d:?}"),
        (None, None) => String::new(),
    };
    match cfg.kind {
        ExchangeKind::Ping => format!(
            "ping {protocol} to {server}: {}-byte probes, {how_long}",
            cfg.request
        ),
        ExchangeKind::Rr => format!(
            "rr {protocol} to {server}: {} B requests, {} B responses, {} flow(s){}, {how_long}",
            cfg.request,
            cfg.response,
            cfg.flows,
            if cfg.new_connection {
                ", a new connection per request"
            } else {
                ""
            }
        ),
    }
}

/// The text block of one ping run.
pub fn ping_block(r: &RrResult) -> String {
    let mut s = String::new();
    if let Some(c) = &r.connect {
        let what = match r.protocol {
            Protocol::Quic => "QUIC handshake",
            _ => "TCP connect",
        };
        let _ = write!(s, "  set-up: {what} {}", micros(c.mean_ns));
        if let Some(z) = &r.resumed {
            let _ = write!(s, "; resumed: {}", resumed_text(z));
        }
        s.push('\n');
    }
    let _ = writeln!(s, "  probes: {}", counts_text(r));
    match &r.response {
        Some(rtt) => {
            let _ = writeln!(s, "  rtt:    {}", rtt_text(rtt));
        }
        None => s.push_str("  rtt:    no probe answered\n"),
    }
    if let Some(t) = &r.transport {
        let _ = writeln!(
            s,
            "  transport: {} of {} packets sent again or lost (retrans_rate {})",
            t.stats.packets_retransmitted,
            t.stats.packets_sent,
            t.retrans_rate
                .map_or("n/a".into(), |r| format!("{:.4}%", r * 100.0))
        );
    }
    let _ = writeln!(s, "  server: {}", server_text(&r.server));
    s
}

/// One line of an rr run (one K), and with `detail` the full response-time ladder and, with a
/// new connection per request, the handshake ladder.
pub fn rr_block(r: &RrResult, detail: bool) -> String {
    let mut s = format!(
        "  K={:<5} {:.0} req/s, {}",
        r.concurrency,
        r.requests_per_second,
        counts_text(r)
    );
    if let Some(rtt) = &r.response {
        let _ = write!(
            s,
            "; p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
            micros(rtt.p50_ns as f64),
            micros(rtt.p90_ns as f64),
            micros(rtt.p99_ns as f64),
            micros(rtt.p999_ns as f64),
            micros(rtt.max_ns as f64)
        );
    }
    if let Some(rate) = r.retrans_rate {
        let _ = write!(s, "; retrans_rate {:.4}%", rate * 100.0);
    }
    let _ = writeln!(s, "; server answered {}", r.server.answered);
    if detail {
        if let Some(rtt) = &r.response {
            let _ = writeln!(s, "    response:  {}", rtt_text(rtt));
        }
        if r.new_connection {
            if let Some(c) = &r.connect {
                let _ = writeln!(s, "    handshake: {}", rtt_text(c));
            }
        }
    }
    s
}

fn counts_text(r: &RrResult) -> String {
    let mut s = format!(
        "sent {}, answered {}, lost {} ({:.3}%), late {}, retries {}",
        r.sent,
        r.answered,
        r.lost,
        r.loss_ratio * 100.0,
        r.late,
        r.retries
    );
    if r.send_errors > 0 {
        let _ = write!(s, ", send errors {}", r.send_errors);
    }
    s
}

fn server_text(s: &ServerRr) -> String {
    let mut t = format!(
        "answered {} requests ({} B read)",
        s.answered, s.request_bytes
    );
    if s.aborted {
        let _ = write!(
            t,
            ", ABORTED: {}",
            s.abort_reason.as_deref().unwrap_or("no reason given")
        );
    }
    t
}

fn resumed_text(z: &ResumedFigures) -> String {
    if !z.zero_rtt_sent {
        return "no session ticket, so no 0-RTT".into();
    }
    let verdict = if z.zero_rtt_accepted {
        "0-RTT accepted"
    } else {
        "0-RTT refused"
    };
    match z.first_response_ns {
        Some(ns) => format!(
            "{verdict}, first response {} after connect",
            micros(ns as f64)
        ),
        None => format!("{verdict}, the early request was not answered"),
    }
}

fn micros(ns: f64) -> String {
    format!("{:.1} µs", ns / 1000.0)
}
