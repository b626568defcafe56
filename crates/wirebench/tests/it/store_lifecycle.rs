//! One campaign lifecycle for every kind (run, rr, ping, dns, rpm, latency), against SQLite and a
//! throw-away PostgreSQL: each kind moves between stores whole and once (`store copy`,
//! `export`/`import`), an unfinished campaign is brought up to date when its finished version
//! arrives (in-process, and with a real `run` copied and exported while it runs), `ping` is
//! stored as an rr-like sweep, and a version-8 store keeps its sweeps through version 9.

use serde_json::Value;
use wirebench::store::dns::Dns;
use wirebench::store::kind::Kind;
use wirebench::store::latency::Latency;
use wirebench::store::lifecycle::Merged;
use wirebench::store::rpm::Rpm;
use wirebench::store::rr::{Ping, Rr};
use wirebench::store::run::Run;
use wirebench::store::{schema, Store};
use wirebench_core::machine::responsiveness::RpmResult;
use wirebench_core::record::dns::{DnsResult, NewDnsCampaign};
use wirebench_core::record::lifecycle::{CampaignDocument, CampaignKind, StoredRun};
use wirebench_core::record::load_phases::{LoadPhasesResult, NewLatencyCampaign};
use wirebench_core::record::rpm::NewRpmCampaign;
use wirebench_core::record::rr::{NewRrCampaign, RrResult};
use wirebench_core::record::{Environment, NewCampaign, Status};

use crate::cli::{stderr, wirebench};
use crate::postgres::{backends, TestDb};
use crate::support::TempPath;

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn rr_plan(planned: u64) -> NewRrCampaign {
    NewRrCampaign {
        started_at_unix_s: 1_700_000_000,
        server: "embedded 127.0.0.1:40000".into(),
        protocols: "udp,tcp".into(),
        concurrency: "1,8,32".into(),
        request_bytes: 64,
        response_bytes: 512,
        flows: 2,
        planned_results: planned,
        host_name: Some("testhost".into()),
        wirebench_version: "0.1.0".into(),
    }
}

fn rr_results() -> Vec<RrResult> {
    serde_json::from_value(fixture("rr-sweep.json")["results"].clone()).unwrap()
}

fn dns_plan() -> NewDnsCampaign {
    NewDnsCampaign {
        started_at_unix_s: 1_700_000_100,
        resolver: "127.0.0.1:5354".into(),
        name: "host.example.test.".into(),
        record_type: "A".into(),
        transports: "udp,tcp".into(),
        concurrency: "1,10,40".into(),
        planned_results: 6,
        host_name: Some("testhost".into()),
        wirebench_version: "0.1.0".into(),
    }
}

fn dns_results() -> Vec<DnsResult> {
    serde_json::from_value(fixture("dns-sweep.json")["results"].clone()).unwrap()
}

fn rpm_plan_and_result() -> (NewRpmCampaign, RpmResult) {
    let doc = fixture("rpm-campaign.json");
    (
        serde_json::from_value(doc["campaign"].clone()).unwrap(),
        serde_json::from_value(doc["result"].clone()).unwrap(),
    )
}

fn latency_plan_and_result() -> (NewLatencyCampaign, LoadPhasesResult) {
    let doc = fixture("latency-campaign.json");
    (
        serde_json::from_value(doc["campaign"].clone()).unwrap(),
        serde_json::from_value(doc["result"].clone()).unwrap(),
    )
}

/// The runs of the export fixture, as stored results.
fn run_plan_and_runs() -> (NewCampaign, Vec<StoredRun>) {
    let doc = fixture("campaign-export.json");
    let runs: Vec<wirebench_core::record::RunRecord> =
        serde_json::from_value(doc["runs"].clone()).unwrap();
    let point = wirebench_core::vocab::sweep::Point {
        msg_size: doc["parameters"]["msg_size"].as_u64().unwrap() as u32,
        total_bytes: doc["parameters"]["total_bytes"].as_u64().unwrap(),
    };
    let plan = NewCampaign {
        started_at_unix_s: 1_700_000_200,
        parameters: serde_json::from_value(doc["parameters"].clone()).unwrap(),
        planned_runs: runs.len() as u64,
        msg_sizes: vec![point.msg_size],
        totals: vec![point.total_bytes],
        environment: Environment::default(),
    };
    let runs = runs
        .into_iter()
        .map(|run| StoredRun::Finished {
            point,
            run: Box::new(run),
        })
        .collect();
    (plan, runs)
}

/// Begins a campaign of kind `K`, records `results` (the first `upto` of them), and ends it
/// complete unless `upto` stopped short; its id.
fn store_kind<K: Kind>(store: &Store, plan: &K::Plan, results: &[K::Result], upto: usize) -> i64 {
    let id = store.begin::<K>(plan).unwrap().id;
    for (i, r) in results.iter().take(upto).enumerate() {
        store.record::<K>(id, i as u64 + 1, r).unwrap();
    }
    if upto >= results.len() {
        store
            .finish::<K>(id, Status::Complete, 1_800_000_000, None)
            .unwrap();
    }
    id
}

/// One campaign of every kind, finished, in `store`.
fn one_of_each(store: &Store) {
    let (run_plan, runs) = run_plan_and_runs();
    store_kind::<Run>(store, &run_plan, &runs, runs.len());
    let rr = rr_results();
    store_kind::<Rr>(store, &rr_plan(6), &rr, rr.len());
    store_kind::<Ping>(store, &rr_plan(1), &rr[..1], 1);
    let dns = dns_results();
    store_kind::<Dns>(store, &dns_plan(), &dns, dns.len());
    let (rpm_plan, rpm) = rpm_plan_and_result();
    store_kind::<Rpm>(store, &rpm_plan, &[rpm], 1);
    let (latency_plan, latency) = latency_plan_and_result();
    store_kind::<Latency>(store, &latency_plan, &[latency], 1);
}

/// Campaign `id`'s document with its store id and tool version set aside.
fn comparable<K: Kind>(store: &Store, id: i64) -> Value {
    let mut doc = serde_json::to_value(store.document::<K>(id).unwrap().expect("stored")).unwrap();
    doc["campaign"]["id"] = Value::Null;
    doc["tool"] = Value::Null;
    doc
}

/// Every kind goes into another store whole (the same document, uid and all) and once: a
/// second copy skips all five, and an export imported twice is refused the second time.
#[test]
fn every_kind_moves_between_stores_whole_and_once() {
    let source = TestDb::sqlite();
    one_of_each(&source.open());
    let from = source.open();
    for to in backends() {
        let mut dest = to.open();
        let n = dest.copy_from(&from).unwrap();
        for kind in CampaignKind::ALL {
            assert_eq!((n.of(kind).copied, n.of(kind).skipped), (1, 0), "{kind:?}");
        }
        let n = dest.copy_from(&from).unwrap();
        assert_eq!((n.skipped(), n.updated()), (6, 0), "{}", to.name());
        // Ids are the destination's: rr and ping share one sequence there as here.
        assert_eq!(comparable::<Run>(&dest, 1), comparable::<Run>(&from, 1));
        assert_eq!(comparable::<Rr>(&dest, 1), comparable::<Rr>(&from, 1));
        assert_eq!(comparable::<Ping>(&dest, 2), comparable::<Ping>(&from, 2));
        assert_eq!(comparable::<Dns>(&dest, 1), comparable::<Dns>(&from, 1));
        assert_eq!(comparable::<Rpm>(&dest, 1), comparable::<Rpm>(&from, 1));
        assert_eq!(
            comparable::<Latency>(&dest, 1),
            comparable::<Latency>(&from, 1)
        );
        // export --rr/--dns/--rpm and import: the same merge.
        let third_db = to.another();
        let third = third_db.open();
        for (kind, id) in [
            (CampaignKind::Rr, 1),
            (CampaignKind::Ping, 2),
            (CampaignKind::Dns, 1),
            (CampaignKind::Rpm, 1),
            (CampaignKind::Latency, 1),
        ] {
            let text = from.document_text(kind, id).unwrap().expect("exported");
            let (got, merged) = third.merge_text(&text, Some("import"), false).unwrap();
            assert_eq!(got, kind);
            assert!(matches!(merged, Merged::New(_)), "{kind:?}: {merged:?}");
            let (_, again) = third.merge_text(&text, Some("import"), false).unwrap();
            assert!(
                matches!(again, Merged::AlreadyThere(_)),
                "{kind:?}: {again:?}"
            );
        }
        assert_eq!(third.results::<Rr>(1).unwrap().len(), 6);
        assert_eq!(
            third.campaign::<Ping>(2).unwrap().unwrap().kind,
            CampaignKind::Ping
        );
        assert_eq!(third.get::<Dns>(1).unwrap().unwrap().0.origin, "import");
    }
}

/// For every kind: a version taken while the campaign ran (two results), merged, is stored
/// running; its finished version brings the rest and its end (`Updated`, ended), exactly once;
/// a campaign that ended keeps its end when an older version arrives.
#[test]
fn an_unfinished_campaign_is_brought_up_to_date_by_its_finished_version() {
    for db in backends() {
        let source = TestDb::sqlite();
        let from = source.open();
        let (run_plan, runs) = run_plan_and_runs();
        let rr = rr_results();
        let dns = dns_results();
        let (rpm_plan, rpm) = rpm_plan_and_result();
        let to = db.open();
        up_to_date::<Run>(&from, &to, &run_plan, &runs);
        up_to_date::<Rr>(&from, &to, &rr_plan(6), &rr);
        up_to_date::<Dns>(&from, &to, &dns_plan(), &dns);
        // Two results need a plan of two: a merge refuses a campaign holding more results
        // than it planned (a real rpm campaign plans one).
        let two = NewRpmCampaign {
            planned_results: 2,
            ..rpm_plan
        };
        up_to_date::<Rpm>(&from, &to, &two, &[rpm.clone(), rpm]);
    }
}

fn up_to_date<K: Kind>(from: &Store, to: &Store, plan: &K::Plan, results: &[K::Result]) {
    let id = store_kind::<K>(from, plan, results, 1);
    let running: CampaignDocument<K::Plan, K::Result> = from.document::<K>(id).unwrap().unwrap();
    for r in results.iter().enumerate().skip(1) {
        from.record::<K>(id, r.0 as u64 + 1, r.1).unwrap();
    }
    from.finish::<K>(id, Status::Complete, 1_800_000_000, None)
        .unwrap();
    let done = from.document::<K>(id).unwrap().unwrap();
    let kind = K::KIND;
    let Merged::New(there) = to.merge::<K>(&running, None, false).unwrap() else {
        panic!("{kind:?}: new")
    };
    let (life, _) = to.get::<K>(there).unwrap().unwrap();
    assert_eq!((life.status, life.stored), (Status::Running, 1), "{kind:?}");
    let merged = to.merge::<K>(&done, None, false).unwrap();
    let more = results.len() as u64 - 1;
    assert_eq!(
        merged,
        Merged::Updated {
            id: there,
            added: more,
            ended: Some(Status::Complete)
        },
        "{kind:?}"
    );
    let (life, _) = to.get::<K>(there).unwrap().unwrap();
    assert_eq!(
        (life.status, life.stored, life.finished_at_unix_s),
        (Status::Complete, results.len() as u64, Some(1_800_000_000)),
        "{kind:?}"
    );
    assert_eq!(
        to.merge::<K>(&done, None, false).unwrap(),
        Merged::AlreadyThere(there)
    );
    assert_eq!(
        to.merge::<K>(&running, None, false).unwrap(),
        Merged::AlreadyThere(there),
        "{kind:?}: an older version changes nothing"
    );
    // --again: a campaign of its own, with a uid of its own.
    let Merged::New(copy) = to.merge::<K>(&done, None, true).unwrap() else {
        panic!("{kind:?}: again")
    };
    assert_ne!(copy, there);
    let (a, b) = (
        to.get::<K>(there).unwrap().unwrap().0,
        to.get::<K>(copy).unwrap().unwrap().0,
    );
    assert_ne!(a.uid, b.uid);
}

/// `store copy` and `export` while a real `run` is in progress, then again after it finished:
/// the copy and the import show it running, then complete with all six runs; importing the
/// finished export a second time is refused.
#[tokio::test]
async fn copy_and_import_mid_run_bring_the_campaign_up_to_date() {
    crate::support::within(async {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let src = TempPath::new(".sqlite3");
        let data_home = TempPath::new("-data");
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
            .args(["run", "--db", src.arg(), "--proto", "udp", "--rate", "20M"])
            .args(["-t", "1", "--repeat", "6"])
            .env("XDG_DATA_HOME", &data_home.0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("[1/6]") {
                break;
            }
        }
        // Five runs of a second each are still to come.
        let dests = backends();
        for to in &dests {
            let out = wirebench(&["store", "copy", "--from", src.arg(), "--to", to.arg()]).await;
            assert!(out.status.success(), "{}", stderr(&out));
        }
        let mid = TempPath::new(".json");
        let out = wirebench(&["export", "1", "--db", src.arg()]).await;
        std::fs::write(&mid.0, &out.stdout).unwrap();
        let imported = TempPath::new(".sqlite3");
        let out = wirebench(&["import", mid.arg(), "--db", imported.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        for store in dests
            .iter()
            .map(TestDb::open)
            .chain([Store::open(&imported.0).unwrap()])
        {
            let c = store.campaign::<Run>(1).unwrap().unwrap();
            assert_eq!(c.status, Status::Running);
            assert!((1..6).contains(&c.stored_runs), "{c:?}");
        }
        while lines.next_line().await.ok().flatten().is_some() {}
        assert!(child.wait().await.unwrap().success());
        let end = TempPath::new(".json");
        let out = wirebench(&["export", "1", "--db", src.arg()]).await;
        std::fs::write(&end.0, &out.stdout).unwrap();
        let mut original: Value = serde_json::from_slice(&out.stdout).unwrap();
        original["campaign"]["id"] = Value::Null;
        for to in &dests {
            let out = wirebench(&["store", "copy", "--from", src.arg(), "--to", to.arg()]).await;
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(said.contains("; 1 brought up to date"), "{said}");
            let out = wirebench(&["export", "1", "--db", to.arg()]).await;
            let mut copied: Value = serde_json::from_slice(&out.stdout).unwrap();
            copied["campaign"]["id"] = Value::Null;
            assert_eq!(copied, original, "{}", to.name());
        }
        let out = wirebench(&["import", end.arg(), "--db", imported.arg()]).await;
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            said.contains("brought campaign 1 in") && said.contains("now complete"),
            "{said}"
        );
        let c = Store::open(&imported.0)
            .unwrap()
            .campaign::<Run>(1)
            .unwrap()
            .unwrap();
        assert_eq!((c.status, c.stored_runs), (Status::Complete, 6));
        let out = wirebench(&["import", end.arg(), "--db", imported.arg()]).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("is already in"), "{}", stderr(&out));
    })
    .await
}

/// `ping --db` stores its results as a ping sweep: `runs` lists it, `report --rr ID` renders
/// it, `export --rr ID` writes it as a ping document, and --help says so.
#[tokio::test]
async fn ping_is_stored_as_an_rr_like_sweep() {
    crate::support::within(async {
        for db in backends() {
            let out = wirebench(&["ping", "-c", "5", "--db", db.arg()]).await;
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{}", stderr(&out));
            assert!(text.contains("stored as ping sweep 1 in "), "{text}");
            let store = db.open();
            let info = store.campaign::<Ping>(1).unwrap().expect("stored");
            assert_eq!(
                (info.kind, info.status),
                (CampaignKind::Ping, Status::Complete)
            );
            let results = store
                .results::<Rr>(1)
                .unwrap()
                .into_iter()
                .map(|r| r.result)
                .collect::<Vec<_>>();
            assert_eq!(results.len(), 1);
            assert_eq!((results[0].sent, results[0].answered), (5, 5));
            let runs = wirebench(&["runs", "--db", db.arg()]).await;
            let listed = String::from_utf8_lossy(&runs.stdout);
            assert!(listed.contains("RR ") && listed.contains("1/1"), "{listed}");
            // Listed and reported as the ping it was, not as an rr sweep.
            assert!(
                listed.lines().any(|l| l.contains("ping: 64 B probes")),
                "{listed}"
            );
            let report = wirebench(&["report", "--rr", "1", "--db", db.arg()]).await;
            assert!(report.status.success(), "{}", stderr(&report));
            let shown = String::from_utf8_lossy(&report.stdout);
            assert!(
                shown.contains("ping sweep 1") && !shown.contains("rr sweep"),
                "{shown}"
            );
            let export = wirebench(&["export", "--rr", "1", "--db", db.arg()]).await;
            let doc: Value = serde_json::from_slice(&export.stdout).expect("a document");
            assert_eq!(doc["kind"], "ping");
            assert_eq!(doc["results"][0]["result"]["sent"], 5);
        }
        let help = wirebench(&["ping", "--help"]).await;
        let help = String::from_utf8_lossy(&help.stdout);
        assert!(
            help.contains("--db") && help.contains("--no-store"),
            "{help}"
        );
    })
    .await
}

/// A store at schema version 8 with a DNS campaign (whose table version 9 rebuilds), an rr
/// sweep and an rpm campaign opens at version 9 with all three readable as they were, as
/// `rr` sweeps without a uid, and a second copy of it duplicates nothing (found by their
/// start, plan and host).
#[test]
fn a_version_8_store_keeps_its_sweeps_through_version_9() {
    let db = TempPath::new(".sqlite3");
    let conn = rusqlite::Connection::open(&db.0).unwrap();
    for m in &schema::MIGRATIONS[..8] {
        conn.execute_batch(m.sqlite).unwrap();
    }
    conn.execute_batch(&format!(
        "PRAGMA user_version = 8;
         INSERT INTO dns_campaign (started_at_unix_s, finished_at_unix_s, status, resolver, name,
             record_type, transports, concurrency, planned_results, host_name, wirebench_version)
         VALUES (1700000000, 1700000060, 'aborted', '127.0.0.1:53', 'a.test.', 'A', 'udp', '1', 2,
             'h', '0.1.0');
         INSERT INTO dns_result (campaign_id, position, transport, concurrency, sent, answered,
             timeouts, result_json)
         VALUES (1, 1, 'udp', 1, 10, 9, 1, '{dns}');
         INSERT INTO rr_campaign (started_at_unix_s, status, server, protocols, concurrency,
             request_bytes, response_bytes, flows, planned_results, host_name, wirebench_version)
         VALUES (1700000100, 'running', 's', 'udp', '1', 64, 512, 1, 1, 'h', '0.1.0');",
        dns = serde_json::to_string(&dns_results()[0])
            .unwrap()
            .replace('\'', "''"),
    ))
    .unwrap();
    drop(conn);
    let store = Store::open(&db.0).unwrap();
    assert_eq!(store.schema_version().unwrap(), schema::CURRENT_VERSION);
    let (life, plan) = store.get::<Dns>(1).unwrap().expect("the DNS campaign");
    assert_eq!(
        (life.status, life.stored, life.uid),
        (Status::Aborted, 1, None)
    );
    assert_eq!(
        (plan.name.as_str(), life.origin.as_str()),
        ("a.test.", "run")
    );
    assert_eq!(store.results::<Dns>(1).unwrap().len(), 1);
    let rr = store.campaign::<Rr>(1).unwrap().expect("the rr sweep");
    assert_eq!((rr.kind, rr.status), (CampaignKind::Rr, Status::Running));
    let copy_db = TestDb::sqlite();
    let mut copy = copy_db.open();
    assert_eq!(
        copy.copy_from(&store).unwrap().of(CampaignKind::Dns).copied,
        1
    );
    let again = copy.copy_from(&store).unwrap();
    assert_eq!((again.skipped(), again.updated()), (2, 0));
}
