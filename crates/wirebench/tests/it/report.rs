//! Reports: every exporter's output for fixed campaigns (tests/fixtures/*.json, real campaigns
//! exported) is compared byte for byte with its snapshot in tests/snapshots/, in both layouts;
//! reports over several campaigns and partly-timed configurations (the charts are
//! report_charts.rs's). Set WIREBENCH_UPDATE_SNAPSHOTS=1 to rewrite the snapshots after an
//! intended change, and review the diff.

use std::path::PathBuf;

use wirebench::commands::history;
use wirebench::commands::report::{self, Options, Which};
use wirebench::report::{Format, Layout};

use crate::cli::{stderr, wirebench};
use crate::support::{assert_snapshot, TempPath};

pub(crate) fn manifest_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

const FORMATS: [(Format, &str); 5] = [
    (Format::Table, "table"),
    (Format::Markdown, "markdown"),
    (Format::Csv, "csv"),
    (Format::Json, "json"),
    (Format::Html, "html"),
];

/// The fixture campaigns of the seed-000 shape: one message size, two totals, every protocol
/// × mechanism, three runs each, in three campaigns (stop-and-wait apart, as a student bounds
/// the time).
pub(crate) const SEED_000: [&str; 3] = [
    "seed000-stream.json",
    "seed000-tcp-udp-saw.json",
    "seed000-quic-saw.json",
];

/// A store holding `fixtures` (tests/fixtures/NAME) as campaigns 1, 2, …, in order.
pub(crate) fn fixtures_db(fixtures: &[&str]) -> TempPath {
    let db = TempPath::new(".sqlite3");
    for (i, name) in fixtures.iter().enumerate() {
        let id = history::import(
            &db.0,
            &manifest_path(&format!("tests/fixtures/{name}")),
            0,
            false,
        )
        .expect("fixture imports");
        assert_eq!(id, i as i64 + 1);
    }
    db
}

/// A store holding the single-size fixture campaign as campaign 1.
pub(crate) fn fixture_db() -> TempPath {
    fixtures_db(&["campaign-export.json"])
}

/// A real campaign measured with `-i 20ms` (tcp,udp × stream, 1000 and 8000 B, unpaced, so
/// UDP lost messages): its export is the fixture for the interval and loss charts.
pub(crate) fn interval_fixture_db() -> TempPath {
    fixtures_db(&["campaign-intervals.json"])
}

/// The report of campaigns `ids` of `db` in `format` and `layout`.
pub(crate) fn report_of(db: &TempPath, ids: &[i64], format: Format, layout: Layout) -> String {
    let mut out = Vec::new();
    let opts = Options {
        layout,
        ..Options::format(format)
    };
    report::execute(&db.0, &Which::Ids(ids.to_vec()), opts, &mut out).expect("a report");
    String::from_utf8(out).expect("UTF-8")
}

fn extension(name: &str) -> &str {
    match name {
        "table" => "txt",
        "markdown" => "md",
        other => other,
    }
}

#[test]
fn every_format_matches_its_snapshot() {
    let db = fixture_db();
    for (format, name) in FORMATS {
        let out = report_of(&db, &[1], format, Layout::Configurations);
        assert_snapshot(&format!("report.{}", extension(name)), out.as_bytes());
    }
}

/// Seed 000's table from one command over its three campaigns: rows = totals, columns =
/// protocol × mechanism, min / avg / max of time and goodput, in every format.
#[test]
fn the_grid_layout_gives_the_seeds_table_in_every_format() {
    let db = fixtures_db(&SEED_000);
    for (format, name) in FORMATS {
        if format == Format::Json {
            continue;
        }
        let out = report_of(&db, &[1, 2, 3], format, Layout::Grid);
        assert_snapshot(&format!("report-grid.{}", extension(name)), out.as_bytes());
    }
    let text = report_of(&db, &[1, 2, 3], Format::Table, Layout::Grid);
    let header = text
        .lines()
        .find(|l| l.starts_with("Total "))
        .expect("a header row");
    let columns: Vec<&str> = header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        columns,
        [
            "Total",
            "TCP Streaming",
            "UDP Streaming",
            "QUIC Streaming",
            "TCP Stop and Wait",
            "UDP Stop and Wait",
            "QUIC Stop and Wait"
        ],
        "{text}"
    );
    // Five tables (time, goodput, messages, bytes, UDP loss), two rows each (1 MiB, 2 MiB):
    // time and goodput cells min / avg / max, count cells client sent / server read, loss cells
    // min / avg / max of the two UDP columns only.
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("1 MiB") || l.starts_with("2 MiB"))
        .collect();
    assert_eq!(rows.len(), 10, "{text}");
    let slashes: Vec<usize> = rows.iter().map(|r| r.matches(" / ").count()).collect();
    assert_eq!(slashes, [12, 12, 12, 12, 6, 6, 6, 6, 4, 4], "{text}");
    // 1 MiB in 1024-byte messages is 1024 of them, sent and read, in every column.
    assert_eq!(rows[4].matches("1024 / 1024").count(), 6, "{text}");
    assert_eq!(rows[6].matches("1048576 / 1048576").count(), 6, "{text}");
    assert!(text.contains("UDP loss: messages lost"), "{text}");
    // The CSV is the same grid, one line per total, ready for a spreadsheet.
    let csv = report_of(&db, &[1, 2, 3], Format::Csv, Layout::Grid);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with(
        "msg_size,total_bytes,tcp_stream_runs,tcp_stream_timed_runs,tcp_stream_time_min_s"
    ));
    assert!(lines[1].starts_with("1024,1048576,3,3,"), "{csv}");
    assert_eq!(lines[1].split(',').count(), lines[0].split(',').count());
    // JSON holds every summary: no layout for it.
    let mut out = Vec::new();
    let opts = Options {
        layout: Layout::Grid,
        ..Options::format(Format::Json)
    };
    let err = report::execute(&db.0, &Which::Ids(vec![1]), opts, &mut out).unwrap_err();
    assert!(err.to_string().contains("--layout grid"), "{err}");
}

/// Seven campaigns of a lab report are one report: `report A B C` and `--last N` give the same
/// bytes, the heading names each campaign, and a configuration measured twice pools its runs
/// and says so.
#[tokio::test]
async fn several_campaigns_make_one_report() {
    let db = fixtures_db(&SEED_000);
    let all = report_of(&db, &[1, 2, 3], Format::Table, Layout::Configurations);
    assert!(
        all.starts_with("Campaigns 1, 2, 3\n  Campaign 1: complete, started "),
        "{all}"
    );
    assert_eq!(
        all.matches("Statistics for Client ").count(),
        12,
        "6 × 2 totals: {all}"
    );
    let out = wirebench(&["report", "--last", "3", "--db", db.arg()]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        all,
        "--last 3 is 1 2 3"
    );
    let out = wirebench(&["report", "1", "2", "3", "--db", db.arg()]).await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), all);
    let json: serde_json::Value = serde_json::from_str(&report_of(
        &db,
        &[1, 3],
        Format::Json,
        Layout::Configurations,
    ))
    .unwrap();
    assert_eq!(json["schema_version"], 3);
    assert_eq!(json["campaigns"].as_array().unwrap().len(), 2);
    assert_eq!(json["configurations"].as_array().unwrap().len(), 3 * 2 + 2);

    // The same campaign imported again: its configurations pool the runs of both.
    let out = wirebench(&[
        "import",
        manifest_path("tests/fixtures/seed000-quic-saw.json")
            .to_str()
            .unwrap(),
        "--again",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let pooled = report_of(&db, &[3, 4], Format::Table, Layout::Configurations);
    assert!(
        pooled.contains("their runs pooled: QUIC Stop and Wait, 1024 B × 1 MiB: campaigns 3, 4; QUIC Stop and Wait, 1024 B × 2 MiB: campaigns 3, 4."),
        "{pooled}"
    );
    assert!(pooled.contains("1024-byte messages, 6 runs"), "{pooled}");

    for (args, says) in [
        (vec!["report", "1", "1"], "campaign 1 is named twice"),
        (vec!["report", "1", "9"], "there is no campaign 9"),
        (
            vec!["report", "1", "2", "--format", "html", "--run", "1"],
            "--run picks a run of one campaign",
        ),
        (vec!["report", "1", "--last"], "cannot be used with"),
        (
            vec!["report", "--dns", "1", "2"],
            "there is no DNS campaign 1",
        ),
        (vec!["report", "--rr", "--last", "2"], "--last 2: "),
        (
            vec!["report", "--rpm", "1", "2"],
            "there is no rpm campaign 1",
        ),
    ] {
        let mut argv = args.clone();
        argv.extend(["--db", db.arg()]);
        let out = wirebench(&argv).await;
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{argv:?}: {}", stderr(&out));
        if !says.starts_with("cannot") {
            // Ours are one line; clap's conflict adds its usage.
            assert_eq!(
                stderr(&out).trim_end().lines().count(),
                1,
                "{}",
                stderr(&out)
            );
        }
    }
}

/// The seed's "Left: Local, Right: EC2": campaigns measured on two hosts (one exported there
/// and imported here) stand side by side, never pooled: each configuration once per host,
/// next to each other, in the tables, the grid, its CSV, the JSON and the charts' series;
/// campaigns of one host still pool. Where the servers differ too, a site is "host → server
/// host".
#[tokio::test]
async fn campaigns_from_two_hosts_stand_side_by_side() {
    let db = fixtures_db(&["seed000-stream.json"]);
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(manifest_path("tests/fixtures/seed000-stream.json")).unwrap(),
    )
    .unwrap();
    // Campaign 2: the same plan on another host; campaign 3: that host against its own server;
    // campaign 4: this host's campaign imported again.
    let elsewhere = |server: Option<&str>| {
        let mut c = fixture.clone();
        c["campaign"]["environment"]["host_name"] = "ec2-vm".into();
        if let Some(server) = server {
            c["parameters"]["server"] = server.into();
            c["parameters"]["embedded_server"] = false.into();
        }
        let file = TempPath::new(".json");
        std::fs::write(&file.0, serde_json::to_vec(&c).unwrap()).unwrap();
        file
    };
    for (file, again) in [
        (elsewhere(None), false),
        (elsewhere(Some("10.0.0.2:5201")), false),
        (
            TempPath(manifest_path("tests/fixtures/seed000-stream.json")),
            true,
        ),
    ] {
        let mut argv = vec!["import", file.arg(), "--db", db.arg()];
        if again {
            argv.push("--again");
        }
        let out = wirebench(&argv).await;
        // The fixture is not ours to delete.
        if again {
            std::mem::forget(file);
        }
        assert!(out.status.success(), "{}", stderr(&out));
    }

    let text = report_of(&db, &[1, 2, 4], Format::Table, Layout::Configurations);
    assert!(
        text.contains("Campaign 1 on vm: complete, started ")
            && text.contains("Campaign 2 on ec2-vm: complete, started "),
        "{text}"
    );
    // Campaigns 1 and 4 (this host) pool; campaign 2 (the other host) pools with neither.
    assert!(
        text.contains("their runs pooled: TCP Streaming on vm, 1024 B × 1 MiB: campaigns 1, 4;"),
        "{text}"
    );
    assert!(!text.contains("campaigns 1, 2"), "{text}");
    let titles: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("Statistics for "))
        .filter(|l| !l.starts_with("Client") && !l.starts_with("Server"))
        .map(|l| l.split(" (").next().unwrap_or(l))
        .take(4)
        .collect();
    assert_eq!(
        titles,
        [
            "TCP Streaming on vm",
            "TCP Streaming on ec2-vm",
            "UDP Streaming on vm",
            "UDP Streaming on ec2-vm"
        ],
        "one configuration's hosts side by side: {text}"
    );
    assert!(
        text.contains("1024-byte messages, 6 runs"),
        "pooled: {text}"
    );

    let grid = report_of(&db, &[1, 2], Format::Table, Layout::Grid);
    let header = grid.lines().find(|l| l.starts_with("Total ")).unwrap();
    let columns: Vec<&str> = header
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        columns[..3],
        ["Total", "TCP Streaming on vm", "TCP Streaming on ec2-vm"],
        "{grid}"
    );
    assert_eq!(columns.len(), 7, "3 protocols × 2 hosts: {grid}");
    let messages = grid
        .lines()
        .filter(|l| l.starts_with("1 MiB"))
        .nth(2)
        .unwrap();
    assert_eq!(messages.matches("1024 / 1024").count(), 6, "{grid}");
    let csv = report_of(&db, &[1, 2], Format::Csv, Layout::Grid);
    assert!(
        csv.starts_with("msg_size,total_bytes,tcp_stream_on_vm_runs,")
            && csv.contains(",tcp_stream_on_ec2_vm_runs,"),
        "{csv}"
    );

    // Another host and another server: the site names both.
    let json: serde_json::Value = serde_json::from_str(&report_of(
        &db,
        &[1, 3],
        Format::Json,
        Layout::Configurations,
    ))
    .unwrap();
    let sites: Vec<&str> = json["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["site"].as_str().unwrap())
        .take(2)
        .collect();
    assert_eq!(sites, ["vm → 127.0.0.1", "ec2-vm → 10.0.0.2"]);
    assert_eq!(json["campaigns"][1]["server"], "10.0.0.2:5201");
    let csv = report_of(&db, &[1, 3], Format::Csv, Layout::Configurations);
    assert!(
        csv.lines().nth(1).unwrap().ends_with(",vm → 127.0.0.1"),
        "{csv}"
    );
    let html = report_of(&db, &[1, 3], Format::Html, Layout::Configurations);
    assert!(
        html.contains("TCP Streaming on ec2-vm → 10.0.0.2"),
        "the charts and tables name the site"
    );
    assert!(
        html.contains("of each protocol × mechanism × site, per total"),
        "the captions say the series are per site"
    );

    // One host and one server: no sites, as before.
    let one = report_of(&db, &[1, 4], Format::Json, Layout::Configurations);
    assert!(!one.contains("\"site\""), "{one}");
}

/// Runs under 1 ms are too short to time: a configuration with some of them says how many of
/// its runs its rates cover, in the per-configuration tables and in the grid.
#[test]
fn partly_timed_configurations_say_how_many_runs_were_timed() {
    let db = fixture_db();
    let text = report_of(&db, &[1], Format::Table, Layout::Configurations);
    // The fixture's UDP streaming runs: one of three under 1 ms.
    let partly: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Goodput (") && l.contains(" runs timed)"))
        .collect();
    assert!(!partly.is_empty(), "{text}");
    for line in &partly {
        assert!(line.contains(" of 3 runs timed)"), "{line}");
    }
    let grid = report_of(&db, &[1], Format::Table, Layout::Grid);
    // TCP and UDP streaming: one of three runs each.
    assert_eq!(grid.matches(" (1 of 3 timed)").count(), 2, "{grid}");
    assert!(grid.contains("too short to time"), "{grid}");
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
    let a = std::fs::read_to_string(&first.0).unwrap();
    assert!(a == std::fs::read_to_string(&second.0).unwrap());
    assert!(a == std::fs::read_to_string(manifest_path("tests/snapshots/report.md")).unwrap());

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

#[test]
fn html_escapes_what_the_store_holds() {
    use wirebench::report::markup::escape;
    assert_eq!(
        escape("<b>\"x\" & 'y'</b>"),
        "&lt;b&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/b&gt;"
    );
}
