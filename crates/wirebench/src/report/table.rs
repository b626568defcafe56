//! Plain-text report: the "Statistics for Client TCP Streaming" tables our users paste into
//! their reports, with median and standard deviation added. Writes only to the writer given.

use std::io::{self, Write};

use wirebench_core::stats::Summary;
use wirebench_core::units::ByteSize;

use super::{Configuration, Exporter, Report, View};

/// The text-table exporter.
pub struct Table;

impl Exporter for Table {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        let h = &report.heading;
        writeln!(
            out,
            "Campaign {} ({}, started {} UTC, host {})\n",
            h.campaign, h.status, h.started, h.host
        )?;
        for c in &report.configurations {
            table(out, "Client", c, &c.client)?;
            table(out, "Server", c, &c.server)?;
        }
        Ok(())
    }
}

fn table(out: &mut dyn Write, side: &str, c: &Configuration, v: &View) -> io::Result<()> {
    writeln!(
        out,
        "Statistics for {side} {} ({}, {}-byte messages), {} runs:\n-----",
        c.title(),
        ByteSize(c.total_bytes),
        c.msg_size,
        c.runs
    )?;
    writeln!(out, "Messages: {}", counts(&v.messages))?;
    writeln!(out, "Bytes: {}", counts(&v.bytes))?;
    writeln!(out, "Time (s): {}", figures(&v.seconds, 1.0, 4))?;
    writeln!(
        out,
        "Throughput (Gbit/s): {}",
        figures(&v.throughput_bps, 1e9, 3)
    )?;
    writeln!(out, "-----")
}

fn counts(s: &Summary) -> String {
    format!(
        "Min = {:.0}, Avg = {:.2}, Median = {:.1}, Max = {:.0}, Stddev = {:.2}",
        s.min, s.mean, s.median, s.max, s.stddev
    )
}

fn figures(s: &Summary, scale: f64, digits: usize) -> String {
    format!(
        "Min = {:.d$}, Avg = {:.d$}, Median = {:.d$}, Max = {:.d$}, Stddev = {:.d$}",
        s.min / scale,
        s.mean / scale,
        s.median / scale,
        s.max / scale,
        s.stddev / scale,
        d = digits
    )
}
