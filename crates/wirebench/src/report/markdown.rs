//! Markdown report: one table per configuration, client and server rows side by side. Writes
//! only to the writer given.

use std::io::{self, Write};

use wirebench_core::units::ByteSize;

use super::{metrics, Exporter, Report};

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
            writeln!(
                out,
                "\n## {}, {}-byte messages, {}, {} runs\n",
                c.title(),
                c.msg_size,
                ByteSize(c.total_bytes),
                c.runs
            )?;
            writeln!(out, "| View | Metric | Min | Avg | Median | Max | Stddev |")?;
            writeln!(out, "|---|---|---:|---:|---:|---:|---:|")?;
            for (side, v) in [("Client", &c.client), ("Server", &c.server)] {
                for m in metrics(v) {
                    let (s, scale) = (m.summary, m.scale);
                    writeln!(
                        out,
                        "| {side} | {} | {:.d$} | {:.d$} | {:.d$} | {:.d$} | {:.d$} |",
                        m.label,
                        s.min / scale,
                        s.mean / scale,
                        s.median / scale,
                        s.max / scale,
                        s.stddev / scale,
                        d = m.digits
                    )?;
                }
            }
        }
        Ok(())
    }
}
