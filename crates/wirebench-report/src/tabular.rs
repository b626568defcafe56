//! One table model for every table a report prints that is not a per-configuration summary —
//! the seeds' grid, the sweep tables of rr and DNS, the rpm summaries and intervals — so each
//! format renders it once: text (aligned columns), Markdown, CSV and HTML. A table is cells of
//! text already formatted by whoever built it; this module only lays them out.

use std::io::{self, Write};

use super::markup::escape;

/// One column: its heading, the least width it takes in text, and its alignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The heading.
    pub name: String,
    /// Text: the column is at least this wide (sweep tables keep the widths they always had).
    pub width: usize,
    /// Text and HTML: left-aligned (words); otherwise right-aligned (figures).
    pub left: bool,
}

impl Column {
    /// A right-aligned column (figures).
    pub fn figure(name: impl Into<String>, width: usize) -> Column {
        Column {
            name: name.into(),
            width,
            left: false,
        }
    }

    /// A left-aligned column (words).
    pub fn word(name: impl Into<String>, width: usize) -> Column {
        Column {
            name: name.into(),
            width,
            left: true,
        }
    }
}

/// A table: an optional title, columns, rows of cells (one per column), and notes under it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tabular {
    /// Printed above the table.
    pub title: Option<String>,
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows, each one cell per column.
    pub rows: Vec<Vec<String>>,
    /// Printed below the table.
    pub notes: Vec<String>,
    /// Text: spaces between columns, beyond the first (wide cells read better apart).
    pub spacing: usize,
}

impl Tabular {
    /// A table of `columns` titled `title`, without rows yet.
    pub fn new(title: Option<String>, columns: Vec<Column>) -> Tabular {
        Tabular {
            title,
            columns,
            rows: Vec::new(),
            notes: Vec::new(),
            spacing: 0,
        }
    }

    /// Text: an indented line per row, columns at least their width and as wide as their widest
    /// cell, separated by one space; the title above (after a blank line), the notes below.
    pub fn write_text(&self, indent: &str, out: &mut dyn Write) -> io::Result<()> {
        if let Some(title) = &self.title {
            writeln!(out, "\n{title}")?;
        }
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .map(|cell| cell.chars().count())
                    .chain([c.width, c.name.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: Vec<&str>| {
            let mut s = String::from(indent);
            for (i, (c, w)) in self.columns.iter().zip(&widths).enumerate() {
                let cell = cells.get(i).copied().unwrap_or("");
                let pad = w.saturating_sub(cell.chars().count());
                if i > 0 {
                    s.push(' ');
                    s.push_str(&" ".repeat(self.spacing));
                }
                if c.left {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            s.trim_end().to_string()
        };
        writeln!(
            out,
            "{}",
            line(self.columns.iter().map(|c| c.name.as_str()).collect())
        )?;
        for row in &self.rows {
            writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
        }
        for note in &self.notes {
            writeln!(out, "{indent}{note}")?;
        }
        Ok(())
    }

    /// Markdown: the title in bold, a pipe table (figures right-aligned), the notes.
    pub fn write_markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        let cell = |s: &str| s.replace('|', "\\|");
        if let Some(title) = &self.title {
            writeln!(out, "\n**{}**", cell(title))?;
        }
        writeln!(out)?;
        let names: Vec<String> = self.columns.iter().map(|c| cell(&c.name)).collect();
        writeln!(out, "| {} |", names.join(" | "))?;
        let rule: Vec<&str> = self
            .columns
            .iter()
            .map(|c| if c.left { "---" } else { "---:" })
            .collect();
        writeln!(out, "|{}|", rule.join("|"))?;
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
            writeln!(out, "| {} |", cells.join(" | "))?;
        }
        if !self.notes.is_empty() {
            writeln!(out)?;
            for note in &self.notes {
                writeln!(out, "{}", cell(note))?;
            }
        }
        Ok(())
    }

    /// CSV: the column names, then one line per row, quoted where a cell needs it; no title or
    /// notes (a spreadsheet reads the table alone). The one CSV writer of every report: cells
    /// are our own text, RFC 4180 quoting is a few lines ([`csv_cell`]), so the `csv` crate
    /// would add a dependency for nothing it writes differently.
    pub fn write_csv(&self, out: &mut dyn Write) -> io::Result<()> {
        let names: Vec<String> = self.columns.iter().map(|c| csv_cell(&c.name)).collect();
        writeln!(out, "{}", names.join(","))?;
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| csv_cell(c)).collect();
            writeln!(out, "{}", cells.join(","))?;
        }
        Ok(())
    }

    /// HTML: the table in a box that scrolls sideways on a narrow screen rather than running
    /// past the page.
    pub fn write_wide_html(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "<div class=\"wide\">")?;
        self.write_html(out)?;
        writeln!(out, "</div>")
    }

    /// HTML: a table with the title as its caption, figures right-aligned, notes under it.
    pub fn write_html(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "<table>")?;
        if let Some(title) = &self.title {
            writeln!(out, "<caption>{}</caption>", escape(title))?;
        }
        write!(out, "<tr>")?;
        for c in &self.columns {
            write!(out, "<th>{}</th>", escape(&c.name))?;
        }
        writeln!(out, "</tr>")?;
        for row in &self.rows {
            write!(out, "<tr>")?;
            for (c, cell) in self.columns.iter().zip(row) {
                let class = if c.left { "" } else { " class=\"n\"" };
                write!(out, "<td{class}>{}</td>", escape(cell))?;
            }
            writeln!(out, "</tr>")?;
        }
        writeln!(out, "</table>")?;
        for note in &self.notes {
            writeln!(out, "<p class=\"note\">{}</p>", escape(note))?;
        }
        Ok(())
    }
}

/// A time in nanoseconds as a table cell in microseconds, one decimal, no unit ("12.3"): the
/// column heading names the unit.
pub fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

/// A CSV field, quoted (with quotes doubled) when it holds a comma, a quote or a line break.
pub fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Tabular {
        let mut t = Tabular::new(
            Some("title".into()),
            vec![Column::word("proto", 5), Column::figure("K", 6)],
        );
        t.rows.push(vec!["udp".into(), "32".into()]);
        t.rows.push(vec!["tcp, x".into(), "1".into()]);
        t.notes.push("a note".into());
        t
    }

    #[test]
    fn every_format_lays_out_the_same_cells() {
        let t = sample();
        let mut text = Vec::new();
        t.write_text("  ", &mut text).unwrap();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "\ntitle\n  proto       K\n  udp        32\n  tcp, x      1\n  a note\n"
        );
        let mut md = Vec::new();
        t.write_markdown(&mut md).unwrap();
        assert_eq!(
            String::from_utf8(md).unwrap(),
            "\n**title**\n\n| proto | K |\n|---|---:|\n| udp | 32 |\n| tcp, x | 1 |\n\na note\n"
        );
        let mut csv = Vec::new();
        t.write_csv(&mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "proto,K\nudp,32\n\"tcp, x\",1\n"
        );
        let mut html = Vec::new();
        t.write_html(&mut html).unwrap();
        let html = String::from_utf8(html).unwrap();
        assert!(html.contains("<caption>title</caption>"));
        assert!(html.contains("<td>udp</td><td class=\"n\">32</td>"));
        assert_eq!(csv_cell("plain"), "plain");
        assert_eq!(csv_cell("a,\"b\""), "\"a,\"\"b\"\"\"");
    }
}
