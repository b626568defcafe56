//! The Prometheus text exposition of the services' pages: the server's and the exporter's own
//! counters (`/metrics`) and one probe's result (`/probe`). It renders the result model
//! (`RunRecord::headline`, `record::service`) and computes no figure of its own.
//!
//! The format is Prometheus's text format 0.0.4 (what every Prometheus scrapes, and what
//! `promtool check metrics` lints): counters carry their `_total` name in `# TYPE`, which the
//! OpenMetrics 1.0 form does not, and promtool 2.42 (Debian 12) rejects that form's counters.

use std::fmt::Write as _;

use wirebench_core::record::dns::DnsResult;
use wirebench_core::record::one_way::{DelayFigures, OneWayDelay};
use wirebench_core::record::rr::RrResult;
use wirebench_core::record::service::{ExporterCounts, ProbeOutcome, ProbeResult, ServerCounts};
use wirebench_core::record::{RttFigures, RunRecord};

/// The `Content-Type` of every page rendered here.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The server's `/metrics` page.
pub fn server_page(c: &ServerCounts) -> String {
    let mut p = Page::default();
    let sessions = [
        ("started", c.sessions_started),
        ("finished", c.sessions_finished),
        ("aborted", c.sessions_aborted),
    ];
    for (what, n) in sessions {
        let name = format!("wirebench_server_sessions_{what}_total");
        p.family(&name, "counter", &format!("Sessions {what}."));
        p.sample(&name, &[], n as f64);
    }
    let name = "wirebench_server_sessions_refused_total";
    p.family(
        name,
        "counter",
        "Session requests refused, by reason: the limit flag, shutdown or invalid-request.",
    );
    for (reason, n) in &c.sessions_refused {
        p.sample(name, &[("reason", reason)], *n as f64);
    }
    let name = "wirebench_server_limit_hits_total";
    p.family(
        name,
        "counter",
        "Times a session ran into a limit (refused or aborted), by the limit flag.",
    );
    for (limit, n) in &c.limit_hits {
        p.sample(name, &[("limit", limit)], *n as f64);
    }
    let name = "wirebench_server_sessions_running";
    p.family(name, "gauge", "Sessions running now.");
    p.sample(name, &[], c.sessions_running as f64);
    for (dir, help) in [
        (
            "read",
            "Payload bytes read from clients, counted when each session ends.",
        ),
        (
            "sent",
            "Payload bytes sent to clients (reversed sessions), counted when each session ends.",
        ),
    ] {
        let name = format!("wirebench_server_bytes_{dir}_total");
        p.family(&name, "counter", help);
        for b in &c.bytes {
            let n = if dir == "read" { b.read } else { b.sent };
            p.sample(&name, &[("proto", b.protocol.as_str())], n as f64);
        }
    }
    p.out
}

/// The exporter's own `/metrics` page.
pub fn exporter_page(c: &ExporterCounts) -> String {
    let mut p = Page::default();
    let name = "wirebench_exporter_probes_total";
    p.family(name, "counter", "Probes run, successful or not.");
    p.sample(name, &[], c.probes_run as f64);
    let name = "wirebench_exporter_probes_failed_total";
    p.family(name, "counter", "Probes that ran and failed.");
    p.sample(name, &[], c.probes_failed as f64);
    let name = "wirebench_exporter_probes_refused_total";
    p.family(
        name,
        "counter",
        "Probe requests refused before running, by reason.",
    );
    for (reason, n) in &c.probes_refused {
        p.sample(name, &[("reason", reason)], *n as f64);
    }
    let name = "wirebench_exporter_probes_in_flight";
    p.family(name, "gauge", "Probes running now.");
    p.sample(name, &[], c.probes_in_flight as f64);
    p.out
}

/// One probe's page: success and duration always, the failure's reason when it failed, and
/// the finished test's figures by kind.
pub fn probe_page(o: &ProbeOutcome) -> String {
    let mut p = Page::default();
    let failure = o.failure();
    p.gauge(
        "wirebench_probe_success",
        "Whether the probe's test finished and passed (1) or failed (0).",
        if failure.is_none() { 1.0 } else { 0.0 },
    );
    p.gauge(
        "wirebench_probe_duration_seconds",
        "Wall time of the whole probe: set-up, the run and its report.",
        o.duration_ns as f64 / 1e9,
    );
    if let Some(f) = &failure {
        let name = "wirebench_probe_failure_info";
        p.family(
            name,
            "gauge",
            "Why the probe failed: timeout, error, aborted, unanswered or rcode (the exporter's log has the detail).",
        );
        p.sample(name, &[("reason", f.reason.as_str())], 1.0);
    }
    match &o.result {
        None => {}
        Some(r @ (ProbeResult::Run(run) | ProbeResult::Iperf3(run))) => {
            run_figures(&mut p, r.kind(), run)
        }
        Some(ProbeResult::Ping(r)) => exchange_figures(&mut p, "ping", r),
        Some(ProbeResult::Rr(r)) => exchange_figures(&mut p, "rr", r),
        Some(ProbeResult::Dns(d)) => dns_figures(&mut p, d),
    }
    p.out
}

/// What the probe ran: its kind, protocol and mechanism (or exchange).
fn info(p: &mut Page, kind: &str, proto: &str, mode: &str) {
    let name = "wirebench_probe_info";
    p.family(
        name,
        "gauge",
        "What the probe ran: kind, protocol and mechanism.",
    );
    p.sample(
        name,
        &[("kind", kind), ("proto", proto), ("mode", mode)],
        1.0,
    );
}

/// A transfer's figures (`kind=run` and `kind=iperf3`): the run's headline.
fn run_figures(p: &mut Page, kind: &str, run: &RunRecord) {
    let h = run.headline();
    info(p, kind, run.protocol.as_str(), run.mechanism.as_str());
    p.gauge(
        "wirebench_probe_transfer_seconds",
        "The run's transfer time (the client's span), which the rates are taken over.",
        h.transfer_ns as f64 / 1e9,
    );
    // Bytes per second, as Prometheus's base units want (promtool lints bits): the model's
    // bit/s over 8.
    if let Some(bps) = h.goodput_bps {
        p.gauge(
            "wirebench_probe_goodput_bytes_per_second",
            "Goodput: unique bytes the receiver got / transfer time.",
            bps / 8.0,
        );
    }
    if let Some(bps) = h.sent_bps {
        p.gauge(
            "wirebench_probe_sent_bytes_per_second",
            "The sender's rate: bytes sent (each once) / transfer time.",
            bps / 8.0,
        );
    }
    p.gauge(
        "wirebench_probe_sent_bytes",
        "Payload bytes the sender sent (each once).",
        h.sent_bytes as f64,
    );
    p.gauge(
        "wirebench_probe_received_bytes",
        "Unique payload bytes the receiver got.",
        h.received_bytes as f64,
    );
    if let Some(d) = &h.delivery {
        p.gauge(
            "wirebench_probe_udp_lost_messages",
            "UDP: messages sent that never arrived.",
            d.lost as f64,
        );
        p.gauge(
            "wirebench_probe_udp_lost_ratio",
            "UDP: messages lost / messages sent.",
            d.lost_pct / 100.0,
        );
        if let Some(split) = &d.loss_split {
            p.gauge(
                "wirebench_probe_udp_lost_receiving_host_messages",
                "UDP: of the messages lost, those the receiving host dropped (its socket buffer was full).",
                split.receiving_host as f64,
            );
            p.gauge(
                "wirebench_probe_udp_lost_sending_host_messages",
                "UDP: of the messages lost, those the sending host did not send (its device queue was full).",
                split.sending_host as f64,
            );
            p.gauge(
                "wirebench_probe_udp_lost_path_messages",
                "UDP: of the messages lost, those lost on the path (neither host dropped them).",
                split.path as f64,
            );
        }
        p.gauge(
            "wirebench_probe_udp_duplicate_messages",
            "UDP: extra copies of messages already received.",
            d.duplicates as f64,
        );
        p.gauge(
            "wirebench_probe_udp_out_of_order_messages",
            "UDP: new messages that arrived after a later one.",
            d.out_of_order as f64,
        );
    }
    retransmissions(p, h.retrans_rate);
    if let Some(rtt) = &h.rtt {
        rtt_summary(p, rtt);
    }
}

/// The share of packets the transport sent again, one help text for every kind.
fn retransmissions(p: &mut Page, rate: Option<f64>) {
    if let Some(rate) = rate {
        p.gauge(
            "wirebench_probe_retransmission_ratio",
            "The sender's data packets sent again (TCP from TCP_INFO, QUIC, UDP retries or stop-and-wait) or lost (UDP streaming) / packets sent.",
            rate,
        );
    }
}

/// A ping's or rr's figures (`wirebench_probe_ping_*`, `wirebench_probe_rr_*`): requests sent,
/// answered, lost and late, and their response times.
fn exchange_figures(p: &mut Page, kind: &str, r: &RrResult) {
    info(p, kind, r.protocol.as_str(), kind);
    let what = if kind == "ping" {
        "Ping probes"
    } else {
        "Requests"
    };
    let counts = [
        ("sent", r.sent, format!("{what} sent (each once).")),
        ("answered", r.answered, format!("{what} answered in time.")),
        (
            "lost",
            r.lost,
            format!("{what} never answered in time (UDP, after the retries)."),
        ),
        (
            "late",
            r.late,
            "Answers that came after their request was given up (UDP).".to_string(),
        ),
    ];
    for (name, n, help) in counts {
        p.gauge(&format!("wirebench_probe_{kind}_{name}"), &help, n as f64);
    }
    p.gauge(
        &format!("wirebench_probe_{kind}_loss_ratio"),
        &format!("{what} lost / sent."),
        r.loss_ratio,
    );
    if kind == "rr" {
        p.gauge(
            "wirebench_probe_rr_retries",
            "UDP request copies sent again after a timeout.",
            r.retries as f64,
        );
        p.gauge(
            "wirebench_probe_rr_flows",
            "Flows (connections or UDP sockets) the requests went over.",
            f64::from(r.flows),
        );
        p.gauge(
            "wirebench_probe_rr_concurrency",
            "Requests in flight per flow.",
            f64::from(r.concurrency),
        );
        p.gauge(
            "wirebench_probe_requests_per_second",
            "Requests answered / time from the first request to the last answer.",
            r.requests_per_second,
        );
        retransmissions(p, r.retrans_rate);
    }
    if let Some(rtt) = &r.response {
        rtt_summary(p, rtt);
    }
    if let Some(w) = &r.one_way {
        one_way_figures(p, w);
    }
}

/// Each direction's delay (`ping` over UDP against a server that stamps its answers): p50 and
/// p99 up and down, and the bound every one of them carries. Nothing when none was measured
/// (the exchanges fit no clock, or the server does not stamp).
fn one_way_figures(p: &mut Page, w: &OneWayDelay) {
    let Some(clock) = &w.clock else {
        return;
    };
    for (q, of) in [
        (
            "p50",
            (|d: &DelayFigures| d.p50_ns) as fn(&DelayFigures) -> i64,
        ),
        ("p99", |d: &DelayFigures| d.p99_ns),
    ] {
        let name = format!("wirebench_probe_one_way_delay_{q}_seconds");
        p.family(
            &name,
            "gauge",
            &format!("The {q} (nearest rank) of each direction's delay over the answered probes (up: client to server, down: server to client); within wirebench_probe_one_way_bound_seconds of the truth."),
        );
        for (direction, figures) in [("up", &w.up), ("down", &w.down)] {
            if let Some(d) = figures {
                p.sample(&name, &[("direction", direction)], of(d) as f64 / 1e9);
            }
        }
    }
    p.gauge(
        "wirebench_probe_one_way_bound_seconds",
        "How far the clock offset between the hosts may be off: every one-way delay is within this of the truth.",
        clock.bound_ns as f64 / 1e9,
    );
    p.gauge(
        "wirebench_probe_clock_offset_seconds",
        "The server's clock minus the client's, as the probes' exchanges bound it.",
        clock.offset_ns as f64 / 1e9,
    );
    p.gauge(
        "wirebench_probe_one_way_outside_bound",
        "Probes whose delay fell outside the bound (left out of the quantiles).",
        w.outside_bound as f64,
    );
}

/// A DNS probe's figures (`wirebench_probe_dns_*`): queries, answers by RCODE, timeouts and
/// response times.
fn dns_figures(p: &mut Page, d: &DnsResult) {
    let transport = d.transport.name();
    info(p, "dns", transport, "dns");
    let c = &d.counts;
    let counts = [
        ("sent", c.sent, "Queries sent (retries not counted)."),
        (
            "answered",
            c.answered,
            "Queries answered by a valid response.",
        ),
        (
            "timeouts",
            c.timeouts,
            "Queries never answered in time (UDP: after the retries).",
        ),
        (
            "wrong",
            c.wrong,
            "Responses not trusted: malformed, another question, an unknown ID.",
        ),
        (
            "retries",
            c.retries,
            "UDP query copies sent again after a timeout.",
        ),
    ];
    for (name, n, help) in counts {
        p.gauge(&format!("wirebench_probe_dns_{name}"), help, n as f64);
    }
    let name = "wirebench_probe_dns_answers";
    p.family(name, "gauge", "Valid answers by RCODE.");
    for (rcode, n) in [
        ("NOERROR", c.noerror),
        ("NXDOMAIN", c.nxdomain),
        ("SERVFAIL", c.servfail),
        ("REFUSED", c.refused),
        ("other", c.other_rcode),
    ] {
        p.sample(name, &[("rcode", rcode)], n as f64);
    }
    p.gauge(
        "wirebench_probe_dns_timeout_ratio",
        "Queries timed out / sent (the loss the resolver's clients see).",
        d.timeout_ratio,
    );
    p.gauge(
        "wirebench_probe_dns_queries_per_second",
        "Queries answered / time from the first query to the last settled.",
        d.queries_per_second,
    );
    retransmissions(p, d.retrans_rate);
    if let Some(rtt) = &d.response {
        rtt_summary(p, rtt);
    }
}

/// Round trips as a summary: quantile 0 is the smallest, 1 the largest.
fn rtt_summary(p: &mut Page, rtt: &RttFigures) {
    let name = "wirebench_probe_rtt_seconds";
    p.family(
        name,
        "summary",
        "Round trips (stop-and-wait: first transmissions only; ping, rr and dns: answered requests' response times): quantile 0 is the smallest, 1 the largest.",
    );
    for (q, ns) in [
        ("0", rtt.min_ns),
        ("0.5", rtt.p50_ns),
        ("0.9", rtt.p90_ns),
        ("0.99", rtt.p99_ns),
        ("0.999", rtt.p999_ns),
        ("1", rtt.max_ns),
    ] {
        p.sample(name, &[("quantile", q)], ns as f64 / 1e9);
    }
    p.sample(
        "wirebench_probe_rtt_seconds_sum",
        &[],
        rtt.mean_ns * rtt.samples as f64 / 1e9,
    );
    p.sample("wirebench_probe_rtt_seconds_count", &[], rtt.samples as f64);
}

/// A page being written: families (HELP, TYPE) and their samples.
#[derive(Default)]
struct Page {
    out: String,
}

impl Page {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", number(value));
    }

    fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, "gauge", help);
        self.sample(name, &[], value);
    }
}

/// A sample value as the format spells it (Go's ParseFloat): `NaN`, `+Inf`, `-Inf`, or the
/// shortest decimal that reads back exactly.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::record::service::{FailReason, ProbeError, ProtocolBytes};
    use wirebench_core::vocab::plan::Protocol;

    #[test]
    fn server_page_counts_by_reason_and_protocol() {
        let page = server_page(&ServerCounts {
            sessions_started: 3,
            sessions_finished: 2,
            sessions_aborted: 1,
            sessions_running: 0,
            sessions_refused: vec![("max-sessions".into(), 4)],
            limit_hits: vec![("max-sessions".into(), 4)],
            bytes: vec![ProtocolBytes {
                protocol: Protocol::Udp,
                read: 1024,
                sent: 0,
            }],
        });
        assert!(page.contains("# TYPE wirebench_server_sessions_started_total counter\nwirebench_server_sessions_started_total 3\n"));
        assert!(
            page.contains("wirebench_server_sessions_refused_total{reason=\"max-sessions\"} 4\n")
        );
        assert!(page.contains("wirebench_server_bytes_read_total{proto=\"udp\"} 1024\n"));
    }

    #[test]
    fn a_failed_probe_says_so_and_nothing_more() {
        let page = probe_page(&ProbeOutcome {
            target: "127.0.0.1:1".into(),
            duration_ns: 1_500_000_000,
            result: None,
            error: Some(ProbeError {
                reason: FailReason::Error,
                detail: "connection refused".into(),
            }),
        });
        assert_eq!(
            page,
            "# HELP wirebench_probe_success Whether the probe's test finished and passed (1) or failed (0).\n\
             # TYPE wirebench_probe_success gauge\nwirebench_probe_success 0\n\
             # HELP wirebench_probe_duration_seconds Wall time of the whole probe: set-up, the run and its report.\n\
             # TYPE wirebench_probe_duration_seconds gauge\nwirebench_probe_duration_seconds 1.5\n\
             # HELP wirebench_probe_failure_info Why the probe failed: timeout, error, aborted, unanswered or rcode (the exporter's log has the detail).\n\
             # TYPE wirebench_probe_failure_info gauge\nwirebench_probe_failure_info{reason=\"error\"} 1\n"
        );
    }

    #[test]
    fn values_and_labels_are_escaped() {
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(1e21), "1000000000000000000000");
        let mut p = Page::default();
        p.sample("x", &[("l", "a\"b\\c\nd")], 1.0);
        assert_eq!(p.out, "x{l=\"a\\\"b\\\\c\\nd\"} 1\n");
    }
}
