//! Reports of the stored sweeps, written once over the kinds (rr, DNS, rpm): every kind in
//! every format (text, Markdown, CSV, HTML, JSON), the DNS report's one chart of UDP loss
//! against TCP retransmission with min / avg / max response times and a rate that says how
//! timeouts count, and seed 002's comparison from a live `rr --flows 1,2,3` sweep. The stores
//! are built from fixtures of real sweeps (tests/fixtures/rr-sweep.json, dns-sweep.json).

use serde_json::Value;
use wirebench::store::Store;
use wirebench_core::record::dns::{DnsResult, NewDnsCampaign};
use wirebench_core::record::rr::{NewRrCampaign, RrResult};
use wirebench_core::record::Status;

use crate::browser::{charts_of, check_chart, texts_of};
use crate::cli::{stderr, wirebench};
use crate::support::TempPath;
use wirebench::store::dns::Dns;
use wirebench::store::rr::Rr;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON")
}

/// A store holding the DNS fixture sweep (udp,tcp × K = 1, 10, 40) as DNS campaign 1.
pub(crate) fn dns_db() -> TempPath {
    let db = TempPath::new(".sqlite3");
    add_dns_campaign(&db, "testhost");
    db
}

/// Stores the DNS fixture sweep in `db` as measured on `host`.
fn add_dns_campaign(db: &TempPath, host: &str) {
    let results: Vec<DnsResult> =
        serde_json::from_value(fixture("dns-sweep.json")["results"].clone()).unwrap();
    let store = Store::open(&db.0).unwrap();
    let id = store
        .begin::<Dns>(&NewDnsCampaign {
            started_at_unix_s: 1_700_000_000,
            resolver: "127.0.0.1:5354".into(),
            name: "host.example.test.".into(),
            record_type: "A".into(),
            transports: "udp,tcp".into(),
            concurrency: "1,10,40".into(),
            planned_results: 6,
            host_name: Some(host.into()),
            wirebench_version: "0.1.0".into(),
        })
        .unwrap()
        .id;
    for (i, r) in results.iter().enumerate() {
        store.record::<Dns>(id, i as u64 + 1, r).unwrap();
    }
    store
        .finish::<Dns>(id, Status::Complete, 1_700_000_060, None)
        .unwrap();
}

/// A store holding the rr fixture sweep (udp,tcp × K = 1, 8, 32, 2 flows) as rr sweep 1.
pub(crate) fn rr_db() -> TempPath {
    let results: Vec<RrResult> =
        serde_json::from_value(fixture("rr-sweep.json")["results"].clone()).unwrap();
    let db = TempPath::new(".sqlite3");
    let store = Store::open(&db.0).unwrap();
    let id = store
        .begin::<Rr>(&NewRrCampaign {
            started_at_unix_s: 1_700_000_000,
            server: "embedded 127.0.0.1:40000".into(),
            protocols: "udp,tcp".into(),
            concurrency: "1,8,32".into(),
            request_bytes: 64,
            response_bytes: 512,
            flows: 2,
            planned_results: 6,
            host_name: Some("testhost".into()),
            wirebench_version: "0.1.0".into(),
        })
        .unwrap()
        .id;
    for (i, r) in results.iter().enumerate() {
        store.record::<Rr>(id, i as u64 + 1, r).unwrap();
    }
    store
        .finish::<Rr>(id, Status::Complete, 1_700_000_060, None)
        .unwrap();
    db
}

/// A store holding the rr flows fixture sweep (tcp,udp × 1, 2, 3 flows, K = 1) as rr sweep 1.
pub(crate) fn rr_flows_db() -> TempPath {
    let results: Vec<RrResult> =
        serde_json::from_value(fixture("rr-flows.json")["results"].clone()).unwrap();
    let db = TempPath::new(".sqlite3");
    let store = Store::open(&db.0).unwrap();
    let id = store
        .begin::<Rr>(&NewRrCampaign {
            started_at_unix_s: 1_700_000_000,
            server: "embedded 127.0.0.1:40000".into(),
            protocols: "tcp,udp".into(),
            concurrency: "1".into(),
            request_bytes: 64,
            response_bytes: 64,
            flows: 3,
            planned_results: 6,
            host_name: Some("testhost".into()),
            wirebench_version: "0.1.0".into(),
        })
        .unwrap()
        .id;
    for (i, r) in results.iter().enumerate() {
        store.record::<Rr>(id, i as u64 + 1, r).unwrap();
    }
    store
        .finish::<Rr>(id, Status::Complete, 1_700_000_060, None)
        .unwrap();
    db
}

async fn report(flag: &str, format: &str, db: &TempPath) -> String {
    let out = wirebench(&["report", flag, "1", "--format", format, "--db", db.arg()]).await;
    assert!(out.status.success(), "{flag} {format}: {}", stderr(&out));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Every kind comes in every format: CSV with one row per result and a header of base units,
/// Markdown with its tables, and the same heading line in text and Markdown.
#[tokio::test]
async fn every_sweep_kind_reports_in_every_format() {
    for (flag, db, rows, heading) in [
        ("--rr", rr_db(), 6, "rr sweep 1 (complete, started 2023-11-14 22:13:20 UTC, host testhost) against embedded 127.0.0.1:40000"),
        ("--dns", dns_db(), 6, "DNS campaign 1 (complete, started 2023-11-14 22:13:20 UTC, host testhost): host.example.test. A to 127.0.0.1:5354"),
    ] {
        let text = report(flag, "table", &db).await;
        assert!(text.starts_with(&format!("{heading}\n")), "{text}");
        let md = report(flag, "markdown", &db).await;
        assert!(md.starts_with(&format!("# wirebench {}\n\n{heading}\n", &heading[..heading.find(" (").unwrap()])), "{md}");
        assert!(md.contains("|---|---:|"), "{md}");
        let csv = report(flag, "csv", &db).await;
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + rows, "{csv}");
        let width = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == width), "{csv}");
        for column in ["concurrency", "response_min_ns", "response_mean_ns", "response_max_ns", "retrans_rate"] {
            assert!(lines[0].split(',').any(|c| c == column), "{column}: {}", lines[0]);
        }
        let html = report(flag, "html", &db).await;
        for (i, svg) in charts_of(&html).iter().enumerate() {
            check_chart(&format!("{flag} chart {}", i + 1), svg);
        }
        let json: Value = serde_json::from_str(&report(flag, "json", &db).await).unwrap();
        assert_eq!(json["results"].as_array().map(Vec::len), Some(rows));
    }
    let out = wirebench(&["report", "--rr", "2", "--db", rr_db().arg()]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("there is no rr sweep 2"),
        "{}",
        stderr(&out)
    );
}

/// Sweeps from two hosts stand side by side, never pooled: each host's a section of its own
/// (its own sweeps pooled), the CSV one table with each row's host first.
#[tokio::test]
async fn sweeps_from_two_hosts_stand_side_by_side() {
    let db = dns_db();
    add_dns_campaign(&db, "ec2-vm");
    add_dns_campaign(&db, "testhost");
    let run = |format: &'static str| {
        let db = db.arg().to_string();
        async move {
            let out = wirebench(&[
                "report", "--dns", "1", "2", "3", "--format", format, "--db", &db,
            ])
            .await;
            assert!(out.status.success(), "{format}: {}", stderr(&out));
            String::from_utf8(out.stdout).expect("UTF-8")
        }
    };
    let text = run("table").await;
    assert!(
        text.contains("3 sweeps from 2 hosts, side by side"),
        "{text}"
    );
    let on_this = text.find("On testhost").expect("a section per host");
    let on_that = text.find("On ec2-vm").expect("a section per host");
    assert!(on_this < on_that, "hosts in the order of their first sweep");
    let md = run("markdown").await;
    assert!(md.contains("\n## On ec2-vm"), "{md}");
    let csv = run("csv").await;
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("host,"), "{csv}");
    assert_eq!(lines.len(), 1 + 3 * 6, "every result once: {csv}");
    let hosts: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(hosts.iter().filter(|h| **h == "testhost").count(), 12);
    assert_eq!(hosts.iter().filter(|h| **h == "ec2-vm").count(), 6);
    let width = lines[0].split(',').count();
    assert!(lines.iter().all(|l| l.split(',').count() == width), "{csv}");
    let html = run("html").await;
    let charts = charts_of(&html);
    assert!(charts.len() >= 2, "each host's charts");
    for (i, svg) in charts.iter().enumerate() {
        check_chart(&format!("chart {}", i + 1), svg);
    }
    // One host's sweeps alone still pool, as before.
    let out = wirebench(&["report", "--dns", "1", "3", "--db", db.arg()]).await;
    let pooled = String::from_utf8_lossy(&out.stdout);
    assert!(pooled.contains("2 sweeps pooled"), "{pooled}");
    assert!(!pooled.contains("On testhost"), "{pooled}");
}

/// Seed 003's comparison: UDP's loss rate and TCP's retransmission rate against load on one
/// chart; response times keep min / avg / max; queries per second say how timeouts count.
#[tokio::test]
async fn the_dns_report_puts_udp_loss_beside_tcp_retransmissions() {
    let db = dns_db();
    let html = report("--dns", "html", &db).await;
    let charts = charts_of(&html);
    assert_eq!(
        charts.len(),
        2,
        "loss against retransmissions, response time"
    );
    let repair = texts_of(charts[0]);
    for text in [
        "DNS: UDP loss and TCP retransmissions against queries in flight",
        "UDP queries lost (timeouts)",
        "TCP segments retransmitted",
        "Lost or retransmitted (% of sent)",
    ] {
        assert!(repair.contains(&text.to_string()), "{text}: {repair:?}");
    }
    // The caption's noun is spelt right, and the load is queries.
    assert!(html.contains("from a query being sent"), "{html}");
    assert!(!html.contains("querie "), "{html}");
    assert!(
        html.contains("against the queries in flight per flow"),
        "{html}"
    );
    // Three points per transport, UDP's at its timeout percentages (8, 9, 13.5 %): UDP's
    // dots and TCP's triangles (a shape per series), each with its legend entry's mark.
    assert_eq!(charts[0].matches("<circle").count(), 3 + 1);
    assert_eq!(charts[0].matches("<polygon").count(), 3 + 1);
    let times = texts_of(charts[1]);
    assert!(
        times
            .iter()
            .any(|t| t.starts_with("Response time, avg and min–max (µs")),
        "{times:?}"
    );
    let text = report("--dns", "table", &db).await;
    for column in ["min µs", "avg µs", "max µs", "p50 µs", "p99 µs", "q/s"] {
        assert!(text.contains(column), "{column}: {text}");
    }
    assert!(
        text.contains("time spent waiting out timeouts counts"),
        "{text}"
    );
    assert!(html.contains("time spent waiting out timeouts counts"));
}

/// Seed 002 compares one, two and three sessions: `rr --flows 1,2,3` runs each (every K at
/// each), stores them as one sweep, and its report charts response time and requests per
/// second against the number of flows.
#[tokio::test]
async fn rr_sweeps_a_list_of_flows() {
    let db = TempPath::new(".sqlite3");
    let out = wirebench(&[
        "rr",
        "--proto",
        "tcp,udp",
        "--flows",
        "1,2,3",
        "--count",
        "40",
        "--db",
        db.arg(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert_eq!(
        text.matches("  T=").count(),
        6,
        "one line per protocol × flows: {text}"
    );
    let store = Store::open(&db.0).unwrap();
    let results = store
        .results::<Rr>(1)
        .unwrap()
        .into_iter()
        .map(|r| r.result)
        .collect::<Vec<_>>();
    let flows: Vec<(String, u32)> = results
        .iter()
        .map(|r| (r.protocol.as_str().to_string(), r.flows))
        .collect();
    assert_eq!(
        flows,
        [
            ("tcp", 1),
            ("tcp", 2),
            ("tcp", 3),
            ("udp", 1),
            ("udp", 2),
            ("udp", 3)
        ]
        .map(|(p, f)| (p.to_string(), f))
    );
    for r in &results {
        assert_eq!(r.sent, 40 * u64::from(r.flows), "{r:?}");
        assert_eq!(r.answered + r.lost, r.sent, "{r:?}");
    }
    let info = store.campaign::<Rr>(1).unwrap().unwrap();
    assert_eq!((info.campaign.flows, info.campaign.planned_results), (3, 6));
    drop(store);
    let listed = wirebench(&["runs", "--db", db.arg()]).await;
    assert!(String::from_utf8_lossy(&listed.stdout).contains("up to 3 flows"));
    let html = report("--rr", "html", &db).await;
    let titles: Vec<String> = charts_of(&html)
        .iter()
        .map(|svg| texts_of(svg).remove(0))
        .collect();
    assert_eq!(
        titles,
        [
            "Loss and retransmissions against flows",
            "Response time against flows",
            "Requests per second against flows",
        ]
    );
    for svg in charts_of(&html) {
        check_chart("rr --flows", svg);
        assert!(texts_of(svg).contains(&"Flows (connections or sockets, count)".to_string()));
    }
    let out = wirebench(&["rr", "--flows", "1,0", "--no-store"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--flows 0 is out of range"),
        "{}",
        stderr(&out)
    );
}
