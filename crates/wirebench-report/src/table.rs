//! Plain-text report: the "Statistics for ..." tables our users paste into their reports — the
//! run's headline figures (goodput first, UDP loss where it applies), then the client's and
//! the server's counts — with median and standard deviation, or the seeds' grid. `run
//! --repeat` ends with the same tables; and a stored sweep's report as text (heading, lines,
//! indented tables, figure/value pairs, lists, text charts). Writes only to the writer given.

use std::io::{self, Write};

use wirebench_core::record::summary::ConfigurationSummary;

use super::document::{Block, Document};
use super::grid::Grid;
use super::model::{configuration_caption, metrics, Exporter, Layout, Metric, Report, View};

/// The text-table exporter.
pub struct Table;

impl Exporter<Report> for Table {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        match report.campaigns.as_slice() {
            [h] => writeln!(out, "Campaign {} ({})", h.campaign, h.line())?,
            _ => {
                writeln!(out, "{}", capitalised(&report.what()))?;
                for line in report.heading_lines() {
                    writeln!(out, "  {line}")?;
                }
            }
        }
        match report.layout {
            Layout::Configurations => {
                writeln!(out)?;
                write_summaries(&report.configurations, out)
            }
            Layout::Grid => {
                let grid = Grid::of(&report.configurations);
                for t in grid.tables() {
                    t.write_text("", out)?;
                }
                Ok(())
            }
        }
    }
}

/// "Campaigns 1, 2" from "campaigns 1, 2".
fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
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

impl Exporter<Document> for Table {
    fn write(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        sweep(doc, out)
    }
}

/// A sweep's report as text.
fn sweep(doc: &Document, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", doc.heading.line())?;
    for line in &doc.lines {
        writeln!(out, "{line}")?;
    }
    for s in &doc.sections {
        if let Some(h) = &s.heading {
            writeln!(out, "\n{h}:")?;
        }
        for b in &s.blocks {
            match b {
                Block::Table(t) => {
                    // A table in a headed section is set apart by a blank line.
                    if s.heading.is_some() && t.title.is_none() {
                        writeln!(out)?;
                    }
                    t.write_text("  ", out)?;
                }
                Block::Pairs(pairs) => {
                    for (label, value) in pairs {
                        writeln!(out, "  {label:<20} {value}")?;
                    }
                }
                Block::Chart(_) => {}
                Block::List(title, items) => {
                    writeln!(out, "  {title}:")?;
                    for item in items {
                        writeln!(out, "  - {item}")?;
                    }
                }
                Block::TextOnly(lines) => {
                    for line in lines {
                        writeln!(out, "{line}")?;
                    }
                }
            }
        }
    }
    Ok(())
}
