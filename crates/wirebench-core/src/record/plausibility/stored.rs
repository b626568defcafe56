//! Disbelief for what a file supplies (`import`, a spool, `store copy`): a campaign's lifecycle
//! against its plan and its results, a stored run's figures against each other and against
//! physical bounds, and every string in the document free of control and bidirectional
//! characters. A file that fails is refused whole, with the reason; nothing of it is stored.

use serde_json::Value;

use crate::record::campaign::Status;
use crate::record::lifecycle::{Lifecycle, StoredRun};
use crate::record::run::{ClientRecord, ServerRecord};
use crate::vocab::text::is_unsafe_char;

/// Longest uid a campaign may carry (ours are 32 hex digits).
pub const MAX_UID_LEN: usize = 64;

/// Checks a campaign's lifecycle against its plan: a uid that is a plain token (it names
/// files and rows), a start after 1970 and an end not before it, no more results than it
/// planned, each at a position within the plan, and no result stopped in flight in a campaign
/// that says every run finished. `results` gives each result's position and whether it was
/// stopped in flight.
pub fn check_lifecycle(
    life: &Lifecycle,
    planned: u64,
    results: impl IntoIterator<Item = (u64, bool)>,
) -> Result<(), String> {
    if let Some(uid) = &life.uid {
        let token = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if uid.is_empty() || uid.len() > MAX_UID_LEN || !uid.chars().all(token) {
            return Err(format!(
                "its uid {:?} is not a token of 1 to {MAX_UID_LEN} letters, digits, '-' or '_'",
                crate::vocab::text::peer_text(uid)
            ));
        }
    }
    if life.started_at_unix_s < 0 {
        return Err(format!(
            "it started at {} s, before 1970",
            life.started_at_unix_s
        ));
    }
    if let Some(end) = life
        .finished_at_unix_s
        .filter(|e| *e < life.started_at_unix_s)
    {
        return Err(format!(
            "it finished at {end} s, before it started ({} s)",
            life.started_at_unix_s
        ));
    }
    let mut count = 0u64;
    for (position, stopped) in results {
        count += 1;
        if position == 0 || position > planned {
            return Err(format!(
                "a result sits at position {position}, outside its plan of {planned}"
            ));
        }
        if stopped && life.status == Status::Complete {
            return Err(format!(
                "it is complete, yet its result at position {position} was stopped in flight"
            ));
        }
    }
    if count > planned {
        return Err(format!("it holds {count} results, but planned {planned}"));
    }
    Ok(())
}

/// Checks one stored run: its times and rates finite and not negative, its seconds what its
/// nanoseconds say, and a forward run's server reading no more than its client sent (a
/// reversed one's client no more than its server sent).
pub fn check_stored_run(run: &StoredRun) -> Result<(), String> {
    let StoredRun::Finished { run, .. } = run else {
        return Ok(());
    };
    check_side("the client", &run.client.figures())?;
    check_side("the server", &run.server.figures())?;
    let (sender, sent_bytes, receiver, read_bytes) = if run.reverse {
        ("server", run.server.bytes, "client", run.client.bytes)
    } else {
        ("client", run.client.bytes, "server", run.server.bytes)
    };
    if read_bytes > sent_bytes {
        return Err(format!(
            "its {receiver} read {read_bytes} bytes, but its {sender} sent {sent_bytes}"
        ));
    }
    Ok(())
}

/// The figures of one side that can be checked alone.
struct Figures {
    seconds: f64,
    elapsed_ns: u64,
    rate_bps: f64,
}

impl ClientRecord {
    fn figures(&self) -> Figures {
        Figures {
            seconds: self.seconds,
            elapsed_ns: self.elapsed_ns,
            rate_bps: self.rate_bps,
        }
    }
}

impl ServerRecord {
    fn figures(&self) -> Figures {
        Figures {
            seconds: self.seconds,
            elapsed_ns: self.elapsed_ns,
            rate_bps: self.rate_bps,
        }
    }
}

fn check_side(who: &str, f: &Figures) -> Result<(), String> {
    if !f.seconds.is_finite() || f.seconds < 0.0 {
        return Err(format!("{who}'s time is {} s", f.seconds));
    }
    // No bound on the rate: a server's own span can be one read (0 ns, or microseconds for
    // megabytes on loopback), so only a rate that is no number is impossible.
    if !f.rate_bps.is_finite() || f.rate_bps < 0.0 {
        return Err(format!("{who}'s rate is {} bit/s", f.rate_bps));
    }
    // Seconds are the nanoseconds shown (rounded); they may not tell another time.
    if (f.seconds - f.elapsed_ns as f64 / 1e9).abs() > 1e-3 {
        return Err(format!(
            "{who}'s time is {} s, but {} ns",
            f.seconds, f.elapsed_ns
        ));
    }
    Ok(())
}

/// Checks every string of a document (keys too) for control characters (ESC, NUL, line
/// breaks) and bidirectional overrides: a stored string is shown as it is by `runs`, `show`
/// and the reports, so none may reach a terminal or a page. Names where the first one sits.
pub fn check_document_text(doc: &Value) -> Result<(), String> {
    fn walk(v: &Value, path: &mut String) -> Result<(), String> {
        let bad = |s: &str| s.chars().any(is_unsafe_char);
        match v {
            Value::String(s) if bad(s) => Err(format!(
                "{} holds a control or bidirectional character: {}",
                if path.is_empty() {
                    "the document"
                } else {
                    path
                },
                crate::vocab::text::peer_text(s)
            )),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(item, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Object(map) => {
                for (key, item) in map {
                    if bad(key) {
                        return Err(format!(
                            "a key holds a control or bidirectional character: {}",
                            crate::vocab::text::peer_text(key)
                        ));
                    }
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(key);
                    walk(item, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    walk(doc, &mut String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn life(status: Status, uid: Option<&str>) -> Lifecycle {
        Lifecycle {
            id: 1,
            uid: uid.map(str::to_string),
            started_at_unix_s: 1_800_000_000,
            finished_at_unix_s: Some(1_800_000_010),
            status,
            error: None,
            origin: "run".into(),
            planned: 2,
            stored: 2,
            aborted: 0,
        }
    }

    #[test]
    fn a_true_lifecycle_passes_and_each_lie_is_named() {
        let ok = life(Status::Complete, Some("9b8f9aa7c78db450c3a0b708feb27180"));
        assert_eq!(check_lifecycle(&ok, 2, [(1, false), (2, false)]), Ok(()));
        // A failed campaign may hold a run stopped in flight; a complete one may not.
        let failed = life(Status::Failed, None);
        assert_eq!(check_lifecycle(&failed, 2, [(1, false), (2, true)]), Ok(()));
        let lies = [
            (check_lifecycle(&ok, 2, [(1, true)]), "stopped in flight"),
            (
                check_lifecycle(&ok, 1, [(1, false), (2, false)]),
                "outside its plan of 1",
            ),
            (check_lifecycle(&ok, 2, [(0, false)]), "position 0"),
            (
                check_lifecycle(&life(Status::Complete, Some("../../x")), 2, []),
                "is not a token",
            ),
            (
                check_lifecycle(&life(Status::Complete, Some("")), 2, []),
                "is not a token",
            ),
            (
                check_lifecycle(
                    &Lifecycle {
                        finished_at_unix_s: Some(1),
                        ..ok.clone()
                    },
                    2,
                    [],
                ),
                "before it started",
            ),
            (
                check_lifecycle(
                    &Lifecycle {
                        started_at_unix_s: -5,
                        finished_at_unix_s: None,
                        ..ok.clone()
                    },
                    2,
                    [],
                ),
                "before 1970",
            ),
        ];
        for (got, says) in lies {
            let why = got.expect_err(says);
            assert!(why.contains(says), "{why}");
        }
    }

    #[test]
    fn control_and_bidi_characters_anywhere_in_a_document_are_named() {
        let clean = serde_json::json!({"a": ["ok", {"b": "fine – ünïcode"}], "n": 1});
        assert_eq!(check_document_text(&clean), Ok(()));
        for (doc, path) in [
            (
                serde_json::json!({"a": ["ok", {"b": "x\u{1b}[2J"}]}),
                "a[1].b",
            ),
            (serde_json::json!({"host": "abc\u{202e}def"}), "host"),
            (serde_json::json!(["\n"]), "[0]"),
        ] {
            let why = check_document_text(&doc).expect_err(path);
            assert!(why.starts_with(path), "{why}");
            assert!(
                !why.contains('\u{1b}') && !why.contains('\u{202e}'),
                "{why}"
            );
        }
        let key = serde_json::json!({"k\u{7}": 1});
        assert!(check_document_text(&key).is_err());
    }
}
