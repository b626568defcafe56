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

fn fixture_db() -> TempPath {
    let db = TempPath::new(".sqlite3");
    let id = history::import(
        &db.0,
        &manifest_path("tests/fixtures/campaign-export.json"),
        0,
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
        report::execute(&db.0, report::Which::Id(1), format, None, &mut out).expect(name);
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
    report::execute(&db.0, report::Which::Last, Format::Csv, None, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    // 4 configurations × 2 views × 4 metrics, plus the header.
    assert_eq!(text.lines().count(), 1 + 4 * 2 * 4, "{text}");
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

/// The HTML report is one self-contained file: two SVG charts with titles, axis descriptions
/// with units and a legend, the tables, and nothing fetched from elsewhere.
#[test]
fn html_report_is_self_contained_with_labelled_charts() {
    let db = fixture_db();
    let mut first = Vec::new();
    report::execute(&db.0, report::Which::Id(1), Format::Html, None, &mut first).unwrap();
    let mut again = Vec::new();
    report::execute(&db.0, report::Which::Id(1), Format::Html, None, &mut again).unwrap();
    assert!(first == again, "the same campaign gives the same bytes");
    let html = String::from_utf8(first).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>wirebench campaign 1</title>"));
    assert_eq!(html.matches("<svg").count(), 2, "two charts");
    assert_eq!(html.matches("</svg>").count(), 2);
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
        "Client throughput (median) against message size",
        "Message size (bytes, log scale)",
        "Stop-and-wait round-trip time (median over runs)",
        "Round-trip time (µs, log scale)",
        "TCP Streaming",
        "UDP Stop and Wait",
        "TCP Stop and Wait, 1000 B",
        "p99",
    ] {
        assert!(texts.iter().any(|t| t == expected), "{expected}: {texts:?}");
    }
    assert!(texts
        .iter()
        .any(|t| t.starts_with("Throughput (") && t.ends_with("bit/s)")));
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
