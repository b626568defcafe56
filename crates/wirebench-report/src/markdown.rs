//! Markdown report: one table per configuration, the run's headline figures first, then the
//! client's and the server's counts; or the seeds' grid; and a stored sweep's report (its
//! sections as headings, tables, figure/value tables and lists). Writes only to the writer
//! given.

use std::io::{self, Write};

use super::document::{Block, Document};
use super::grid::Grid;
use super::model::{configuration_caption, metrics, Exporter, Layout, Report};

/// The Markdown exporter.
pub struct Markdown;

impl Exporter<Report> for Markdown {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "# wirebench {}\n", report.what())?;
        let lines = report.heading_lines();
        if report.campaigns.len() == 1 {
            writeln!(out, "{}", lines.join("\n\n"))?;
        } else {
            for line in lines {
                writeln!(out, "- {line}")?;
            }
        }
        if report.layout == Layout::Grid {
            let grid = Grid::of(&report.configurations);
            for t in grid.tables() {
                t.write_markdown(out)?;
            }
            return Ok(());
        }
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

impl Exporter<Document> for Markdown {
    fn write(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        sweep(doc, out)
    }
}

/// A sweep's report as Markdown.
fn sweep(doc: &Document, out: &mut dyn Write) -> io::Result<()> {
    let h = &doc.heading;
    writeln!(out, "# {}\n\n{}", h.title(), h.line())?;
    for line in &doc.lines {
        writeln!(out, "\n{line}")?;
    }
    let cell = |s: &str| s.replace('|', "\\|");
    for s in &doc.sections {
        if let Some(heading) = &s.heading {
            writeln!(out, "\n## {heading}")?;
        }
        for b in &s.blocks {
            match b {
                Block::Table(t) => t.write_markdown(out)?,
                Block::Pairs(pairs) => {
                    writeln!(out, "\n| Figure | Value |\n|---|---|")?;
                    for (label, value) in pairs {
                        writeln!(out, "| {} | {} |", cell(label), cell(value))?;
                    }
                }
                Block::Chart(_) | Block::TextOnly(_) => {}
                Block::List(title, items) => {
                    writeln!(out, "\n{title}:\n")?;
                    for item in items {
                        writeln!(out, "- {item}")?;
                    }
                }
            }
        }
    }
    Ok(())
}
