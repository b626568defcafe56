//! PostgreSQL stores: newer, foreign and bad URLs refused, eight processes writing at once, and
//! `store copy` to PostgreSQL and back.

use serde_json::Value;
use wirebench::store::writer::this_process;
use wirebench::store::Store;
use wirebench_core::record::{Environment, NewCampaign, Status};

use super::{fixture_run, parameters};
use crate::cli::{stderr, wirebench};
use crate::postgres::TestDb;
use crate::support::{TempPath, TEST_TIMEOUT};
use wirebench::store::run::Run;
use wirebench_core::record::lifecycle::StoredRun;
use wirebench_core::record::AbortedRun;
use wirebench_core::record::RunRecord;

/// A PostgreSQL database written by a newer wirebench, or holding someone else's tables, is
/// refused on one line and left as it was; a bad URL is a usage error before anything runs.
#[tokio::test]
async fn postgres_newer_foreign_and_bad_urls_are_refused() {
    crate::support::within(async {
        for (url, expect) in [
            (
                "postgres://wb@127.0.0.1:notaport/db",
                "not a PostgreSQL URL",
            ),
            (
                "mysql://wb@127.0.0.1/db",
                "expected a file path or a postgres://",
            ),
        ] {
            let out = wirebench(&["runs", "--db", url]).await;
            assert_eq!(out.status.code(), Some(2), "{url}: {}", stderr(&out));
            assert!(stderr(&out).contains(expect), "{url}: {}", stderr(&out));
            assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
        }
        let Some(db) = TestDb::postgres() else { return };
        let (name, cluster) = db.pg().expect("a PostgreSQL store");
        let newer = db.another();
        let (newer_name, _) = newer.pg().expect("pg");
        cluster.sql(
            newer_name,
            "CREATE TABLE wirebench_schema (version BIGINT NOT NULL);
         INSERT INTO wirebench_schema VALUES (99);",
        );
        cluster.sql(
            name,
            "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine');",
        );
        for (db, expect) in [
            (&newer, "newer than this wirebench"),
            (&db, "not a wirebench results store"),
        ] {
            let err = format!("{:#}", Store::open(db.location()).err().expect("refused"));
            assert!(err.contains("cannot open results database"), "{err}");
            assert!(err.contains(expect), "{err}");
            assert!(!err.contains('\n'), "one line: {err}");
            let out = wirebench(&["runs", "--db", db.arg()]).await;
            assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
            assert!(stderr(&out).contains(expect), "{}", stderr(&out));
        }
        let (newer_name, _) = newer.pg().expect("pg");
        assert_eq!(
            cluster.ints(newer_name, "SELECT version FROM wirebench_schema"),
            [99],
            "unchanged"
        );
        assert_eq!(
            cluster.ints(
                name,
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            ),
            [1],
            "no table added beside the foreign one"
        );
        // Nobody listens on a closed port: one line, exit status 1, no hang.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let out = wirebench(&["runs", "--db", &format!("postgres://wb@127.0.0.1:{port}/x")]).await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot open results database"),
            "{}",
            stderr(&out)
        );
        assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
    })
    .await
}

/// Eight `wirebench run` processes write to one PostgreSQL database at once (the first opens
/// of a new database migrate it under a lock): every campaign and every run is there, complete,
/// with distinct ids and this host as the measuring host; WIREBENCH_DB names the store.
#[tokio::test]
async fn eight_processes_write_campaigns_to_one_postgres_at_once() {
    crate::support::within(async {
        let Some(db) = TestDb::postgres() else { return };
        let started = std::time::Instant::now();
        let writers: Vec<_> = (0..8)
            .map(|_| {
                let data_home = TempPath::new("-data");
                let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wirebench"))
                    .args(["run", "--proto", "tcp,udp", "-l", "1000", "-n", "20000"])
                    .args(["--repeat", "2"])
                    .env("WIREBENCH_DB", db.arg())
                    .env("XDG_DATA_HOME", &data_home.0)
                    .kill_on_drop(true)
                    .output();
                (data_home, child)
            })
            .collect();
        let mut outputs = Vec::new();
        for (_home, child) in writers {
            let out = tokio::time::timeout(TEST_TIMEOUT, child)
                .await
                .expect("in time")
                .expect("ran");
            assert!(out.status.success(), "{}", stderr(&out));
            outputs.push(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let store = db.open();
        let campaigns = store
            .campaigns::<Run>()
            .unwrap()
            .into_iter()
            .map(|(c, _)| c)
            .collect::<Vec<_>>();
        assert_eq!(campaigns.len(), 8);
        let mut ids: Vec<i64> = campaigns.iter().map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 8, "distinct campaign ids");
        let host = this_process().host;
        for c in &campaigns {
            assert_eq!(
                (c.status, c.stored_runs, c.planned_runs),
                (Status::Complete, 4, 4)
            );
            assert_eq!(c.environment.host_name, host, "the measuring host");
            assert!(
                outputs
                    .iter()
                    .filter(
                        |o| o.contains(&format!("stored as campaign {} (4 runs, complete)", c.id))
                    )
                    .count()
                    == 1,
                "each writer got its own id: {outputs:?}"
            );
        }
        let (name, cluster) = db.pg().expect("pg");
        assert_eq!(cluster.ints(name, "SELECT count(*) FROM run"), [32]);
        assert_eq!(
            cluster.ints(name, "SELECT count(DISTINCT id) FROM run"),
            [32]
        );
        assert_eq!(
            cluster.ints(
                name,
                "SELECT count(DISTINCT (campaign_id, position)) FROM run"
            ),
            [32]
        );
        eprintln!(
            "8 writers, 8 campaigns, 32 runs in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    })
    .await
}

/// `store copy` moves a campaign (finished and aborted runs) from SQLite into PostgreSQL and
/// back: the exported documents are the same, and a second copy copies nothing.
#[tokio::test]
async fn store_copy_moves_history_to_postgres_and_back() {
    crate::support::within(async {
        let Some(pg) = TestDb::postgres() else { return };
        let sqlite = TestDb::sqlite();
        let out = wirebench(&["run", "--db", sqlite.arg(), "-l", "1000", "-n", "20000"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        {
            let store = sqlite.open();
            let id = store
                .begin::<Run>(&NewCampaign {
                    started_at_unix_s: 1_700_000_000,
                    parameters: parameters(),
                    planned_runs: 2,
                    msg_sizes: vec![1000],
                    totals: vec![10_000],
                    environment: Environment::default(),
                })
                .unwrap()
                .id;
            let (point, run) = fixture_run();
            store
                .record::<Run>(id, 1, &StoredRun::finished(point, RunRecord::clone(&run)))
                .unwrap();
            let params = serde_json::from_value(serde_json::json!({
                "protocol": "tcp", "mechanism": "stream", "msg_size": 1000, "total_bytes": 10000,
                "rto_us": null, "rate_bps": null, "grace_us": 250000
            }))
            .expect("session parameters");
            let aborted = wirebench_core::record::AbortedRun {
                position: 2,
                repeat_index: 1,
                params,
            };
            let so_far = wirebench_core::record::campaign::SoFar {
                messages: 3,
                bytes: 3000,
                elapsed: std::time::Duration::from_millis(5),
            };
            store
                .record::<Run>(
                    id,
                    aborted.position,
                    &StoredRun::aborted(AbortedRun::clone(&aborted), "SIGTERM", Some(so_far)),
                )
                .unwrap();
            store
                .finish::<Run>(id, Status::Aborted, 1_700_000_010, Some("stopped"))
                .unwrap();
        }
        let copy = |from: &TestDb, to: &TestDb| {
            let (from, to) = (from.arg().to_string(), to.arg().to_string());
            async move { wirebench(&["store", "copy", "--from", &from, "--to", &to]).await }
        };
        let out = copy(&sqlite, &pg).await;
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{said}{}", stderr(&out));
        assert!(said.contains("copied 2 campaign(s)"), "{said}");
        assert!(said.contains("0 already there"), "{said}");
        let out = copy(&sqlite, &pg).await;
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            said.contains("copied 0 campaign(s)") && said.contains("2 already there"),
            "{said}"
        );
        let back = TestDb::sqlite();
        let out = wirebench(&["store", "migrate", "--from", pg.arg(), "--to", back.arg()]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        for id in ["1", "2"] {
            let mut docs = Vec::new();
            for db in [&sqlite, &pg, &back] {
                let out = wirebench(&["export", id, "--db", db.arg()]).await;
                assert!(out.status.success(), "{}", stderr(&out));
                let mut doc: Value = serde_json::from_slice(&out.stdout).unwrap();
                doc["campaign"]["id"] = Value::Null;
                docs.push(doc);
            }
            assert_eq!(docs[0], docs[1], "campaign {id} in PostgreSQL");
            assert_eq!(docs[0], docs[2], "campaign {id} back in SQLite");
        }
        let (a, b) = (sqlite.open(), back.open());
        assert_eq!(a.aborted_details(2).unwrap(), b.aborted_details(2).unwrap());
        let out = wirebench(&["store", "copy", "--from", pg.arg(), "--to", pg.arg()]).await;
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    })
    .await
}
