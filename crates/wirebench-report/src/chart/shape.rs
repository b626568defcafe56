//! The shape of a transfer campaign as its charts follow it: which swept dimension (message
//! size or total) is the x axis — the one with the most values —, which dimensions name the
//! series instead (one tied to the protocol × mechanism, such as a size per protocol, or the
//! one that is not the axis), and whether the x axis is a line chart's or bars' categories.
//! Owns that choice only; must not draw or compute statistics.

use std::collections::{BTreeMap, BTreeSet};

use wirebench_core::record::summary::ConfigurationSummary as Configuration;

use crate::model::short_size;

/// A swept dimension of a transfer campaign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// The message size, bytes.
    Size,
    /// The total per run, bytes.
    Total,
}

/// How a campaign's charts are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The x axis: `None` when neither size nor total varies (or the size is tied to the
    /// protocol and the total has one value): no "against" chart, bars per protocol instead.
    pub x: Option<Dim>,
    /// The values along x, ascending (the one total when `x` is `None`).
    pub x_values: Vec<u64>,
    /// Distinct message sizes.
    sizes: usize,
    /// Distinct totals.
    totals: usize,
    /// Distinct sites (campaigns from several places side by side).
    sites: usize,
    /// Each protocol × mechanism has one message size of its own (TCP 65535 B, UDP 32767 B):
    /// the size names the series, it does not split the axis.
    size_tied: bool,
}

impl Shape {
    /// The shape of `configs`.
    pub fn of(configs: &[&Configuration]) -> Shape {
        let sizes: BTreeSet<u64> = configs.iter().map(|c| u64::from(c.key.msg_size)).collect();
        let totals: BTreeSet<u64> = configs.iter().map(|c| c.key.total_bytes).collect();
        let sites: BTreeSet<Option<&str>> = configs.iter().map(|c| c.site.as_deref()).collect();
        let mut per_title: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
        for c in configs {
            per_title
                .entry(c.title())
                .or_default()
                .insert(c.key.msg_size);
        }
        let size_tied = sizes.len() > 1 && per_title.values().all(|s| s.len() == 1);
        let size_count = if size_tied { 0 } else { sizes.len() };
        // The dimension with the most values; a tie goes to the size (the finer sweep).
        let x = match (size_count > 1, totals.len() > 1) {
            (false, false) => None,
            (true, false) => Some(Dim::Size),
            (false, true) => Some(Dim::Total),
            (true, true) if totals.len() > size_count => Some(Dim::Total),
            (true, true) => Some(Dim::Size),
        };
        let x_values = match x {
            Some(Dim::Size) => sizes.iter().copied().collect(),
            Some(Dim::Total) | None => totals.iter().copied().collect(),
        };
        Shape {
            x,
            x_values,
            sizes: sizes.len(),
            totals: totals.len(),
            sites: sites.len(),
            size_tied,
        }
    }

    /// Whether the x axis is a line chart's (a size sweep, or three totals or more); bars per
    /// category of x otherwise.
    pub fn lines(&self) -> bool {
        match self.x {
            Some(Dim::Size) => true,
            Some(Dim::Total) => self.x_values.len() >= 3,
            None => false,
        }
    }

    /// Where `c` lies along x: its value on a line chart, its category's index on bars.
    pub fn x_of(&self, c: &Configuration) -> f64 {
        let v = match self.x {
            Some(Dim::Size) => u64::from(c.key.msg_size),
            Some(Dim::Total) | None => c.key.total_bytes,
        };
        if self.lines() {
            v as f64
        } else {
            self.x_values.iter().position(|x| *x == v).unwrap_or(0) as f64
        }
    }

    /// The series `c` belongs to: its protocol × mechanism, with every dimension that is not
    /// the x axis and has several values ("TCP Streaming, 65535 B", "UDP Streaming, 1 GiB").
    pub fn name(&self, c: &Configuration) -> String {
        let mut name = c.title();
        if self.sizes > 1 && self.x != Some(Dim::Size) {
            name.push_str(&format!(", {} B", c.key.msg_size));
        }
        if self.totals > 1 && self.x != Some(Dim::Total) {
            name.push_str(&format!(", {}", short_size(c.key.total_bytes)));
        }
        name
    }

    /// The label of a value along x: "1 GB", "1000 B".
    pub fn x_label(&self, v: u64) -> String {
        match self.x {
            Some(Dim::Size) => format!("{v} B"),
            Some(Dim::Total) | None => short_size(v),
        }
    }

    /// The words of the x axis: "message size", "total".
    pub fn x_words(&self) -> &'static str {
        match self.x {
            Some(Dim::Size) => "message size",
            Some(Dim::Total) | None => "total",
        }
    }

    /// What the series stand for, for a caption: "protocol × mechanism × total".
    pub fn series_words(&self) -> String {
        let mut words = "protocol × mechanism".to_string();
        if self.sizes > 1 && self.x != Some(Dim::Size) {
            words.push_str(if self.size_tied {
                " (with its message size)"
            } else {
                " × message size"
            });
        }
        if self.totals > 1 && self.x != Some(Dim::Total) {
            words.push_str(" × total");
        }
        if self.sites > 1 {
            words.push_str(" × site");
        }
        words
    }

    /// The one message size of every configuration, when there is one.
    pub fn one_size(&self, configs: &[&Configuration]) -> Option<u32> {
        (self.sizes == 1).then(|| configs.first().map(|c| c.key.msg_size))?
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use wirebench_core::record::summary::{ConfigurationKey, RttSummary, SideSummary};
    use wirebench_core::vocab::plan::{Mechanism, Protocol};
    use wirebench_core::vocab::stats::Summary;

    /// A configuration of three runs taking `seconds` each (figures made from the arguments,
    /// so charts have something to draw).
    pub(crate) fn config(
        protocol: Protocol,
        mechanism: Mechanism,
        msg_size: u32,
        total_bytes: u64,
        seconds: f64,
    ) -> Configuration {
        let of = |v: f64| Summary::of(&[v * 0.9, v, v * 1.1]).expect("three values");
        let side = SideSummary {
            messages: of((total_bytes / u64::from(msg_size)) as f64),
            bytes: of(total_bytes as f64),
            seconds: of(seconds),
        };
        Configuration {
            key: ConfigurationKey {
                protocol,
                mechanism,
                msg_size,
                total_bytes,
            },
            runs: 3,
            untimed_runs: 0,
            seconds: of(seconds),
            goodput_bps: Some(of(total_bytes as f64 * 8.0 / seconds)),
            sent_bps: Some(of(total_bytes as f64 * 8.0 / seconds)),
            rate_found_bps: None,
            delivery: None,
            retrans_rate: None,
            rtt: (mechanism == Mechanism::StopAndWait).then_some(RttSummary {
                runs: 3,
                min_ns: 10_000.0,
                p50_ns: 20_000.0,
                mean_ns: 21_000.0,
                p99_ns: 50_000.0,
                max_ns: 90_000.0,
            }),
            rtt_p50_ns: None,
            rtt_p99_ns: None,
            client: side.clone(),
            server: side,
            both_directions: false,
            site: None,
        }
    }

    #[test]
    fn the_dimension_with_the_most_values_is_the_x_axis() {
        let tcp = (Protocol::Tcp, Mechanism::Stream);
        let udp = (Protocol::Udp, Mechanism::Stream);
        // Three sizes × two totals: against size, the total names the series.
        let configs: Vec<Configuration> = [1000, 10000, 30000]
            .iter()
            .flat_map(|s| [500_000_000u64, 1_000_000_000].map(|t| config(tcp.0, tcp.1, *s, t, 1.0)))
            .collect();
        let all: Vec<&Configuration> = configs.iter().collect();
        let shape = Shape::of(&all);
        assert_eq!(shape.x, Some(Dim::Size));
        assert_eq!(shape.name(&configs[1]), "TCP Streaming, 1 GB");
        // Size tied to protocol: the totals are the axis and the size names the series.
        let configs: Vec<Configuration> = [1_000_000u64, 2_000_000]
            .iter()
            .flat_map(|t| {
                [
                    config(tcp.0, tcp.1, 65535, *t, 1.0),
                    config(udp.0, udp.1, 32767, *t, 1.0),
                ]
            })
            .collect();
        let all: Vec<&Configuration> = configs.iter().collect();
        let shape = Shape::of(&all);
        assert_eq!(
            (shape.x, shape.lines()),
            (Some(Dim::Total), false),
            "two totals: bars"
        );
        assert_eq!(shape.name(&configs[1]), "UDP Streaming, 32767 B");
        // One size, one total: no "against" chart.
        let one = [config(tcp.0, tcp.1, 1000, 1_000_000, 1.0)];
        let shape = Shape::of(&one.iter().collect::<Vec<_>>());
        assert_eq!((shape.x, shape.lines()), (None, false));
        assert_eq!(shape.name(&one[0]), "TCP Streaming");
    }
}
