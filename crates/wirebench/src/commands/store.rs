//! `wirebench store copy` (alias `migrate`): moves history between two results stores, an
//! SQLite file and a PostgreSQL database either way, and says what it copied.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::vocab::error::UsageError;

use crate::store::{Location, Store};

/// Copies everything `from` holds that `to` does not; prints one line of counts.
pub fn copy(from: &Location, to: &Location, out: &mut impl Write) -> Result<()> {
    if from == to {
        return Err(UsageError(format!(
            "--from and --to are the same store ({}); name two different ones",
            from.display()
        ))
        .into());
    }
    let source = Store::open_existing(from)?;
    let mut dest = Store::open(to)?;
    let n = dest.copy_from(&source).with_context(|| {
        format!(
            "while copying from {} to {} (each campaign copied before this one is kept)",
            from.display(),
            to.display()
        )
    })?;
    writeln!(
        out,
        "copied {} campaign(s) with {} run(s), {} DNS campaign(s), {} rr sweep(s) and {} rpm \
         campaign(s) from {} to {}; {} already there",
        n.campaigns,
        n.runs,
        n.dns,
        n.rr,
        n.rpm,
        from.display(),
        to.display(),
        n.skipped
    )?;
    Ok(())
}
