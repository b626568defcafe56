//! Reports over one campaign: per configuration, min / avg / median / max / stddev of time,
//! throughput, messages and bytes for the client and the server view, and the exporters that
//! write them (one file per format). Owns the report model; must not open files, read clocks or
//! know about the store: commands load campaigns and hand them in.

pub mod chart;
pub mod compare;
pub mod csv;
pub mod dns;
pub mod html;
pub mod json;
pub mod markdown;
pub mod series;
pub mod table;

use std::io::{self, Write};

use serde::Serialize;
use wirebench_core::plan::{Mechanism, Protocol};
use wirebench_core::stats::Summary;
use wirebench_core::sweep::Point;

use crate::output::json::RunJson;

/// Version of the JSON report's layout.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// Writes a report in one format.
pub trait Exporter {
    /// Writes `report` to `out`.
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()>;
}

/// The report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Plain-text tables ("Statistics for Client TCP Streaming ...").
    Table,
    /// Markdown tables, one per configuration.
    Markdown,
    /// One CSV row per configuration × view × metric.
    Csv,
    /// One JSON document.
    Json,
    /// One self-contained HTML file with SVG charts and the tables.
    Html,
}

/// The exporter for `format`.
pub fn exporter(format: Format) -> Box<dyn Exporter> {
    match format {
        Format::Table => Box::new(table::Table),
        Format::Markdown => Box::new(markdown::Markdown),
        Format::Csv => Box::new(csv::Csv),
        Format::Json => Box::new(json::Json),
        Format::Html => Box::new(html::Html),
    }
}

/// Which campaign a report is about (already formatted by the caller: no clocks here).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Heading {
    /// Campaign id in the store.
    pub campaign: i64,
    /// Start time, as the caller formats it (UTC).
    pub started: String,
    /// How the campaign ended.
    pub status: String,
    /// Host the campaign ran on.
    pub host: String,
}

/// A whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Layout version of the JSON form.
    pub schema_version: u32,
    /// Which campaign.
    pub heading: Heading,
    /// One entry per configuration with runs, in run order.
    pub configurations: Vec<Configuration>,
    /// The run the throughput-over-time chart shows (HTML only; `None` when no run has
    /// interval series).
    #[serde(skip)]
    pub timeline: Option<series::Timeline>,
    /// UDP streaming runs for the loss-against-load chart (HTML only; empty without any).
    #[serde(skip)]
    pub loss: Vec<series::LossPoint>,
}

/// The statistics of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Configuration {
    /// Protocol.
    pub protocol: Protocol,
    /// Mechanism.
    pub mechanism: Mechanism,
    /// Message size, bytes.
    pub msg_size: u32,
    /// Bytes per run.
    pub total_bytes: u64,
    /// Runs summarised.
    pub runs: usize,
    /// What the client measured.
    pub client: View,
    /// What the server measured.
    pub server: View,
    /// Stop-and-wait round-trip times (medians over the runs), absent for streaming.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt: Option<RttView>,
}

/// Round-trip times of a stop-and-wait configuration: each figure is the median over its runs
/// of that run's figure, in nanoseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RttView {
    /// Runs with round-trip figures.
    pub runs: usize,
    /// Smallest round trip.
    pub min_ns: f64,
    /// 50th percentile.
    pub p50_ns: f64,
    /// Mean.
    pub mean_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Largest round trip.
    pub max_ns: f64,
}

/// One side's figures over the runs of a configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    /// Transfer time, seconds.
    pub seconds: Summary,
    /// Goodput, bit/s.
    pub throughput_bps: Summary,
    /// Messages.
    pub messages: Summary,
    /// Bytes.
    pub bytes: Summary,
}

impl Report {
    /// Builds the report of a campaign from its runs (each with its message size and total);
    /// configurations come in the order their first run ran, which is the plan's order.
    pub fn build(heading: Heading, runs: &[(Point, RunJson)]) -> Report {
        let configurations = configuration_keys(runs)
            .into_iter()
            .filter_map(|(point, protocol, mechanism)| {
                let these: Vec<&RunJson> = runs
                    .iter()
                    .filter(|(p, r)| {
                        *p == point && r.protocol == protocol && r.mechanism == mechanism
                    })
                    .map(|(_, r)| r)
                    .collect();
                Some(Configuration {
                    protocol,
                    mechanism,
                    msg_size: point.msg_size,
                    total_bytes: point.total_bytes,
                    runs: these.len(),
                    client: view(&these, |r| {
                        let c = &r.client;
                        [
                            c.seconds,
                            c.throughput_bps,
                            c.messages as f64,
                            c.bytes as f64,
                        ]
                    })?,
                    server: view(&these, |r| {
                        let s = &r.server;
                        [
                            s.seconds,
                            s.throughput_bps,
                            s.messages as f64,
                            s.bytes as f64,
                        ]
                    })?,
                    rtt: rtt_view(&these),
                })
            })
            .collect();
        Report {
            schema_version: REPORT_SCHEMA_VERSION,
            heading,
            configurations,
            // With no run chosen this cannot fail: no run with series is simply no chart.
            timeline: series::timeline(runs, None).ok().flatten(),
            loss: series::loss_points(runs),
        }
    }

    /// Shows run `n` (1-based, as `wirebench show` numbers the runs) on the throughput-over-time
    /// chart; an error names what is allowed when there is no such run or it has no series.
    pub fn choose_run(&mut self, runs: &[(Point, RunJson)], n: usize) -> Result<(), String> {
        self.timeline = series::timeline(runs, Some(n))?;
        Ok(())
    }
}

impl Configuration {
    /// "TCP Streaming", "UDP Stop and Wait", as in the text tables.
    pub fn title(&self) -> String {
        Configuration::title_of(self.protocol, self.mechanism)
    }

    /// The title of a protocol × mechanism: "TCP Streaming", "UDP Stop and Wait".
    pub fn title_of(protocol: Protocol, mechanism: Mechanism) -> String {
        format!(
            "{} {}",
            match protocol {
                Protocol::Tcp => "TCP",
                Protocol::Udp => "UDP",
                Protocol::Quic => "QUIC",
            },
            match mechanism {
                Mechanism::Stream => "Streaming",
                Mechanism::StopAndWait => "Stop and Wait",
            }
        )
    }
}

/// One metric of a view, with how exporters name and print it.
pub struct Metric<'a> {
    /// Machine name: time, throughput, messages, bytes.
    pub name: &'static str,
    /// Base unit of the summary's values: s, bit/s, count, B.
    pub unit: &'static str,
    /// Human label with its display unit, as in the text tables.
    pub label: &'static str,
    /// Divide values by this for the display unit.
    pub scale: f64,
    /// Decimals in human formats.
    pub digits: usize,
    /// The values.
    pub summary: &'a Summary,
}

/// The metrics of a view in the order exporters print them.
pub fn metrics(v: &View) -> [Metric<'_>; 4] {
    let m = |name, unit, label, scale, digits, summary| Metric {
        name,
        unit,
        label,
        scale,
        digits,
        summary,
    };
    [
        m("time", "s", "Time (s)", 1.0, 4, &v.seconds),
        m(
            "throughput",
            "bit/s",
            "Throughput (Gbit/s)",
            1e9,
            3,
            &v.throughput_bps,
        ),
        m("messages", "count", "Messages", 1.0, 1, &v.messages),
        m("bytes", "B", "Bytes", 1.0, 1, &v.bytes),
    ]
}

/// The distinct (point, protocol, mechanism) of `runs`, in order of first appearance.
pub fn configuration_keys(runs: &[(Point, RunJson)]) -> Vec<(Point, Protocol, Mechanism)> {
    let mut keys = Vec::new();
    for (point, r) in runs {
        let key = (*point, r.protocol, r.mechanism);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

fn rtt_view(runs: &[&RunJson]) -> Option<RttView> {
    let rtts: Vec<_> = runs.iter().filter_map(|r| r.client.rtt).collect();
    let median = |f: &dyn Fn(&crate::client::RttFigures) -> f64| {
        Summary::of(&rtts.iter().map(f).collect::<Vec<_>>()).map(|s| s.median)
    };
    Some(RttView {
        runs: rtts.len(),
        min_ns: median(&|r| r.min_ns as f64)?,
        p50_ns: median(&|r| r.p50_ns as f64)?,
        mean_ns: median(&|r| r.mean_ns)?,
        p99_ns: median(&|r| r.p99_ns as f64)?,
        max_ns: median(&|r| r.max_ns as f64)?,
    })
}

fn view(runs: &[&RunJson], pick: impl Fn(&RunJson) -> [f64; 4]) -> Option<View> {
    let values: Vec<[f64; 4]> = runs.iter().map(|r| pick(r)).collect();
    let column = |i: usize| Summary::of(&values.iter().map(|v| v[i]).collect::<Vec<_>>());
    Some(View {
        seconds: column(0)?,
        throughput_bps: column(1)?,
        messages: column(2)?,
        bytes: column(3)?,
    })
}
