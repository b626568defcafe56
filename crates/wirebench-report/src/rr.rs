//! The report of a stored `wirebench rr` sweep as a [`Document`]: the seed's comparison in one
//! table and one chart — UDP requests lost against TCP (and QUIC) retransmissions, side by side,
//! as the load grows (requests in flight per flow, or flows) — with response times (min / avg /
//! max and percentiles), requests per second, and the path measured. Formats nothing itself:
//! [`super::document`] writes it in every format. Never opens files or reads clocks.

use std::io;

use wirebench_core::record::rr::{MeasuredPath, RrResult};
use wirebench_core::vocab::units::format_bitrate;

use super::chart;
use super::document::{Block, Document, Section, SweepHeading};
use super::tabular::{us, Column, Tabular};

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

/// The sweep table: one row per protocol × flows × K, loss and retransmission side by side,
/// then response times, requests per second and the throughput of one session (flow) in bit/s,
/// requests and responses counted.
pub fn table(results: &[RrResult]) -> Tabular {
    let mut t = Tabular::new(
        Some("requests in flight sweep (lost = UDP requests never answered after their retries; retrans = TCP/QUIC packets sent again)".into()),
        vec![
            Column::word("proto", 5),
            Column::figure("K", 6),
            Column::figure("flows", 6),
            Column::figure("sent", 10),
            Column::figure("answered", 10),
            Column::figure("lost", 8),
            Column::figure("lost %", 9),
            Column::figure("retrans %", 9),
            Column::figure("min µs", 9),
            Column::figure("avg µs", 9),
            Column::figure("max µs", 9),
            Column::figure("p50 µs", 10),
            Column::figure("p99 µs", 10),
            Column::figure("req/s", 10),
            Column::figure("per flow", 14),
        ],
    );
    for r in results {
        let times: [String; 5] = match &r.response {
            Some(x) => [
                us(x.min_ns as f64),
                us(x.mean_ns),
                us(x.max_ns as f64),
                us(x.p50_ns as f64),
                us(x.p99_ns as f64),
            ],
            None => std::array::from_fn(|_| "n/a".to_string()),
        };
        let mut row = vec![
            // A connection per request says so: pooled with a plain TCP sweep, rows differ.
            if r.new_connection {
                format!("{}/new", r.protocol.as_str())
            } else {
                r.protocol.as_str().to_string()
            },
            r.concurrency.to_string(),
            r.flows.to_string(),
            r.sent.to_string(),
            r.answered.to_string(),
            r.lost.to_string(),
            format!("{:.3}", r.loss_ratio * 100.0),
            r.retrans_rate
                .map_or("n/a".into(), |x| format!("{:.3}", x * 100.0)),
        ];
        row.extend(times);
        row.push(format!("{:.0}", r.requests_per_second));
        row.push(
            r.throughput_per_flow_bps()
                .map_or("n/a".into(), format_bitrate),
        );
        t.rows.push(row);
    }
    t
}

/// The sweep table as text (what `wirebench rr` prints at the end of a sweep).
pub fn sweep_table(results: &[RrResult]) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = table(results).write_text("  ", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The CSV table: one row per result, base units (bytes, ns, ratios, requests per second).
pub fn csv(results: &[RrResult]) -> Tabular {
    const HEADER: [&str; 23] = [
        "protocol",
        "request_bytes",
        "response_bytes",
        "flows",
        "concurrency",
        "new_connection",
        "sent",
        "answered",
        "lost",
        "late",
        "retries",
        "loss_ratio",
        "retrans_rate",
        "elapsed_ns",
        "requests_per_second",
        "per_flow_bps",
        "response_min_ns",
        "response_mean_ns",
        "response_p50_ns",
        "response_p99_ns",
        "response_max_ns",
        "response_samples",
        "path_note",
    ];
    let mut t = Tabular::new(None, HEADER.iter().map(|h| Column::figure(*h, 0)).collect());
    for r in results {
        let opt = |v: Option<String>| v.unwrap_or_default();
        let resp = r.response.as_ref();
        t.rows.push(vec![
            r.protocol.as_str().to_string(),
            r.request_bytes.to_string(),
            r.response_bytes.to_string(),
            r.flows.to_string(),
            r.concurrency.to_string(),
            r.new_connection.to_string(),
            r.sent.to_string(),
            r.answered.to_string(),
            r.lost.to_string(),
            r.late.to_string(),
            r.retries.to_string(),
            r.loss_ratio.to_string(),
            opt(r.retrans_rate.map(|v| v.to_string())),
            r.elapsed_ns.to_string(),
            r.requests_per_second.to_string(),
            opt(r.throughput_per_flow_bps().map(|v| v.to_string())),
            opt(resp.map(|x| x.min_ns.to_string())),
            opt(resp.map(|x| x.mean_ns.to_string())),
            opt(resp.map(|x| x.p50_ns.to_string())),
            opt(resp.map(|x| x.p99_ns.to_string())),
            opt(resp.map(|x| x.max_ns.to_string())),
            opt(resp.map(|x| x.samples.to_string())),
            r.path_note.clone().unwrap_or_default(),
        ]);
    }
    t
}

/// The report of an rr sweep: the heading, the paths, the charts and the table.
pub fn document(heading: SweepHeading, results: &[RrResult]) -> io::Result<Document> {
    let mut blocks: Vec<Block> = chart::sweep::rr(results, &[])?
        .into_iter()
        .map(Block::Chart)
        .collect();
    blocks.push(Block::Table(table(results)));
    Ok(Document {
        heading,
        lines: path_lines(results),
        sections: vec![Section {
            heading: None,
            blocks,
        }],
        csv: csv(results),
    })
}

/// The report of several rr (and ping) sweeps pooled, each named (`"ping sweep 1"`): one
/// table of every result, in the sweeps' order, and one set of charts, whose series name
/// their sweep where two sweeps measured one protocol at one load (a ping and an rr sweep's
/// one flow), so no line joins two sweeps' points at one place.
pub fn pooled_document(
    heading: SweepHeading,
    sweeps: &[(String, Vec<RrResult>)],
) -> io::Result<Document> {
    let results: Vec<RrResult> = sweeps.iter().flat_map(|(_, r)| r.clone()).collect();
    let place = |r: &RrResult| {
        (
            r.protocol.as_str(),
            r.new_connection,
            r.flows,
            r.concurrency,
        )
    };
    let clash = sweeps.iter().enumerate().any(|(i, (_, a))| {
        sweeps[i + 1..]
            .iter()
            .any(|(_, b)| a.iter().any(|x| b.iter().any(|y| place(x) == place(y))))
    });
    let labels: Vec<String> = if clash {
        sweeps
            .iter()
            .flat_map(|(name, r)| std::iter::repeat_n(name.clone(), r.len()))
            .collect()
    } else {
        Vec::new()
    };
    let mut blocks: Vec<Block> = chart::sweep::rr(&results, &labels)?
        .into_iter()
        .map(Block::Chart)
        .collect();
    blocks.push(Block::Table(table(&results)));
    Ok(Document {
        heading,
        lines: path_lines(&results),
        sections: vec![Section {
            heading: None,
            blocks,
        }],
        csv: csv(&results),
    })
}
