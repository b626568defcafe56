//! `wirebench compare`: an injected 2× slowdown is flagged as a significant regression and
//! fails the check; two identical campaigns are not flagged.

use serde_json::Value;

use crate::cli::{stderr, wirebench};
use crate::support::TempPath;

/// A campaign export with six runs per configuration whose client times are `base × (1 + 2% i)`
/// times `factor`, built from the fixture's first run of each configuration.
fn campaign(factor: f64) -> Value {
    let text = include_str!("../fixtures/campaign-export.json");
    let mut doc: Value = serde_json::from_str(text).unwrap();
    let templates: Vec<Value> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["repeat_index"] == 0)
        .cloned()
        .collect();
    let mut runs = Vec::new();
    for template in templates {
        for i in 0..6u32 {
            let mut run = template.clone();
            // Above 1 ms, so every run is long enough to time.
            let base = template["client"]["seconds"].as_f64().unwrap().max(2e-3);
            let seconds = base * (1.0 + 0.02 * f64::from(i)) * factor;
            run["repeat_index"] = i.into();
            run["client"]["seconds"] = seconds.into();
            run["client"]["elapsed_ns"] = ((seconds * 1e9) as u64).into();
            runs.push(run);
        }
    }
    doc["runs"] = Value::Array(runs);
    doc["parameters"]["repeat"] = 6.into();
    doc["campaign"]["planned_runs"] = 24.into();
    doc
}

async fn import(db: &TempPath, doc: &Value) {
    let file = TempPath::new(".json");
    std::fs::write(&file.0, serde_json::to_vec(doc).unwrap()).unwrap();
    // The identical campaign is imported on purpose: --again.
    let out = wirebench(&["import", file.arg(), "--again", "--db", db.arg()]).await;
    assert!(out.status.success(), "{}", stderr(&out));
}

#[tokio::test]
async fn a_2x_slowdown_is_flagged_and_identical_campaigns_are_not() {
    let db = TempPath::new(".sqlite3");
    import(&db, &campaign(1.0)).await; // 1
    import(&db, &campaign(1.0)).await; // 2: identical
    import(&db, &campaign(2.0)).await; // 3: twice as slow

    let out = wirebench(&[
        "compare",
        "1",
        "2",
        "--fail-on-regression",
        "10",
        "--db",
        db.arg(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert_eq!(
        text.matches("no significant difference").count(),
        4,
        "{text}"
    );
    assert!(!text.contains("REGRESSION"), "{text}");
    assert!(text.contains("Mann–Whitney U"), "{text}");

    let out = wirebench(&[
        "compare",
        "1",
        "3",
        "--fail-on-regression",
        "10",
        "--db",
        db.arg(),
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert_eq!(text.matches("REGRESSION").count(), 4, "{text}");
    assert!(
        text.contains("slower (-50.0% goodput, +100.0% time)"),
        "{text}"
    );
    assert!(text.contains("0.500"), "goodput ratio B/A: {text}");

    // Without the threshold the difference is reported but the exit status stays 0; the other
    // way round B is faster.
    let out = wirebench(&["compare", "3", "1", "--db", db.arg()]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        text.matches("faster (+100.0% goodput, -50.0% time)")
            .count(),
        4,
        "{text}"
    );

    let out = wirebench(&["compare", "1", "9", "--db", db.arg()]).await;
    assert_eq!(
        out.status.code(),
        Some(2),
        "unknown campaign: {}",
        stderr(&out)
    );
    let out = wirebench(&[
        "compare",
        "1",
        "2",
        "--fail-on-regression",
        "-5",
        "--db",
        db.arg(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
