//! The report of a stored `wirebench rpm` campaign as a [`Document`]: per test, the RPM
//! summary with the draft's rating word and confidence, the components (foreign and self
//! probes' trimmed means), idle and loaded latency, goodput, the per-interval time series (a
//! table, and a chart that puts probe latency and goodput on one time axis) and the differences
//! from the draft; and the text of `compare --rpm`. Every figure comes from the result model;
//! never opens files or reads clocks.

use std::io::{self, Write};

use wirebench_core::machine::responsiveness::{LoadDirection, RpmResult};
use wirebench_core::record::count_of;
use wirebench_core::record::rpm::{
    loaded_latency, timeline, IntervalPoint, LatencyFigures, RpmComparison, ALPHA,
};
use wirebench_core::vocab::units::format_bitrate;

use super::chart::{self, Figure};
use super::document::{Block, Document, Section, SweepHeading};
use super::tabular::{Column, Tabular};

/// The draft's classes, as the reports state them beside the rating word.
pub const RATING_SCALE: &str =
    "Rating (draft-ietf-ippm-responsiveness): Poor below 300 RPM (round trips over 200 ms), Fair from 300, Good from 1000 (60 ms), Excellent from 6000 (10 ms).";

/// The header row of the CSV report: one row per interval of every test, base units.
pub const CSV_HEADER: &str = "test,interval,start_s,end_s,flows,download_bps,upload_bps,rpm,foreign_probes,self_probes,loaded_samples,loaded_p50_ns,loaded_p90_ns,loaded_p99_ns";

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// "download", "upload", "download + upload".
pub fn direction_words(d: LoadDirection) -> &'static str {
    match d {
        LoadDirection::Download => "download",
        LoadDirection::Upload => "upload",
        LoadDirection::Both => "download + upload",
    }
}

fn percentiles(f: &LatencyFigures) -> String {
    format!(
        "{}: p50 {}, p90 {}, p99 {}, max {}",
        count_of(f.samples as usize, "sample", "samples"),
        ms(f.p50_ns),
        ms(f.p90_ns),
        ms(f.p99_ns),
        ms(f.max_ns)
    )
}

/// The summary of one test as (label, value) rows, in the order every format prints them.
pub fn summary_rows(r: &RpmResult) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    rows.push((
        "RPM",
        match (r.rpm, r.rating) {
            (Some(rpm), Some(rating)) => format!("{rpm:.0} ({})", rating.word()),
            _ => "not measured (no probe completed)".to_string(),
        },
    ));
    rows.push((
        "Confidence",
        format!(
            "{} (RPM{}), {} (goodput{})",
            r.rpm_confidence.word(),
            if r.rpm_stable { ", stable" } else { "" },
            r.goodput_confidence.word(),
            if r.goodput_stable { ", stable" } else { "" }
        ),
    ));
    if let Some(c) = &r.components {
        rows.push((
            "Foreign RPM",
            format!(
                "{:.0}: TCP handshake {}{}, request {} (trimmed means, new connections)",
                c.foreign_rpm,
                ms(c.foreign_tcp_handshake_rtt_ns),
                c.foreign_tls_handshake_rtt_ns
                    .map(|t| format!(", TLS {}", ms(t)))
                    .unwrap_or_default(),
                ms(c.foreign_request_rtt_ns)
            ),
        ));
        rows.push((
            "Self RPM",
            format!(
                "{:.0}: request {} (trimmed mean, the persistent connection)",
                c.self_rpm,
                ms(c.self_request_rtt_ns)
            ),
        ));
    }
    if let Some(i) = &r.idle {
        rows.push((
            "Idle latency",
            format!(
                "{}: TCP handshake {}, request {} (new connection), {} (persistent)",
                count_of(i.probes as usize, "probe", "probes"),
                ms(i.tcp_handshake_rtt_ns),
                ms(i.foreign_request_rtt_ns),
                ms(i.self_request_rtt_ns)
            ),
        ));
    }
    let loaded = loaded_latency(r);
    for (label, figures) in [
        ("Loaded round trips", loaded.all),
        ("Loaded, foreign", loaded.foreign),
        ("Loaded, self", loaded.own),
    ] {
        rows.push((
            label,
            figures.as_ref().map_or("no probe".to_string(), percentiles),
        ));
    }
    rows.push((
        "Goodput",
        format!(
            "download {}, upload {} (moving average of the last intervals)",
            format_bitrate(r.download_goodput_bps),
            format_bitrate(r.upload_goodput_bps)
        ),
    ));
    rows.push((
        "Load",
        format!(
            "{} per direction, {:.1} s, {}, {}",
            count_of(r.load_flows as usize, "flow", "flows"),
            r.duration_ns as f64 / 1e9,
            count_of(r.intervals.len(), "interval", "intervals"),
            count_of(r.failed_probes as usize, "failed probe", "failed probes")
        ),
    ));
    rows
}

/// The interval table's header.
pub const INTERVAL_HEADER: [&str; 9] = [
    "#",
    "Time (s)",
    "Flows",
    "Download",
    "Upload",
    "RPM",
    "Probes (foreign+self)",
    "Loaded p50 (ms)",
    "Loaded p99 (ms)",
];

/// One row of the interval table per interval.
pub fn interval_rows(points: &[IntervalPoint], r: &RpmResult) -> Vec<[String; 9]> {
    points
        .iter()
        .zip(&r.intervals)
        .map(|(p, i)| {
            let lat = |f: fn(&LatencyFigures) -> u64| {
                p.latency
                    .all
                    .as_ref()
                    .map_or("-".to_string(), |l| format!("{:.3}", f(l) as f64 / 1e6))
            };
            [
                p.index.to_string(),
                format!("{:.1}–{:.1}", p.start_s, p.end_s),
                p.flows.to_string(),
                format_bitrate(p.download_bps),
                format_bitrate(p.upload_bps),
                p.rpm.map_or("-".to_string(), |v| format!("{v:.0}")),
                format!("{}+{}", i.foreign_probes, i.self_probes),
                lat(|l| l.p50_ns),
                lat(|l| l.p99_ns),
            ]
        })
        .collect()
}

/// The interval table of one test (no title: it follows the test's summary).
fn interval_table(points: &[IntervalPoint], r: &RpmResult) -> Tabular {
    // Numbers right, words left: the first two columns are labels; the widths are the ones
    // these tables always had.
    let widths = [3, 11, 5, 14, 14, 7, 21, 15, 15];
    let columns = INTERVAL_HEADER
        .iter()
        .zip(widths)
        .enumerate()
        .map(|(i, (name, w))| {
            if i == 1 {
                Column::word(*name, w)
            } else {
                Column::figure(*name, w)
            }
        })
        .collect();
    let mut t = Tabular::new(None, columns);
    t.rows = interval_rows(points, r)
        .into_iter()
        .map(|row| row.to_vec())
        .collect();
    t
}

/// The CSV table: one row per interval of every test, in base units (seconds, bit/s,
/// nanoseconds), empty where a figure is absent.
fn csv(results: &[RpmResult]) -> Tabular {
    let mut t = Tabular::new(
        None,
        CSV_HEADER
            .split(',')
            .map(|h| Column::figure(h, 0))
            .collect(),
    );
    for (n, r) in results.iter().enumerate() {
        for (p, i) in timeline(r).iter().zip(&r.intervals) {
            let opt = |v: Option<String>| v.unwrap_or_default();
            let l = p.latency.all;
            t.rows.push(vec![
                (n + 1).to_string(),
                p.index.to_string(),
                p.start_s.to_string(),
                p.end_s.to_string(),
                p.flows.to_string(),
                p.download_bps.to_string(),
                p.upload_bps.to_string(),
                opt(p.rpm.map(|v| v.to_string())),
                i.foreign_probes.to_string(),
                i.self_probes.to_string(),
                l.map_or(0, |l| l.samples).to_string(),
                opt(l.map(|l| l.p50_ns.to_string())),
                opt(l.map(|l| l.p90_ns.to_string())),
                opt(l.map(|l| l.p99_ns.to_string())),
            ]);
        }
    }
    t
}

/// The report of an rpm campaign: the rating scale, then per test its summary, the chart of
/// probe latency above goodput on one time axis, the interval table and the differences from
/// the draft.
pub fn document(heading: SweepHeading, results: &[RpmResult]) -> io::Result<Document> {
    let mut sections = Vec::new();
    for (n, r) in results.iter().enumerate() {
        let mut blocks = vec![Block::Pairs(
            summary_rows(r)
                .into_iter()
                .map(|(label, value)| (label.to_string(), value))
                .collect(),
        )];
        let points = timeline(r);
        let idle_ms = r.idle.map(|i| i.self_request_rtt_ns as f64 / 1e6);
        let chart_title = format!("Latency and goodput over time, test {}", n + 1);
        if let Some(svg) =
            chart::rpm::latency_and_goodput_over_time(&chart_title, &points, idle_ms)?
        {
            blocks.push(Block::Chart(Figure {
                heading: format!("Latency and goodput, test {}", n + 1),
                svg,
                caption: "Top: the median and 99th percentile of the request round trips of the probes (foreign and self) that completed in each interval, and the idle round trip on the persistent connection (dashed). Bottom: the goodput of each interval. One flow more per interval until goodput and then RPM are stable.".into(),
            }));
        }
        if !points.is_empty() {
            blocks.push(Block::Table(interval_table(&points, r)));
        }
        blocks.push(Block::List(
            "differences from the draft".into(),
            r.differences.clone(),
        ));
        sections.push(Section {
            heading: Some(format!("test {} ({})", n + 1, r.draft)),
            blocks,
        });
    }
    Ok(Document {
        heading,
        lines: vec![RATING_SCALE.to_string()],
        sections,
        csv: csv(results),
    })
}

/// The text of `compare --rpm A B`: RPM with its rating, loaded p50 and p99, the samples and
/// the Mann–Whitney U test of the loaded round trips, and a verdict; with `fail_pct`, a
/// significant regression beyond it is marked REGRESSION.
pub fn write_comparison(
    c: &RpmComparison,
    fail_pct: Option<f64>,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "rpm campaign {} (A) against rpm campaign {} (B): RPM (median over each campaign's tests) and the request round trips of the probes under load.\n\
         Test: Mann–Whitney U of A's loaded round trips against B's, two-sided, normal approximation with tie and continuity correction; significant when p < {ALPHA}.\n",
        c.a, c.b
    )?;
    let rpm =
        |v: Option<f64>, r: Option<wirebench_core::machine::responsiveness::Rating>| match (v, r) {
            (Some(v), Some(r)) => format!("{v:.0} ({})", r.word()),
            _ => "n/a".to_string(),
        };
    let pct = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:+.1}%"));
    let lat = |l: Option<LatencyFigures>, f: fn(&LatencyFigures) -> u64| {
        l.as_ref().map_or("n/a".to_string(), |l| ms(f(l)))
    };
    let row = |out: &mut dyn Write, cells: [String; 4]| {
        let [label, a, b, change] = cells;
        let line = format!("{label:<22} {a:>18} {b:>18} {change:>9}");
        writeln!(out, "{}", line.trim_end())
    };
    let p50_change = match c.loaded {
        (Some(a), Some(b)) if a.p50_ns > 0 => {
            Some((b.p50_ns as f64 / a.p50_ns as f64 - 1.0) * 100.0)
        }
        _ => None,
    };
    for cells in [
        ["".into(), "A".into(), "B".into(), "B vs A".into()],
        [
            "tests with an RPM".into(),
            c.results.0.to_string(),
            c.results.1.to_string(),
            String::new(),
        ],
        [
            "RPM".into(),
            rpm(c.rpm.0, c.rating.0),
            rpm(c.rpm.1, c.rating.1),
            pct(c.rpm_change_pct()),
        ],
        [
            "loaded samples".into(),
            c.loaded.0.map_or(0, |l| l.samples).to_string(),
            c.loaded.1.map_or(0, |l| l.samples).to_string(),
            String::new(),
        ],
        [
            "loaded p50".into(),
            lat(c.loaded.0, |l| l.p50_ns),
            lat(c.loaded.1, |l| l.p50_ns),
            pct(p50_change),
        ],
        [
            "loaded p99".into(),
            lat(c.loaded.0, |l| l.p99_ns),
            lat(c.loaded.1, |l| l.p99_ns),
            pct(c.p99_change_pct()),
        ],
    ] {
        row(out, cells)?;
    }
    // A p-value too small for four decimals is not printed as zero.
    let p = |p: f64| {
        if p < 1e-4 {
            "p < 0.0001".to_string()
        } else {
            format!("p = {p:.4}")
        }
    };
    let verdict = match c.test {
        None => "no test: a campaign has no loaded round trip".to_string(),
        Some(t) if t.p_value >= ALPHA => format!("{}: ~ (no significant difference)", p(t.p_value)),
        // U of A below its mean: A's round trips are the shorter ones.
        Some(t) if t.z < 0.0 => format!(
            "{}: B is less responsive (longer round trips)",
            p(t.p_value)
        ),
        Some(t) => format!(
            "{}: B is more responsive (shorter round trips)",
            p(t.p_value)
        ),
    };
    let flag = match fail_pct {
        Some(pct) if c.is_regression(pct) => " REGRESSION",
        _ => "",
    };
    writeln!(out, "\n{verdict}{flag}")?;
    if let Some(pct) = fail_pct {
        if c.is_regression(pct) {
            writeln!(out, "B is significantly worse (RPM lower by more than {pct}%, or loaded p99 higher by more than {pct}%)")?;
        } else {
            writeln!(out, "B is not significantly worse (RPM lower by more than {pct}%, or loaded p99 higher by more than {pct}%)")?;
        }
    }
    Ok(())
}
