//! Opening a store: the V1 fixture migrated and still readable, runs committed one by one and
//! bad writes changing nothing, foreign, newer and broken databases refused unchanged, and only
//! dead writers' campaigns on this host marked interrupted.

use wirebench::store::writer::this_process;
use wirebench::store::{schema, Store};
use wirebench_core::record::campaign::Writer;
use wirebench_core::record::{Environment, NewCampaign, Status};

use super::{fixture_run, parameters, V1_FIXTURE};
use crate::postgres::{backends, TestDb};
use crate::support::TempPath;
use wirebench::store::run::Run;
use wirebench_core::record::lifecycle::StoredRun;
use wirebench_core::record::RunRecord;

#[test]
fn v1_fixture_is_migrated_and_still_readable() {
    let db = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&db.0)
        .and_then(|c| c.execute_batch(V1_FIXTURE))
        .expect("fixture loads");
    let store = Store::open(&db.0).expect("v1 store opens");
    assert_eq!(store.schema_version().unwrap(), schema::CURRENT_VERSION);
    let campaigns = store
        .campaigns::<Run>()
        .unwrap()
        .into_iter()
        .map(|(c, _)| c)
        .collect::<Vec<_>>();
    assert_eq!(campaigns.len(), 1);
    let c = &campaigns[0];
    assert_eq!(
        (
            c.id,
            c.status,
            c.stored_runs,
            c.planned_runs,
            c.aborted_runs
        ),
        (1, Status::Complete, 2, 2, 0)
    );
    assert_eq!(c.origin, "run", "v2 fills in the origin of old campaigns");
    assert_eq!(c.environment.host_name.as_deref(), Some("fixture-host"));
    assert_eq!(c.environment.rmem_max_bytes, Some(212_992));
    let runs = store.runs(1).unwrap();
    let names: Vec<String> = runs
        .iter()
        .map(|(p, r)| format!("{} {} {}", r.protocol, r.mechanism, p.msg_size))
        .collect();
    assert_eq!(names, ["tcp saw 1000", "udp saw 1000"]);
    assert_eq!(runs[0].1.client.bytes, 10_000);
    assert_eq!(runs[1].1.server.bytes, 10_000);
    assert_eq!(
        (c.msg_sizes.as_slice(), c.totals.as_slice()),
        (&[1000][..], &[10_000][..])
    );
    drop(store);
    // Opening again is a no-op: nothing is migrated twice.
    let store = Store::open(&db.0).expect("reopens");
    assert_eq!(
        store
            .campaigns::<Run>()
            .unwrap()
            .into_iter()
            .map(|(c, _)| c)
            .collect::<Vec<_>>()
            .len(),
        1
    );
}

#[test]
fn runs_are_committed_one_by_one_and_bad_writes_change_nothing() {
    for db in backends() {
        runs_are_committed_one_by_one(&db);
    }
}

fn runs_are_committed_one_by_one(db: &TestDb) {
    let store = db.open();
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
    assert_eq!(
        store.campaign::<Run>(id).unwrap().unwrap().status,
        Status::Running
    );
    let (point, run) = fixture_run();
    store
        .record::<Run>(id, 1, &StoredRun::finished(point, RunRecord::clone(&run)))
        .unwrap();
    // A second run at the same position is refused and leaves the first as it was.
    assert!(store
        .record::<Run>(id, 1, &StoredRun::finished(point, RunRecord::clone(&run)))
        .is_err());
    // A run for a campaign that does not exist is refused.
    assert!(store
        .record::<Run>(
            id + 7,
            1,
            &StoredRun::finished(point, RunRecord::clone(&run))
        )
        .is_err());
    assert_eq!(store.runs(id).unwrap(), vec![(point, run.clone())]);
    store
        .finish::<Run>(id, Status::Aborted, 1_700_000_100, Some("interrupted"))
        .unwrap();
    drop(store);
    let store = db.open();
    let c = store.campaign::<Run>(id).unwrap().unwrap();
    assert_eq!((c.status, c.stored_runs), (Status::Aborted, 1));
    assert_eq!(c.error.as_deref(), Some("interrupted"));
    assert_eq!(c.finished_at_unix_s, Some(1_700_000_100));
    assert_eq!(store.last_id::<Run>().unwrap(), Some(id));
    assert!(store.campaign::<Run>(id + 1).unwrap().is_none());
}

#[test]
fn foreign_newer_and_broken_databases_are_refused_unchanged() {
    let newer = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&newer.0)
        .and_then(|c| c.execute_batch("PRAGMA user_version = 99; CREATE TABLE x (y);"))
        .unwrap();
    let foreign = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&foreign.0)
        .and_then(|c| c.execute_batch("CREATE TABLE notes (text TEXT);"))
        .unwrap();
    let garbage = TempPath::new(".sqlite3");
    std::fs::write(&garbage.0, b"this is not a database, it is a text file\n").unwrap();
    for (db, expect) in [
        (&newer, "newer than this wirebench"),
        (&foreign, "not a wirebench results store"),
        (&garbage, "not a database"),
    ] {
        let before = std::fs::read(&db.0).unwrap();
        let err = format!("{:#}", Store::open(&db.0).err().expect("refused"));
        assert!(err.contains("cannot open results database"), "{err}");
        assert!(err.contains(expect), "{err}");
        assert!(!err.contains('\n'), "one line: {err}");
        assert_eq!(
            std::fs::read(&db.0).unwrap(),
            before,
            "{err}: file unchanged"
        );
    }
}

/// Only campaigns left `running` by a dead writer on this host become `interrupted`: a live
/// writer's, another host's, and one without a recorded writer (older stores, imports) stay
/// as they are; the V1 fixture's runs survive the V6 table rebuild.
#[test]
fn only_campaigns_of_dead_writers_on_this_host_become_interrupted() {
    let db = TestDb::sqlite();
    rusqlite::Connection::open(db.arg())
        .and_then(|c| c.execute_batch(V1_FIXTURE))
        .expect("fixture loads");
    dead_writers_are_marked(&db, 1);
    // PostgreSQL: the same rules, with one finished campaign stored first.
    if let Some(db) = TestDb::postgres() {
        let store = db.open();
        let id = store
            .begin::<Run>(&NewCampaign {
                started_at_unix_s: 1_600_000_000,
                parameters: parameters(),
                planned_runs: 1,
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
        store
            .finish::<Run>(id, Status::Complete, 1_600_000_001, None)
            .unwrap();
        drop(store);
        dead_writers_are_marked(&db, id);
    }
}

/// Begins five running campaigns (a live writer, another host's, an unknown one, a dead
/// one, one of another boot) in `db`, whose campaign `finished` is complete with runs, and
/// checks what the next open marks.
fn dead_writers_are_marked(db: &TestDb, finished: i64) {
    let mut store = db.open();
    let fixture_runs = store.runs(finished).unwrap().len();
    assert!(fixture_runs > 0);
    let me = this_process();
    let dead_pid = {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    };
    let mut begin = |writer: Option<Writer>| {
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
        if let Some(w) = writer {
            store.claim_campaign(id, &w).unwrap();
        }
        id
    };
    let live = begin(Some(me.clone()));
    let elsewhere = begin(Some(Writer {
        pid: dead_pid,
        host: Some("another-host.invalid".into()),
        boot_id: None,
    }));
    let unknown = begin(None);
    let dead = begin(Some(Writer {
        pid: dead_pid,
        ..me.clone()
    }));
    let rebooted = begin(Some(Writer {
        boot_id: Some("a-previous-boot".into()),
        ..me.clone()
    }));
    drop(store);
    // The next open marks them.
    let store = db.open();
    let status = |id| store.campaign::<Run>(id).unwrap().unwrap().status;
    assert_eq!(status(live), Status::Running, "this process is alive");
    assert_eq!(
        status(elsewhere),
        Status::Running,
        "another host's pid says nothing here"
    );
    assert_eq!(status(unknown), Status::Running, "no writer recorded");
    if me.host.is_some() {
        assert_eq!(status(dead), Status::Interrupted);
        let why = store
            .campaign::<Run>(dead)
            .unwrap()
            .unwrap()
            .error
            .unwrap_or_default();
        assert!(why.contains(&format!("pid {dead_pid}")), "{why}");
        if me.boot_id.is_some() {
            assert_eq!(
                status(rebooted),
                Status::Interrupted,
                "a pid of another boot"
            );
        }
    }
    assert_eq!(
        store.runs(finished).unwrap().len(),
        fixture_runs,
        "{}: runs kept by the V6 rebuild",
        db.name()
    );
    assert_eq!(status(finished), Status::Complete);
}
