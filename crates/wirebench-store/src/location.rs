//! Where a results store lives: `--db`'s value as an SQLite file or a PostgreSQL URL, the
//! default file, and the values refused because no result would outlive the process there
//! (`:memory:`, an empty name, a device or other non-regular file). Owns naming and checking
//! the place; must not open a database.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use wirebench_core::vocab::error::UsageError;

/// The file name of the default database, under `$XDG_DATA_HOME/wirebench/`.
pub const DEFAULT_FILE: &str = "results.sqlite3";

/// The environment variable naming the database when `--db` is not given.
pub const DB_ENV: &str = "WIREBENCH_DB";

/// Where wirebench keeps its own files: `$XDG_DATA_HOME/wirebench`, falling back to
/// `~/.local/share/wirebench`.
pub fn data_dir() -> Result<PathBuf> {
    let data_home = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local").join("share"),
            None => bail!(
                "cannot find a place for the results database: neither XDG_DATA_HOME nor HOME is set; \
                 pass --db PATH or --no-store"
            ),
        },
    };
    Ok(data_home.join("wirebench"))
}

/// The default database path: `$XDG_DATA_HOME/wirebench/results.sqlite3`, falling back to
/// `~/.local/share/wirebench/results.sqlite3`.
pub fn default_path() -> Result<PathBuf> {
    Ok(data_dir()?.join(DEFAULT_FILE))
}

/// Where a results store lives: an SQLite file or a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file (created on first use).
    File(PathBuf),
    /// A PostgreSQL connection URL, `postgres://user[:password]@host[:port]/dbname`.
    Postgres(String),
}

impl Location {
    /// `--db`'s value: a `postgres://` or `postgresql://` URL (checked here, so a bad one is a
    /// one-line usage error before anything runs), otherwise a file path. A value that would
    /// keep nothing after the process ends (`:memory:`, an empty name) is refused here too.
    pub fn parse(text: &std::ffi::OsStr) -> Result<Location> {
        let Some(s) = text.to_str() else {
            return Ok(Location::File(PathBuf::from(text)));
        };
        if s.is_empty() || s == ":memory:" {
            return Err(UsageError(format!(
                "--db {s:?}: SQLite would keep that database in memory or in a temporary file, \
                 and every result would be gone when wirebench ends; pass a file path \
                 (or --no-store to keep nothing)"
            ))
            .into());
        }
        let lower = s.to_ascii_lowercase();
        if !(lower.starts_with("postgres://") || lower.starts_with("postgresql://")) {
            if lower.contains("://") {
                return Err(UsageError(format!(
                    "--db {s:?}: not a database wirebench knows; expected a file path or a \
                     postgres://user@host/dbname URL"
                ))
                .into());
            }
            return Ok(Location::File(PathBuf::from(s)));
        }
        if let Err(e) = s.parse::<postgres::Config>() {
            return Err(UsageError(format!(
                "--db {}: not a PostgreSQL URL ({e}); expected postgres://user[:password]@host[:port]/dbname",
                redact(s)
            ))
            .into());
        }
        Ok(Location::Postgres(s.to_string()))
    }

    /// Whether there is a store to read there without creating one: the file exists (a
    /// PostgreSQL database is there, or its connection fails and says why).
    pub fn exists(&self) -> bool {
        match self {
            Location::File(p) => p.exists(),
            Location::Postgres(_) => true,
        }
    }

    /// The location for messages: the path, or the URL without its password.
    pub fn display(&self) -> impl std::fmt::Display + '_ {
        match self {
            Location::File(p) => p.display().to_string(),
            Location::Postgres(url) => redact(url),
        }
    }
}

/// Refuses a file store that is there but is not a regular file (`/dev/null`, a directory, a
/// FIFO): SQLite would "store" into it and keep nothing, and leave a journal beside it. A
/// symbolic link to a regular file is fine.
pub fn check_regular_file(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => Err(UsageError(format!(
            "--db {}: not a regular file ({}); results stored there would be lost: pass a file \
             path (or --no-store to keep nothing)",
            path.display(),
            if meta.is_dir() {
                "a directory"
            } else {
                "a device, FIFO or socket"
            }
        ))
        .into()),
        _ => Ok(()),
    }
}

impl From<&Path> for Location {
    fn from(p: &Path) -> Location {
        Location::File(p.to_path_buf())
    }
}

impl From<&PathBuf> for Location {
    fn from(p: &PathBuf) -> Location {
        Location::File(p.clone())
    }
}

impl From<PathBuf> for Location {
    fn from(p: PathBuf) -> Location {
        Location::File(p)
    }
}

impl From<&Location> for Location {
    fn from(l: &Location) -> Location {
        l.clone()
    }
}

/// A URL with any password replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_values_are_files_or_postgres_urls() {
        let parse = |s: &str| Location::parse(std::ffi::OsStr::new(s));
        assert_eq!(
            parse("results.sqlite3").unwrap(),
            Location::File("results.sqlite3".into())
        );
        assert_eq!(
            parse("postgresql://wb@127.0.0.1:5432/db").unwrap(),
            Location::Postgres("postgresql://wb@127.0.0.1:5432/db".into())
        );
        for bad in [
            "postgres://wb@h:notaport/db",
            "mysql://wb@h/db",
            ":memory:",
            "",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.downcast_ref::<UsageError>().is_some(), "{err}");
        }
        assert!(parse(":memory:")
            .unwrap_err()
            .to_string()
            .contains("in memory"));
        let secret = parse("postgres://wb:hunter2@db.example:5433/x").unwrap();
        assert_eq!(
            secret.display().to_string(),
            "postgres://wb:***@db.example:5433/x"
        );
        let err = parse("postgres://wb:hunter2@h:bad/x")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn devices_and_directories_are_not_stores() {
        for place in ["/dev/null", "/"] {
            let err = check_regular_file(Path::new(place)).unwrap_err();
            assert!(err.downcast_ref::<UsageError>().is_some(), "{err}");
            assert!(err.to_string().contains("not a regular file"), "{err}");
        }
        // Missing is fine (it is created), and so is a regular file.
        check_regular_file(Path::new("/nonexistent/wirebench/x.sqlite3")).unwrap();
        check_regular_file(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/Cargo.toml"
        )))
        .unwrap();
    }
}
