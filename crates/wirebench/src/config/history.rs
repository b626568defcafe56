//! The flags of the commands that read or fill the store (`show`, `export`, `report`,
//! `compare`, `import`, `store copy`) as typed values: which store, which kind of campaign,
//! which campaigns, in which format, how far a regression may go.

use std::path::PathBuf;

use wirebench_core::record::lifecycle::CampaignKind;

use crate::cli::{
    CompareArgs, ExportArgs, ImportArgs, ReportArgs, ReportFormat, ReportLayout, ShowArgs,
    StoreCopyArgs,
};
use crate::report::{Format, Layout};
use crate::store::Location;

use super::error::usage;
use super::store_target::db_path;

/// One stored campaign: `show ID` and `export ID`.
#[derive(Debug, Clone)]
pub struct CampaignQuery {
    /// The store.
    pub db: Location,
    /// The campaign's id.
    pub id: i64,
    /// Its kind (`export --rr/--dns/--rpm`; a transfer campaign without, and for `show`).
    pub kind: CampaignKind,
}

/// `wirebench show ID`.
pub fn show_query(args: &ShowArgs) -> anyhow::Result<CampaignQuery> {
    Ok(CampaignQuery {
        db: db_path(&args.db)?,
        id: args.id,
        kind: CampaignKind::Run,
    })
}

/// `wirebench export ID [--rr|--dns|--rpm|--latency]`.
pub fn export_query(args: &ExportArgs) -> anyhow::Result<CampaignQuery> {
    let kind = match (args.rr, args.dns, args.rpm, args.latency) {
        (true, ..) => CampaignKind::Rr,
        (_, true, ..) => CampaignKind::Dns,
        (_, _, true, _) => CampaignKind::Rpm,
        (.., true) => CampaignKind::Latency,
        _ => CampaignKind::Run,
    };
    Ok(CampaignQuery {
        db: db_path(&args.db)?,
        id: args.id,
        kind,
    })
}

/// What `wirebench import` reads, and into which store.
#[derive(Debug, Clone)]
pub struct ImportQuery {
    /// The store.
    pub db: Location,
    /// The exported document.
    pub file: PathBuf,
    /// `--again`: import a campaign the store already holds once more.
    pub again: bool,
}

/// `wirebench import FILE`.
pub fn import_query(args: &ImportArgs) -> anyhow::Result<ImportQuery> {
    Ok(ImportQuery {
        db: db_path(&args.db)?,
        file: args.file.clone(),
        again: args.again,
    })
}

/// Which campaigns a report covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    /// These ids, in this order.
    Ids(Vec<i64>),
    /// The newest this many.
    Last(usize),
}

/// What `wirebench report` writes.
#[derive(Debug, Clone)]
pub struct ReportQuery {
    /// The store.
    pub db: Location,
    /// The campaigns.
    pub selection: Selection,
    /// `--rr`, `--dns` or `--rpm`: a stored sweep of that kind; `None` for transfer campaigns.
    pub sweep: Option<CampaignKind>,
    /// `--format`.
    pub format: Format,
    /// `--layout` (transfer reports).
    pub layout: Layout,
    /// `--run`: the run of the HTML throughput-over-time chart (1-based).
    pub run: Option<usize>,
    /// `-o/--output`: the file written instead of stdout.
    pub output: Option<PathBuf>,
}

/// `wirebench report`'s flags.
pub fn report_query(args: &ReportArgs) -> anyhow::Result<ReportQuery> {
    let db = db_path(&args.db)?;
    let selection = match args.last {
        Some(n) => Selection::Last(usize::try_from(n).unwrap_or(usize::MAX)),
        None => Selection::Ids(args.ids.clone()),
    };
    let sweep = match (args.dns, args.rpm, args.rr, args.latency) {
        (true, ..) => Some(CampaignKind::Dns),
        (_, true, ..) => Some(CampaignKind::Rpm),
        (_, _, true, _) => Some(CampaignKind::Rr),
        (.., true) => Some(CampaignKind::Latency),
        _ => None,
    };
    Ok(ReportQuery {
        db,
        selection,
        sweep,
        format: match args.format {
            ReportFormat::Table => Format::Table,
            ReportFormat::Markdown => Format::Markdown,
            ReportFormat::Csv => Format::Csv,
            ReportFormat::Json => Format::Json,
            ReportFormat::Html => Format::Html,
        },
        layout: match args.layout {
            ReportLayout::Configurations => Layout::Configurations,
            ReportLayout::Grid => Layout::Grid,
        },
        run: args.run.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        output: args.output.clone(),
    })
}

/// What `wirebench compare` compares.
#[derive(Debug, Clone)]
pub struct CompareQuery {
    /// The store.
    pub db: Location,
    /// The baseline campaign.
    pub a: i64,
    /// The campaign compared with it.
    pub b: i64,
    /// `--fail-on-regression PCT`: a percentage of 0 or more.
    pub fail_on_regression: Option<f64>,
    /// `--rpm`: two responsiveness campaigns.
    pub rpm: bool,
}

/// `wirebench compare`'s flags, the regression threshold checked.
pub fn compare_query(args: &CompareArgs) -> anyhow::Result<CompareQuery> {
    let db = db_path(&args.db)?;
    if let Some(pct) = args.fail_on_regression {
        if !(pct.is_finite() && pct >= 0.0) {
            return Err(usage(format!(
                "--fail-on-regression {pct}: expected a percentage of 0 or more, e.g. 10"
            ))
            .into());
        }
    }
    Ok(CompareQuery {
        db,
        a: args.a,
        b: args.b,
        fail_on_regression: args.fail_on_regression,
        rpm: args.rpm,
    })
}

/// `wirebench store copy FROM TO`: the two stores.
pub fn store_copy(args: &StoreCopyArgs) -> anyhow::Result<(Location, Location)> {
    let from = Location::parse(args.from.as_os_str())?;
    let to = Location::parse(args.to.as_os_str())?;
    Ok((from, to))
}
