//! The seeds' table (`report --layout grid`): one row per total (or message size, or both
//! where both vary), one column per protocol × mechanism, each cell the minimum / average /
//! maximum over the runs — one grid of transfer time, one of goodput — and the same as one wide
//! CSV a spreadsheet opens without reshaping. A goodput cell from a configuration some of whose
//! runs were too short to time says how many were timed. Lays out the result model's
//! summaries; computes no figure.

use std::collections::BTreeSet;

use wirebench_core::record::summary::ConfigurationSummary;
use wirebench_core::vocab::stats::Summary;

use super::chart::axis::{rate_unit, three_digits, time_unit};
use super::model::short_size;
use super::tabular::{Column, Tabular};

/// The grid of a report's configurations.
#[derive(Debug, Clone)]
pub struct Grid<'a> {
    /// The rows: (message size, total), ascending.
    rows: Vec<(u32, u64)>,
    /// What the rows differ in.
    row_kind: RowKind,
    /// The columns: protocol × mechanism titles in the plan's order.
    columns: Vec<String>,
    /// Each configuration, with its row and column.
    cells: Vec<(usize, usize, &'a ConfigurationSummary)>,
    /// The message size of every row, when it is one.
    one_size: Option<u32>,
    /// The total of every row, when it is one.
    one_total: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowKind {
    Total,
    Size,
    Both,
}

impl<'a> Grid<'a> {
    /// The grid of `configs`.
    pub fn of(configs: &'a [ConfigurationSummary]) -> Grid<'a> {
        let rows: Vec<(u32, u64)> = configs
            .iter()
            .map(|c| (c.key.msg_size, c.key.total_bytes))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let sizes: BTreeSet<u32> = rows.iter().map(|r| r.0).collect();
        let totals: BTreeSet<u64> = rows.iter().map(|r| r.1).collect();
        let row_kind = match (sizes.len() > 1, totals.len() > 1) {
            (true, true) => RowKind::Both,
            (true, false) => RowKind::Size,
            _ => RowKind::Total,
        };
        let mut columns: Vec<String> = Vec::new();
        for c in configs {
            if !columns.contains(&c.title()) {
                columns.push(c.title());
            }
        }
        let cells = configs
            .iter()
            .filter_map(|c| {
                let row = rows
                    .iter()
                    .position(|r| *r == (c.key.msg_size, c.key.total_bytes))?;
                let column = columns.iter().position(|t| *t == c.title())?;
                Some((row, column, c))
            })
            .collect();
        Grid {
            one_size: (sizes.len() == 1).then(|| sizes.first().copied()).flatten(),
            one_total: (totals.len() == 1)
                .then(|| totals.first().copied())
                .flatten(),
            rows,
            row_kind,
            columns,
            cells,
        }
    }

    fn cell(&self, row: usize, column: usize) -> Option<&'a ConfigurationSummary> {
        self.cells
            .iter()
            .find(|(r, c, _)| *r == row && *c == column)
            .map(|(_, _, s)| *s)
    }

    fn row_heading(&self) -> &'static str {
        match self.row_kind {
            RowKind::Total => "Total",
            RowKind::Size => "Message size",
            RowKind::Both => "Message size × total",
        }
    }

    fn row_label(&self, (size, total): (u32, u64)) -> String {
        match self.row_kind {
            RowKind::Total => short_size(total),
            RowKind::Size => format!("{size} B"),
            RowKind::Both => format!("{size} B × {}", short_size(total)),
        }
    }

    /// What every row shares: "1024-byte messages", "500 MiB each".
    fn shared(&self) -> String {
        match (self.row_kind, self.one_size, self.one_total) {
            (RowKind::Total, Some(size), _) => format!(", {size}-byte messages"),
            (RowKind::Size, _, Some(total)) => format!(", {} per run", short_size(total)),
            _ => String::new(),
        }
    }

    fn table(
        &self,
        what: &str,
        unit: &str,
        figure: impl Fn(&ConfigurationSummary) -> String,
    ) -> Tabular {
        let mut columns = vec![Column::word(self.row_heading(), 0)];
        columns.extend(self.columns.iter().map(|c| Column::figure(c.as_str(), 0)));
        let mut t = Tabular::new(
            Some(format!(
                "{what} ({unit}): min / avg / max over the runs{}",
                self.shared()
            )),
            columns,
        );
        t.spacing = 2;
        for (i, row) in self.rows.iter().enumerate() {
            let mut cells = vec![self.row_label(*row)];
            cells.extend(
                (0..self.columns.len())
                    .map(|j| self.cell(i, j).map_or_else(|| "–".to_string(), &figure)),
            );
            t.rows.push(cells);
        }
        t
    }

    /// Transfer time: min / avg / max of each cell, in one unit for the whole grid.
    pub fn time(&self) -> Tabular {
        let top = self
            .cells
            .iter()
            .map(|(_, _, c)| c.seconds.max)
            .fold(0.0f64, f64::max);
        let (scale, unit) = time_unit(top);
        self.table("Transfer time", unit, |c| spread(&c.seconds, scale))
    }

    /// Goodput: min / avg / max of each cell's timed runs, in one unit for the whole grid, with
    /// how many runs were timed where that is not all of them.
    pub fn goodput(&self) -> Tabular {
        let top = self
            .cells
            .iter()
            .filter_map(|(_, _, c)| c.goodput_bps.map(|s| s.max))
            .fold(0.0f64, f64::max);
        let (scale, unit) = rate_unit(top);
        let mut t = self.table("Goodput", unit, |c| {
            let timed = c.runs - c.untimed_runs;
            match &c.goodput_bps {
                None => format!("not timed (0 of {})", c.runs),
                Some(s) if c.untimed_runs > 0 => {
                    format!("{} ({timed} of {} timed)", spread(s, scale), c.runs)
                }
                Some(s) => spread(s, scale),
            }
        });
        if self.cells.iter().any(|(_, _, c)| c.untimed_runs > 0) {
            t.notes.push(format!(
                "Runs under {} ms are too short to time: a cell says how many of its runs its goodput covers.",
                wirebench_core::record::MIN_TIMED_NS / 1_000_000
            ));
        }
        t
    }

    /// The wide CSV: one line per row, for each column its runs, timed runs and the minimum,
    /// mean and maximum of time (s) and goodput (bit/s); empty fields where a configuration
    /// was not measured or nothing was timed.
    pub fn csv(&self) -> Tabular {
        let mut columns = vec![
            Column::figure("msg_size", 0),
            Column::figure("total_bytes", 0),
        ];
        let slug = |title: &str| {
            title
                .to_lowercase()
                .replace(", both directions", "_bidir")
                .replace(" stop and wait", "_saw")
                .replace(" streaming", "_stream")
        };
        const FIELDS: [&str; 8] = [
            "runs",
            "timed_runs",
            "time_min_s",
            "time_mean_s",
            "time_max_s",
            "goodput_min_bps",
            "goodput_mean_bps",
            "goodput_max_bps",
        ];
        for title in &self.columns {
            for f in FIELDS {
                columns.push(Column::figure(format!("{}_{f}", slug(title)), 0));
            }
        }
        let mut t = Tabular::new(None, columns);
        for (i, (size, total)) in self.rows.iter().enumerate() {
            let mut cells = vec![size.to_string(), total.to_string()];
            for j in 0..self.columns.len() {
                match self.cell(i, j) {
                    None => cells.extend(std::iter::repeat_n(String::new(), FIELDS.len())),
                    Some(c) => {
                        cells.push(c.runs.to_string());
                        cells.push((c.runs - c.untimed_runs).to_string());
                        let s = &c.seconds;
                        cells.extend([s.min, s.mean, s.max].map(|v| v.to_string()));
                        match &c.goodput_bps {
                            Some(g) => cells.extend([g.min, g.mean, g.max].map(|v| v.to_string())),
                            None => cells.extend(std::iter::repeat_n(String::new(), 3)),
                        }
                    }
                }
            }
            t.rows.push(cells);
        }
        t
    }
}

/// "5.43 / 6.56 / 8.01": min, mean and max divided by `scale`, three significant digits each.
fn spread(s: &Summary, scale: f64) -> String {
    format!(
        "{} / {} / {}",
        three_digits(s.min / scale),
        three_digits(s.mean / scale),
        three_digits(s.max / scale)
    )
}
