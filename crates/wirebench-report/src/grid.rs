//! The seeds' table (`report --layout grid`): one row per total (or message size, or both
//! where both vary), one column per protocol × mechanism, each cell the minimum / average /
//! maximum over the runs — one grid of transfer time, one of goodput — and the same as one wide
//! CSV a spreadsheet opens without reshaping. A goodput cell from a configuration some of whose
//! runs were too short to time says how many were timed. Lays out the result model's
//! summaries; computes no figure.

use std::collections::BTreeSet;

use wirebench_core::record::summary::{ConfigurationSummary, SideSummary};
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
    /// Each column has a message size of its own (TCP 65535 B, UDP 32767 B): the size is in
    /// the column's heading and the rows are the totals alone (rows hold size 0).
    size_tied: bool,
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
        let sizes: BTreeSet<u32> = configs.iter().map(|c| c.key.msg_size).collect();
        let totals: BTreeSet<u64> = configs.iter().map(|c| c.key.total_bytes).collect();
        let mut per_title: Vec<(String, BTreeSet<u32>)> = Vec::new();
        for c in configs {
            match per_title.iter_mut().find(|(t, _)| *t == c.title()) {
                Some((_, s)) => {
                    s.insert(c.key.msg_size);
                }
                None => per_title.push((c.title(), BTreeSet::from([c.key.msg_size]))),
            }
        }
        let size_tied = sizes.len() > 1 && per_title.iter().all(|(_, s)| s.len() == 1);
        // A tied size is the column's: the row is the total alone.
        let row_of = |c: &ConfigurationSummary| {
            (
                if size_tied { 0 } else { c.key.msg_size },
                c.key.total_bytes,
            )
        };
        let rows: Vec<(u32, u64)> = configs
            .iter()
            .map(row_of)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let row_kind = match (sizes.len() > 1 && !size_tied, totals.len() > 1) {
            (true, true) => RowKind::Both,
            (true, false) => RowKind::Size,
            _ => RowKind::Total,
        };
        let column_of = |c: &ConfigurationSummary| {
            if size_tied {
                format!("{} ({} B)", c.title(), c.key.msg_size)
            } else {
                c.title()
            }
        };
        let mut columns: Vec<String> = Vec::new();
        for c in configs {
            if !columns.contains(&column_of(c)) {
                columns.push(column_of(c));
            }
        }
        let cells = configs
            .iter()
            .filter_map(|c| {
                let row = rows.iter().position(|r| *r == row_of(c))?;
                let column = columns.iter().position(|t| *t == column_of(c))?;
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
            size_tied,
        }
    }

    /// Every table of the grid, in the order a report prints them: time, goodput, messages and
    /// bytes of each side, and UDP loss where a column is UDP.
    pub fn tables(&self) -> Vec<Tabular> {
        let mut all = vec![self.time(), self.goodput(), self.messages(), self.bytes()];
        all.extend(self.loss());
        all
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

    /// A table of `figure` per cell, its caption `what` and what every row shares.
    fn table(&self, what: &str, figure: impl Fn(&ConfigurationSummary) -> String) -> Tabular {
        let mut columns = vec![Column::word(self.row_heading(), 0)];
        columns.extend(self.columns.iter().map(|c| Column::figure(c.as_str(), 0)));
        let mut t = Tabular::new(Some(format!("{what}{}", self.shared())), columns);
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
        self.table(
            &format!("Transfer time ({unit}): min / avg / max over the runs"),
            |c| spread(&c.seconds, scale),
        )
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
        let mut t = self.table(
            &format!("Goodput ({unit}): min / avg / max over the runs"),
            |c| {
                let timed = c.runs - c.untimed_runs;
                match &c.goodput_bps {
                    None => format!("not timed (0 of {})", c.runs),
                    Some(s) if c.untimed_runs > 0 => {
                        format!("{} ({timed} of {} timed)", spread(s, scale), c.runs)
                    }
                    Some(s) => spread(s, scale),
                }
            },
        );
        if self.cells.iter().any(|(_, _, c)| c.untimed_runs > 0) {
            t.notes.push(format!(
                "Runs under {} ms are too short to time: a cell says how many of its runs its goodput covers.",
                wirebench_core::record::MIN_TIMED_NS / 1_000_000
            ));
        }
        t
    }

    /// Messages: what the client sent and the server read, each the mean over the runs.
    pub fn messages(&self) -> Tabular {
        self.counts("Messages", |s| &s.messages)
    }

    /// Bytes: what the client sent and the server read, each the mean over the runs.
    pub fn bytes(&self) -> Tabular {
        self.counts("Bytes", |s| &s.bytes)
    }

    fn counts(&self, what: &str, figure: impl Fn(&SideSummary) -> &Summary) -> Tabular {
        let caption = format!("{what}: client sent / server read, mean over the runs");
        let mut t = self.table(&caption, |c| {
            format!(
                "{} / {}",
                count(figure(&c.client).mean),
                count(figure(&c.server).mean)
            )
        });
        if self.cells.iter().any(|(_, _, c)| {
            let (a, b) = (figure(&c.client), figure(&c.server));
            a.min != a.max || b.min != b.max
        }) {
            t.notes.push(
                "Counts are the mean over the runs where the runs differ (timed runs, UDP loss)."
                    .to_string(),
            );
        }
        t
    }

    /// UDP loss: messages the receiver never got, min / avg / max over the runs, with the
    /// mean share of those sent; `None` when no cell has UDP delivery figures.
    pub fn loss(&self) -> Option<Tabular> {
        self.cells
            .iter()
            .any(|(_, _, c)| c.delivery.is_some())
            .then(|| {
                let caption =
                    "UDP loss: messages lost, min / avg / max over the runs (mean % of those sent)";
                self.table(caption, |c| match &c.delivery {
                    Some(d) => format!(
                        "{} / {} / {} ({}%)",
                        count(d.lost.min),
                        count(d.lost.mean),
                        count(d.lost.max),
                        three_digits(d.lost_pct.mean)
                    ),
                    None => "–".to_string(),
                })
            })
    }

    /// The wide CSV: one line per row, for each column its runs, timed runs and the minimum,
    /// mean and maximum of time (s) and goodput (bit/s), the mean messages and bytes each side
    /// counted and the mean UDP messages lost; empty fields where a configuration was not
    /// measured, nothing was timed or nothing can be lost (not UDP).
    pub fn csv(&self) -> Tabular {
        let mut columns = vec![
            Column::figure("msg_size", 0),
            Column::figure("total_bytes", 0),
        ];
        let slug = |title: &str| {
            let short = title
                .to_lowercase()
                .replace(", both directions", "_bidir")
                .replace(" stop and wait", "_saw")
                .replace(" streaming", "_stream")
                // A size tied to the column: "udp_stream (32767 b)" → "udp_stream_32767b".
                .replace(" b)", "b")
                .replace(" (", "_");
            // A site ("tcp_stream on ec2-vm → 10.0.0.2") in letters, digits and single
            // underscores, so every header is one word a spreadsheet formula can name.
            let mut out = String::new();
            for ch in short.chars() {
                if ch.is_ascii_alphanumeric() {
                    out.push(ch);
                } else if !out.ends_with('_') {
                    out.push('_');
                }
            }
            out.trim_end_matches('_').to_string()
        };
        const FIELDS: [&str; 13] = [
            "runs",
            "timed_runs",
            "time_min_s",
            "time_mean_s",
            "time_max_s",
            "goodput_min_bps",
            "goodput_mean_bps",
            "goodput_max_bps",
            "client_messages_mean",
            "server_messages_mean",
            "client_bytes_mean",
            "server_bytes_mean",
            "lost_mean",
        ];
        for title in &self.columns {
            for f in FIELDS {
                columns.push(Column::figure(format!("{}_{f}", slug(title)), 0));
            }
        }
        let mut t = Tabular::new(None, columns);
        for (i, (size, total)) in self.rows.iter().enumerate() {
            let size = if self.size_tied {
                String::new()
            } else {
                size.to_string()
            };
            let mut cells = vec![size, total.to_string()];
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
                        cells.extend(
                            [
                                c.client.messages.mean,
                                c.server.messages.mean,
                                c.client.bytes.mean,
                                c.server.bytes.mean,
                            ]
                            .map(|v| v.to_string()),
                        );
                        cells.push(
                            c.delivery
                                .as_ref()
                                .map_or_else(String::new, |d| d.lost.mean.to_string()),
                        );
                    }
                }
            }
            t.rows.push(cells);
        }
        t
    }
}

/// A count as a whole number (a mean of counts rounded to one).
fn count(v: f64) -> String {
    format!("{:.0}", v)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::shape::tests::config;
    use wirebench_core::record::summary::DeliverySummary;
    use wirebench_core::vocab::plan::{Mechanism, Protocol};

    fn of(values: &[f64]) -> Summary {
        Summary::of(values).expect("values")
    }

    /// TCP at 65535 B and UDP at 32767 B over two totals: the size goes to the columns, the
    /// rows are the totals, no cell is empty; the grid has the counts of both sides and UDP
    /// loss.
    #[test]
    fn a_grid_with_sizes_tied_to_protocols_has_totals_for_rows_and_counts_and_loss() {
        let mut configs = Vec::new();
        for total in [1_000_000u64, 2_000_000_000] {
            configs.push(config(Protocol::Tcp, Mechanism::Stream, 65535, total, 1.0));
            let mut udp = config(Protocol::Udp, Mechanism::Stream, 32767, total, 1.0);
            udp.server.messages = of(&[20.0, 24.0, 28.0]);
            udp.delivery = Some(DeliverySummary {
                lost: of(&[2.0, 6.0, 10.0]),
                lost_pct: of(&[2.0, 6.5, 11.0]),
                duplicates: of(&[0.0]),
                duplicates_pct: of(&[0.0]),
                out_of_order: of(&[0.0]),
                out_of_order_pct: of(&[0.0]),
                lost_receiving_host: None,
                lost_sending_host: None,
                lost_path: None,
            });
            configs.push(udp);
        }
        let grid = Grid::of(&configs);
        let tables = grid.tables();
        assert_eq!(tables.len(), 5, "time, goodput, messages, bytes, loss");
        let time = &tables[0];
        assert_eq!(time.rows.len(), 2, "one row per total");
        assert_eq!(time.rows[0][0], "1 MB");
        assert_eq!(time.rows[1][0], "2 GB");
        assert!(
            time.rows.iter().flatten().all(|c| c != "–"),
            "no empty cell"
        );
        let names: Vec<&str> = time.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Total",
                "TCP Streaming (65535 B)",
                "UDP Streaming (32767 B)"
            ]
        );
        // 1 MB in 65535-byte messages: 15 sent and read (the fixture's counts).
        let messages = &tables[2];
        assert_eq!(messages.rows[0][1], "15 / 15");
        assert_eq!(messages.rows[0][2], "30 / 24", "UDP: the server read fewer");
        assert_eq!(tables[3].rows[1][1], "2000000000 / 2000000000");
        let csv = grid.csv();
        let header: Vec<&str> = csv.columns.iter().map(|c| c.name.as_str()).collect();
        let at = |name: &str| header.iter().position(|h| *h == name).expect(name);
        let row = &csv.rows[0];
        assert_eq!(row[0], "", "the size is the column's");
        assert_eq!(row[at("udp_stream_32767b_server_messages_mean")], "24");
        assert_eq!(row[at("udp_stream_32767b_lost_mean")], "6");
        assert_eq!(
            row[at("tcp_stream_65535b_lost_mean")],
            "",
            "TCP reports no loss"
        );
        let loss = &tables[4];
        assert_eq!(loss.rows[0][1], "–", "TCP has no loss figures");
        assert_eq!(loss.rows[0][2], "2 / 6 / 10 (6.50%)");
    }
}
