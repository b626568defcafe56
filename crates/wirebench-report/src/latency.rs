//! The report of a stored `wirebench latency` campaign as a [`Document`]: per test, the clock
//! every one-way figure shares (offset, bound, source), a table of the phases (round trip,
//! each direction's delay, each direction's goodput, probes) and a chart of each direction's
//! delay over time with the phases named on its time axis. Every figure comes from the result
//! model; never opens files or reads clocks.

use std::io;

use wirebench_core::record::load_phases::{LoadPhaseRecord, LoadPhasesResult};
use wirebench_core::record::one_way::DelayFigures;
use wirebench_core::vocab::units::format_bitrate;

use super::chart::{self, Figure};
use super::document::{Block, Document, Section, SweepHeading};
use super::tabular::{Column, Tabular};

/// The header row of the CSV report: one row per phase of every test, base units.
pub const CSV_HEADER: &str = "test,phase,probes_sent,probes_lost,rtt_p50_ns,rtt_p99_ns,up_p50_ns,up_p99_ns,down_p50_ns,down_p99_ns,clock_bound_ns,outside_bound,upload_bps,download_bps";

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// The report of `results` (each a test of the campaign).
pub fn document(heading: SweepHeading, results: &[LoadPhasesResult]) -> io::Result<Document> {
    let mut sections = Vec::new();
    for (n, r) in results.iter().enumerate() {
        let mut blocks = vec![Block::Pairs(summary_rows(r))];
        blocks.push(Block::Table(phase_table(r)));
        let title = format!("One-way delay by direction, test {}", n + 1);
        if let Some(svg) = chart::load_phases::one_way_over_time(&title, r)? {
            blocks.push(Block::Chart(Figure {
                heading: format!("Each direction over time, test {}", n + 1),
                svg,
                caption: "The one-way delay of every answered probe, client → server (up) and server → client (down), against time since the first phase began; each phase is named on the time axis where it starts. A load queues in the direction it sends: an upload's queue shows in up, a download's in down. Every delay carries the clock bound in the summary.".into(),
            }));
        }
        sections.push(Section {
            heading: Some(format!("test {}", n + 1)),
            blocks,
        });
    }
    Ok(Document {
        heading,
        lines: vec!["Latency under load by direction: probes through each phase; one clock fit over every phase's stamped probes bounds each direction's delay.".to_string()],
        sections,
        csv: csv(results),
    })
}

/// The test's plan and clock as (label, value) rows.
fn summary_rows(r: &LoadPhasesResult) -> Vec<(String, String)> {
    let p = &r.plan;
    let mut rows = vec![(
        "Plan".to_string(),
        format!(
            "{} probes every {:.0} ms; {} load, {} per loaded direction, {:.1} s per phase",
            p.probe,
            p.interval_ns as f64 / 1e6,
            p.load,
            if p.streams == 1 {
                "1 flow".to_string()
            } else {
                format!("{} flows", p.streams)
            },
            p.phase_ns as f64 / 1e9
        ),
    )];
    rows.push((
        "Clock".to_string(),
        match &r.clock {
            Some(c) => format!(
                "offset {} ± {} ({}){}; drift {:.3} ± {:.3} ppm",
                ms(c.offset_ns as f64),
                ms(c.bound_ns as f64),
                c.source.label(),
                c.contradicted
                    .map(|claim| format!("; the claim {claim:?} was contradicted"))
                    .unwrap_or_default(),
                c.drift_ppm,
                c.drift_bound_ppm
            ),
            None => "no one-way delays (the server announced no clock: a wirebench before one-way delays)".to_string(),
        },
    ));
    rows
}

/// One row per phase.
fn phase_table(r: &LoadPhasesResult) -> Tabular {
    let columns = [
        "phase", "rtt p50", "rtt p99", "up p50", "up p99", "down p50", "down p99", "upload",
        "download", "probes",
    ]
    .iter()
    .enumerate()
    .map(|(i, name)| {
        if i == 0 {
            Column::word(*name, 8)
        } else {
            Column::figure(*name, 9)
        }
    })
    .collect();
    let mut t = Tabular::new(None, columns);
    for p in &r.phases {
        t.rows.push(phase_row(p));
        if let Some(e) = &p.load_error {
            t.notes
                .push(format!("{}: the load failed: {e}", p.phase.name()));
        }
        if let Some(w) = p.one_way.as_ref().filter(|w| w.outside_bound > 0) {
            t.notes.push(format!(
                "{}: {} of {} probes fell outside the clock bound and are left out",
                p.phase.name(),
                w.outside_bound,
                w.exchanges
            ));
        }
    }
    t
}

fn phase_row(p: &LoadPhaseRecord) -> Vec<String> {
    let dash = || "-".to_string();
    let delay = |d: Option<DelayFigures>, p99: bool| {
        d.map_or_else(dash, |d| ms(if p99 { d.p99_ns } else { d.p50_ns } as f64))
    };
    let (up, down) = match &p.one_way {
        Some(w) => (w.up, w.down),
        None => (None, None),
    };
    vec![
        p.phase.name().to_string(),
        p.probes.rtt.map_or_else(dash, |r| ms(r.p50_ns as f64)),
        p.probes.rtt.map_or_else(dash, |r| ms(r.p99_ns as f64)),
        delay(up, false),
        delay(up, true),
        delay(down, false),
        delay(down, true),
        p.upload_bps.map_or_else(dash, format_bitrate),
        p.download_bps.map_or_else(dash, format_bitrate),
        format!("{} sent, {} lost", p.probes.sent, p.probes.lost),
    ]
}

/// The CSV table: one row per phase of every test, in base units, empty where absent.
fn csv(results: &[LoadPhasesResult]) -> Tabular {
    let mut t = Tabular::new(
        None,
        CSV_HEADER
            .split(',')
            .map(|h| Column::figure(h, 0))
            .collect(),
    );
    for (n, r) in results.iter().enumerate() {
        for p in &r.phases {
            let opt = |v: Option<String>| v.unwrap_or_default();
            let w = p.one_way.as_ref();
            let d = |up: bool, p99: bool| {
                opt(w
                    .and_then(|w| if up { w.up } else { w.down })
                    .map(|d| if p99 { d.p99_ns } else { d.p50_ns }.to_string()))
            };
            t.rows.push(vec![
                (n + 1).to_string(),
                p.phase.name().to_string(),
                p.probes.sent.to_string(),
                p.probes.lost.to_string(),
                opt(p.probes.rtt.map(|r| r.p50_ns.to_string())),
                opt(p.probes.rtt.map(|r| r.p99_ns.to_string())),
                d(true, false),
                d(true, true),
                d(false, false),
                d(false, true),
                opt(r.clock.as_ref().map(|c| c.bound_ns.to_string())),
                opt(w.map(|w| w.outside_bound.to_string())),
                opt(p.upload_bps.map(|v| v.to_string())),
                opt(p.download_bps.map(|v| v.to_string())),
            ]);
        }
    }
    t
}
