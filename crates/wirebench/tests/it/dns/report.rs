//! A stored DNS campaign read back and rendered by `report --dns` (HTML chart snapshot, JSON,
//! text).

use serde_json::Value;
use wirebench::store::Store;
use wirebench_core::record::dns::{DnsResult, NewDnsCampaign};
use wirebench_core::record::Status;

use super::assert_matches_dns_schema;
use crate::cli::{stderr, wirebench};
use crate::support::TempPath;
use wirebench::store::dns::Dns;

/// A stored DNS campaign (the results of a real sweep through a lossy relay, kept as a
/// fixture) reads back unchanged, and `report --dns` renders it: the HTML page with the
/// timeouts-against-concurrency chart byte for byte as its snapshot (set
/// WIREBENCH_UPDATE_SNAPSHOTS=1 to rewrite it after an intended change), the JSON against the
/// schema, the text table.
#[tokio::test]
async fn a_stored_campaign_reports_its_timeout_curve_as_a_chart() {
    let manifest = env!("CARGO_MANIFEST_DIR");
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{manifest}/tests/fixtures/dns-sweep.json")).unwrap(),
    )
    .unwrap();
    let results: Vec<DnsResult> = serde_json::from_value(fixture["results"].clone()).unwrap();
    assert_eq!(results.len(), 6);
    let db = TempPath::new(".sqlite3");
    let id = {
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
                host_name: Some("testhost".into()),
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
        let back = store
            .results::<Dns>(id)
            .unwrap()
            .into_iter()
            .map(|r| r.result)
            .collect::<Vec<_>>();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            fixture["results"],
            "stored results read back unchanged"
        );
        assert_eq!(
            store.campaign::<Dns>(id).unwrap().unwrap().status,
            Status::Complete
        );
        id
    };
    let id_arg = id.to_string();
    let html = wirebench(&[
        "report",
        "--dns",
        &id_arg,
        "--format",
        "html",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(html.status.success(), "{}", stderr(&html));
    let page = String::from_utf8(html.stdout).unwrap();
    assert!(page.contains("DNS: UDP loss and TCP retransmissions against queries in flight"));
    assert!(page.contains("<svg") && page.contains("\nUDP\n") && page.contains("\nTCP\n"));
    crate::support::assert_snapshot("dns-report.html", page.as_bytes());
    let json = wirebench(&[
        "report",
        "--dns",
        "--last",
        "--format",
        "json",
        "--db",
        db.arg(),
    ])
    .await;
    assert!(json.status.success(), "{}", stderr(&json));
    let doc: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_matches_dns_schema(&doc);
    assert_eq!(doc["results"], fixture["results"]);
    let table = wirebench(&["report", "--dns", &id_arg, "--db", db.arg()]).await;
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(
        text.starts_with(&format!("DNS campaign {id} (complete")),
        "{text}"
    );
    let udp40 = &results[2];
    assert!(
        text.contains(&format!(
            "udp      40        200        {}        {}",
            udp40.counts.answered, udp40.counts.timeouts
        )),
        "{text}"
    );
    // The history lists it, with every result stored.
    let runs = wirebench(&["runs", "--db", db.arg()]).await;
    let listing = String::from_utf8(runs.stdout).unwrap();
    let row = listing
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{id} ")) && l.contains("over udp"))
        .unwrap_or_else(|| panic!("a DNS row: {listing}"));
    assert!(
        row.contains(&format!(
            "complete     {:>9}",
            format!("{0}/{0}", results.len())
        )),
        "{row}"
    );
    let bad = wirebench(&["report", "--dns", "99", "--db", db.arg()]).await;
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("no DNS campaign 99"));
}

/// The DNS lab: UDP, TCP and TCP with a new connection per query, three campaigns against one
/// resolver, make one `report --dns A B C`: one table whose rows say which transport (tcp/new
/// for a connection per query), each with the counts it stored.
#[tokio::test]
async fn report_dns_pools_udp_tcp_and_new_connection_campaigns_in_one_table() {
    let Some(ub) = super::Unbound::start() else {
        return;
    };
    tokio::time::timeout(crate::support::TEST_TIMEOUT, async {
        let db = TempPath::new(".sqlite3");
        let resolver = ub.addr().to_string();
        for extra in [
            &["--transport", "udp"][..],
            &["--transport", "tcp"],
            &["--transport", "tcp", "--new-connection"],
        ] {
            let mut args = vec![
                "dns",
                "--resolver",
                &resolver,
                "--name",
                "host.wb.test",
                "--count",
                "10",
                "--db",
                db.arg(),
            ];
            args.extend_from_slice(extra);
            let out = wirebench(&args).await;
            assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        }
        let out = wirebench(&["report", "--dns", "1", "2", "3", "--db", db.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("3 sweeps pooled"), "{text}");
        // The answers table: one row per campaign, 10 sent each.
        let mut kinds = Vec::new();
        for tr in ["udp", "tcp", "tcp/new"] {
            let rows: Vec<&str> = text
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(tr))
                .filter(|l| l.split_whitespace().nth(2) == Some("10"))
                .collect();
            assert!(!rows.is_empty(), "{tr}: {text}");
            kinds.push(rows.len());
        }
        assert_eq!(kinds, [1, 1, 1], "{text}");
    })
    .await
    .expect("in time");
}
