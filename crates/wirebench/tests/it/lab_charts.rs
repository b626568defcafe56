//! The charts of each lab page's HTML reports (docs/guide/lab-*.md), read from the files the
//! guide test's run of the page wrote (guide.rs runs the commands at its reduced scale and hands
//! the page's directory here): each chart's kind and x axis are the lab report's own — bars per
//! total for the protocols × mechanisms lab, time and goodput against the total or the message
//! size, response times against the flows or the queries in flight —, no line chart has one
//! point per series, no two series of a chart share a colour, and a series keeps its colour on
//! every chart of its page. The charts say their shape in their `<svg>` element
//! (`data-kind`, `data-x`, … from wirebench-report's `chart::attributes`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::browser::check_chart;

/// A chart as its `<svg>` element describes it.
pub(crate) struct Chart {
    /// `bars` or `lines`.
    pub(crate) kind: String,
    /// The x axis' description.
    pub(crate) x: String,
    /// `categories`, `log` or `linear`.
    pub(crate) x_scale: String,
    /// The most marks one series has.
    pub(crate) points: usize,
    /// Each series' colour, in legend order.
    pub(crate) colours: Vec<String>,
    /// Each series' name, in legend order.
    pub(crate) names: Vec<String>,
    /// The whole `<svg …>…</svg>` text after `<svg`.
    svg: String,
}

impl std::fmt::Debug for Chart {
    /// Its shape, without the drawing.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} chart against {:?} ({}), {} points, series {:?} in {:?}",
            self.kind, self.x, self.x_scale, self.points, self.names, self.colours
        )
    }
}

/// What one chart of a lab page's report must be.
struct Expected {
    /// The report the page writes (`-o FILE`).
    file: &'static str,
    /// The chart's place on that page, from 1.
    chart: usize,
    kind: &'static str,
    /// How its x axis' description starts.
    x: &'static str,
    /// `categories`, `log` or `linear`; `None` where the scale follows the values measured.
    x_scale: Option<&'static str>,
    /// How many series.
    series: usize,
    /// The most marks one series has: the number of values along x.
    points: usize,
}

/// The expected charts of the lab page `page` (none for a page that is not a lab).
fn expected(page: &str) -> Vec<Expected> {
    let e = |file, chart, kind, x, x_scale, series, points| Expected {
        file,
        chart,
        kind,
        x,
        x_scale,
        series,
        points,
    };
    let (cat, log, lin) = (Some("categories"), Some("log"), Some("linear"));
    match page {
        // Seed 000: one bar per protocol × mechanism in each total's group.
        "lab-protocols.md" => vec![
            e(
                "lab.html",
                1,
                "bars",
                "Total per run (one bar per",
                cat,
                6,
                2,
            ),
            e(
                "lab.html",
                2,
                "bars",
                "Total per run (one bar per",
                cat,
                6,
                2,
            ),
            e("lab.html", 3, "lines", "Total per run", cat, 3, 2),
        ],
        // Goodput and time against the total: five totals, one line per protocol × mechanism
        // (its message size tied to it).
        "lab-totals.md" => vec![
            e(
                "totals.html",
                1,
                "lines",
                "Total per run (bytes",
                None,
                4,
                5,
            ),
            e(
                "totals.html",
                2,
                "lines",
                "Total per run (bytes",
                None,
                4,
                5,
            ),
            e(
                "totals.html",
                3,
                "lines",
                "Total per run (bytes",
                None,
                2,
                5,
            ),
        ],
        // Against the message size: 3 protocols × 2 mechanisms × 2 totals.
        "lab-message-sizes.md" => vec![
            e(
                "sizes.html",
                1,
                "lines",
                "Message size (bytes, log",
                log,
                12,
                3,
            ),
            e(
                "sizes.html",
                2,
                "lines",
                "Message size (bytes, log",
                log,
                12,
                3,
            ),
            e(
                "sizes.html",
                3,
                "lines",
                "Message size (bytes, log",
                log,
                6,
                3,
            ),
        ],
        // Against the number of sessions.
        "lab-sessions.md" => (1..=3)
            .map(|i| e("sessions.html", i, "lines", "Flows (", lin, 2, 3))
            .collect(),
        // Loss and retransmissions, then response times, against the queries (requests) in
        // flight: seven loads.
        "lab-dns.md" => vec![
            e(
                "dns.html",
                1,
                "lines",
                "Queries in flight per flow",
                lin,
                2,
                7,
            ),
            e(
                "dns.html",
                2,
                "lines",
                "Queries in flight per flow",
                lin,
                2,
                7,
            ),
            e(
                "lab-rr.html",
                1,
                "lines",
                "Requests in flight per flow",
                lin,
                2,
                7,
            ),
            e(
                "lab-rr.html",
                2,
                "lines",
                "Requests in flight per flow",
                lin,
                2,
                7,
            ),
        ],
        _ => Vec::new(),
    }
}

/// Checks the charts of the reports a run of the lab page `page` wrote into `dir` (nothing
/// for a page that is not a lab).
pub(crate) fn check_page(page: &str, dir: &Path) {
    let expected = expected(page);
    let mut files: Vec<&str> = expected.iter().map(|e| e.file).collect();
    files.dedup();
    for file in files {
        let html = std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("{page}: {file} was not written: {e}"));
        let charts = charts_of(&html);
        check_every_chart(&format!("{page}, {file}"), &charts);
        for want in expected.iter().filter(|e| e.file == file) {
            let what = format!("{page}, {file}, chart {}", want.chart);
            let chart = charts
                .get(want.chart - 1)
                .unwrap_or_else(|| panic!("{what}: the page has {} charts", charts.len()));
            assert_eq!(chart.kind, want.kind, "{what}: {chart:?}");
            assert!(chart.x.starts_with(want.x), "{what}: x axis {:?}", chart.x);
            if let Some(scale) = want.x_scale {
                assert_eq!(chart.x_scale, scale, "{what}: {chart:?}");
            }
            assert_eq!(chart.names.len(), want.series, "{what}: {:?}", chart.names);
            assert_eq!(chart.points, want.points, "{what}: {chart:?}");
        }
    }
}

/// What every chart of a page must be: read as a chart (browser.rs's checks), no line chart
/// with one point per series, no colour twice on a chart, and over the page one colour per
/// series name and a colour for one series only (a name and the same name with more words,
/// "UDP" and "UDP queries lost (timeouts)", are one series).
fn check_every_chart(what: &str, charts: &[Chart]) {
    assert!(!charts.is_empty(), "{what}: no chart");
    let mut colour_of: BTreeMap<&str, &str> = BTreeMap::new();
    let mut names_of: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (i, c) in charts.iter().enumerate() {
        let what = format!("{what}, chart {}", i + 1);
        check_chart(&what, &c.svg);
        assert_eq!(c.names.len(), c.colours.len(), "{what}: {c:?}");
        if c.kind == "lines" {
            assert!(c.points > 1, "{what}: one point per series: {c:?}");
        }
        let mut distinct = c.colours.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), c.colours.len(), "{what}: {:?}", c.colours);
        for (name, colour) in c.names.iter().zip(&c.colours) {
            let was = colour_of.insert(name, colour);
            assert!(
                was.is_none_or(|w| w == colour),
                "{what}: {name} changed colour"
            );
            names_of.entry(colour).or_default().push(name);
        }
    }
    for (colour, names) in names_of {
        let shortest = names.iter().min_by_key(|n| n.len()).copied().unwrap_or("");
        assert!(
            names.iter().all(|n| n.starts_with(shortest)),
            "{what}: {colour} stands for {names:?}"
        );
    }
}

/// The charts of an HTML report, in order, as their `<svg class="wb-chart" …>` elements say.
pub(crate) fn charts_of(html: &str) -> Vec<Chart> {
    html.split("<svg class=\"wb-chart\"")
        .skip(1)
        .map(|rest| {
            let tag = rest.split('>').next().unwrap_or("");
            let attr = |name: &str| {
                tag.split(&format!(" {name}=\""))
                    .nth(1)
                    .and_then(|v| v.split('"').next())
                    .map(crate::browser::unescape)
                    .unwrap_or_default()
            };
            let list = |name: &str, sep: &str| -> Vec<String> {
                let v = attr(name);
                if v.is_empty() {
                    return Vec::new();
                }
                v.split(sep).map(String::from).collect()
            };
            Chart {
                kind: attr("data-kind"),
                x: attr("data-x"),
                x_scale: attr("data-x-scale"),
                points: attr("data-points").parse().unwrap_or(0),
                colours: list("data-colours", " "),
                names: list("data-names", " | "),
                svg: format!(
                    " class=\"wb-chart\"{}",
                    rest.split("</svg>").next().unwrap_or("")
                ),
            }
        })
        .collect()
}
