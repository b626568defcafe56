//! CSV report: one row per configuration × view × metric, in base units (s, bit/s, %, ratio,
//! count, B), full precision, for spreadsheets; or, with the grid layout, one line per row of
//! the seeds' grid. Writes only to the writer given.

use std::io::{self, Write};

use super::grid::Grid;
use super::model::{metrics, Exporter, Layout, Report};

/// The CSV exporter.
pub struct Csv;

/// The header row.
/// (`timed_runs`, the runs long enough to time that the rates cover, is last: added after the
/// others, so readers of the older columns find them where they were.)
pub const HEADER: &str =
    "protocol,mechanism,msg_size,total_bytes,runs,view,metric,unit,min,mean,median,max,stddev,timed_runs";

impl Exporter for Csv {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        if report.layout == Layout::Grid {
            return Grid::of(&report.configurations).csv().write_csv(out);
        }
        writeln!(out, "{HEADER}")?;
        for c in &report.configurations {
            let k = &c.key;
            for m in metrics(c) {
                let s = m.summary;
                // No field can hold a comma or a quote: names are fixed words.
                writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    k.protocol,
                    k.mechanism,
                    k.msg_size,
                    k.total_bytes,
                    c.runs,
                    m.view.name(),
                    m.name,
                    m.unit,
                    s.min,
                    s.mean,
                    s.median,
                    s.max,
                    s.stddev,
                    c.runs - c.untimed_runs
                )?;
            }
        }
        Ok(())
    }
}
