//! `wirebench import FILE`: a campaign from a file into the results store — an export of a
//! throughput campaign, a `run --json` document, or a campaign document of any kind (`export
//! --rr/--dns/--rpm`, a spool file) — merged as `store copy` merges: stored whole when new,
//! brought up to date when the store holds an unfinished version of it, refused as a
//! duplicate when it holds all of it (unless `--again`). Never measures anything.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};
use wirebench_core::record::document::{
    CampaignMeta, ImportDocument, OLDEST_READABLE_VERSION, SCHEMA_VERSION,
};
use wirebench_core::record::lifecycle::{
    CampaignDocument, CampaignKind, Lifecycle, Positioned, StoredRun,
};
use wirebench_core::record::{Environment, NewCampaign, Status};
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::sweep::Point;

use crate::store::documents::Head;
use crate::store::lifecycle::Merged;
use crate::store::run::Run;
use crate::store::{Location, Store};
use crate::transport::files::{read_at_most, read_stdin_at_most, ReadError, IMPORT_FILE_MAX};

/// `wirebench import FILE` (`-` for stdin): stores or updates the campaign the file holds and
/// writes one line saying which. A campaign the store already holds in full is refused
/// unless `again`, which stores it once more as a campaign of its own.
pub fn import(
    db: impl Into<Location>,
    file: &Path,
    now_unix_s: i64,
    again: bool,
    out: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    let (kind, merged) = import_file(db, file, now_unix_s, again)?;
    let noun = kind.noun();
    match merged {
        Merged::New(id) | Merged::AlreadyThere(id) => writeln!(
            out,
            "imported {} as {noun} {id} in {}",
            file.display(),
            db.display()
        )?,
        Merged::Updated { id, added, ended } => writeln!(
            out,
            "brought {noun} {id} in {} up to date from {}: {added} more {}{}",
            db.display(),
            file.display(),
            if added == 1 {
                kind.result_noun().to_string()
            } else {
                format!("{}s", kind.result_noun())
            },
            match ended {
                Some(status) => format!(", now {}", status.as_str()),
                None => String::new(),
            }
        )?,
    }
    Ok(())
}

/// Imports `file` into `db` as [`import`] does, without a word: the campaign's kind and what
/// the merge did (with the status it ended with, when its end came). A campaign the store
/// already holds in full is a usage error unless `again`.
pub fn import_file(
    db: &Location,
    file: &Path,
    now_unix_s: i64,
    again: bool,
) -> Result<(CampaignKind, Merged)> {
    let text = read_document(file)?;
    refuse_unsafe_text(&text, file)?;
    // Read before the store is opened: a file that is not a campaign creates no store.
    let legacy = match Head::of(&text) {
        Some(_) => None,
        None => Some(run_document(&text, file, now_unix_s)?),
    };
    let store = Store::open(db)?;
    crate::commands::recorder::say_replayed(&store);
    let (kind, merged) = match &legacy {
        Some(doc) => (
            CampaignKind::Run,
            store.merge::<Run>(doc, Some("import"), again)?,
        ),
        None => store
            .merge_text(&text, Some("import"), again)
            .with_context(|| {
                format!("{} is not a campaign wirebench can import", file.display())
            })?,
    };
    if let Merged::AlreadyThere(id) = merged {
        return Err(UsageError(format!(
            "{} is already in {} as {} {id}, with all its results and its end; pass --again \
             to import it once more",
            file.display(),
            db.display(),
            kind.noun()
        ))
        .into());
    }
    Ok((kind, merged))
}

/// Refuses a document holding a string with a control or bidirectional character (a host
/// name holding ESC was stored, and `runs` printed it raw): every stored string is shown as it
/// is. A file that is no JSON at all is left to the readers below, which say what it is not.
fn refuse_unsafe_text(text: &str, file: &Path) -> Result<()> {
    use wirebench_core::record::plausibility::stored::check_document_text;
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(text) else {
        return Ok(());
    };
    check_document_text(&doc)
        .map_err(|why| UsageError(format!("{} cannot be imported: {why}", file.display())).into())
}

/// An export of a throughput campaign, or a `run --json` document (then started `now`,
/// complete or failed as its error says), as a campaign document.
fn run_document(
    text: &str,
    file: &Path,
    now_unix_s: i64,
) -> Result<CampaignDocument<NewCampaign, StoredRun>> {
    let doc: ImportDocument = serde_json::from_str(text).with_context(|| {
        format!(
            "{} is not a wirebench export or run --json document",
            file.display()
        )
    })?;
    if !(OLDEST_READABLE_VERSION..=SCHEMA_VERSION).contains(&doc.schema_version) {
        bail!(
            "{} has schema_version {}; this wirebench reads versions {OLDEST_READABLE_VERSION} to {SCHEMA_VERSION}",
            file.display(),
            doc.schema_version
        );
    }
    for (i, run) in doc.runs.iter().enumerate() {
        if !doc.parameters.protocols.contains(&run.protocol)
            || !doc.parameters.mechanisms.contains(&run.mechanism)
        {
            bail!(
                "{}: run {} ({} {}) is not part of the campaign's parameters",
                file.display(),
                i + 1,
                run.protocol,
                run.mechanism
            );
        }
    }
    let meta = doc.campaign.unwrap_or(CampaignMeta {
        id: 0,
        started_at_unix_s: now_unix_s,
        finished_at_unix_s: None,
        status: if doc.error.is_some() {
            Status::Failed
        } else {
            Status::Complete
        },
        planned_runs: doc.runs.len() as u64,
        msg_sizes: Vec::new(),
        totals: Vec::new(),
        run_points: Vec::new(),
        environment: Environment::default(),
        uid: None,
        run_positions: Vec::new(),
    });
    let single = Point {
        msg_size: doc.parameters.msg_size,
        total_bytes: doc.parameters.total_bytes,
    };
    let n = doc.runs.len();
    let parallel = |len: usize, what: &str| {
        if len == 0 || len == n {
            Ok(())
        } else {
            Err(anyhow::anyhow!(
                "{}: campaign.{what} has {len} entries for {n} runs",
                file.display()
            ))
        }
    };
    parallel(meta.run_points.len(), "run_points")?;
    parallel(meta.run_positions.len(), "run_positions")?;
    // A run --json document says its direction only in its parameters.
    let reverse = doc.parameters.reverse;
    let results = doc
        .runs
        .into_iter()
        .enumerate()
        .map(|(i, mut run)| {
            run.reverse |= reverse;
            Positioned {
                position: meta.run_positions.get(i).copied().unwrap_or(i as u64 + 1),
                result: StoredRun::Finished {
                    point: meta.run_points.get(i).copied().unwrap_or(single),
                    run: Box::new(run),
                },
            }
        })
        .collect();
    let plan = NewCampaign {
        started_at_unix_s: meta.started_at_unix_s,
        planned_runs: meta.planned_runs,
        msg_sizes: if meta.msg_sizes.is_empty() {
            vec![single.msg_size]
        } else {
            meta.msg_sizes
        },
        totals: if meta.totals.is_empty() {
            vec![single.total_bytes]
        } else {
            meta.totals
        },
        environment: meta.environment,
        parameters: doc.parameters,
    };
    let life = Lifecycle {
        id: 0,
        uid: meta.uid,
        started_at_unix_s: meta.started_at_unix_s,
        finished_at_unix_s: meta.finished_at_unix_s,
        status: meta.status,
        error: doc.error,
        origin: "import".into(),
        planned: meta.planned_runs,
        stored: n as u64,
        aborted: 0,
    };
    Ok(CampaignDocument::new(
        env!("CARGO_PKG_VERSION"),
        CampaignKind::Run,
        life,
        plan,
        results,
    ))
}

/// The document `import` reads: `file`, or standard input for `-`, at most
/// [`IMPORT_FILE_MAX`] bytes of UTF-8 (`import /dev/zero` is refused, not read for ever).
fn read_document(file: &Path) -> Result<String> {
    let read = if file == Path::new("-") {
        read_stdin_at_most(IMPORT_FILE_MAX)
    } else {
        read_at_most(file, IMPORT_FILE_MAX)
    };
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(e @ ReadError::TooLarge(_)) => {
            return Err(UsageError(format!(
                "import {}: {e}; a campaign document is at most 256 MiB",
                file.display()
            ))
            .into())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    String::from_utf8(bytes).map_err(|_| {
        UsageError(format!(
            "import {}: not UTF-8 text, so not a campaign wirebench can import",
            file.display()
        ))
        .into()
    })
}
