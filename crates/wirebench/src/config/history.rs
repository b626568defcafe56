//! The flags of the commands that read the store (`export`, `report`, `compare`, `store copy`)
//! as typed values: which kind of campaign, which campaigns, in which format, how far a
//! regression may go.

use std::path::PathBuf;

use wirebench_core::record::lifecycle::CampaignKind;
use wirebench_core::vocab::error::UsageError;

use crate::cli::{CompareArgs, ExportArgs, ReportArgs, ReportFormat, ReportLayout, StoreCopyArgs};
use crate::report::{Format, Layout};
use crate::store::Location;

use super::error::usage;

/// The kind of campaign `export --rr/--dns/--rpm` names (a transfer campaign without).
pub fn export_kind(args: &ExportArgs) -> CampaignKind {
    match (args.rr, args.dns, args.rpm) {
        (true, _, _) => CampaignKind::Rr,
        (_, true, _) => CampaignKind::Dns,
        (_, _, true) => CampaignKind::Rpm,
        _ => CampaignKind::Run,
    }
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
pub fn report_query(args: &ReportArgs) -> ReportQuery {
    let selection = match args.last {
        Some(n) => Selection::Last(usize::try_from(n).unwrap_or(usize::MAX)),
        None => Selection::Ids(args.ids.clone()),
    };
    let sweep = match (args.dns, args.rpm, args.rr) {
        (true, _, _) => Some(CampaignKind::Dns),
        (_, true, _) => Some(CampaignKind::Rpm),
        (_, _, true) => Some(CampaignKind::Rr),
        _ => None,
    };
    ReportQuery {
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
    }
}

/// What `wirebench compare` compares.
#[derive(Debug, Clone, Copy)]
pub struct CompareQuery {
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
pub fn compare_query(args: &CompareArgs) -> Result<CompareQuery, UsageError> {
    if let Some(pct) = args.fail_on_regression {
        if !(pct.is_finite() && pct >= 0.0) {
            return Err(usage(format!(
                "--fail-on-regression {pct}: expected a percentage of 0 or more, e.g. 10"
            )));
        }
    }
    Ok(CompareQuery {
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
