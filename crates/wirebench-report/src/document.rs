//! The report of a stored sweep — an rr sweep, a DNS campaign, an rpm campaign — as one model
//! for every kind: each kind builds a [`Document`] (its heading, lines, sections of tables,
//! figure/value pairs, charts and lists, and its CSV table), and the format exporters (text,
//! Markdown, CSV, HTML) write it, as they write a transfer report. JSON is each kind's own
//! document, written by the command.

use super::chart::Figure;
use super::tabular::{Column, Tabular};

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

/// One part of a report that sets documents side by side: what its CSV rows are named by
/// (a host name, "rpm campaign 2"), the heading of its sections ("On laptop", "rpm campaign
/// 2"), and its document.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    /// Its value in the CSV's first column.
    pub name: String,
    /// What heads its sections.
    pub title: String,
    /// Its document.
    pub doc: Document,
}

impl Document {
    /// One document of `parts` side by side: their sections in turn, each headed by its part's
    /// title; the lines every part has once, the others each under its part's title; one CSV
    /// whose first column, `column`, names each row's part.
    pub fn side_by_side(heading: SweepHeading, column: &str, parts: Vec<Part>) -> Document {
        let shared: Vec<String> = parts
            .first()
            .map(|first| {
                first
                    .doc
                    .lines
                    .iter()
                    .filter(|l| parts.iter().all(|p| p.doc.lines.contains(l)))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut lines = shared.clone();
        let mut sections = Vec::new();
        let mut csv: Option<Tabular> = None;
        for part in parts {
            let title = part.title;
            for line in part.doc.lines {
                if !shared.contains(&line) {
                    lines.push(format!("{title}: {line}"));
                }
            }
            for mut section in part.doc.sections {
                section.heading = Some(match section.heading {
                    Some(h) => format!("{title}: {h}"),
                    None => title.clone(),
                });
                sections.push(section);
            }
            let table = csv.get_or_insert_with(|| {
                let mut columns = vec![Column::word(column, 0)];
                columns.extend(part.doc.csv.columns.iter().cloned());
                Tabular::new(part.doc.csv.title.clone(), columns)
            });
            for row in part.doc.csv.rows {
                let mut named = vec![part.name.clone()];
                named.extend(row);
                table.rows.push(named);
            }
        }
        Document {
            heading,
            lines,
            sections,
            csv: csv.unwrap_or_else(|| Tabular::new(None, Vec::new())),
        }
    }
}
