//! The report of a stored sweep — an rr sweep, a DNS campaign, an rpm campaign — written once
//! for every kind: each kind builds a [`Document`] (its heading, lines, sections of tables,
//! figure/value pairs, charts and lists, and its CSV table) and this module writes it as text,
//! Markdown, CSV or HTML. JSON is each kind's own document, written by the command. Writes only
//! to the writer given.

use std::io::{self, Write};

use super::chart::Figure;
use super::markup::{self, escape};
use super::model::Format;
use super::tabular::Tabular;

/// Which stored sweep a report is about (formatted by the caller: no clocks here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepHeading {
    /// "rr sweep", "DNS campaign", "rpm campaign".
    pub kind: &'static str,
    /// Store id.
    pub campaign: i64,
    /// Start time, formatted (UTC).
    pub started: String,
    /// How it ended.
    pub status: String,
    /// The host it ran on.
    pub host: String,
    /// What ran, after the status: " against embedded 127.0.0.1:40000", ": example. A to
    /// 127.0.0.1:53".
    pub what: String,
}

impl SweepHeading {
    /// "rr sweep 1 (complete, started … UTC, host h) against …".
    pub fn line(&self) -> String {
        format!(
            "{} {} ({}, started {} UTC, host {}){}",
            self.kind, self.campaign, self.status, self.started, self.host, self.what
        )
    }

    /// "wirebench rr sweep 1".
    pub fn title(&self) -> String {
        format!("wirebench {} {}", self.kind, self.campaign)
    }
}

/// One piece of a section.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A table.
    Table(Tabular),
    /// Figure and value, one per line (a summary without column headings).
    Pairs(Vec<(String, String)>),
    /// A chart (HTML only).
    Chart(Figure),
    /// A titled list.
    List(String, Vec<String>),
    /// Lines of text art (text only: an HTML report draws charts instead).
    TextOnly(Vec<String>),
}

/// A section: an optional heading and its blocks, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Section {
    /// "test 1 (draft-ietf-ippm-responsiveness-08)"; `None` continues the document.
    pub heading: Option<String>,
    /// What it holds.
    pub blocks: Vec<Block>,
}

/// A whole sweep report.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Which sweep.
    pub heading: SweepHeading,
    /// Lines under the heading (the path measured, the rating scale).
    pub lines: Vec<String>,
    /// The sections.
    pub sections: Vec<Section>,
    /// The CSV form: one row per result (or interval), base units.
    pub csv: Tabular,
}

/// Writes `doc` as `format` (table, markdown, csv or html); `Err` with the formats offered for
/// JSON, which each kind writes as its own document.
pub fn write(doc: &Document, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => text(doc, out),
        Format::Markdown => markdown(doc, out),
        Format::Csv => doc.csv.write_csv(out),
        Format::Html => page(doc, out),
        Format::Json => Err(io::Error::other(
            "a sweep's JSON is its own document, not a layout",
        )),
    }
}

fn text(doc: &Document, out: &mut dyn Write) -> io::Result<()> {
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

fn markdown(doc: &Document, out: &mut dyn Write) -> io::Result<()> {
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

fn page(doc: &Document, out: &mut dyn Write) -> io::Result<()> {
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
