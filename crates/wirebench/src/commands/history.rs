//! `wirebench runs`, `show`, `export` and `import`: read campaigns from the results store, print
//! them, and move them between machines as JSON. Never measures anything.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{bail, Context, Result};
use wirebench_core::record::document::{
    CampaignMeta, ExportDocument, ImportDocument, RunDocument, OLDEST_READABLE_VERSION,
    SCHEMA_VERSION,
};
use wirebench_core::record::{CampaignInfo, Environment, RunRecord, Status};
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::sweep::Point;

use crate::output::text;
use crate::store::{Location, Store};

/// `wirebench runs`.
pub fn list(db: impl Into<Location>, out: &mut impl Write) -> Result<()> {
    let db: &Location = &db.into();
    // Listing never creates a database: a missing one is just an empty history.
    let (campaigns, dns, rr, rpm) = if db.exists() {
        let store = Store::open(db)?;
        let mut rpm = Vec::new();
        for (info, _) in store.rpm_campaigns()? {
            let figures = store.rpm_figures(info.id)?;
            rpm.push((info, figures));
        }
        (
            store.campaigns()?,
            store.dns_campaigns()?,
            store.rr_campaigns()?,
            rpm,
        )
    } else {
        (Vec::new(), Vec::new(), Vec::new(), Vec::new())
    };
    if campaigns.is_empty() && dns.is_empty() && rr.is_empty() && rpm.is_empty() {
        writeln!(
            out,
            "no campaigns in {} yet: `wirebench run` stores each run there",
            db.display()
        )?;
        return Ok(());
    }
    let mut blocks = Vec::new();
    if !campaigns.is_empty() {
        blocks.push(text::campaign_list(&campaigns));
    }
    if !dns.is_empty() {
        blocks.push(text::dns_campaign_list(&dns));
    }
    if !rr.is_empty() {
        blocks.push(text::rr_campaign_list(&rr));
    }
    if !rpm.is_empty() {
        blocks.push(text::rpm_campaign_list(&rpm));
    }
    write!(out, "{}", blocks.join("\n"))?;
    Ok(())
}

/// `wirebench show ID`.
pub fn show(db: impl Into<Location>, id: i64, out: &mut impl Write) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let (info, runs) = load(&store, id)?;
    write!(out, "{}", text::campaign_detail(&info, &runs))?;
    let details = store.aborted_details(id)?;
    for a in store.aborted_runs(id)? {
        let detail = details.iter().find(|d| d.position == a.position);
        write!(out, "{}", text::aborted_run_line(&a, detail))?;
    }
    Ok(())
}

/// `wirebench export ID`.
pub fn export(db: impl Into<Location>, id: i64, out: &mut impl Write) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let (info, runs) = load(&store, id)?;
    let doc = export_document(info, runs);
    serde_json::to_writer_pretty(&mut *out, &doc).context("while writing the export")?;
    writeln!(out)?;
    Ok(())
}

/// `wirebench import FILE` (`-` for stdin); returns the new campaign id. A campaign the store
/// already holds (same start time, parameters and host) is refused unless `again`.
pub fn import(db: impl Into<Location>, file: &Path, now_unix_s: i64, again: bool) -> Result<i64> {
    let db: &Location = &db.into();
    let mut text = String::new();
    if file == Path::new("-") {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("while reading stdin")?;
    } else {
        text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
    }
    let doc: ImportDocument = serde_json::from_str(&text).with_context(|| {
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
    });
    let single = Point {
        msg_size: doc.parameters.msg_size,
        total_bytes: doc.parameters.total_bytes,
    };
    let points = if meta.run_points.is_empty() {
        vec![single; doc.runs.len()]
    } else if meta.run_points.len() == doc.runs.len() {
        meta.run_points.clone()
    } else {
        bail!(
            "{}: campaign.run_points has {} entries for {} runs",
            file.display(),
            meta.run_points.len(),
            doc.runs.len()
        );
    };
    let or_single = |v: Vec<u32>| {
        if v.is_empty() {
            vec![single.msg_size]
        } else {
            v
        }
    };
    let msg_sizes = or_single(meta.msg_sizes);
    let totals = if meta.totals.is_empty() {
        vec![single.total_bytes]
    } else {
        meta.totals
    };
    let info = CampaignInfo {
        id: 0,
        started_at_unix_s: meta.started_at_unix_s,
        finished_at_unix_s: meta.finished_at_unix_s,
        status: meta.status,
        error: doc.error,
        origin: "import".into(),
        parameters: doc.parameters,
        planned_runs: meta.planned_runs,
        stored_runs: doc.runs.len() as u64,
        aborted_runs: 0,
        msg_sizes,
        totals,
        environment: meta.environment,
    };
    // A run --json document says its direction only in its parameters.
    let reverse = info.parameters.reverse;
    let runs: Vec<(Point, RunRecord)> = points
        .into_iter()
        .zip(doc.runs)
        .map(|(p, mut r)| {
            r.reverse |= reverse;
            (p, r)
        })
        .collect();
    let mut store = Store::open(db)?;
    if !again {
        if let Some(existing) = store.same_campaign(&info)? {
            return Err(UsageError(format!(
                "{} is already in {} as campaign {existing} (same start, parameters and host); \
                 pass --again to import it once more",
                file.display(),
                db.display()
            ))
            .into());
        }
    }
    store.import(&info, &runs)
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
    let info = store.campaign(id)?.ok_or_else(|| {
        UsageError(format!(
            "there is no campaign {id} in {}; `wirebench runs` lists them",
            store.path().display()
        ))
    })?;
    let runs = store.runs(id)?;
    Ok((info, runs))
}
