//! The spool: where a measured result goes when the store cannot take it (busy past the
//! wait, disk full, gone), so it is never thrown away. A spool file is the whole campaign so
//! far as one campaign document (`<kind>-<uid>.json`), written atomically; the next open of
//! the store brings it in (`Store::merge`: results the store lacks, and the campaign's end)
//! and removes it. Spool places, first that works: beside an SQLite store (`FILE.spool/`),
//! then `$XDG_DATA_HOME/wirebench/spool/KEY/`, then the temporary directory
//! (`wirebench-spool/KEY/`), KEY naming the store. Must not print.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use wirebench_core::record::lifecycle::CampaignDocument;

use super::documents::Head;
use super::location::{data_dir, redact, Location};
use super::writer::{process_alive, this_process};
use crate::store::Store;

pub use crate::merged::Replayed;

/// The places a spool file of the store at `location` may be, first choice first.
pub fn places(location: &Location) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Location::File(path) = location {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".spool");
        dirs.push(path.with_file_name(name));
    }
    let key = key(location);
    if let Ok(data) = data_dir() {
        dirs.push(data.join("spool").join(&key));
    }
    dirs.push(std::env::temp_dir().join("wirebench-spool").join(&key));
    dirs
}

/// A short name for a store that is the same however it was named: the FNV-1a hash of its
/// absolute path, or of its URL without the password.
fn key(location: &Location) -> String {
    let name = match location {
        Location::File(path) => {
            let absolute = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            format!("file:{}", absolute.display())
        }
        Location::Postgres(url) => format!("postgres:{}", redact(url)),
    };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Writes `doc` as the spool file of its campaign, replacing an older version of it, in the
/// first place that takes it; where it went, or why no place did.
pub fn write<P: serde::Serialize, R: serde::Serialize>(
    location: &Location,
    doc: &CampaignDocument<P, R>,
) -> Result<PathBuf> {
    let text = serde_json::to_vec_pretty(doc).context("while encoding the spool file")?;
    let name = format!(
        "{}-{}.json",
        doc.kind.name(),
        doc.campaign.uid.as_deref().unwrap_or("no-uid")
    );
    let mut failures = Vec::new();
    for dir in places(location) {
        match write_atomically(&dir, &name, &text) {
            Ok(path) => {
                // An older version of this campaign elsewhere must not come back later.
                for other in places(location).into_iter().filter(|d| *d != dir) {
                    let _ = std::fs::remove_file(other.join(&name));
                }
                return Ok(path);
            }
            Err(e) => failures.push(format!("{}: {e:#}", dir.display())),
        }
    }
    anyhow::bail!("no place would take a spool file ({})", failures.join("; "))
}

/// Writes `bytes` to `dir/name` through a temporary file and a rename, so a reader never
/// sees half a file and a crash leaves the older version whole.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(name);
    let partial = dir.join(format!(".{name}.{}.partial", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&partial, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(e.into());
    }
    Ok(path)
}

/// Removes a spool file whose campaign is in the store now (one already gone is fine).
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Every spool file waiting for the store at `location`.
pub fn pending(location: &Location) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in places(location) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !name.starts_with('.') && name.ends_with(".json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Brings every spool file of `store` into it, except those a live process other than this
/// one is still writing; removes each file whose campaign went in.
pub fn replay(store: &mut Store) -> Vec<Replayed> {
    let me = this_process();
    let mut done = Vec::new();
    for path in pending(store.path()) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some(head) = Head::of(&text) else {
            continue;
        };
        if let Some(w) = &head.writer {
            let same_host = w.host == me.host && w.boot_id == me.boot_id;
            let alive = i32::try_from(w.pid).is_ok_and(process_alive);
            if w.pid != me.pid && same_host && alive {
                continue;
            }
        }
        let outcome = store
            .merge_text(&text, None, false)
            .map(|(_, merged)| merged)
            .map_err(|e| format!("{e:#}"));
        if outcome.is_ok() {
            remove(&path);
            // An emptied spool place goes too (best effort: another file may be there).
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
        done.push(Replayed {
            path,
            kind: head.kind,
            uid: head.uid().map(str::to_string),
            outcome,
        });
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_store_spools_beside_itself_first_and_a_store_has_one_key() {
        let db = Location::File(PathBuf::from("/var/lib/wb/results.sqlite3"));
        let dirs = places(&db);
        assert_eq!(dirs[0], PathBuf::from("/var/lib/wb/results.sqlite3.spool"));
        assert!(dirs.last().unwrap().starts_with(std::env::temp_dir()));
        // A PostgreSQL store has no "beside": the data directory, then the temporary one.
        let pg = Location::Postgres("postgres://wb:secret@db.example/wb".into());
        assert!(places(&pg)
            .iter()
            .all(|d| !d.to_string_lossy().contains("secret")));
        // One store, one key, however it is named; two stores, two keys.
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            key(&Location::File("r.sqlite3".into())),
            key(&Location::File(here.join("r.sqlite3")))
        );
        assert_ne!(
            key(&Location::File("r.sqlite3".into())),
            key(&Location::File("s.sqlite3".into()))
        );
        assert_eq!(
            key(&Location::Postgres("postgres://wb:a@h/x".into())),
            key(&Location::Postgres("postgres://wb:b@h/x".into())),
            "the password is not part of the store's name"
        );
    }
}
