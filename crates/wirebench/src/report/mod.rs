//! Reports over one campaign: for every configuration, the summary the result model computes
//! (goodput, sent rate, time, UDP loss, retransmissions, round trips, both sides' counts), and
//! the exporters that write it (one file per format). Owns the report layout; must not compute
//! a statistic (`wirebench_core::record` does), open files, read clocks or know about the
//! store: commands load campaigns and hand them in.

pub mod chart;
pub mod compare;
pub mod csv;
pub mod dns;
pub mod html;
pub mod json;
pub mod markdown;
pub mod rpm;
pub mod rpm_chart;
pub mod rr;
pub mod series;
pub mod table;

use std::io::{self, Write};

use serde::Serialize;
use wirebench_core::record::summary::ConfigurationSummary;
use wirebench_core::record::{summarise, RunRecord};
use wirebench_core::vocab::stats::Summary;
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::bitrate_unit;

/// Version of the JSON report's layout. Version 2: configurations are the result model's
/// summaries (goodput, sent rate, UDP delivery) instead of two throughput views.
pub const REPORT_SCHEMA_VERSION: u32 = 2;

/// Writes a report in one format.
pub trait Exporter {
    /// Writes `report` to `out`.
    fn write(&self, report: &Report, out: &mut dyn Write) -> io::Result<()>;
}

/// The report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// One summary per configuration with runs, in run order.
    pub configurations: Vec<ConfigurationSummary>,
    /// The run the throughput-over-time chart shows (HTML only; `None` when no run has
    /// interval series).
    #[serde(skip)]
    pub timeline: Option<series::Timeline>,
    /// UDP streaming runs for the loss-against-load chart (HTML only; empty without any).
    #[serde(skip)]
    pub loss: Vec<series::LossPoint>,
}

impl Report {
    /// Builds the report of a campaign from its runs (each with its message size and total);
    /// configurations come in the order their first run ran, which is the plan's order.
    pub fn build(heading: Heading, runs: &[(Point, RunRecord)]) -> Report {
        Report {
            schema_version: REPORT_SCHEMA_VERSION,
            heading,
            configurations: summarise(runs),
            // With no run chosen this cannot fail: no run with series is simply no chart.
            timeline: series::timeline(runs, None).ok().flatten(),
            loss: series::loss_points(runs),
        }
    }

    /// Shows run `n` (1-based, as `wirebench show` numbers the runs) on the throughput-over-time
    /// chart; an error names what is allowed when there is no such run or it has no series.
    pub fn choose_run(&mut self, runs: &[(Point, RunRecord)], n: usize) -> Result<(), String> {
        self.timeline = series::timeline(runs, Some(n))?;
        Ok(())
    }
}

/// Which rows of a configuration a metric belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The run as a whole: what the receiver got, over the run's transfer time.
    Run,
    /// What the client counted.
    Client,
    /// What the server counted.
    Server,
}

impl View {
    /// "run", "client", "server" (CSV).
    pub fn name(self) -> &'static str {
        match self {
            View::Run => "run",
            View::Client => "client",
            View::Server => "server",
        }
    }

    /// "Run", "Client", "Server" (tables).
    pub fn title(self) -> &'static str {
        match self {
            View::Run => "Run",
            View::Client => "Client",
            View::Server => "Server",
        }
    }
}

/// How a metric's figures are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Whole counts: integers, the mean with one decimal only when it is not whole.
    Count,
    /// Figures with this many decimals.
    Decimals(usize),
}

/// One metric of a configuration, with how exporters name and print it.
#[derive(Debug, Clone)]
pub struct Metric<'a> {
    /// Whose figure.
    pub view: View,
    /// Machine name: goodput, sent_rate, time, lost_pct, messages, ...
    pub name: &'static str,
    /// Base unit of the summary's values: s, bit/s, %, count, B, ns.
    pub unit: &'static str,
    /// Human label with its display unit: "Goodput (Mbit/s)".
    pub label: String,
    /// Divide values by this for the display unit.
    pub scale: f64,
    /// How the display values are printed.
    pub shape: Shape,
    /// The values.
    pub summary: &'a Summary,
}

impl Metric<'_> {
    /// One summary figure in the display unit, printed by the metric's shape.
    pub fn show(&self, value: f64) -> String {
        let v = value / self.scale;
        match self.shape {
            Shape::Count if v.fract() == 0.0 => format!("{v:.0}"),
            Shape::Count => format!("{v:.1}"),
            Shape::Decimals(d) => format!("{v:.d$}"),
        }
    }
}

/// The metrics of a configuration in the order exporters print them: the run's headline
/// figures (goodput first), then what the client and the server counted.
pub fn metrics(c: &ConfigurationSummary) -> Vec<Metric<'_>> {
    fn m<'a>(
        view: View,
        name: &'static str,
        unit: &'static str,
        label: String,
        scale: f64,
        shape: Shape,
        summary: &'a Summary,
    ) -> Metric<'a> {
        Metric {
            view,
            name,
            unit,
            label,
            scale,
            shape,
            summary,
        }
    }
    fn rate<'a>(name: &'static str, what: &str, s: &'a Summary) -> Metric<'a> {
        let (unit, scale) = bitrate_unit(s.max);
        m(
            View::Run,
            name,
            "bit/s",
            format!("{what} ({unit})"),
            scale,
            Shape::Decimals(3),
            s,
        )
    }
    let mut out = Vec::new();
    if let Some(s) = &c.goodput_bps {
        out.push(rate("goodput", "Goodput", s));
    }
    if let Some(s) = &c.sent_bps {
        out.push(rate("sent_rate", "Sent", s));
    }
    if let Some(s) = &c.rate_found_bps {
        out.push(rate("rate_found", "Rate found (--rate max)", s));
    }
    out.push(m(
        View::Run,
        "time",
        "s",
        "Time (s)".into(),
        1.0,
        Shape::Decimals(4),
        &c.seconds,
    ));
    if let Some(d) = &c.delivery {
        let pct = |name, label: &str, s| {
            m(
                View::Run,
                name,
                "%",
                format!("{label} (%)"),
                1.0,
                Shape::Decimals(3),
                s,
            )
        };
        let count = |name, label: &str, s| {
            m(
                View::Run,
                name,
                "count",
                label.to_string(),
                1.0,
                Shape::Count,
                s,
            )
        };
        out.push(pct("lost_pct", "Lost", &d.lost_pct));
        out.push(count("lost", "Lost", &d.lost));
        out.push(pct("duplicates_pct", "Duplicates", &d.duplicates_pct));
        out.push(count("duplicates", "Duplicates", &d.duplicates));
        out.push(pct("out_of_order_pct", "Out of order", &d.out_of_order_pct));
        out.push(count("out_of_order", "Out of order", &d.out_of_order));
    }
    // UDP streaming's retransmission rate is its loss, shown above already.
    let udp_stream =
        c.delivery.is_some() && c.key.mechanism == wirebench_core::vocab::plan::Mechanism::Stream;
    if let Some(s) = c.retrans_rate.as_ref().filter(|_| !udp_stream) {
        // A share in the model, a percentage on the page.
        out.push(m(
            View::Run,
            "retrans_rate",
            "ratio",
            "Retransmitted (%)".into(),
            0.01,
            Shape::Decimals(4),
            s,
        ));
    }
    for (name, label, s) in [
        ("rtt_p50", "RTT p50 (µs)", &c.rtt_p50_ns),
        ("rtt_p99", "RTT p99 (µs)", &c.rtt_p99_ns),
    ] {
        if let Some(s) = s {
            out.push(m(
                View::Run,
                name,
                "ns",
                label.into(),
                1000.0,
                Shape::Decimals(1),
                s,
            ));
        }
    }
    for (view, side) in [(View::Client, &c.client), (View::Server, &c.server)] {
        out.push(m(
            view,
            "messages",
            "count",
            "Messages".into(),
            1.0,
            Shape::Count,
            &side.messages,
        ));
        out.push(m(
            view,
            "bytes",
            "B",
            "Bytes".into(),
            1.0,
            Shape::Count,
            &side.bytes,
        ));
        out.push(m(
            view,
            "time",
            "s",
            if view == View::Server {
                "Time (s, first to last byte read)".into()
            } else {
                "Time (s)".into()
            },
            1.0,
            Shape::Decimals(4),
            &side.seconds,
        ));
    }
    out
}

/// "500 MiB, 1024-byte messages, 3 runs" and, when some were too short to time, how many.
pub fn configuration_caption(c: &ConfigurationSummary) -> String {
    let mut s = format!(
        "{}, {}-byte messages, {}",
        wirebench_core::record::total_label(c.key.total_bytes),
        c.key.msg_size,
        wirebench_core::record::count_of(c.runs, "run", "runs")
    );
    if c.untimed_runs > 0 {
        s.push_str(&format!(
            "; {} too short to time (under {} ms), left out of the rates",
            c.untimed_runs,
            wirebench_core::record::MIN_TIMED_NS / 1_000_000
        ));
    }
    s
}
