//! Output of `wirebench dns`: the per-run text block, the concurrency-sweep table with its
//! timeout curve, and the JSON document (docs/dns-output.schema.json). Formats what it is
//! given; never measures or opens files.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use wirebench_core::dns::{DnsCounts, DnsTransport};
use wirebench_core::metrics::TransportStats;

use super::json::{transport_json, TransportJson};
use super::text::rtt_text;
use crate::client::RttFigures;
use crate::config::dns::DnsConfig;
use crate::dns::DnsOutcome;

/// Version of the JSON document below; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole `--json` output of one `wirebench dns` command.
#[derive(Debug, Serialize, Deserialize)]
pub struct DnsDocument {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always `"dns"`.
    pub command: String,
    /// The resolver as named on the command line.
    pub resolver: String,
    /// The name asked for, fully qualified.
    pub name: String,
    /// The record type asked for.
    pub record_type: String,
    /// One result per transport × concurrency, in the order they ran.
    pub results: Vec<DnsResult>,
}

/// One transport × concurrency run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DnsResult {
    /// udp, tcp or dot.
    pub transport: DnsTransport,
    /// The address queried.
    pub resolver_addr: String,
    /// Flows (UDP sockets or connections).
    pub flows: u32,
    /// Queries outstanding per flow.
    pub concurrency: u32,
    /// TCP/DoT: a fresh connection per query.
    pub new_connection: bool,
    /// Queries per flow asked for.
    pub count_per_flow: u64,
    /// Per-query (UDP: per-copy) timeout, ns.
    pub timeout_ns: u64,
    /// UDP retries allowed per query.
    pub retries_allowed: u32,
    /// What was counted.
    pub counts: DnsCounts,
    /// timeouts / sent (0 when nothing was sent).
    pub timeout_ratio: f64,
    /// First query → last settled, ns.
    pub elapsed_ns: u64,
    /// answered / elapsed.
    pub queries_per_second: f64,
    /// Query sent → valid answer, ns.
    pub response: Option<RttFigures>,
    /// TCP connect, ns, one sample per connection (UDP: its TC fallbacks').
    pub tcp_connect: Option<RttFigures>,
    /// TLS handshake after the connect, ns, one sample per DoT connection.
    pub tls_handshake: Option<RttFigures>,
    /// TCP/DoT: (total_retrans - dsack_dups) / data_segs_out from TCP_INFO, summed over the
    /// connections; UDP: retries / datagrams sent; null when unknown.
    pub retrans_rate: Option<f64>,
    /// The client's transport counters.
    pub transport_stats: Option<TransportJson>,
    /// The first valid answer's answer section, one record per line.
    pub answer: Vec<String>,
}

impl DnsResult {
    /// The result of one run of `cfg` over `transport` with `concurrency`.
    pub fn new(
        cfg: &DnsConfig,
        transport: DnsTransport,
        concurrency: u32,
        out: &DnsOutcome,
    ) -> Self {
        let c = out.counts;
        let secs = out.elapsed.as_secs_f64();
        DnsResult {
            transport,
            resolver_addr: cfg.addr_for(transport).to_string(),
            flows: cfg.flows,
            concurrency,
            new_connection: cfg.new_connection && transport != DnsTransport::Udp,
            count_per_flow: cfg.count,
            timeout_ns: u64::try_from(cfg.timeout.as_nanos()).unwrap_or(u64::MAX),
            retries_allowed: cfg.retries,
            counts: c,
            timeout_ratio: c.timeout_pct() / 100.0,
            elapsed_ns: u64::try_from(out.elapsed.as_nanos()).unwrap_or(u64::MAX),
            queries_per_second: if secs > 0.0 {
                c.answered as f64 / secs
            } else {
                0.0
            },
            response: out.response,
            tcp_connect: out.connect,
            tls_handshake: out.tls_handshake,
            retrans_rate: out
                .transport
                .as_ref()
                .and_then(TransportStats::retrans_rate),
            transport_stats: out.transport.as_ref().map(transport_json),
            answer: out.answer.clone(),
        }
    }
}

/// The heading printed before the runs of one transport.
pub fn heading(cfg: &DnsConfig, transport: DnsTransport) -> String {
    let addr = cfg.addr_for(transport).to_string();
    let to = if addr == cfg.resolver_name {
        addr
    } else {
        format!("{} ({addr})", cfg.resolver_name)
    };
    format!(
        "dns {transport} to {to}: {} {}, {} queries per flow, {} flow(s){}",
        cfg.question.name(),
        cfg.question.rtype(),
        cfg.count,
        cfg.flows,
        if cfg.new_connection && transport != DnsTransport::Udp {
            ", a new connection per query"
        } else {
            ""
        }
    )
}

/// The text block of one run: counts, response time, set-up cost, transport, the answer.
pub fn block(r: &DnsResult) -> String {
    let c = &r.counts;
    let mut s = format!(
        "  K={:<5} {:.0} queries/s; sent {}, answered {} (NOERROR {}, NXDOMAIN {}",
        r.concurrency, r.queries_per_second, c.sent, c.answered, c.noerror, c.nxdomain
    );
    if c.servfail + c.refused + c.other_rcode > 0 {
        let _ = write!(
            s,
            ", SERVFAIL {}, REFUSED {}, other {}",
            c.servfail, c.refused, c.other_rcode
        );
    }
    let _ = write!(
        s,
        "), timeouts {} ({:.3}%)",
        c.timeouts,
        r.timeout_ratio * 100.0
    );
    if r.transport == DnsTransport::Udp {
        let _ = write!(
            s,
            ", retries {}, TC retried over TCP {}, late {}",
            c.retries, c.tc_retries, c.late
        );
    }
    let _ = write!(s, ", wrong {}", c.wrong);
    if c.failed > 0 {
        let _ = write!(s, ", failed {}", c.failed);
    }
    if c.send_errors > 0 {
        let _ = write!(s, ", send errors {}", c.send_errors);
    }
    s.push('\n');
    match &r.response {
        Some(rtt) => {
            let _ = writeln!(s, "    response:      {}", rtt_text(rtt));
        }
        None => s.push_str("    response:      no query answered\n"),
    }
    if let Some(t) = &r.tcp_connect {
        let _ = writeln!(
            s,
            "    tcp connect:   {} ({} connections)",
            rtt_text(t),
            c.connections
        );
    }
    if let Some(t) = &r.tls_handshake {
        let _ = writeln!(s, "    tls handshake: {}", rtt_text(t));
    }
    if let Some(t) = &r.transport_stats {
        let what = if r.transport == DnsTransport::Udp {
            "datagrams sent again"
        } else {
            "TCP segments retransmitted (TCP_INFO)"
        };
        let _ = writeln!(
            s,
            "    transport:     {} of {} {what} (retrans_rate {})",
            t.stats.packets_retransmitted,
            t.stats.packets_sent,
            t.retrans_rate
                .map_or("n/a".into(), |r| format!("{:.4}%", r * 100.0))
        );
    }
    if !r.answer.is_empty() {
        let _ = writeln!(s, "    answer:        {}", r.answer.join(" | "));
    }
    s
}

/// The sweep table: one row per transport × K, then per transport the timeout curve as bars.
pub fn sweep_table(results: &[DnsResult]) -> String {
    let mut s = String::from(
        "\nconcurrency sweep (timeouts = queries never answered; retrans = UDP retries or TCP retransmissions)\n",
    );
    let _ = writeln!(
        s,
        "  {:<4} {:>6} {:>10} {:>10} {:>9} {:>9} {:>8} {:>10} {:>10} {:>10}",
        "tr",
        "K",
        "sent",
        "answered",
        "timeouts",
        "timeout%",
        "retrans%",
        "p50 µs",
        "p99 µs",
        "q/s"
    );
    for r in results {
        let (p50, p99) = r.response.as_ref().map_or((0.0, 0.0), |x| {
            (x.p50_ns as f64 / 1000.0, x.p99_ns as f64 / 1000.0)
        });
        let _ = writeln!(
            s,
            "  {:<4} {:>6} {:>10} {:>10} {:>9} {:>9.3} {:>8} {:>10.1} {:>10.1} {:>10.0}",
            r.transport.name(),
            r.concurrency,
            r.counts.sent,
            r.counts.answered,
            r.counts.timeouts,
            r.timeout_ratio * 100.0,
            r.retrans_rate
                .map_or("n/a".into(), |x| format!("{:.3}", x * 100.0)),
            p50,
            p99,
            r.queries_per_second
        );
    }
    let worst = results
        .iter()
        .map(|r| r.timeout_ratio)
        .fold(0.0_f64, f64::max);
    let _ = writeln!(
        s,
        "\ntimeout curve (bar = timeout%, full width = {:.3}%)",
        worst * 100.0
    );
    for r in results {
        let width = if worst > 0.0 {
            (r.timeout_ratio / worst * 40.0).round() as usize
        } else {
            0
        };
        let _ = writeln!(
            s,
            "  {:<4} K={:<6} {:<40} {:.3}%",
            r.transport.name(),
            r.concurrency,
            "#".repeat(width),
            r.timeout_ratio * 100.0
        );
    }
    s
}
