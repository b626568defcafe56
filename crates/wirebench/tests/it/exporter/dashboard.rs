//! The Grafana dashboard in packaging/grafana/ against the real thing: every metric its
//! Prometheus queries name is one a live exporter (run, UDP stream, ping, rr and dns probes)
//! or a live server's /metrics page exports, and every SQL query runs on a real PostgreSQL
//! store holding real campaigns (skipped, with a message, where PostgreSQL is not installed).

use std::collections::BTreeSet;

use serde_json::Value;
use wirebench::cli::ExporterArgs;
use wirebench::flows::server::Limits;

use super::{exporter_args, get, MeteredServer, TestExporter};
use crate::support::TEST_TIMEOUT;

/// The dashboard as committed.
fn dashboard() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../packaging/grafana/wirebench.json"
    );
    let text = std::fs::read_to_string(path).expect("packaging/grafana/wirebench.json");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

/// Every query of the dashboard's panels (and variables) on a data source of `kind`.
fn queries(doc: &Value, kind: &str) -> Vec<String> {
    let mut out = Vec::new();
    for panel in doc["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let ds = if target["datasource"].is_object() {
                &target["datasource"]
            } else {
                &panel["datasource"]
            };
            if ds["type"].as_str().is_some_and(|t| t.contains(kind)) {
                let field = if kind == "prometheus" {
                    "expr"
                } else {
                    "rawSql"
                };
                out.push(target[field].as_str().expect("a query").to_string());
            }
        }
    }
    if kind == "prometheus" {
        for var in doc["templating"]["list"].as_array().expect("variables") {
            if let Some(q) = var["query"]["query"].as_str() {
                out.push(q.to_string());
            }
        }
    }
    out
}

/// The metric names a Prometheus text page exports: its families and its samples.
fn names(page: &str, into: &mut BTreeSet<String>) {
    for line in page.lines() {
        let name = match line.strip_prefix("# TYPE ") {
            Some(rest) => rest.split_whitespace().next(),
            None if line.starts_with('#') => None,
            None => line.split(['{', ' ']).next(),
        };
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            into.insert(n.to_string());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_prometheus_query_names_a_metric_the_exporter_exports() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let server = MeteredServer::start(Limits::default()).await;
        // Transfers long enough to be timed (1 ms) on any machine, so the rates are exported:
        // 1 MiB took under 1 ms on a quiet one, and its goodput was rightly left out.
        let exporter = TestExporter::start(ExporterArgs {
            max_total: "256MiB".into(),
            ..exporter_args()
        })
        .await;
        let target = server.addr;
        // A DNS target that never answers still gives the DNS probe's families.
        let silent_dns = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let dns = silent_dns.local_addr().unwrap();
        let mut exported = BTreeSet::new();
        for probe in [
            format!("/probe?target={target}&proto=tcp&mode=stream&total=128MiB"),
            format!("/probe?target={target}&proto=udp&mode=stream&total=32MiB&size=1024"),
            format!("/probe?kind=ping&target={target}&proto=udp&count=5"),
            format!("/probe?kind=rr&target={target}&proto=tcp&count=5"),
            format!("/probe?kind=dns&target={dns}&name=a.test&count=2&timeout=100ms"),
        ] {
            let (status, page) = get(exporter.addr, &probe).await;
            assert_eq!(status, 200, "{probe}: {page}");
            names(&page, &mut exported);
        }
        let (_, server_page) = get(server.metrics, "/metrics").await;
        names(&server_page, &mut exported);
        let doc = dashboard();
        let prometheus = queries(&doc, "prometheus");
        assert!(prometheus.len() >= 10, "{prometheus:?}");
        for query in &prometheus {
            let named = metric_names(query);
            assert!(!named.is_empty(), "{query}: names no wirebench metric");
            for name in named {
                assert!(
                    exported.contains(&name),
                    "{query}: {name} is not exported; exported: {exported:?}"
                );
            }
        }
    })
    .await
    .expect("within the test timeout");
}

/// The `wirebench_…` names in a PromQL expression.
fn metric_names(query: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = query;
    while let Some(at) = rest.find("wirebench_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sql_query_runs_on_a_real_postgresql_store() {
    let Some(cluster) = crate::postgres::cluster() else {
        eprintln!("skipped: PostgreSQL is not installed (apt-get install postgresql)");
        return;
    };
    let url = cluster.create_database();
    tokio::time::timeout(TEST_TIMEOUT, async {
        // Real campaigns in the store: a TCP and a UDP run, an rr sweep and an rpm test.
        for args in [
            &[
                "run", "-n", "1MiB", "--proto", "tcp,udp", "--mode", "stream",
            ][..],
            &["rr", "--count", "20"][..],
            // As rpm_store's: a 20 Mbit/s relay keeps the load off the tests beside it.
            &[
                "rpm",
                "--impair",
                "rate=20Mbit,queue=64KiB",
                "--direction",
                "download",
                "--max-flows",
                "2",
                "--ramp-interval",
                "250ms",
                "--max-load",
                "2s",
                "--idle-probes",
                "2",
                "--probe-rate",
                "20",
            ][..],
        ] {
            let mut all = args.to_vec();
            all.extend(["--db", &url]);
            let out = crate::cli::wirebench(&all).await;
            assert!(
                out.status.success(),
                "{all:?}: {}",
                crate::cli::stderr(&out)
            );
        }
    })
    .await
    .expect("within the test timeout");
    let sql = queries(&dashboard(), "postgres");
    assert!(sql.len() >= 4, "{sql:?}");
    // The synchronous client runs a runtime of its own: on a thread outside the test's.
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connects");
        for query in sql {
            // Grafana's time macro, as Grafana expands it over all time.
            let expanded = expand_time_filter(&query);
            let rows = client
                .query(expanded.as_str(), &[])
                .unwrap_or_else(|e| panic!("{query}\n: {e}"));
            assert!(
                !rows.is_empty(),
                "no rows from the campaigns stored: {query}"
            );
        }
    })
    .join()
    .expect("every query ran");
}

/// `$__timeFilter(expr)` as Grafana writes it for a range that holds everything.
fn expand_time_filter(query: &str) -> String {
    let mut out = String::new();
    let mut rest = query;
    while let Some(at) = rest.find("$__timeFilter(") {
        out.push_str(&rest[..at]);
        let inner = &rest[at + "$__timeFilter(".len()..];
        // The argument ends at the parenthesis that closes the macro's.
        let mut depth = 1;
        let end = inner
            .char_indices()
            .find_map(|(i, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                (depth == 0).then_some(i)
            })
            .expect("a closed macro");
        out.push_str(&format!(
            "{} BETWEEN '1970-01-01T00:00:00Z' AND '2100-01-01T00:00:00Z'",
            &inner[..end]
        ));
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    out
}
