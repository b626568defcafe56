//! The charts of the HTML report for every shape of campaign — one size × one total, one size ×
//! several totals over several campaigns (seed 000), a size × total sweep, a stop-and-wait sweep,
//! runs with interval series — each checked for its title, units, distinct labelled series and
//! a legend clear of the data (browser.rs's checks, on the report's own SVG), and the series
//! behind the run charts against the stored figures.

use wirebench::commands::report::{self, Options, Which};
use wirebench::report::{Format, Layout};

use crate::browser::{charts_of, check_chart, texts_of};
use crate::cli::{stderr, wirebench};
use crate::report::{fixture_db, fixtures_db, interval_fixture_db, report_of, SEED_000};
use crate::support::TempPath;

/// The charts of an HTML report, each checked (title, units, legend beside the plot, distinct
/// colours per series), with their titles.
fn checked_charts(html: &str, what: &str) -> Vec<String> {
    charts_of(html)
        .iter()
        .enumerate()
        .map(|(i, svg)| {
            check_chart(&format!("{what}, chart {}", i + 1), svg);
            texts_of(svg).into_iter().next().unwrap_or_default()
        })
        .collect()
}

/// The HTML report is one self-contained file: SVG charts with titles, axis descriptions with
/// units and a legend, the tables, and nothing fetched from elsewhere. The fixture measured one
/// message size × one total, so goodput and time are bars per configuration, not lines.
#[test]
fn html_report_is_self_contained_with_labelled_charts() {
    let db = fixture_db();
    let html = report_of(&db, &[1], Format::Html, Layout::Configurations);
    assert_eq!(
        html,
        report_of(&db, &[1], Format::Html, Layout::Configurations),
        "the same campaign gives the same bytes"
    );
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>wirebench campaign 1</title>"));
    let titles = checked_charts(&html, "campaign-export");
    assert_eq!(
        titles,
        [
            "Goodput, 1000-byte messages",
            "Transfer time, 1000-byte messages",
            "Stop-and-wait round-trip time, 1000-byte messages",
        ],
        "no interval series: no time chart; one UDP streaming run: no loss curve of one point"
    );
    assert_eq!(
        html.matches("<table>").count(),
        4,
        "one table per configuration"
    );
    let texts = texts_of(&html);
    for expected in [
        "Total per run (one bar per protocol × mechanism)",
        "100 kB",
        "Transfer time, median and min–max (ms)",
        "Round-trip time (µs, log scale)",
        "TCP Streaming",
        "UDP Stop and Wait",
        "140 Mbit/s (1 of 3 timed)",
    ] {
        assert!(texts.iter().any(|t| t == expected), "{expected}: {texts:?}");
    }
    // Nothing external: no scripts, links, images or URLs except the SVG namespace name.
    for banned in [
        "<script", "<link", "<img", "src=", "href=", "url(", "@import",
    ] {
        assert!(!html.contains(banned), "{banned}");
    }
    let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!without_ns.contains("http:") && !without_ns.contains("https:"));
}

/// Seed 000's shape — one message size, two totals, six protocol × mechanism, three runs each,
/// over three campaigns: grouped bars per total of goodput and of transfer time, each with its
/// whisker, six distinct series, and the round trips of each stop-and-wait configuration per
/// total.
#[test]
fn one_size_and_several_totals_get_grouped_bars_per_total() {
    let db = fixtures_db(&SEED_000);
    let html = report_of(&db, &[1, 2, 3], Format::Html, Layout::Configurations);
    let titles = checked_charts(&html, "seed 000");
    assert_eq!(
        titles,
        [
            "Goodput, 1024-byte messages",
            "Transfer time, 1024-byte messages",
            "Stop-and-wait round-trip time per total, 1024-byte messages",
            "UDP streaming: server loss against offered load",
        ]
    );
    let charts = charts_of(&html);
    for bars in &charts[..2] {
        let texts = texts_of(bars);
        assert!(texts.contains(&"1 MiB".to_string()) && texts.contains(&"2 MiB".to_string()));
        // Six bars per total and a whisker each (three lines: stem and two caps).
        let filled = bars.matches("<rect").count();
        assert_eq!(
            filled,
            2 + 6 * 2 + 6,
            "background, legend box, 12 bars, 6 swatches"
        );
    }
    // Round trips per total, with the bars' series: each stop-and-wait configuration keeps
    // its name and colour from the bars (one series, one colour on the page).
    let rtt = texts_of(charts[2]);
    for name in ["TCP Stop and Wait", "QUIC Stop and Wait", "1 MiB", "2 MiB"] {
        assert!(rtt.contains(&name.to_string()), "{name}: {rtt:?}");
    }
    assert!(
        !rtt.iter().any(|t| t == "TCP Stop and Wait, 1 MiB"),
        "{rtt:?}"
    );
    let swatch = |svg: &str, name: &str| -> Option<String> {
        // The legend entry's colour: the swatch or stroke drawn just before its name.
        let at = svg.find(&format!(">\n{name}\n<"))?;
        let before = &svg[..at];
        let fill = before.rfind("fill=\"#").map(|i| &before[i + 6..i + 13]);
        let stroke = before.rfind("stroke=\"#").map(|i| &before[i + 8..i + 15]);
        let last = before.rfind("fill=\"#").max(before.rfind("stroke=\"#"));
        match last {
            Some(i) if Some(i) == before.rfind("fill=\"#") => fill.map(str::to_string),
            _ => stroke.map(str::to_string),
        }
    };
    let in_bars = swatch(charts[0], "TCP Stop and Wait");
    assert!(in_bars.is_some());
    assert_eq!(in_bars, swatch(charts[2], "TCP Stop and Wait"));
}

/// A sweep of message sizes and totals: goodput and transfer time against message size, one
/// line per protocol × mechanism × total, each sorted by size.
#[test]
fn a_size_and_total_sweep_draws_goodput_and_time_against_size() {
    let db = fixtures_db(&["sweep-size-total.json"]);
    let html = report_of(&db, &[1], Format::Html, Layout::Configurations);
    let titles = checked_charts(&html, "size × total sweep");
    assert_eq!(
        titles,
        [
            "Goodput against message size",
            "Transfer time against message size",
            "UDP streaming: server loss against offered load",
        ]
    );
    let charts = charts_of(&html);
    for chart in &charts[..2] {
        let texts = texts_of(chart);
        for name in [
            "TCP Streaming, 1 MiB",
            "TCP Streaming, 4 MiB",
            "UDP Streaming, 1 MiB",
            "UDP Streaming, 4 MiB",
        ] {
            assert!(texts.contains(&name.to_string()), "{name}: {texts:?}");
        }
    }
    // Every line runs left to right (sorted by message size).
    for line in charts[0].split("<polyline").skip(1) {
        let points: Vec<f64> = line
            .split("points=\"")
            .nth(1)
            .and_then(|p| p.split('"').next())
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|p| p.split(',').next()?.parse().ok())
            .collect();
        assert!(points.windows(2).all(|w| w[0] <= w[1]), "{points:?}");
    }
    // The grid puts message size × total in the rows.
    let grid = report_of(&db, &[1], Format::Table, Layout::Grid);
    assert!(grid.contains("Message size × total"), "{grid}");
    assert!(
        grid.lines().any(|l| l.starts_with("30000 B × 4 MiB")),
        "{grid}"
    );
}

/// A stop-and-wait sweep of sizes and totals: round trips per total against message size, and
/// the time chart beside goodput.
#[test]
fn a_stop_and_wait_sweep_draws_round_trips_per_total() {
    let db = fixtures_db(&["sweep-saw.json"]);
    let html = report_of(&db, &[1], Format::Html, Layout::Configurations);
    let titles = checked_charts(&html, "stop-and-wait sweep");
    assert_eq!(
        titles,
        [
            "Goodput against message size",
            "Transfer time against message size",
            "Stop-and-wait round-trip time against message size",
        ]
    );
    let rtt = texts_of(charts_of(&html)[2]);
    for name in [
        "TCP Stop and Wait, 256 KiB",
        "TCP Stop and Wait, 1 MiB",
        "UDP Stop and Wait, 256 KiB",
        "UDP Stop and Wait, 1 MiB",
    ] {
        assert!(rtt.contains(&name.to_string()), "{name}: {rtt:?}");
    }
}

fn html_report(db: &TempPath, run: Option<usize>) -> String {
    let mut out = Vec::new();
    let opts = Options {
        run,
        ..Options::format(Format::Html)
    };
    report::execute(&db.0, &Which::Ids(vec![1]), opts, &mut out).expect("html report");
    String::from_utf8(out).unwrap()
}

/// The series behind the two run charts, checked against the stored figures exactly.
#[test]
fn interval_and_loss_series_come_from_the_stored_runs() {
    use wirebench::report::series;
    let db = interval_fixture_db();
    let store = wirebench::store::Store::open(&db.0).unwrap();
    let runs = store.runs(1).unwrap();
    // By default the run with the longest series (the first of equals): run 1 (tcp stream,
    // 1000 B) in this fixture.
    let t = series::timeline(&runs, None)
        .unwrap()
        .expect("a run has series");
    assert_eq!(t.run, 1);
    assert_eq!(
        t.label,
        "run 1: TCP Streaming, 1000 B × 104857600 B (100 MiB), repeat 1"
    );
    assert_eq!(t.client.len(), runs[0].1.client.measured.intervals.len());
    assert_eq!(t.server.len(), runs[0].1.server.measured.intervals.len());
    let first = &runs[0].1.client.measured.intervals[0];
    assert_eq!(t.client[0].bits_per_second, first.bits_per_second);
    assert_eq!(t.client[0].end_s, first.sample.end_ns as f64 / 1e9);
    // Not merely the first run: cut run 1 to one interval and the longest other run is shown.
    let mut cut = runs.clone();
    cut[0].1.client.measured.intervals.truncate(1);
    cut[0].1.server.measured.intervals.truncate(1);
    let longest = series::timeline(&cut, None).unwrap().unwrap();
    let length = |i: usize| {
        cut[i].1.client.measured.intervals.len() + cut[i].1.server.measured.intervals.len()
    };
    assert_ne!(longest.run, 1);
    assert!((0..cut.len()).all(|i| length(longest.run - 1) >= length(i)));
    let t = series::timeline(&runs, Some(4)).unwrap().unwrap();
    assert_eq!(
        t.label,
        "run 4: UDP Streaming, 8000 B × 104857600 B (100 MiB), repeat 1"
    );
    assert!(series::timeline(&runs, Some(5))
        .unwrap_err()
        .contains("numbered 1 to 4"));
    // Loss = lost / sent, offered load = bytes sent over the run's transfer time (the run's
    // headline figures); UDP streaming runs only.
    let loss = series::loss_points(&runs, None);
    assert_eq!(loss.len(), 2);
    for (point, (_, run)) in loss.iter().zip([&runs[1], &runs[3]]) {
        let s = &run.server;
        assert_eq!(
            point.loss_pct,
            s.lost as f64 * 100.0 / run.client.messages as f64
        );
        assert_eq!(
            point.offered_bps,
            run.client.bytes as f64 * 8.0 / run.client.seconds
        );
        assert!(
            point.loss_pct > 0.0,
            "the unpaced fixture runs lost messages"
        );
    }
    assert_eq!((loss[0].msg_size, loss[1].msg_size), (1000, 8000));
}

/// With interval series: a throughput-over-time chart (the run with the longest series, or `--run
/// N`), labelled with units and a legend, the same bytes each time. One UDP streaming run per
/// message size is a point per line: no loss-against-load chart (the tables give each loss).
#[tokio::test]
async fn html_report_draws_throughput_over_time_and_no_loss_curve_of_one_point() {
    let db = interval_fixture_db();
    let html = html_report(&db, None);
    assert_eq!(html, html_report(&db, None), "deterministic");
    let titles = checked_charts(&html, "campaign-intervals");
    assert_eq!(
        titles,
        [
            "Goodput against message size",
            "Transfer time against message size",
            "Throughput over time, run 1",
        ]
    );
    let charts = charts_of(&html);
    let over_time = texts_of(charts[2]);
    for expected in [
        "Time since the session started (ms)",
        "Throughput per interval (Gbit/s)",
        "Client sent",
        "Server read",
    ] {
        assert!(
            over_time.iter().any(|t| t == expected),
            "{expected}: {over_time:?}"
        );
    }
    // One dot per client interval of run 1 (36 in the fixture), and the legend's dot.
    assert_eq!(charts[2].matches("<circle").count(), 36 + 1);
    assert!(html.contains("run 1: TCP Streaming, 1000 B × 104857600 B (100 MiB), repeat 1"));
    assert!(!html.contains("grace period"), "only UDP streaming has one");
    assert!(
        html.contains("<th>Lost</th>") || html.contains(">Lost<"),
        "the tables give the loss"
    );

    let html = html_report(&db, Some(4));
    assert!(texts_of(charts_of(&html)[2]).contains(&"Throughput over time, run 4".to_string()));
    assert!(html.contains("run 4: UDP Streaming, 8000 B × 104857600 B (100 MiB), repeat 1"));
    assert!(
        html.contains("are the grace period"),
        "UDP streaming runs explain their tail"
    );

    // Bad choices are usage errors that say what is allowed.
    for (args, says) in [
        (vec!["--run", "5"], "numbered 1 to 4"),
        (vec!["--run", "0"], "--run"),
        (
            vec!["--run", "1", "--format", "csv"],
            "use it with --format html",
        ),
    ] {
        let mut argv = vec!["report", "1", "--db", db.arg()];
        if !args.contains(&"--format") {
            argv.extend(["--format", "html"]);
        }
        argv.extend(args.iter().copied());
        let out = wirebench(&argv).await;
        assert_eq!(out.status.code(), Some(2), "{argv:?}");
        assert!(stderr(&out).contains(says), "{argv:?}: {}", stderr(&out));
    }
    let out = wirebench(&[
        "report",
        "1",
        "--format",
        "html",
        "--run",
        "2",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Without interval series there is no throughput-over-time chart, and `--run` says why.
#[tokio::test]
async fn no_interval_series_means_no_time_chart() {
    let db = fixture_db();
    let html = html_report(&db, None);
    assert!(!html.contains("Throughput over time"));
    let out = wirebench(&[
        "report",
        "1",
        "--format",
        "html",
        "--run",
        "1",
        "--db",
        db.arg(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("-i D"), "{}", stderr(&out));
}
