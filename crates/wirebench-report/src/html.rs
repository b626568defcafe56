//! HTML report: one self-contained file (inline CSS and SVG, no scripts, no external resources)
//! with the charts and the tables (per configuration, or the seeds' grid), readable on screen
//! and in print; and a stored sweep's report on the same page. Writes only to the writer
//! given; the page pieces are `markup`'s.

use std::io::{self, Write};

use super::chart::campaign;
use super::document::{Block, Document};
use super::grid::Grid;
use super::markup::{self, escape, figure, page_end, page_start};
use super::model::{configuration_caption, metrics, Exporter, Layout, Report};

/// The HTML exporter.
pub struct Html;

impl Exporter<Report> for Html {
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        page_start(out, &format!("wirebench {}", report.what()))?;
        for line in report.heading_lines() {
            writeln!(out, "<p>{}</p>", escape(&line))?;
        }
        let figures = campaign::figures(
            &report.configurations,
            report.timeline.as_ref(),
            &report.loss,
        )?;
        for f in &figures {
            figure(out, f)?;
        }
        match report.layout {
            Layout::Grid => {
                writeln!(
                    out,
                    "<h2>Time, goodput, counts and loss per total and configuration</h2>"
                )?;
                let grid = Grid::of(&report.configurations);
                for t in grid.tables() {
                    t.write_wide_html(out)?;
                }
            }
            Layout::Configurations => configuration_tables(report, out)?,
        }
        page_end(out)
    }
}

fn configuration_tables(report: &Report, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "<h2>Statistics per configuration</h2>")?;
    for c in &report.configurations {
        writeln!(
            out,
            "<h3>{} ({})</h3>",
            escape(&c.title()),
            escape(&configuration_caption(c))
        )?;
        writeln!(
            out,
            "<table>\n<tr><th>View</th><th>Metric</th><th>Min</th><th>Avg</th><th>Median</th><th>Max</th><th>Stddev</th></tr>"
        )?;
        for m in metrics(c) {
            let s = m.summary;
            let cell = |x: f64| format!("<td class=\"n\">{}</td>", m.show(x));
            writeln!(
                out,
                "<tr><td>{}</td><td>{}</td>{}{}{}{}{}</tr>",
                m.view.title(),
                escape(&m.label),
                cell(s.min),
                cell(s.mean),
                cell(s.median),
                cell(s.max),
                cell(s.stddev)
            )?;
        }
        writeln!(out, "</table>")?;
    }
    Ok(())
}

impl Exporter<Document> for Html {
    fn write(&self, doc: &Document, out: &mut dyn Write) -> io::Result<()> {
        sweep(doc, out)
    }
}

/// A sweep's report as one HTML page, charts and tables.
fn sweep(doc: &Document, out: &mut dyn Write) -> io::Result<()> {
    markup::page_start(out, &doc.heading.title())?;
    writeln!(out, "<p>{}.</p>", escape(&doc.heading.line()))?;
    for line in &doc.lines {
        writeln!(out, "<p>{}</p>", escape(line.trim()))?;
    }
    for s in &doc.sections {
        if let Some(h) = &s.heading {
            writeln!(out, "<h2>{}</h2>", escape(h))?;
        }
        for b in &s.blocks {
            match b {
                Block::Table(t) => t.write_wide_html(out)?,
                Block::Pairs(pairs) => {
                    writeln!(out, "<table>")?;
                    for (label, value) in pairs {
                        writeln!(
                            out,
                            "<tr><th>{}</th><td>{}</td></tr>",
                            escape(label),
                            escape(value)
                        )?;
                    }
                    writeln!(out, "</table>")?;
                }
                Block::Chart(f) => markup::figure(out, f)?,
                Block::List(title, items) => {
                    writeln!(out, "<p>{}:</p>\n<ul>", escape(title))?;
                    for item in items {
                        writeln!(out, "<li>{}</li>", escape(item))?;
                    }
                    writeln!(out, "</ul>")?;
                }
                Block::TextOnly(_) => {}
            }
        }
    }
    markup::page_end(out)
}
