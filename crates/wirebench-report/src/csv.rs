//! CSV report: one row per configuration × view × metric, in base units (s, bit/s, %, ratio,
//! count, B), full precision, for spreadsheets; or, with the grid layout, one line per row of
//! the seeds' grid; a stored sweep's own CSV table. Each is a [`Tabular`], written by its one
//! CSV writer. Writes only to the writer given.

use std::io::{self, Write};

use super::document::Document;
use super::grid::Grid;
use super::model::{metrics, Exporter, Layout, Report};
use super::tabular::{Column, Tabular};

/// The CSV exporter.
pub struct Csv;

/// The header row.
/// (`timed_runs`, the runs long enough to time that the rates cover, and `site`, where the runs
/// were measured when the report names sites (else empty), come last: added after the others,
/// so readers of the older columns find them where they were.)
pub const HEADER: &str =
    "protocol,mechanism,msg_size,total_bytes,runs,view,metric,unit,min,mean,median,max,stddev,timed_runs,site";

impl Exporter<Report> for Csv {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        match report.layout {
            Layout::Grid => Grid::of(&report.configurations).csv().write_csv(out),
            Layout::Configurations => table(report).write_csv(out),
        }
    }
}

impl Exporter<Document> for Csv {
    fn write(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        doc.csv.write_csv(out)
    }
}

/// The per-configuration CSV as a table: [`HEADER`]'s columns, one row per configuration ×
/// view × metric, figures at full precision.
pub fn table(report: &Report) -> Tabular {
    let mut t = Tabular::new(
        None,
        HEADER.split(',').map(|h| Column::figure(h, 0)).collect(),
    );
    for c in &report.configurations {
        let k = &c.key;
        for m in metrics(c) {
            let s = m.summary;
            t.rows.push(vec![
                k.protocol.to_string(),
                k.mechanism.to_string(),
                k.msg_size.to_string(),
                k.total_bytes.to_string(),
                c.runs.to_string(),
                m.view.name().to_string(),
                m.name.to_string(),
                m.unit.to_string(),
                s.min.to_string(),
                s.mean.to_string(),
                s.median.to_string(),
                s.max.to_string(),
                s.stddev.to_string(),
                (c.runs - c.untimed_runs).to_string(),
                c.site.clone().unwrap_or_default(),
            ]);
        }
    }
    t
}
