//! Markdown report: one table per configuration, the run's headline figures first, then the
//! client's and the server's counts. Writes only to the writer given.

use std::io::{self, Write};

use super::{configuration_caption, metrics, Exporter, Report};

/// The Markdown exporter.
pub struct Markdown;

impl Exporter for Markdown {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        let h = &report.heading;
        writeln!(
            out,
            "# wirebench campaign {}\n\n{}, started {} UTC, host {}.",
            h.campaign, h.status, h.started, h.host
        )?;
        for c in &report.configurations {
            writeln!(out, "\n## {} ({})\n", c.title(), configuration_caption(c))?;
            writeln!(out, "| View | Metric | Min | Avg | Median | Max | Stddev |")?;
            writeln!(out, "|---|---|---:|---:|---:|---:|---:|")?;
            for m in metrics(c) {
                let s = m.summary;
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {} |",
                    m.view.title(),
                    m.label,
                    m.show(s.min),
                    m.show(s.mean),
                    m.show(s.median),
                    m.show(s.max),
                    m.show(s.stddev)
                )?;
            }
        }
        Ok(())
    }
}
