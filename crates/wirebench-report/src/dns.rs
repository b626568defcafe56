//! The report of a stored `wirebench dns` campaign as a [`Document`]: UDP queries lost against
//! TCP (and DoT) segments retransmitted on one chart as the load grows, response time with its
//! minimum and maximum, and two tables — what was answered, and how fast — whose queries per
//! second say how timeouts count. Formats nothing itself: [`super::document`] writes it in every
//! format. Never opens files or reads clocks.

use std::fmt::Write as _;
use std::io;

use wirebench_core::record::dns::DnsResult;
use wirebench_core::wire::dns::DnsTransport;

use super::chart;
use super::document::{Block, Document, Section, SweepHeading};
use super::tabular::{us, Column, Tabular};

/// What queries per second count, as every DNS table says under it.
pub const RATE_NOTE: &str = "q/s: queries answered per second of the whole run, from the first query to the last one settled: time spent waiting out timeouts counts (a lost UDP query holds its place for --timeout × (1 + --retries); a silent TCP/DoT connection for --timeout), so loss lowers q/s as well as the answered count.";

/// The transport column: "udp", "tcp", or "tcp/new" for a connection per query (so UDP, TCP
/// and TCP with a new connection each share a table and keep their rows apart).
fn transport_label(r: &DnsResult) -> String {
    if r.new_connection {
        format!("{}/new", r.transport.name())
    } else {
        r.transport.name().to_string()
    }
}

/// What was sent and answered per transport × K: timeouts against retransmissions.
pub fn answers(results: &[DnsResult]) -> Tabular {
    let mut t = Tabular::new(
        Some("concurrency sweep (timeouts = queries never answered; retrans = UDP retries or TCP retransmissions)".into()),
        vec![
            Column::word("tr", 4),
            Column::figure("K", 6),
            Column::figure("sent", 10),
            Column::figure("answered", 10),
            Column::figure("timeouts", 9),
            Column::figure("timeout%", 9),
            Column::figure("retrans%", 8),
            Column::figure("retries", 8),
            Column::figure("TC→TCP", 7),
            Column::figure("late", 6),
            Column::figure("wrong", 6),
            Column::figure("NXDOMAIN", 8),
            Column::figure("flows", 5),
        ],
    );
    for r in results {
        let c = &r.counts;
        t.rows.push(vec![
            transport_label(r),
            r.concurrency.to_string(),
            c.sent.to_string(),
            c.answered.to_string(),
            c.timeouts.to_string(),
            format!("{:.3}", r.timeout_ratio * 100.0),
            r.retrans_rate
                .map_or("n/a".into(), |x| format!("{:.3}", x * 100.0)),
            c.retries.to_string(),
            c.tc_retries.to_string(),
            c.late.to_string(),
            c.wrong.to_string(),
            c.nxdomain.to_string(),
            r.flows.to_string(),
        ]);
    }
    t
}

/// How fast per transport × K: response time (min / avg / max, p50, p99), queries per second
/// (with [`RATE_NOTE`]) and the set-up cost.
pub fn times(results: &[DnsResult]) -> Tabular {
    let mut t = Tabular::new(
        Some("response time (µs) and rate".into()),
        vec![
            Column::word("tr", 4),
            Column::figure("K", 6),
            Column::figure("min µs", 9),
            Column::figure("avg µs", 9),
            Column::figure("max µs", 9),
            Column::figure("p50 µs", 10),
            Column::figure("p99 µs", 10),
            Column::figure("q/s", 10),
            Column::figure("connect µs", 10),
            Column::figure("TLS µs", 9),
        ],
    );
    for r in results {
        let na = || "n/a".to_string();
        let times: [String; 5] = match &r.response {
            Some(x) => [
                us(x.min_ns as f64),
                us(x.mean_ns),
                us(x.max_ns as f64),
                us(x.p50_ns as f64),
                us(x.p99_ns as f64),
            ],
            None => std::array::from_fn(|_| na()),
        };
        let mut row = vec![transport_label(r), r.concurrency.to_string()];
        row.extend(times);
        row.push(format!("{:.0}", r.queries_per_second));
        row.push(r.tcp_connect.map_or_else(na, |x| us(x.mean_ns)));
        row.push(r.tls_handshake.map_or_else(na, |x| us(x.mean_ns)));
        t.rows.push(row);
    }
    t.notes.push(RATE_NOTE.into());
    t
}

/// The timeout curve as text bars, per transport × K.
fn curve(results: &[DnsResult]) -> Vec<String> {
    let worst = results
        .iter()
        .map(|r| r.timeout_ratio)
        .fold(0.0_f64, f64::max);
    let mut lines = vec![format!(
        "\ntimeout curve (bar = timeout%, full width = {:.3}%)",
        worst * 100.0
    )];
    // The bars start in one column, whatever the labels ("tcp/new" beside "udp").
    let label_width = results
        .iter()
        .map(|r| transport_label(r).chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    for r in results {
        let width = if worst > 0.0 {
            (r.timeout_ratio / worst * 40.0).round() as usize
        } else {
            0
        };
        lines.push(format!(
            "  {:<label_width$} K={:<6} {:<40} {:.3}%",
            transport_label(r),
            r.concurrency,
            "#".repeat(width),
            r.timeout_ratio * 100.0
        ));
    }
    lines
}

/// The tables and the timeout curve as text (what `wirebench dns` prints after a sweep).
pub fn sweep_table(results: &[DnsResult]) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = answers(results).write_text("  ", &mut out);
    let _ = times(results).write_text("  ", &mut out);
    let mut s = String::from_utf8_lossy(&out).into_owned();
    for line in curve(results) {
        let _ = writeln!(s, "{line}");
    }
    s
}

/// The CSV table: one row per result, base units (ns, ratios, queries per second).
pub fn csv(results: &[DnsResult]) -> Tabular {
    const HEADER: [&str; 25] = [
        "transport",
        "flows",
        "concurrency",
        "new_connection",
        "sent",
        "answered",
        "noerror",
        "nxdomain",
        "timeouts",
        "retries",
        "tc_retries",
        "late",
        "wrong",
        "timeout_ratio",
        "retrans_rate",
        "elapsed_ns",
        "queries_per_second",
        "response_min_ns",
        "response_mean_ns",
        "response_p50_ns",
        "response_p99_ns",
        "response_max_ns",
        "response_samples",
        "tcp_connect_mean_ns",
        "tls_handshake_mean_ns",
    ];
    let mut t = Tabular::new(None, HEADER.iter().map(|h| Column::figure(*h, 0)).collect());
    for r in results {
        let c = &r.counts;
        let opt = |v: Option<String>| v.unwrap_or_default();
        let resp = r.response.as_ref();
        t.rows.push(vec![
            r.transport.name().to_string(),
            r.flows.to_string(),
            r.concurrency.to_string(),
            r.new_connection.to_string(),
            c.sent.to_string(),
            c.answered.to_string(),
            c.noerror.to_string(),
            c.nxdomain.to_string(),
            c.timeouts.to_string(),
            c.retries.to_string(),
            c.tc_retries.to_string(),
            c.late.to_string(),
            c.wrong.to_string(),
            r.timeout_ratio.to_string(),
            opt(r.retrans_rate.map(|v| v.to_string())),
            r.elapsed_ns.to_string(),
            r.queries_per_second.to_string(),
            opt(resp.map(|x| x.min_ns.to_string())),
            opt(resp.map(|x| x.mean_ns.to_string())),
            opt(resp.map(|x| x.p50_ns.to_string())),
            opt(resp.map(|x| x.p99_ns.to_string())),
            opt(resp.map(|x| x.max_ns.to_string())),
            opt(resp.map(|x| x.samples.to_string())),
            opt(r.tcp_connect.map(|x| x.mean_ns.to_string())),
            opt(r.tls_handshake.map(|x| x.mean_ns.to_string())),
        ]);
    }
    t
}

/// The report of a DNS campaign: the heading, the charts, both tables and (text) the curve.
pub fn document(heading: SweepHeading, results: &[DnsResult]) -> io::Result<Document> {
    let mut blocks: Vec<Block> = chart::sweep::dns(results)?
        .into_iter()
        .map(Block::Chart)
        .collect();
    blocks.push(Block::Table(answers(results)));
    blocks.push(Block::Table(times(results)));
    blocks.push(Block::TextOnly(curve(results)));
    let mut lines = Vec::new();
    if results.iter().any(|r| r.transport == DnsTransport::Udp)
        && results.iter().any(|r| r.transport != DnsTransport::Udp)
    {
        lines.push("UDP's loss is its queries never answered; TCP's (and DoT's) is repaired by retransmission, so its cost shows as segments sent again (TCP_INFO) and in the response times.".into());
    }
    Ok(Document {
        heading,
        lines,
        sections: vec![Section {
            heading: None,
            blocks,
        }],
        csv: csv(results),
    })
}
