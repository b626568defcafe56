//! `wirebench store copy` (alias `migrate`): moves history between two results stores, an
//! SQLite file and a PostgreSQL database either way, and says what it copied, what it brought
//! up to date (campaigns copied while they ran) and what was there already.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::record::lifecycle::CampaignKind;
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
    crate::commands::recorder::say_replayed(&dest);
    let n = dest.copy_from(&source).with_context(|| {
        format!(
            "while copying from {} to {} (each campaign copied before this one is kept)",
            from.display(),
            to.display()
        )
    })?;
    let runs = n.of(CampaignKind::Run);
    writeln!(
        out,
        "copied {} campaign(s) with {} run(s), {} DNS campaign(s), {} rr sweep(s), {} ping \
         sweep(s), {} rpm campaign(s) and {} latency campaign(s) from {} to {}; {} brought up \
         to date ({} result(s) added); {} already there",
        runs.copied,
        runs.results,
        n.of(CampaignKind::Dns).copied,
        n.of(CampaignKind::Rr).copied,
        n.of(CampaignKind::Ping).copied,
        n.of(CampaignKind::Rpm).copied,
        n.of(CampaignKind::Latency).copied,
        from.display(),
        to.display(),
        n.updated(),
        n.added(),
        n.skipped()
    )?;
    Ok(())
}
