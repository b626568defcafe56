//! `wirebench runs`, `show` and `export`: read campaigns from the results store, print them,
//! and write them as JSON for `wirebench import` elsewhere. Never measures anything.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use wirebench_core::record::document::{CampaignMeta, ExportDocument, RunDocument};
use wirebench_core::record::lifecycle::{CampaignKind, StoredRun};
use wirebench_core::record::{CampaignInfo, RunRecord};
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::sweep::Point;

use crate::output::history;
use crate::store::dns::Dns;
use crate::store::latency::Latency;
use crate::store::rpm::Rpm;
use crate::store::rr::{Ping, Rr};
use crate::store::run::Run;
use crate::store::{Location, Store};

/// `wirebench runs`.
pub fn list(db: impl Into<Location>, out: &mut impl Write) -> Result<()> {
    let db: &Location = &db.into();
    // Listing never creates a database: a missing one is just an empty history.
    let (campaigns, dns, rr, rpm, latency) = if db.exists() {
        let store = Store::open(db)?;
        crate::commands::recorder::say_replayed(&store);
        let mut latency = Vec::new();
        for (info, _) in store.campaigns::<Latency>()? {
            let results = store.results::<Latency>(info.id)?;
            latency.push((info, results.into_iter().map(|r| r.result).collect()));
        }
        let mut rpm = Vec::new();
        for (info, _) in store.campaigns::<Rpm>()? {
            let figures = store.rpm_figures(info.id)?;
            rpm.push((info, figures));
        }
        // `ping` sweeps are stored among the rr sweeps and listed with them, by id.
        let mut rr = store.campaigns::<Rr>()?;
        rr.extend(store.campaigns::<Ping>()?);
        rr.sort_by_key(|(info, _)| info.id);
        let runs = store
            .campaigns::<Run>()?
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        (runs, store.campaigns::<Dns>()?, rr, rpm, latency)
    } else {
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new())
    };
    if campaigns.is_empty()
        && dns.is_empty()
        && rr.is_empty()
        && rpm.is_empty()
        && latency.is_empty()
    {
        writeln!(
            out,
            "no campaigns in {} yet: `wirebench run` stores each run there",
            db.display()
        )?;
        return Ok(());
    }
    let mut blocks = Vec::new();
    if !campaigns.is_empty() {
        blocks.push(history::campaign_list(&campaigns));
    }
    if !dns.is_empty() {
        blocks.push(history::dns_campaign_list(&dns));
    }
    if !rr.is_empty() {
        blocks.push(history::rr_campaign_list(&rr));
    }
    if !rpm.is_empty() {
        blocks.push(history::rpm_campaign_list(&rpm));
    }
    if !latency.is_empty() {
        blocks.push(history::latency_campaign_list(&latency));
    }
    write!(out, "{}", blocks.join("\n"))?;
    Ok(())
}

/// `wirebench show ID`.
pub fn show(db: impl Into<Location>, id: i64, out: &mut impl Write) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    crate::commands::recorder::say_replayed(&store);
    let (info, runs) = load(&store, id)?;
    write!(out, "{}", history::campaign_detail(&info, &runs))?;
    let details = store.aborted_details(id)?;
    for a in store.aborted_runs(id)? {
        let detail = details.iter().find(|d| d.position == a.position);
        write!(out, "{}", history::aborted_run_line(&a, detail))?;
    }
    Ok(())
}

/// `wirebench export ID`: a throughput campaign as the `run --json` document plus its
/// campaign block; with `kind` another kind's campaign as a campaign document
/// (`export --rr/--dns/--rpm ID`).
pub fn export(
    db: impl Into<Location>,
    kind: CampaignKind,
    id: i64,
    out: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    if kind == CampaignKind::Run {
        let (info, runs) = load(&store, id)?;
        let positions = store
            .results::<Run>(id)?
            .into_iter()
            .filter(|r| matches!(r.result, StoredRun::Finished { .. }))
            .map(|r| r.position)
            .collect();
        let mut doc = export_document(info, runs);
        doc.campaign.run_positions = positions;
        doc.campaign.uid = store.get::<Run>(id)?.and_then(|(l, _)| l.uid);
        serde_json::to_writer_pretty(&mut *out, &doc).context("while writing the export")?;
    } else {
        let text = store.document_text(kind, id)?.ok_or_else(|| {
            UsageError(format!(
                "there is no {} {id} in {}; `wirebench runs` lists them",
                kind.noun(),
                db.display()
            ))
        })?;
        out.write_all(text.as_bytes())
            .context("while writing the export")?;
    }
    writeln!(out)?;
    Ok(())
}

/// `wirebench import FILE` without its line: the id the campaign has in the store now.
pub fn import(db: impl Into<Location>, file: &Path, now_unix_s: i64, again: bool) -> Result<i64> {
    let db: &Location = &db.into();
    let (_, merged) = crate::commands::import::import_file(db, file, now_unix_s, again)?;
    Ok(merged.id())
}

/// The export document of a stored campaign.
pub fn export_document(info: CampaignInfo, runs: Vec<(Point, RunRecord)>) -> ExportDocument {
    let run_points: Vec<Point> = runs.iter().map(|(p, _)| *p).collect();
    let campaign = CampaignMeta {
        id: info.id,
        started_at_unix_s: info.started_at_unix_s,
        finished_at_unix_s: info.finished_at_unix_s,
        status: info.status,
        planned_runs: info.planned_runs,
        msg_sizes: info.msg_sizes,
        totals: info.totals,
        run_points,
        environment: info.environment,
        uid: None,
        run_positions: Vec::new(),
    };
    ExportDocument {
        document: RunDocument::new(
            env!("CARGO_PKG_VERSION"),
            info.parameters,
            &runs,
            info.error,
        ),
        campaign,
    }
}

/// A campaign and its runs; an unknown id is a usage error that says how to find one.
pub fn load(store: &Store, id: i64) -> Result<(CampaignInfo, Vec<(Point, RunRecord)>)> {
    let info = store.campaign::<Run>(id)?.ok_or_else(|| {
        UsageError(format!(
            "there is no campaign {id} in {}; `wirebench runs` lists them",
            store.path().display()
        ))
    })?;
    let runs = store.runs(id)?;
    Ok((info, runs))
}
