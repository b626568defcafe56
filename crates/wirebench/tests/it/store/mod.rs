//! The results store: migrations from an old-version fixture, refusal of foreign or newer
//! databases without changing them, every finished run stored by `run`, Ctrl-C after k runs,
//! and the history commands (runs, show, export, import).

mod interrupt;
mod migrations;
mod postgres;
mod runs;

use wirebench::store::Store;
use wirebench_core::record::{Parameters, Status};

use crate::support::TempPath;
use wirebench::store::run::Run;

pub(super) const V1_FIXTURE: &str = include_str!("../../fixtures/store-v1.sql");

pub(super) fn parameters() -> Parameters {
    serde_json::from_value(serde_json::json!({
        "server": "embedded 127.0.0.1:1", "embedded_server": true,
        "protocols": ["tcp"], "mechanisms": ["stream"], "msg_size": 1000,
        "total_bytes": 10000, "repeat": 2, "rto_us": null, "rate_bps": null, "grace_us": 250000
    }))
    .expect("parameters")
}

/// The first run of the V1 fixture: a real run record.
pub(super) fn fixture_run() -> (
    wirebench_core::vocab::sweep::Point,
    wirebench_core::record::RunRecord,
) {
    let f = TempPath::new(".sqlite3");
    rusqlite::Connection::open(&f.0)
        .and_then(|c| c.execute_batch(V1_FIXTURE))
        .unwrap();
    let fixture = Store::open(&f.0).unwrap();
    fixture.runs(1).unwrap().remove(0)
}

pub(super) fn runs_of(db: impl Into<wirebench::store::Location>, id: i64) -> (Status, usize) {
    let store = Store::open(db).unwrap();
    let c = store.campaign::<Run>(id).unwrap().expect("campaign stored");
    (c.status, store.runs(id).unwrap().len())
}
