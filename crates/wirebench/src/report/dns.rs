//! Reports of a stored `wirebench dns` campaign: a self-contained HTML page with the
//! timeouts-against-concurrency chart and the per-result table, or the same table as text.
//! Writes only to the writer given; never opens files or reads clocks.

use std::io::{self, Write};

use super::chart;
use super::html::escape;
use std::fmt::Write as _;

use wirebench_core::record::dns::DnsResult;

/// One result on the timeouts-against-concurrency chart.
#[derive(Debug, Clone, PartialEq)]
pub struct DnsPoint {
    /// udp, tcp or dot (one series each).
    pub transport: &'static str,
    /// Queries outstanding per flow.
    pub concurrency: u32,
    /// Timeouts over queries sent, percent.
    pub timeout_pct: f64,
}

/// What the heading of a DNS report says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsHeading {
    /// Store id.
    pub campaign: i64,
    /// Start time, formatted (UTC).
    pub started: String,
    /// How it ended.
    pub status: String,
    /// The host it ran on.
    pub host: String,
    /// The resolver as named.
    pub resolver: String,
    /// Name and type asked (`host.example. A`).
    pub question: String,
}

/// The chart's points, in result order.
pub fn points(results: &[DnsResult]) -> Vec<DnsPoint> {
    results
        .iter()
        .map(|r| DnsPoint {
            transport: r.transport.name(),
            concurrency: r.concurrency,
            timeout_pct: r.counts.timeout_pct(),
        })
        .collect()
}

/// The text report: the heading line and the sweep table.
pub fn write_text(h: &DnsHeading, results: &[DnsResult], out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "DNS campaign {} ({}, started {} UTC, host {}): {} to {}",
        h.campaign, h.status, h.started, h.host, h.question, h.resolver
    )?;
    write!(out, "{}", sweep_table(results))
}

/// The HTML report.
pub fn write_html(h: &DnsHeading, results: &[DnsResult], out: &mut dyn Write) -> io::Result<()> {
    let title = format!("wirebench DNS campaign {}", h.campaign);
    super::html::page_start(out, &title)?;
    writeln!(
        out,
        "<p>{}, started {} UTC, host {}: {} asked of {}.</p>",
        escape(&h.status),
        escape(&h.started),
        escape(&h.host),
        escape(&h.question),
        escape(&h.resolver)
    )?;
    if let Some(svg) = chart::dns_timeouts_against_concurrency(&points(results))? {
        writeln!(out, "<h2>Timeouts against concurrency</h2>")?;
        writeln!(out, "<figure>\n{}", svg.trim())?;
        writeln!(
            out,
            "<figcaption>{}</figcaption>\n</figure>",
            escape(
                "Queries never answered (UDP: after the last retry; TCP/DoT: connection silent for the timeout), as a share of those sent, against the queries outstanding per flow; one series per transport."
            )
        )?;
    }
    writeln!(out, "<h2>Results</h2>")?;
    writeln!(
        out,
        "<table>\n<tr><th>Transport</th><th>K</th><th>Flows</th><th>Sent</th><th>Answered</th><th>NXDOMAIN</th><th>Timeouts</th><th>Timeout %</th><th>Retries</th><th>TC retried</th><th>Wrong</th><th>Retrans %</th><th>p50 µs</th><th>p99 µs</th><th>Queries/s</th><th>TCP connect µs</th><th>TLS handshake µs</th></tr>"
    )?;
    for r in results {
        let c = &r.counts;
        let n = |x: u64| format!("<td class=\"n\">{x}</td>");
        let f = |x: f64, d: usize| format!("<td class=\"n\">{x:.d$}</td>");
        let opt = |x: Option<f64>, d: usize| x.map_or("<td>n/a</td>".to_string(), |v| f(v, d));
        writeln!(
            out,
            "<tr><td>{}</td>{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}</tr>",
            r.transport.name(),
            n(u64::from(r.concurrency)),
            n(u64::from(r.flows)),
            n(c.sent),
            n(c.answered),
            n(c.nxdomain),
            n(c.timeouts),
            f(c.timeout_pct(), 3),
            n(c.retries),
            n(c.tc_retries),
            n(c.wrong),
            opt(r.retrans_rate.map(|x| x * 100.0), 3),
            opt(r.response.map(|x| x.p50_ns as f64 / 1e3), 1),
            opt(r.response.map(|x| x.p99_ns as f64 / 1e3), 1),
            f(r.queries_per_second, 0),
            opt(r.tcp_connect.map(|x| x.mean_ns / 1e3), 1),
            opt(r.tls_handshake.map(|x| x.mean_ns / 1e3), 1),
        )?;
    }
    writeln!(out, "</table>\n</body>\n</html>")
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
