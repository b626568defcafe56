//! CSV report: one row per configuration × view × metric, in base units (s, bit/s, count, B),
//! full precision, for spreadsheets. Writes only to the writer given.

use std::io::{self, Write};

use super::{metrics, Exporter, Report};

/// The CSV exporter.
pub struct Csv;

/// The header row.
pub const HEADER: &str =
    "protocol,mechanism,msg_size,total_bytes,runs,view,metric,unit,min,mean,median,max,stddev";

impl Exporter for Csv {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{HEADER}")?;
        for c in &report.configurations {
            for (side, v) in [("client", &c.client), ("server", &c.server)] {
                for m in metrics(v) {
                    let s = m.summary;
                    // No field can hold a comma or a quote: names are fixed words.
                    writeln!(
                        out,
                        "{},{},{},{},{},{side},{},{},{},{},{},{},{}",
                        c.protocol,
                        c.mechanism,
                        c.msg_size,
                        c.total_bytes,
                        c.runs,
                        m.name,
                        m.unit,
                        s.min,
                        s.mean,
                        s.median,
                        s.max,
                        s.stddev
                    )?;
                }
            }
        }
        Ok(())
    }
}
