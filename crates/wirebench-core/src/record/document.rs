//! The documents wirebench writes for programs: `run --json` and `export` (one layout, the
//! export adding the campaign), and what `import` reads back. Owns their versions and the
//! schemas in docs/ (run-output.schema.json, export.schema.json).

use serde::{Deserialize, Serialize};

use super::campaign::{Environment, Status};
use super::headline::{DirectionHeadlines, Headline};
use super::ratesearch::RateSearchRecord;
use super::run::{Parameters, RunRecord};
use super::summary::{summarise, ConfigurationSummary};
use crate::vocab::sweep::Point;

/// Version of the run document's layout; bumped on any incompatible change. Version 2: the
/// sides' `throughput_bps` became `rate_bps`, each run carries its `headline` (goodput, sent
/// rate, UDP delivery), and `summary` is one entry per configuration with goodput and loss.
pub const SCHEMA_VERSION: u32 = 2;

/// The oldest run document layout `import` still reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;

/// The whole `run --json` document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDocument {
    /// Layout version.
    pub schema_version: u32,
    /// Which program wrote it.
    pub tool: Tool,
    /// What was asked.
    pub parameters: Parameters,
    /// Every finished run, in order, with its headline figures.
    pub runs: Vec<RunEntry>,
    /// Min/mean/median/max/stddev per configuration.
    pub summary: Vec<ConfigurationSummary>,
    /// Why the campaign stopped early, if it did.
    pub error: Option<String>,
    /// `--rate max`: the search that found the rate the runs ran at (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_search: Option<RateSearchRecord>,
}

/// One run in a document: the record, and the figures it is judged by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEntry {
    /// The run.
    #[serde(flatten)]
    pub run: RunRecord,
    /// Goodput, sent rate, UDP delivery and retransmissions, derived from the run (with
    /// `--bidir`, both directions added up: `headline.both_directions`).
    pub headline: Headline,
    /// `--bidir`: each direction's headline figures; absent for a one-direction run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directions: Option<DirectionHeadlines>,
}

/// Program name and version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// Always "wirebench".
    pub name: String,
    /// Version of the wirebench that wrote it.
    pub version: String,
}

impl RunDocument {
    /// The document of a campaign's runs (each measured at its point), written by wirebench
    /// `version`.
    pub fn new(
        version: &str,
        parameters: Parameters,
        runs: &[(Point, RunRecord)],
        error: Option<String>,
    ) -> RunDocument {
        RunDocument {
            schema_version: SCHEMA_VERSION,
            tool: Tool {
                name: "wirebench".into(),
                version: version.into(),
            },
            parameters,
            runs: runs
                .iter()
                .map(|(_, r)| RunEntry {
                    run: r.clone(),
                    headline: r.headline(),
                    directions: r.direction_headlines(),
                })
                .collect(),
            summary: summarise(runs),
            error,
            rate_search: None,
        }
    }
}

/// The document `wirebench export` prints: the `run --json` document plus the campaign's
/// metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExportDocument {
    /// The run document, as `run --json` prints it.
    #[serde(flatten)]
    pub document: RunDocument,
    /// Where and when the campaign ran, and how it ended.
    pub campaign: CampaignMeta,
}

/// A campaign's metadata in an export file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignMeta {
    /// Id in the exporting store (a new id is given on import).
    pub id: i64,
    /// Start time, seconds since the Unix epoch.
    pub started_at_unix_s: i64,
    /// End time, seconds since the Unix epoch; null if it never ended cleanly.
    pub finished_at_unix_s: Option<i64>,
    /// How it ended.
    pub status: Status,
    /// Runs planned.
    pub planned_runs: u64,
    /// Message sizes planned, in plan order (absent: the parameters' `msg_size`).
    #[serde(default)]
    pub msg_sizes: Vec<u32>,
    /// Totals planned, in plan order (absent: the parameters' `total_bytes`).
    #[serde(default)]
    pub totals: Vec<u64>,
    /// Message size and total of each run, parallel to `runs` (absent: the parameters').
    #[serde(default)]
    pub run_points: Vec<Point>,
    /// The host it ran on.
    pub environment: Environment,
    /// The id that follows the campaign between stores: importing a later export of it (once
    /// it finished) brings the imported copy up to date. Absent in older exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Each run's 1-based place in the plan, parallel to `runs` (absent: 1, 2, 3, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run_positions: Vec<u64>,
}

/// What `import` reads: an export file, or a `run --json` document (no `campaign` block), of
/// any layout from [`OLDEST_READABLE_VERSION`] to [`SCHEMA_VERSION`]. Derived fields
/// (`headline`, `summary`) are not read: they are computed again from the runs.
#[derive(Debug, Clone, Deserialize)]
pub struct ImportDocument {
    /// Layout version.
    pub schema_version: u32,
    /// What was asked.
    pub parameters: Parameters,
    /// The runs.
    pub runs: Vec<RunRecord>,
    /// Why the campaign stopped early, if it did.
    #[serde(default)]
    pub error: Option<String>,
    /// The campaign block of an export file.
    #[serde(default)]
    pub campaign: Option<CampaignMeta>,
}
