//! `wirebench report`: loads one campaign from the store and writes it through an exporter, to
//! stdout or a file (written only once the report is complete).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use wirebench_core::record::dns::{DnsDocument, SCHEMA_VERSION as DNS_SCHEMA_VERSION};
use wirebench_core::record::rpm::RpmCampaignDocument;
use wirebench_core::record::rr::{RrDocument, SCHEMA_VERSION as RR_SCHEMA_VERSION};
use wirebench_core::vocab::error::UsageError;

use crate::cli::ReportFormat;
use crate::commands::history;
use crate::output::text;
use crate::report::{self, Format, Heading, Report};
use crate::store::{Location, Store};

/// The report format a `--format` value names.
pub fn format_of(f: ReportFormat) -> Format {
    match f {
        ReportFormat::Table => Format::Table,
        ReportFormat::Markdown => Format::Markdown,
        ReportFormat::Csv => Format::Csv,
        ReportFormat::Json => Format::Json,
        ReportFormat::Html => Format::Html,
    }
}

/// Which campaign to report on.
#[derive(Debug, Clone, Copy)]
pub enum Which {
    /// This id.
    Id(i64),
    /// The newest campaign.
    Last,
}

/// Runs `wirebench report`; `run` picks the run of the HTML throughput-over-time chart
/// (1-based, as `wirebench show` numbers them).
pub fn execute(
    db: impl Into<Location>,
    which: Which,
    format: Format,
    run: Option<usize>,
    output: Option<&Path>,
    stdout: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    if run.is_some() && format != Format::Html {
        return Err(UsageError(
            "--run picks the run of the HTML throughput-over-time chart: use it with --format html"
                .into(),
        )
        .into());
    }
    let store = Store::open_existing(db)?;
    let id = chosen_id(
        which,
        || store.last_campaign_id(),
        || {
            format!(
                "there are no campaigns in {} yet: `wirebench run` stores them",
                db.display()
            )
        },
    )?;
    let report = load_choosing(&store, id, run)?;
    let mut body = Vec::new();
    report::exporter(format).write(&report, &mut body)?;
    deliver(&body, output, stdout)
}

/// The report of a stored campaign.
pub fn load(store: &Store, id: i64) -> Result<Report> {
    load_choosing(store, id, None)
}

/// The report of a stored campaign, with run `run` on the throughput-over-time chart when given.
fn load_choosing(store: &Store, id: i64, run: Option<usize>) -> Result<Report> {
    let (info, runs) = history::load(store, id)?;
    if runs.is_empty() {
        return Err(UsageError(format!(
            "campaign {id} has no finished run to report on (it is {}); `wirebench show {id}` lists what it has",
            info.status.as_str()
        ))
        .into());
    }
    let heading = Heading {
        campaign: info.id,
        started: text::format_utc(info.started_at_unix_s),
        status: info.status.as_str().to_string(),
        host: info
            .environment
            .host_name
            .clone()
            .unwrap_or_else(|| "unknown".into()),
    };
    let mut report = Report::build(heading, &runs);
    if let Some(n) = run {
        report.choose_run(&runs, n).map_err(UsageError)?;
    }
    Ok(report)
}

/// Runs `wirebench report --dns`: a stored DNS campaign as HTML (chart and table), a text table
/// or JSON (the `wirebench dns --json` document).
pub fn execute_dns(
    db: impl Into<Location>,
    which: Which,
    format: Format,
    output: Option<&Path>,
    stdout: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let id = chosen_id(
        which,
        || store.last_dns_campaign_id(),
        || {
            format!(
                "there are no DNS campaigns in {} yet: `wirebench dns` stores them",
                db.display()
            )
        },
    )?;
    let info = store.dns_campaign(id)?.ok_or_else(|| {
        UsageError(format!(
            "there is no DNS campaign {id} in {} (`wirebench dns` prints the id it stores)",
            db.display()
        ))
    })?;
    let results = store.dns_results(id)?;
    let c = &info.campaign;
    let heading = report::dns::DnsHeading {
        campaign: info.id,
        started: text::format_utc(c.started_at_unix_s),
        status: info.status.as_str().to_string(),
        host: c.host_name.clone().unwrap_or_else(|| "unknown".into()),
        resolver: c.resolver.clone(),
        question: format!("{} {}", c.name, c.record_type),
    };
    let mut body = Vec::new();
    match format {
        Format::Html => report::dns::write_html(&heading, &results, &mut body)?,
        Format::Table => report::dns::write_text(&heading, &results, &mut body)?,
        Format::Json => {
            let doc = DnsDocument {
                schema_version: DNS_SCHEMA_VERSION,
                command: "dns".into(),
                resolver: c.resolver.clone(),
                name: c.name.clone(),
                record_type: c.record_type.clone(),
                results,
            };
            write_json(&doc, &mut body)?;
        }
        other => return Err(html_table_or_json("--dns", other)),
    }
    deliver(&body, output, stdout)
}

/// Runs `wirebench report --rr`: a stored rr sweep as HTML (chart and table), a text table or
/// JSON (the `wirebench rr --json` document).
pub fn execute_rr(
    db: impl Into<Location>,
    which: Which,
    format: Format,
    output: Option<&Path>,
    stdout: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let id = chosen_id(
        which,
        || store.last_rr_campaign_id(),
        || {
            format!(
                "there are no rr sweeps in {} yet: `wirebench rr` stores them",
                db.display()
            )
        },
    )?;
    let info = store.rr_campaign(id)?.ok_or_else(|| {
        UsageError(format!(
            "there is no rr sweep {id} in {} (`wirebench rr` prints the id it stores; `wirebench runs` lists them)",
            db.display()
        ))
    })?;
    let results = store.rr_results(id)?;
    if results.is_empty() {
        return Err(UsageError(format!(
            "rr sweep {id} has no finished result to report on (it is {})",
            info.status.as_str()
        ))
        .into());
    }
    let c = &info.campaign;
    let heading = report::rr::RrHeading {
        campaign: info.id,
        started: text::format_utc(c.started_at_unix_s),
        status: info.status.as_str().to_string(),
        host: c.host_name.clone().unwrap_or_else(|| "unknown".into()),
        server: c.server.clone(),
    };
    let mut body = Vec::new();
    match format {
        Format::Html => report::rr::write_html(&heading, &results, &mut body)?,
        Format::Table => report::rr::write_text(&heading, &results, &mut body)?,
        Format::Json => {
            let doc = RrDocument {
                schema_version: RR_SCHEMA_VERSION,
                command: "rr".into(),
                server: c.server.clone(),
                results,
            };
            write_json(&doc, &mut body)?;
        }
        other => return Err(html_table_or_json("--rr", other)),
    }
    deliver(&body, output, stdout)
}

/// Runs `wirebench report --rpm`: a stored rpm campaign as text, Markdown, CSV (one row per
/// interval), JSON (the campaign and its tests with their loaded latency) or HTML (the chart
/// of probe latency over time above the goodput, and the tables).
pub fn execute_rpm(
    db: impl Into<Location>,
    which: Which,
    format: Format,
    output: Option<&Path>,
    stdout: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let id = chosen_id(
        which,
        || store.last_rpm_campaign_id(),
        || {
            format!(
                "there are no rpm campaigns in {} yet: `wirebench rpm` stores them",
                db.display()
            )
        },
    )?;
    let info = store.rpm_campaign(id)?.ok_or_else(|| {
        UsageError(format!(
            "there is no rpm campaign {id} in {} (`wirebench rpm` prints the id it stores; `wirebench runs` lists them)",
            db.display()
        ))
    })?;
    let results = store.rpm_results(id)?;
    if results.is_empty() {
        return Err(UsageError(format!(
            "rpm campaign {id} has no stored test to report on (it is {})",
            info.status.as_str()
        ))
        .into());
    }
    let c = &info.campaign;
    let heading = report::rpm::RpmHeading {
        campaign: info.id,
        started: text::format_utc(c.started_at_unix_s),
        status: info.status.as_str().to_string(),
        host: c.host_name.clone().unwrap_or_else(|| "unknown".into()),
        server: c.server.clone(),
        direction: c.direction,
    };
    let mut body = Vec::new();
    match format {
        Format::Html => report::rpm::write_html(&heading, &results, &mut body)?,
        Format::Table => report::rpm::write_text(&heading, &results, &mut body)?,
        Format::Markdown => report::rpm::write_markdown(&heading, &results, &mut body)?,
        Format::Csv => report::rpm::write_csv(&results, &mut body)?,
        Format::Json => {
            let doc = RpmCampaignDocument::new(info, results);
            write_json(&doc, &mut body)?;
        }
    }
    deliver(&body, output, stdout)
}

/// `doc` as pretty JSON with a closing newline, into `body`.
fn write_json(doc: &impl serde::Serialize, body: &mut Vec<u8>) -> Result<()> {
    serde_json::to_writer_pretty(&mut *body, doc).context("while writing the JSON")?;
    body.push(b'\n');
    Ok(())
}

/// The refusal of a format the `flag` (`--dns`, `--rr`) report does not come in.
fn html_table_or_json(flag: &str, other: Format) -> anyhow::Error {
    UsageError(format!(
        "{flag} reports come as --format html, table or json, not {}",
        format!("{other:?}").to_lowercase()
    ))
    .into()
}

/// The id `which` names: the given one, or the newest (`last`); without any, a usage error
/// saying `none`.
fn chosen_id(
    which: Which,
    last: impl FnOnce() -> Result<Option<i64>>,
    none: impl FnOnce() -> String,
) -> Result<i64> {
    match which {
        Which::Id(id) => Ok(id),
        Which::Last => last()?.ok_or_else(|| UsageError(none()).into()),
    }
}

/// Writes a finished report to `output`, or to `stdout` without one (only once it is whole, so
/// a failed report leaves no half file).
fn deliver(body: &[u8], output: Option<&Path>, stdout: &mut impl Write) -> Result<()> {
    match output {
        None => stdout.write_all(body)?,
        Some(path) => std::fs::write(path, body)
            .with_context(|| format!("cannot write the report to {}", path.display()))?,
    }
    Ok(())
}
