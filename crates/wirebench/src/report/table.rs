//! Plain-text report: the "Statistics for ..." tables our users paste into their reports — the
//! run's headline figures (goodput first, UDP loss where it applies), then the client's and
//! the server's counts — with median and standard deviation. `run --repeat` ends with the same
//! tables. Writes only to the writer given.

use std::io::{self, Write};

use wirebench_core::record::summary::ConfigurationSummary;

use super::{configuration_caption, metrics, Exporter, Metric, Report, View};

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
        write_summaries(&report.configurations, out)
    }
}

/// The tables of every configuration.
pub fn write_summaries(configs: &[ConfigurationSummary], out: &mut dyn Write) -> io::Result<()> {
    for c in configs {
        let all = metrics(c);
        for view in [View::Run, View::Client, View::Server] {
            let rows: Vec<&Metric<'_>> = all.iter().filter(|m| m.view == view).collect();
            let who = match view {
                View::Run => String::new(),
                other => format!("{} ", other.title()),
            };
            writeln!(
                out,
                "Statistics for {who}{} ({}):\n-----",
                c.title(),
                configuration_caption(c)
            )?;
            if view == View::Run && c.goodput_bps.is_none() {
                writeln!(
                    out,
                    "Goodput: every run was too short to time; send more data (-n)"
                )?;
            }
            for m in rows {
                let s = m.summary;
                writeln!(
                    out,
                    "{}: Min = {}, Avg = {}, Median = {}, Max = {}, Stddev = {}",
                    m.label,
                    m.show(s.min),
                    m.show(s.mean),
                    m.show(s.median),
                    m.show(s.max),
                    m.show(s.stddev)
                )?;
            }
            writeln!(out, "-----")?;
        }
    }
    Ok(())
}
