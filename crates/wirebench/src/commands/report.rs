//! `wirebench report`: loads one or more campaigns from the store and writes them as one report
//! through an exporter, or one stored sweep (rr, DNS, rpm) through the sweep document — the
//! loading, the checks and the formats written once over the kinds — to stdout or a file
//! (written only once the report is complete).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use wirebench_core::record::dns::{DnsDocument, SCHEMA_VERSION as DNS_SCHEMA_VERSION};
use wirebench_core::record::lifecycle::CampaignKind;
use wirebench_core::record::rpm::RpmCampaignDocument;
use wirebench_core::record::rr::{RrDocument, SCHEMA_VERSION as RR_SCHEMA_VERSION};
use wirebench_core::record::Status;
use wirebench_core::vocab::error::UsageError;

use crate::commands::history;
use crate::output::history::format_utc;
use crate::report::document::{Document, Part, SweepHeading};
use crate::report::{self, Format, Heading, Layout, Report};
use wirebench_core::record::load_phases::LatencyCampaignDocument;

use crate::store::dns::Dns;
use crate::store::kind::Kind;
use crate::store::latency::Latency;
use crate::store::rpm::Rpm;
use crate::store::rr::{Ping, Rr};
use crate::store::run::Run;
use crate::store::{Location, Store};

/// Which campaigns to report on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Which {
    /// These ids, in this order.
    Ids(Vec<i64>),
    /// The newest this many.
    Last(usize),
}

/// How a report is written.
#[derive(Debug, Clone, Copy)]
pub struct Options<'a> {
    /// The format.
    pub format: Format,
    /// The table layout (transfer reports).
    pub layout: Layout,
    /// The run of the HTML throughput-over-time chart (1-based, as `wirebench show` numbers
    /// them; one campaign only).
    pub run: Option<usize>,
    /// Write here instead of stdout.
    pub output: Option<&'a Path>,
}

impl Options<'_> {
    /// A report in `format`, every other choice its default.
    pub fn format(format: Format) -> Options<'static> {
        Options {
            format,
            layout: Layout::Configurations,
            run: None,
            output: None,
        }
    }
}

/// Runs `wirebench report` over transfer campaigns.
pub fn execute(
    db: impl Into<Location>,
    which: &Which,
    opts: Options<'_>,
    stdout: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    if opts.run.is_some() && opts.format != Format::Html {
        return Err(UsageError(
            "--run picks the run of the HTML throughput-over-time chart: use it with --format html"
                .into(),
        )
        .into());
    }
    if opts.layout == Layout::Grid && opts.format == Format::Json {
        return Err(UsageError(
            "--layout grid lays out the tables of table, markdown, csv and html; json always holds every summary"
                .into(),
        )
        .into());
    }
    let store = Store::open_existing(db)?;
    let ids = match which {
        Which::Ids(ids) => {
            if let Some(twice) = ids
                .iter()
                .enumerate()
                .find(|(i, id)| ids[..*i].contains(id))
                .map(|(_, id)| id)
            {
                return Err(UsageError(format!(
                    "campaign {twice} is named twice: give each campaign once"
                ))
                .into());
            }
            ids.clone()
        }
        Which::Last(n) => {
            let all = store.campaigns::<Run>()?;
            if all.is_empty() {
                return Err(UsageError(format!(
                    "there are no campaigns in {} yet: `wirebench run` stores them",
                    db.display()
                ))
                .into());
            }
            let skip = all.len().saturating_sub(*n);
            all[skip..].iter().map(|(c, _)| c.id).collect()
        }
    };
    if opts.run.is_some() && ids.len() > 1 {
        return Err(UsageError(
            "--run picks a run of one campaign: report that campaign alone to choose its run"
                .into(),
        )
        .into());
    }
    let mut parts = Vec::new();
    for id in &ids {
        parts.push(load_one(&store, *id)?);
    }
    let chosen_runs = match (opts.run, parts.first()) {
        (Some(_), Some((_, runs))) => Some(runs.clone()),
        _ => None,
    };
    let mut report = Report::build(parts);
    report.layout = opts.layout;
    if let (Some(n), Some(runs)) = (opts.run, chosen_runs) {
        report.choose_run(&runs, n).map_err(UsageError)?;
    }
    let mut body = Vec::new();
    report::exporter(opts.format).write(&report, &mut body)?;
    deliver(&body, opts.output, stdout)
}

/// The heading and finished runs of a stored campaign; a usage error when it has none.
fn load_one(
    store: &Store,
    id: i64,
) -> Result<(
    Heading,
    Vec<(
        wirebench_core::vocab::sweep::Point,
        wirebench_core::record::RunRecord,
    )>,
)> {
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
        started: format_utc(info.started_at_unix_s),
        status: info.status.as_str().to_string(),
        host: info
            .environment
            .host_name
            .clone()
            .unwrap_or_else(|| "unknown".into()),
        server: info.parameters.server.clone(),
        site: None,
    };
    Ok((heading, runs))
}

/// The report of one stored campaign.
pub fn load(store: &Store, id: i64) -> Result<Report> {
    Ok(Report::build(vec![load_one(store, id)?]))
}

/// A kind of stored sweep `report` reads: the store's kind ([`Kind`]: where it is kept, its
/// plan, results and info), and what its heading says of it, its document and its JSON. Its
/// flag, nouns and command follow from [`Kind::KIND`]; everything else of
/// `report --dns|--rr|--rpm` is written once, in [`execute_sweep`].
pub trait SweepKind: Kind + Sized {
    /// Whether several sweeps of the kind pool into one report (rr and ping, DNS: rows of one
    /// table); rpm and latency campaigns, each a test of its own, stand side by side instead.
    const POOLS: bool = true;
    /// The newest campaign's id.
    fn last_id(store: &Store) -> Result<Option<i64>> {
        store.last_id::<Self>()
    }
    /// The ids of every campaign of the kind, oldest first.
    fn ids(store: &Store) -> Result<Vec<i64>> {
        let all = store.campaigns::<Self>()?;
        Ok(all.iter().map(|(info, _)| Self::about(info).id).collect())
    }
    /// One campaign, `None` when there is no such id.
    fn find(store: &Store, id: i64) -> Result<Option<Self::Info>> {
        store.campaign::<Self>(id)
    }
    /// What every sweep's heading says of it.
    fn about(info: &Self::Info) -> About<'_>;
    /// What ran, after the heading's status: " against …", ": name type to resolver".
    fn what(info: &Self::Info) -> String;
    /// Its report document.
    fn document(heading: SweepHeading, results: &[Self::Result]) -> std::io::Result<Document>;
    /// The report document of several sweeps pooled, each with its name ("ping sweep 1"): by
    /// default their results in order, as one sweep's.
    fn pooled(
        heading: SweepHeading,
        sweeps: Vec<(String, Vec<Self::Result>)>,
    ) -> std::io::Result<Document> {
        let all: Vec<Self::Result> = sweeps.into_iter().flat_map(|(_, r)| r).collect();
        Self::document(heading, &all)
    }
    /// Its JSON document, as the command's `--json` printed it.
    fn json(info: Self::Info, results: Vec<Self::Result>) -> impl Serialize;
}

/// What the heading of every kind of stored sweep says of it.
#[derive(Debug, Clone, Copy)]
pub struct About<'a> {
    /// Which kind it is (a ping sweep among the rr sweeps).
    pub kind: CampaignKind,
    /// Its store id.
    pub id: i64,
    /// How it ended.
    pub status: Status,
    /// Its start, seconds since the Unix epoch.
    pub started_at_unix_s: i64,
    /// The host it ran on, if known.
    pub host_name: Option<&'a str>,
}

impl SweepKind for Dns {
    fn about(info: &Self::Info) -> About<'_> {
        About {
            kind: info.kind,
            id: info.id,
            status: info.status,
            started_at_unix_s: info.campaign.started_at_unix_s,
            host_name: info.campaign.host_name.as_deref(),
        }
    }
    fn what(info: &Self::Info) -> String {
        let c = &info.campaign;
        format!(": {} {} to {}", c.name, c.record_type, c.resolver)
    }
    fn document(heading: SweepHeading, results: &[Self::Result]) -> std::io::Result<Document> {
        report::dns::document(heading, results)
    }
    fn json(info: Self::Info, results: Vec<Self::Result>) -> impl Serialize {
        let c = info.campaign;
        DnsDocument {
            schema_version: DNS_SCHEMA_VERSION,
            command: "dns".into(),
            resolver: c.resolver,
            name: c.name,
            record_type: c.record_type,
            results,
        }
    }
}

/// `report --rr` reads ping sweeps too: they are stored in the rr sweeps' table.
impl SweepKind for Rr {
    fn last_id(store: &Store) -> Result<Option<i64>> {
        Ok(store.last_id::<Rr>()?.max(store.last_id::<Ping>()?))
    }
    fn ids(store: &Store) -> Result<Vec<i64>> {
        let mut ids: Vec<i64> = store.campaigns::<Rr>()?.iter().map(|(i, _)| i.id).collect();
        ids.extend(store.campaigns::<Ping>()?.iter().map(|(i, _)| i.id));
        ids.sort_unstable();
        Ok(ids)
    }
    fn find(store: &Store, id: i64) -> Result<Option<Self::Info>> {
        match store.campaign::<Rr>(id)? {
            Some(info) => Ok(Some(info)),
            None => store.campaign::<Ping>(id),
        }
    }
    fn about(info: &Self::Info) -> About<'_> {
        About {
            // `ping` is stored as an rr-like sweep; its report says which it was.
            kind: info.kind,
            id: info.id,
            status: info.status,
            started_at_unix_s: info.campaign.started_at_unix_s,
            host_name: info.campaign.host_name.as_deref(),
        }
    }
    fn what(info: &Self::Info) -> String {
        format!(" against {}", info.campaign.server)
    }
    fn document(heading: SweepHeading, results: &[Self::Result]) -> std::io::Result<Document> {
        report::rr::document(heading, results)
    }
    fn pooled(
        heading: SweepHeading,
        sweeps: Vec<(String, Vec<Self::Result>)>,
    ) -> std::io::Result<Document> {
        report::rr::pooled_document(heading, &sweeps)
    }
    fn json(info: Self::Info, results: Vec<Self::Result>) -> impl Serialize {
        RrDocument {
            schema_version: RR_SCHEMA_VERSION,
            command: info.kind.name().into(),
            server: info.campaign.server,
            results,
        }
    }
}

impl SweepKind for Rpm {
    const POOLS: bool = false;
    fn about(info: &Self::Info) -> About<'_> {
        About {
            kind: info.kind,
            id: info.id,
            status: info.status,
            started_at_unix_s: info.campaign.started_at_unix_s,
            host_name: info.campaign.host_name.as_deref(),
        }
    }
    fn what(info: &Self::Info) -> String {
        let c = &info.campaign;
        format!(
            " against {}, {} load",
            c.server,
            report::rpm::direction_words(c.direction)
        )
    }
    fn document(heading: SweepHeading, results: &[Self::Result]) -> std::io::Result<Document> {
        report::rpm::document(heading, results)
    }
    fn json(info: Self::Info, results: Vec<Self::Result>) -> impl Serialize {
        RpmCampaignDocument::new(info, results)
    }
}

impl SweepKind for Latency {
    const POOLS: bool = false;
    fn about(info: &Self::Info) -> About<'_> {
        About {
            kind: info.kind,
            id: info.id,
            status: info.status,
            started_at_unix_s: info.campaign.started_at_unix_s,
            host_name: info.campaign.host_name.as_deref(),
        }
    }
    fn what(info: &Self::Info) -> String {
        let c = &info.campaign;
        format!(" against {}, phases {}", c.server, c.phases)
    }
    fn document(heading: SweepHeading, results: &[Self::Result]) -> std::io::Result<Document> {
        report::latency::document(heading, results)
    }
    fn json(info: Self::Info, results: Vec<Self::Result>) -> impl Serialize {
        LatencyCampaignDocument::new(info, results)
    }
}

/// Runs `wirebench report --dns|--rr|--rpm`: stored sweeps of kind `K` as text, Markdown,
/// CSV (one row per result, base units), HTML (charts and tables) or JSON (as the command's
/// `--json` printed it). Several rr (and ping) or DNS sweeps make one report, their results
/// pooled in one table and one set of charts, with a line naming each sweep; JSON is then an
/// array of the sweeps' documents. Several rpm or latency campaigns, or sweeps from several
/// hosts, stand side by side (see [`sweeps_document`]).
pub fn execute_sweep<K: SweepKind>(
    db: impl Into<Location>,
    which: &Which,
    format: Format,
    output: Option<&Path>,
    stdout: &mut impl Write,
) -> Result<()> {
    let db: &Location = &db.into();
    let store = Store::open_existing(db)?;
    let ids = sweep_ids::<K>(&store, db, which)?;
    let mut sweeps = Vec::new();
    for id in ids {
        sweeps.push(load_sweep::<K>(&store, db, id)?);
    }
    let mut body = Vec::new();
    match report::sweep_exporter(format) {
        Some(exporter) => {
            let headings: Vec<SweepHeading> =
                sweeps.iter().map(|(info, _)| heading::<K>(info)).collect();
            let doc = sweeps_document::<K>(headings, sweeps)?;
            exporter.write(&doc, &mut body)?;
        }
        None if sweeps.len() == 1 => {
            // JSON is each kind's own document, as the command's `--json` printed it.
            let (info, results) = sweeps.remove(0);
            serde_json::to_writer_pretty(&mut body, &K::json(info, results))
                .context("while writing the JSON")?;
            body.push(b'\n');
        }
        None => {
            let docs: Vec<_> = sweeps.into_iter().map(|(i, r)| K::json(i, r)).collect();
            serde_json::to_writer_pretty(&mut body, &docs).context("while writing the JSON")?;
            body.push(b'\n');
        }
    }
    deliver(&body, output, stdout)
}

/// The ids a sweep report covers: those given, or the newest (several only where the kind
/// pools).
fn sweep_ids<K: SweepKind>(store: &Store, db: &Location, which: &Which) -> Result<Vec<i64>> {
    let (name, noun) = (K::KIND.name(), K::KIND.noun());
    match which {
        Which::Ids(ids) if !ids.is_empty() => Ok(ids.clone()),
        Which::Last(1) => {
            let id = K::last_id(store)?.ok_or_else(|| {
                UsageError(format!(
                    "there are no {noun}s in {} yet: `wirebench {name}` stores them",
                    db.display()
                ))
            })?;
            Ok(vec![id])
        }
        Which::Last(n) => {
            // The newest n, oldest first (the order `report A B` would take them in).
            let all = K::ids(store)?;
            if all.len() < *n {
                return Err(UsageError(format!(
                    "--last {n}: {} holds {} {noun}(s); give at most that many",
                    db.display(),
                    all.len()
                ))
                .into());
            }
            Ok(all[all.len() - n..].to_vec())
        }
        _ => Err(UsageError(format!("give at least one {noun} id (or --last N)")).into()),
    }
}

/// One stored sweep and its results; refused when it has none.
fn load_sweep<K: SweepKind>(
    store: &Store,
    db: &Location,
    id: i64,
) -> Result<(K::Info, Vec<K::Result>)> {
    let (name, noun) = (K::KIND.name(), K::KIND.noun());
    let info = K::find(store, id)?.ok_or_else(|| {
        UsageError(format!(
            "there is no {noun} {id} in {} (`wirebench {name}` prints the id it stores; \
             `wirebench runs` lists them)",
            db.display()
        ))
    })?;
    let results: Vec<K::Result> = store
        .results::<K>(id)?
        .into_iter()
        .map(|r| r.result)
        .collect();
    if results.is_empty() {
        return Err(UsageError(format!(
            "{noun} {id} has no stored result to report on (it is {})",
            K::about(&info).status.as_str()
        ))
        .into());
    }
    Ok((info, results))
}

/// The report document of one or more sweeps (each with its heading, in the order given).
/// Sweeps of a kind that pools, measured on one host, pool into one document; each host's
/// sweeps are otherwise a part of their own, side by side, and so is each campaign of a kind
/// that does not pool (rpm, latency: a test each).
fn sweeps_document<K: SweepKind>(
    headings: Vec<SweepHeading>,
    sweeps: Vec<(K::Info, Vec<K::Result>)>,
) -> Result<Document> {
    // `sweep_ids` gives at least one id (clap wants one, --last counts from 1).
    let Some(mut first) = headings.first().cloned() else {
        return Err(UsageError("give a sweep's id (or --last)".into()).into());
    };
    let hosts = {
        let mut all: Vec<&str> = headings.iter().map(|h| h.host.as_str()).collect();
        all.sort_unstable();
        all.dedup();
        all.len()
    };
    // The parts, in the order of their first sweep: (CSV name, title, named sweeps).
    let mut parts: Vec<PartOf<K>> = Vec::new();
    for (h, (_, results)) in headings.iter().zip(sweeps) {
        let name = format!("{} {}", h.kind, h.campaign);
        let (key, title) = match (K::POOLS, hosts > 1) {
            (true, _) => (h.host.clone(), format!("On {}", h.host)),
            (false, false) => (name.clone(), name.clone()),
            (false, true) => (name.clone(), format!("{name} on {}", h.host)),
        };
        match parts.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, group)) => group.push((name, results)),
            None => parts.push((key, title, vec![(name, results)])),
        }
    }
    if headings.len() > 1 {
        // The title names the first sweep; the heading line names them all.
        first.what = format!(
            "{}; {} {}",
            first.what,
            if parts.len() > 1 {
                "beside"
            } else {
                "pooled with"
            },
            headings[1..]
                .iter()
                .map(SweepHeading::line)
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    if parts.len() == 1 {
        let group = parts.into_iter().flat_map(|(_, _, g)| g).collect();
        let mut doc = pooled_document::<K>(first, group)?;
        if headings.len() > 1 {
            doc.lines.insert(
                0,
                format!(
                    "{} sweeps pooled: their results are rows of one table, in the order given, and points of one set of charts (a series names its sweep where two sweeps measured it at one load).",
                    headings.len()
                ),
            );
        }
        return Ok(doc);
    }
    side_by_side::<K>(first, parts, headings.len())
}

/// The document of `parts` side by side (each host's sweeps, or each campaign of a kind that
/// does not pool), `sweeps` in all, with a line that says how they are laid out.
fn side_by_side<K: SweepKind>(
    heading: SweepHeading,
    parts: Vec<PartOf<K>>,
    sweeps: usize,
) -> Result<Document> {
    let count = parts.len();
    let mut sides = Vec::new();
    for (name, title, group) in parts {
        let doc = pooled_document::<K>(heading.clone(), group)?;
        sides.push(Part { name, title, doc });
    }
    let (column, note) = if K::POOLS {
        (
            "host",
            format!(
                "{sweeps} sweeps from {count} hosts, side by side: each host's results are a section of their own (sweeps of one host pooled), and the CSV names each row's host."
            ),
        )
    } else {
        (
            "campaign",
            format!(
                "{count} {}s side by side: each a section of its own, and the CSV names each row's campaign.",
                K::KIND.noun()
            ),
        )
    };
    let mut doc = Document::side_by_side(heading, column, sides);
    doc.lines.insert(0, note);
    Ok(doc)
}

/// A sweep's name ("rr sweep 1") and its results.
type Named<K> = (String, Vec<<K as Kind>::Result>);

/// A part of a side-by-side report being gathered: its CSV name, its title, its sweeps.
type PartOf<K> = (String, String, Vec<Named<K>>);

/// The document of one host's sweeps, each with its name: pooled when there are several.
fn pooled_document<K: SweepKind>(
    heading: SweepHeading,
    named: Vec<Named<K>>,
) -> std::io::Result<Document> {
    if named.len() > 1 {
        K::pooled(heading, named)
    } else {
        let all: Vec<K::Result> = named.into_iter().flat_map(|(_, r)| r).collect();
        K::document(heading, &all)
    }
}

/// The heading of a sweep's report.
fn heading<K: SweepKind>(info: &K::Info) -> SweepHeading {
    let about = K::about(info);
    SweepHeading {
        kind: about.kind.noun(),
        campaign: about.id,
        started: format_utc(about.started_at_unix_s),
        status: about.status.as_str().to_string(),
        host: about.host_name.unwrap_or("unknown").to_string(),
        what: K::what(info),
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
