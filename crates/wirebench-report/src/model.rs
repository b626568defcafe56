//! The transfer report's model: the campaigns' headings, one summary per configuration, its
//! layout and formats, the metrics every exporter prints in one order, and the `Exporter`
//! trait the format modules implement.

use std::io::{self, Write};

use serde::Serialize;
use wirebench_core::record::summary::{
    configuration_keys, summarise_sites, ConfigurationSummary, DeliverySummary, SideSummary,
    SiteRuns,
};
use wirebench_core::record::RunRecord;
use wirebench_core::vocab::stats::Summary;
use wirebench_core::vocab::sweep::Point;
use wirebench_core::vocab::units::bitrate_unit;

use super::series;

/// Version of the JSON report's layout. Version 2: configurations are the result model's
/// summaries (goodput, sent rate, UDP delivery) instead of two throughput views. Version 3:
/// `campaigns` (one heading per campaign reported) in place of `heading`.
pub const REPORT_SCHEMA_VERSION: u32 = 3;

/// Writes a report in one format: one exporter per format (`table`, `markdown`, `csv`,
/// `json`, `html`), for the transfer reports ([`Report`]) and the sweeps' (`Document`) alike.
pub trait Exporter<R> {
    /// Writes `report` to `out`.
    fn write(&self, report: &R, out: &mut dyn Write) -> io::Result<()>;
}

/// The report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain-text tables ("Statistics for Client TCP Streaming ...").
    Table,
    /// Markdown tables (per configuration, or the grid).
    Markdown,
    /// CSV: one row per configuration × view × metric, or one per row of the grid.
    Csv,
    /// One JSON document.
    Json,
    /// One self-contained HTML file with SVG charts and the tables.
    Html,
}

impl Format {
    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Html => "html",
        }
    }
}

/// How the tables of a transfer report are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// One block per configuration: every figure's min, average, median, maximum and standard
    /// deviation, then the client's and the server's counts.
    #[default]
    Configurations,
    /// The seeds' grid: rows are the totals (or message sizes), columns protocol × mechanism,
    /// each cell min / avg / max; one grid of transfer time, one of goodput.
    Grid,
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
    /// The server it measured, as the campaign stored it ("10.0.0.2:5201", "embedded
    /// 127.0.0.1:40000" for the in-process one).
    pub server: String,
    /// Where it ran, when the report holds campaigns from more than one place (see
    /// [`sites`]); absent with one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}

impl Heading {
    /// "complete, started 2023-11-14 22:13:20 UTC, host h".
    pub fn line(&self) -> String {
        format!(
            "{}, started {} UTC, host {}",
            self.status, self.started, self.host
        )
    }
}

/// A whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Layout version of the JSON form.
    pub schema_version: u32,
    /// The campaigns reported, in the order given.
    pub campaigns: Vec<Heading>,
    /// One summary per configuration with runs, in run order (a configuration measured in
    /// several campaigns pools their runs).
    pub configurations: Vec<ConfigurationSummary>,
    /// Configurations measured in more than one of the campaigns: "TCP Streaming, 1024 B ×
    /// 500 MiB: campaigns 1 and 3" (their runs are pooled).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pooled: Vec<String>,
    /// How the tables are laid out (not part of the JSON form, which has every summary).
    #[serde(skip)]
    pub layout: Layout,
    /// The run the throughput-over-time chart shows (HTML only; `None` when no run has
    /// interval series).
    #[serde(skip)]
    pub timeline: Option<series::Timeline>,
    /// UDP streaming runs for the loss-against-load chart (HTML only; empty without any).
    #[serde(skip)]
    pub loss: Vec<series::LossPoint>,
}

impl Report {
    /// Builds the report of one or more campaigns, each given with its heading and its runs
    /// (each with its message size and total); configurations come in the order their first
    /// run ran, which is the plan's order, campaign by campaign.
    pub fn build(mut campaigns: Vec<(Heading, Vec<(Point, RunRecord)>)>) -> Report {
        let named = sites(&campaigns.iter().map(|(h, _)| h).collect::<Vec<_>>());
        for ((heading, _), site) in campaigns.iter_mut().zip(named) {
            heading.site = site;
        }
        // Each site's runs, sites in order of their first campaign: a configuration pools the
        // runs of one site's campaigns, never two sites'.
        let mut per_site: Vec<SiteRuns> = Vec::new();
        for (heading, runs) in &campaigns {
            match per_site.iter_mut().find(|(s, _)| *s == heading.site) {
                Some((_, all)) => all.extend(runs.iter().cloned()),
                None => per_site.push((heading.site.clone(), runs.clone())),
            }
        }
        let pooled = per_site
            .iter()
            .flat_map(|(site, runs)| pooled_lines(&campaigns, site, runs))
            .collect();
        // The run with the longest series of any campaign (the first of equals); named by its
        // campaign when there are several.
        let several = campaigns.len() > 1;
        let timeline = campaigns
            .iter()
            // With no run chosen this cannot fail: no run with series is simply no chart.
            .filter_map(|(h, runs)| {
                let t = series::timeline(runs, None).ok().flatten()?;
                Some(if several {
                    t.of_campaign(h.campaign)
                } else {
                    t
                })
            })
            .fold(None, |best: Option<series::Timeline>, t| match best {
                Some(b) if b.len() >= t.len() => Some(b),
                _ => Some(t),
            });
        Report {
            schema_version: REPORT_SCHEMA_VERSION,
            configurations: summarise_sites(&per_site),
            pooled,
            layout: Layout::Configurations,
            timeline,
            loss: per_site
                .iter()
                .flat_map(|(site, runs)| series::loss_points(runs, site.as_deref()))
                .collect(),
            campaigns: campaigns.into_iter().map(|(h, _)| h).collect(),
        }
    }

    /// Shows run `n` (1-based, as `wirebench show` numbers the runs) of a one-campaign report
    /// on the throughput-over-time chart; an error names what is allowed when there is no such
    /// run or it has no series.
    pub fn choose_run(&mut self, runs: &[(Point, RunRecord)], n: usize) -> Result<(), String> {
        self.timeline = series::timeline(runs, Some(n))?;
        Ok(())
    }

    /// "campaign 3" or "campaigns 1, 2, 3".
    pub fn what(&self) -> String {
        let ids: Vec<String> = self
            .campaigns
            .iter()
            .map(|h| h.campaign.to_string())
            .collect();
        if ids.len() == 1 {
            format!("campaign {}", ids[0])
        } else {
            format!("campaigns {}", ids.join(", "))
        }
    }

    /// What the report is about, one line per campaign: "complete, started … UTC, host h."
    /// for one; "Campaign 1: complete, …" each for several, then the pooled configurations.
    pub fn heading_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = match self.campaigns.as_slice() {
            [one] => vec![format!("{}.", one.line())],
            many => many
                .iter()
                .map(|h| match &h.site {
                    Some(site) => format!(
                        "Campaign {} on {site}: {}, server {}.",
                        h.campaign,
                        h.line(),
                        h.server
                    ),
                    None => format!("Campaign {}: {}.", h.campaign, h.line()),
                })
                .collect(),
        };
        if !self.pooled.is_empty() {
            lines.push(format!(
                "Measured in several of these campaigns, their runs pooled: {}.",
                self.pooled.join("; ")
            ));
        }
        lines
    }
}

/// What the report calls where each campaign ran: the client's host and the server's host
/// (its address without the port: an in-process server and `wirebench server` on the same
/// loopback are one place). `None` for every one when they all share both (the usual report:
/// nothing to tell apart); otherwise the host name where only the hosts differ ("laptop",
/// "ec2-vm"), else "host → server host" ("laptop → 10.0.0.2"). A lab report sets such
/// places side by side ("Left: Local, Right: EC2"), and so does the report.
pub fn sites(headings: &[&Heading]) -> Vec<Option<String>> {
    let places: Vec<(&str, &str)> = headings
        .iter()
        .map(|h| (h.host.as_str(), server_host(&h.server)))
        .collect();
    let distinct = |side: usize| {
        let mut seen: Vec<&str> = places
            .iter()
            .map(|(host, server)| if side == 0 { *host } else { *server })
            .collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    };
    let (hosts, servers) = (distinct(0), distinct(1));
    places
        .iter()
        .map(|(host, server)| match (hosts > 1, servers > 1) {
            (false, false) => None,
            (true, false) => Some(host.to_string()),
            _ => Some(format!("{host} → {server}")),
        })
        .collect()
}

/// The host part of a stored server address: "10.0.0.2" of "10.0.0.2:5201", "::1" of
/// "[::1]:5310", "127.0.0.1" of "embedded 127.0.0.1:40000", "h.example" of "h.example:5310".
fn server_host(server: &str) -> &str {
    let addr = server.strip_prefix("embedded ").unwrap_or(server).trim();
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        // One colon and digits after it: a port. More colons: a bare IPv6 address.
        Some((host, port))
            if !host.contains(':')
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            host
        }
        _ => addr,
    }
}

/// "TCP Streaming, 1024 B × 500 MiB: campaigns 1, 3" for each configuration that more than
/// one of `site`'s campaigns measured (their runs are pooled), naming the site where there is
/// one.
fn pooled_lines(
    campaigns: &[(Heading, Vec<(Point, RunRecord)>)],
    site: &Option<String>,
    runs: &[(Point, RunRecord)],
) -> Vec<String> {
    let mut lines = Vec::new();
    for key in configuration_keys(runs) {
        let ids: Vec<String> = campaigns
            .iter()
            .filter(|(h, runs)| h.site == *site && configuration_keys(runs).contains(&key))
            .map(|(h, _)| h.campaign.to_string())
            .collect();
        if ids.len() > 1 {
            let at = site
                .as_ref()
                .map_or_else(String::new, |s| format!(" on {s}"));
            lines.push(format!(
                "{}{at}, {} B × {}: campaigns {}",
                key.title(),
                key.msg_size,
                short_size(key.total_bytes),
                ids.join(", ")
            ));
        }
    }
    lines
}

/// A size as a chart or grid names it, short: "500 MiB", "1 GiB", "500 MB", "100000 B", or
/// "timed (-t)" for the bound of a time-based run.
pub fn short_size(bytes: u64) -> String {
    if bytes == wirebench_core::wire::proto::UNBOUNDED_TOTAL {
        return wirebench_core::record::total_label(bytes);
    }
    // The unit family in which the total is a whole number, and in it the largest unit: 2 GB
    // (never "1953125 KiB"), 500 MiB (never "524288 kB"), as a user would type them.
    let best = [
        ("GiB", 1u64 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("kB", 1000),
    ]
    .into_iter()
    .filter(|(_, size)| bytes >= *size && bytes % size == 0)
    .min_by_key(|(_, size)| bytes / size);
    if let Some((unit, size)) = best {
        return format!("{} {unit}", bytes / size);
    }
    format!("{bytes} B")
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
pub fn metrics<'a>(c: &'a ConfigurationSummary) -> Vec<Metric<'a>> {
    let mut out = rate_metrics(c);
    out.push(metric(
        View::Run,
        "time",
        "s",
        "Time (s)".into(),
        1.0,
        Shape::Decimals(4),
        &c.seconds,
    ));
    if let Some(d) = &c.delivery {
        out.extend(delivery_metrics(d));
    }
    // UDP streaming's retransmission rate is its loss, shown above already.
    let udp_stream =
        c.delivery.is_some() && c.key.mechanism == wirebench_core::vocab::plan::Mechanism::Stream;
    if let Some(s) = c.retrans_rate.as_ref().filter(|_| !udp_stream) {
        // A share in the model, a percentage on the page.
        out.push(metric(
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
            out.push(metric(
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
        out.extend(side_metrics(view, side));
    }
    out
}

fn metric<'a>(
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

/// The run's rates: goodput, the sent rate and the rate a `--rate max` search found.
fn rate_metrics<'a>(c: &'a ConfigurationSummary) -> Vec<Metric<'a>> {
    // Rates leave out the runs too short to time: the label says over how many they are.
    let timed = (c.untimed_runs > 0)
        .then(|| format!("; {} of {} runs timed", c.runs - c.untimed_runs, c.runs));
    let rate = |name: &'static str, what: &str, s: &'a Summary, timed: Option<&str>| {
        let (unit, scale) = bitrate_unit(s.max);
        metric(
            View::Run,
            name,
            "bit/s",
            format!("{what} ({unit}{})", timed.unwrap_or("")),
            scale,
            Shape::Decimals(3),
            s,
        )
    };
    let mut out = Vec::new();
    if let Some(s) = &c.goodput_bps {
        out.push(rate("goodput", "Goodput", s, timed.as_deref()));
    }
    if let Some(s) = &c.sent_bps {
        out.push(rate("sent_rate", "Sent", s, timed.as_deref()));
    }
    if let Some(s) = &c.rate_found_bps {
        out.push(rate("rate_found", "Rate found (--rate max)", s, None));
    }
    out
}

/// UDP delivery: lost (and where, where the receivers could tell), duplicates, out of order.
fn delivery_metrics(d: &DeliverySummary) -> Vec<Metric<'_>> {
    let pct = |name, label: &str, s| {
        metric(
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
        metric(
            View::Run,
            name,
            "count",
            label.to_string(),
            1.0,
            Shape::Count,
            s,
        )
    };
    let mut out = vec![
        pct("lost_pct", "Lost", &d.lost_pct),
        count("lost", "Lost", &d.lost),
    ];
    // Where the lost messages went, where the receivers could tell (record::loss).
    for (name, label, share) in [
        (
            "lost_receiving_host",
            "Lost: dropped by the receiving host",
            &d.lost_receiving_host,
        ),
        (
            "lost_sending_host",
            "Lost: not sent by the sending host",
            &d.lost_sending_host,
        ),
        ("lost_path", "Lost: on the path", &d.lost_path),
    ] {
        if let Some(s) = share {
            out.push(count(name, label, s));
        }
    }
    out.push(pct("duplicates_pct", "Duplicates", &d.duplicates_pct));
    out.push(count("duplicates", "Duplicates", &d.duplicates));
    out.push(pct("out_of_order_pct", "Out of order", &d.out_of_order_pct));
    out.push(count("out_of_order", "Out of order", &d.out_of_order));
    out
}

/// What one side counted: messages, bytes and its time.
fn side_metrics(view: View, side: &SideSummary) -> Vec<Metric<'_>> {
    vec![
        metric(
            view,
            "messages",
            "count",
            "Messages".into(),
            1.0,
            Shape::Count,
            &side.messages,
        ),
        metric(
            view,
            "bytes",
            "B",
            "Bytes".into(),
            1.0,
            Shape::Count,
            &side.bytes,
        ),
        metric(
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
        ),
    ]
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

#[cfg(test)]
mod tests {
    use super::{short_size, sites, Heading};

    /// A place is named only when the campaigns' places differ: by its host where only hosts
    /// differ, else by host and server.
    #[test]
    fn a_site_names_what_differs_between_the_campaigns() {
        let at = |host: &str, server: &str| Heading {
            campaign: 1,
            started: String::new(),
            status: "complete".into(),
            host: host.into(),
            server: server.into(),
            site: None,
        };
        let named = |hs: &[Heading]| sites(&hs.iter().collect::<Vec<_>>());
        // An in-process server and one on the same loopback, any port: one place.
        let (a, b) = (
            at("vm", "embedded 127.0.0.1:40000"),
            at("vm", "127.0.0.1:5310"),
        );
        assert_eq!(named(&[a.clone(), b]), [None, None]);
        let other_host = at("ec2-vm", "embedded 127.0.0.1:41000");
        assert_eq!(
            named(&[a.clone(), other_host]),
            [Some("vm".to_string()), Some("ec2-vm".to_string())]
        );
        let other_server = at("vm", "[2001:db8::2]:5201");
        assert_eq!(
            named(&[a, other_server]),
            [
                Some("vm → 127.0.0.1".to_string()),
                Some("vm → 2001:db8::2".to_string())
            ]
        );
        assert_eq!(super::server_host("h.example:5310"), "h.example");
        assert_eq!(super::server_host("::1"), "::1");
    }

    /// Totals read as a user types them: decimal ones in GB/MB/kB, binary ones in GiB/MiB/KiB,
    /// whichever family makes the number whole and small.
    #[test]
    fn a_total_is_labelled_in_the_unit_family_it_is_whole_in() {
        assert_eq!(short_size(2_000_000_000), "2 GB");
        assert_eq!(short_size(1_000_000_000), "1 GB");
        assert_eq!(short_size(500 << 20), "500 MiB");
        assert_eq!(short_size(1 << 30), "1 GiB");
        assert_eq!(short_size(1_000_000), "1 MB");
        assert_eq!(short_size(100_000), "100 kB");
        assert_eq!(short_size(1_234_567), "1234567 B");
    }
}
