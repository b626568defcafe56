//! Output of `wirebench dns`: the text block of each result. Formats the core records it is
//! given; never measures or opens files.

use std::fmt::Write as _;

use wirebench_core::record::dns::DnsResult;
use wirebench_core::wire::dns::DnsTransport;

use super::run_block::rtt_text;

/// The text block of one run: counts, response time, set-up cost, transport, the answer.
pub fn block(r: &DnsResult) -> String {
    let c = &r.counts;
    let mut s = format!(
        "  K={:<5} {:.0} queries/s (answered over the whole run, waits for timeouts included); sent {}, answered {} (NOERROR {}, NXDOMAIN {}",
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
