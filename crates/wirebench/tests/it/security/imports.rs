//! Issue 37: `import` believes nothing a file says that cannot be true. A real campaign is
//! measured and exported; each tampered copy of its document is refused with the reason and
//! stores nothing, while the untouched document imports.

use serde_json::Value;

use crate::cli::{stderr, wirebench};
use crate::support::TempPath;

/// What a case is called, how it changes the document, and what the refusal must say.
type Tamper = (&'static str, fn(&mut Value), &'static str);

/// The export of a fresh one-run campaign, as JSON.
async fn exported_campaign() -> Value {
    let db = TempPath::new(".sqlite3");
    let out = wirebench(&["run", "--db", db.arg(), "-n", "100000"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wirebench(&["export", "1", "--db", db.arg()]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("an export is JSON")
}

/// Imports `doc` into a new store; the exit status, stderr and the campaigns `runs` lists.
async fn import(doc: &Value) -> (Option<i32>, String, usize) {
    let file = TempPath::new(".json");
    std::fs::write(&file.0, serde_json::to_vec(doc).unwrap()).unwrap();
    let db = TempPath::new(".sqlite3");
    let out = wirebench(&["import", file.arg(), "--db", db.arg()]).await;
    let listed = if db.0.exists() {
        let runs = wirebench(&["runs", "--db", db.arg()]).await;
        String::from_utf8_lossy(&runs.stdout)
            .lines()
            .count()
            .saturating_sub(1)
    } else {
        0
    };
    (out.status.code(), stderr(&out), listed)
}

#[tokio::test]
async fn an_import_of_figures_that_cannot_be_true_is_refused_whole() {
    crate::support::within(async {
        let doc = exported_campaign().await;
        let (code, err, listed) = import(&doc).await;
        assert_eq!(
            (code, listed),
            (Some(0), 1),
            "the untouched export imports: {err}"
        );
        let tamper: [Tamper; 7] = [
            (
                "server bytes x10",
                |d| {
                    let b = d["runs"][0]["server"]["bytes"].as_u64().unwrap();
                    d["runs"][0]["server"]["bytes"] = (b * 10).into();
                },
                "but its client sent",
            ),
            (
                "a host name holding ESC",
                |d| d["campaign"]["environment"]["host_name"] = "vm\u{1b}[2J".into(),
                "control or bidirectional character",
            ),
            (
                "a uid that is a path",
                |d| d["campaign"]["uid"] = "../../x".into(),
                "is not a token",
            ),
            (
                "a complete campaign with a run its server aborted",
                |d| {
                    d["runs"][0]["server"]["aborted"] = true.into();
                    d["runs"][0]["server"]["abort_reason"] = "--max-bytes".into();
                },
                "stopped in flight",
            ),
            (
                "negative seconds",
                |d| d["runs"][0]["client"]["seconds"] = (-1.0).into(),
                "time is -1 s",
            ),
            (
                "planned 0",
                |d| d["campaign"]["planned_runs"] = 0.into(),
                "outside its plan of 0",
            ),
            (
                "an end before the start",
                |d| {
                    let s = d["campaign"]["started_at_unix_s"].as_i64().unwrap();
                    d["campaign"]["finished_at_unix_s"] = (s - 3600).into();
                },
                "before it started",
            ),
        ];
        for (what, change, said) in tamper {
            let mut bad = doc.clone();
            change(&mut bad);
            let (code, err, listed) = import(&bad).await;
            assert_ne!(code, Some(0), "{what}: imported: {err}");
            assert!(err.contains(said), "{what}: {err}");
            assert_eq!(err.trim().lines().count(), 1, "{what}: one line: {err}");
            assert!(
                !err.contains('\u{1b}'),
                "{what}: the escape reached stderr raw"
            );
            assert_eq!(listed, 0, "{what}: something was stored");
        }
    })
    .await
}
