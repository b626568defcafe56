//! Reports of a stored `wirebench rr` sweep: the seed's comparison in one table and one chart —
//! UDP requests lost against TCP (and QUIC) retransmissions, side by side, as the requests in
//! flight grow — with response times and requests per second. Writes only to the writer given;
//! never opens files or reads clocks.

use std::fmt::Write as _;
use std::io::{self, Write};

use wirebench_core::record::rr::{MeasuredPath, RrResult};

use super::chart;
use super::html::escape;

/// What the heading of an rr report says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RrHeading {
    /// Store id.
    pub campaign: i64,
    /// Start time, formatted (UTC).
    pub started: String,
    /// How it ended.
    pub status: String,
    /// The host it ran on.
    pub host: String,
    /// The server as named.
    pub server: String,
}

/// One result on the repair-against-load chart.
#[derive(Debug, Clone, PartialEq)]
pub struct RrPoint {
    /// The series: "UDP requests lost", "TCP retransmissions", "QUIC packets lost".
    pub series: String,
    /// Requests in flight per flow (K).
    pub concurrency: u32,
    /// The share, percent.
    pub pct: f64,
}

/// The chart's points, in result order; results whose transport gave no figure are left out.
pub fn points(results: &[RrResult]) -> Vec<RrPoint> {
    results
        .iter()
        .filter_map(|r| {
            Some(RrPoint {
                series: series_name(r),
                concurrency: r.concurrency,
                pct: r.repair_pct()?,
            })
        })
        .collect()
}

fn series_name(r: &RrResult) -> String {
    match r.protocol {
        wirebench_core::vocab::plan::Protocol::Udp => "UDP requests lost".into(),
        wirebench_core::vocab::plan::Protocol::Tcp => "TCP segments retransmitted".into(),
        wirebench_core::vocab::plan::Protocol::Quic => "QUIC packets lost".into(),
    }
}

/// What the sweep's paths measured: per distinct path note of its results, "path: NOTE" and,
/// for the relay and the namespace lab, what drops packets there; empty when no result has a
/// note.
pub fn path_lines(results: &[RrResult]) -> Vec<String> {
    let mut notes: Vec<&str> = Vec::new();
    for note in results.iter().filter_map(|r| r.path_note.as_deref()) {
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    let mut lines = Vec::new();
    for note in notes {
        lines.push(format!("path: {note}"));
        match MeasuredPath::of(note) {
            MeasuredPath::Relay => lines.push(
                "  the relay drops UDP datagrams only: UDP's losses are the relay's drops, TCP's retransmissions are the kernel's own over clean loopback legs (no TCP segment was dropped on purpose); for TCP drops use the namespace lab (lab/netns-lab.sh rr)".into(),
            ),
            MeasuredPath::NetnsLab => lines.push(
                "  the lab router's tbf queue drops UDP datagrams and TCP segments alike when the offered load exceeds its rate: UDP's losses and TCP's retransmissions are real drops on the same path".into(),
            ),
            MeasuredPath::Other => {}
        }
    }
    lines
}

/// The text report: the heading line, the path lines and the sweep table.
pub fn write_text(h: &RrHeading, results: &[RrResult], out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "rr sweep {} ({}, started {} UTC, host {}) against {}",
        h.campaign, h.status, h.started, h.host, h.server
    )?;
    for line in path_lines(results) {
        writeln!(out, "{line}")?;
    }
    write!(out, "{}", sweep_table(results))
}

/// The sweep table: one row per protocol × K, loss and retransmission side by side.
pub fn sweep_table(results: &[RrResult]) -> String {
    let mut s = String::from(
        "\nrequests in flight sweep (lost = UDP requests never answered after their retries; retrans = TCP/QUIC packets sent again)\n",
    );
    let _ = writeln!(
        s,
        "  {:<5} {:>6} {:>6} {:>10} {:>10} {:>8} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "proto",
        "K",
        "flows",
        "sent",
        "answered",
        "lost",
        "lost %",
        "retrans %",
        "p50 µs",
        "p99 µs",
        "req/s"
    );
    for r in results {
        let (p50, p99) = r.response.as_ref().map_or((f64::NAN, f64::NAN), |x| {
            (x.p50_ns as f64 / 1000.0, x.p99_ns as f64 / 1000.0)
        });
        let _ = writeln!(
            s,
            "  {:<5} {:>6} {:>6} {:>10} {:>10} {:>8} {:>9.3} {:>9} {:>10.1} {:>10.1} {:>10.0}",
            r.protocol.as_str(),
            r.concurrency,
            r.flows,
            r.sent,
            r.answered,
            r.lost,
            r.loss_ratio * 100.0,
            r.retrans_rate
                .map_or("n/a".into(), |x| format!("{:.3}", x * 100.0)),
            p50,
            p99,
            r.requests_per_second
        );
    }
    s
}

/// The HTML report: the chart and the table.
pub fn write_html(h: &RrHeading, results: &[RrResult], out: &mut dyn Write) -> io::Result<()> {
    let title = format!("wirebench rr sweep {}", h.campaign);
    super::html::page_start(out, &title)?;
    writeln!(
        out,
        "<p>{}, started {} UTC, host {}, against {}.</p>",
        escape(&h.status),
        escape(&h.started),
        escape(&h.host),
        escape(&h.server)
    )?;
    for line in path_lines(results) {
        writeln!(out, "<p>{}</p>", escape(line.trim()))?;
    }
    if let Some(svg) = chart::rr_repair_against_concurrency(&points(results))? {
        writeln!(out, "<h2>Loss and retransmissions against load</h2>")?;
        writeln!(out, "<figure>\n{}", svg.trim())?;
        writeln!(
            out,
            "<figcaption>{}</figcaption>\n</figure>",
            escape(
                "UDP: requests never answered (after their retries), as a share of those sent; TCP and QUIC: packets the client sent again (or lost), as a share of those sent; against the requests in flight per flow."
            )
        )?;
    }
    writeln!(out, "<h2>Results</h2>")?;
    writeln!(
        out,
        "<table>\n<tr><th>Protocol</th><th>K</th><th>Flows</th><th>Sent</th><th>Answered</th><th>Lost</th><th>Lost %</th><th>Retrans %</th><th>p50 µs</th><th>p99 µs</th><th>Requests/s</th></tr>"
    )?;
    for r in results {
        let n = |x: u64| format!("<td class=\"n\">{x}</td>");
        let f = |x: f64, d: usize| format!("<td class=\"n\">{x:.d$}</td>");
        let opt = |x: Option<f64>, d: usize| x.map_or("<td>n/a</td>".to_string(), |v| f(v, d));
        writeln!(
            out,
            "<tr><td>{}</td>{}{}{}{}{}{}{}{}{}{}</tr>",
            r.protocol.as_str(),
            n(u64::from(r.concurrency)),
            n(u64::from(r.flows)),
            n(r.sent),
            n(r.answered),
            n(r.lost),
            f(r.loss_ratio * 100.0, 3),
            opt(r.retrans_rate.map(|x| x * 100.0), 3),
            opt(r.response.map(|x| x.p50_ns as f64 / 1e3), 1),
            opt(r.response.map(|x| x.p99_ns as f64 / 1e3), 1),
            f(r.requests_per_second, 0),
        )?;
    }
    writeln!(out, "</table>\n</body>\n</html>")
}
