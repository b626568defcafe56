//! Reports: every exporter's output for a fixed campaign (tests/fixtures/campaign-export.json)
//! is compared byte for byte with its snapshot in tests/snapshots/. Set
//! WIREBENCH_UPDATE_SNAPSHOTS=1 to rewrite the snapshots after an intended change, and review
//! the diff.

use std::path::PathBuf;

use wirebench::commands::{history, report};
use wirebench::report::Format;

use crate::cli::{stderr, wirebench};
use crate::support::TempPath;

fn manifest_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

const FORMATS: [(Format, &str); 5] = [
    (Format::Table, "table"),
    (Format::Markdown, "markdown"),
    (Format::Csv, "csv"),
    (Format::Json, "json"),
    (Format::Html, "html"),
];

/// A store holding the single-size fixture campaign as campaign 1.
pub(crate) fn fixture_db() -> TempPath {
    let db = TempPath::new(".sqlite3");
    let id = history::import(
        &db.0,
        &manifest_path("tests/fixtures/campaign-export.json"),
        0,
        false,
    )
    .expect("fixture imports");
    assert_eq!(id, 1);
    db
}

fn snapshot_name(name: &str) -> PathBuf {
    let ext = match name {
        "table" => "txt",
        "markdown" => "md",
        other => other,
    };
    manifest_path(&format!("tests/snapshots/report.{ext}"))
}

#[test]
fn every_format_matches_its_snapshot() {
    let db = fixture_db();
    for (format, name) in FORMATS {
        let mut out = Vec::new();
        report::execute(&db.0, report::Which::Id(1), format, None, None, &mut out).expect(name);
        let path = snapshot_name(name);
        if std::env::var_os("WIREBENCH_UPDATE_SNAPSHOTS").is_some() {
            std::fs::write(&path, &out).expect("snapshot written");
        }
        let expected = std::fs::read(&path).expect("snapshot exists");
        assert!(
            out == expected,
            "{name} differs from {}:\n{}",
            path.display(),
            String::from_utf8_lossy(&out)
        );
    }
}

#[test]
fn the_report_covers_every_configuration_and_both_views() {
    let db = fixture_db();
    let mut out = Vec::new();
    report::execute(
        &db.0,
        report::Which::Last,
        Format::Csv,
        None,
        None,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    // 4 configurations × 2 sides × 3 counts (messages, bytes, time), besides the run's rows.
    let side_rows = text
        .lines()
        .filter(|l| l.contains(",client,") || l.contains(",server,"))
        .count();
    assert_eq!(side_rows, 4 * 2 * 3, "{text}");
    for config in ["tcp,stream", "tcp,saw", "udp,stream", "udp,saw"] {
        for row in [
            "client,bytes,B,100000,100000,100000,100000,0",
            "server,messages,count",
        ] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(config) && l.contains(row)),
                "{config} {row}: {text}"
            );
        }
    }
}

#[tokio::test]
async fn report_to_a_file_twice_gives_the_same_bytes() {
    let db = fixture_db();
    let first = TempPath::new(".md");
    let second = TempPath::new(".md");
    for file in [&first, &second] {
        let out = wirebench(&[
            "report",
            "--last",
            "--format",
            "markdown",
            "-o",
            file.arg(),
            "--db",
            db.arg(),
        ])
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
    let a = std::fs::read(&first.0).unwrap();
    assert_eq!(a, std::fs::read(&second.0).unwrap());
    assert_eq!(a, std::fs::read(snapshot_name("markdown")).unwrap());

    let empty = TempPath::new(".sqlite3");
    let out = wirebench(&["report", "--last", "--db", empty.arg()]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out).trim_end().lines().count(),
        1,
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("`wirebench run` creates it"),
        "{}",
        stderr(&out)
    );
    assert!(!empty.0.exists(), "reading commands create no database");
    let out = wirebench(&["runs", "--db", empty.arg()]).await;
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("no campaigns"));
    assert!(!empty.0.exists());
    let out = wirebench(&["report", "--db", empty.arg()]).await;
    assert_eq!(out.status.code(), Some(2), "an id or --last is required");
}

/// The HTML report is one self-contained file: SVG charts with titles, axis descriptions with
/// units and a legend, the tables, and nothing fetched from elsewhere. The fixture measured one
/// message size × one total, so goodput and time are bars per configuration, not lines.
#[test]
fn html_report_is_self_contained_with_labelled_charts() {
    let db = fixture_db();
    let mut first = Vec::new();
    report::execute(
        &db.0,
        report::Which::Id(1),
        Format::Html,
        None,
        None,
        &mut first,
    )
    .unwrap();
    let mut again = Vec::new();
    report::execute(
        &db.0,
        report::Which::Id(1),
        Format::Html,
        None,
        None,
        &mut again,
    )
    .unwrap();
    assert!(first == again, "the same campaign gives the same bytes");
    let html = String::from_utf8(first).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>wirebench campaign 1</title>"));
    assert_eq!(
        html.matches("<svg").count(),
        4,
        "goodput bars, time bars, RTT, UDP loss against load (no interval series: no time chart)"
    );
    assert_eq!(html.matches("</svg>").count(), 4);
    assert!(
        !html.contains("Goodput against message size"),
        "one message size: no line against it"
    );
    assert_eq!(
        html.matches("<table>").count(),
        4,
        "one table per configuration"
    );
    let texts: Vec<String> = html
        .split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = t.split_once('>')?.1;
            Some(body.split("</text>").next()?.trim().to_string())
        })
        .collect();
    for expected in [
        "Goodput per protocol × mechanism, 1000-byte messages, 100000 B (97.66 KiB)",
        "Transfer time per protocol × mechanism, 1000-byte messages, 100000 B (97.66 KiB)",
        "Protocol (one bar per mechanism)",
        "TCP",
        "UDP",
        "Transfer time, median and min–max (ms)",
        "Stop-and-wait round-trip time (median over runs)",
        "Round-trip time (µs, log scale)",
        "TCP Streaming",
        "UDP Stop and Wait",
        "TCP Stop and Wait, 1000 B",
        "p99",
        "UDP streaming: server loss against offered load",
        "Server loss (% of messages sent)",
        "1000 B messages",
    ] {
        assert!(texts.iter().any(|t| t == expected), "{expected}: {texts:?}");
    }
    assert!(texts
        .iter()
        .any(|t| t.starts_with("Goodput, median and min–max (") && t.ends_with("bit/s)")));
    // Each configuration: one bar and its whisker; 4 configurations in each of the two charts.
    let charts = svgs(&html);
    for bars in &charts[..2] {
        let fills = ["#1F77B4", "#D62728", "#2CA02C", "#9467BD"];
        for fill in fills {
            // The bar and its legend swatch.
            assert_eq!(
                bars.matches(&format!("fill=\"{fill}\"")).count(),
                2,
                "{fill}: {bars}"
            );
        }
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

#[test]
fn html_escapes_what_the_store_holds() {
    use wirebench::report::html::escape;
    assert_eq!(
        escape("<b>\"x\" & 'y'</b>"),
        "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;"
    );
}

/// A real campaign measured with `-i 20ms` (tcp,udp × stream, 1000 and 8000 B, unpaced, so
/// UDP lost messages): its export is the fixture for the interval and loss charts.
pub(crate) fn interval_fixture_db() -> TempPath {
    let db = TempPath::new(".sqlite3");
    let id = history::import(
        &db.0,
        &manifest_path("tests/fixtures/campaign-intervals.json"),
        0,
        false,
    )
    .expect("fixture imports");
    assert_eq!(id, 1);
    db
}

/// The SVG charts of an HTML report, in order.
fn svgs(html: &str) -> Vec<&str> {
    html.split("<svg")
        .skip(1)
        .filter_map(|s| s.split("</svg>").next())
        .collect()
}

/// The text elements of an SVG.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = t.split_once('>')?.1;
            Some(body.split("</text>").next()?.trim().to_string())
        })
        .collect()
}

fn html_report(db: &TempPath, run: Option<usize>) -> String {
    let mut out = Vec::new();
    report::execute(
        &db.0,
        report::Which::Id(1),
        Format::Html,
        run,
        None,
        &mut out,
    )
    .expect("html report");
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
    let loss = series::loss_points(&runs);
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
/// N`) and a loss-against-load chart, labelled with units and a legend, the same bytes each time.
#[tokio::test]
async fn html_report_draws_throughput_over_time_and_loss_against_load() {
    let db = interval_fixture_db();
    let html = html_report(&db, None);
    assert_eq!(html, html_report(&db, None), "deterministic");
    let charts = svgs(&html);
    assert_eq!(charts.len(), 3, "throughput by size, over time, loss");
    let over_time = texts(charts[1]);
    for expected in [
        "Throughput over time, run 1",
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
    // One dot per client interval of run 1 (36 in the fixture).
    assert_eq!(charts[1].matches("<circle").count(), 36);
    assert!(html.contains("run 1: TCP Streaming, 1000 B × 104857600 B (100 MiB), repeat 1"));
    assert!(!html.contains("grace period"), "only UDP streaming has one");
    let loss = texts(charts[2]);
    for expected in [
        "UDP streaming: server loss against offered load",
        "Offered load: sent rate (Gbit/s)",
        "Server loss (% of messages sent)",
        "1000 B messages",
        "8000 B messages",
    ] {
        assert!(loss.iter().any(|t| t == expected), "{expected}: {loss:?}");
    }
    assert_eq!(
        charts[2].matches("<circle").count(),
        2,
        "one dot per UDP run"
    );

    let html = html_report(&db, Some(4));
    assert!(texts(svgs(&html)[1]).contains(&"Throughput over time, run 4".to_string()));
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
