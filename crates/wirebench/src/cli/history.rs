//! The flags of the history commands: `runs`, `show`, `report`, `compare`, `export`, `import`
//! and `store copy`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::DbArgs;

/// Flags of `wirebench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline campaign id.
    pub a: i64,
    /// Campaign to compare with the baseline.
    pub b: i64,
    /// Exit with status 1 when B's median time is more than PCT percent above A's and the
    /// difference is significant (e.g. 10).
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
    /// A and B are rpm campaigns (as `wirebench rpm` printed them): compares RPM, loaded p50
    /// and p99 and the sample counts, with a Mann–Whitney U test of the probes' round trips.
    /// With --fail-on-regression PCT, exit status 1 when B's round trips are significantly
    /// longer and its RPM is lower, or its loaded p99 higher, by more than PCT percent.
    #[arg(long)]
    pub rpm: bool,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Flags of `wirebench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Campaign ids, as `wirebench runs` lists them: several make one report (e.g. one
    /// campaign per protocol), a configuration measured in more than one pooling their runs;
    /// campaigns from different hosts stand side by side instead. With --rr (rr and ping
    /// sweeps) or --dns, several sweeps (or --last N) pool into one table and one set of
    /// charts, one section per host; with --rpm or --latency, each campaign is a section of
    /// its own, side by side.
    #[arg(
        value_name = "ID",
        required_unless_present = "last",
        conflicts_with = "last"
    )]
    pub ids: Vec<i64>,
    /// Report on the newest campaign, or with N the newest N as one report (`--last 7`).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1",
          value_parser = clap::value_parser!(u64).range(1..10_000))]
    pub last: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
    /// How the tables are laid out: one block per configuration (every figure's min, avg,
    /// median, max, stddev, and both sides' counts), or `grid`: the lab-report table, rows =
    /// totals (or message sizes), columns = protocol × mechanism (with its message size when
    /// each has its own), each cell min / avg / max of transfer time and of goodput, then the
    /// messages and bytes each side counted and UDP's messages lost (text, markdown, csv and
    /// html).
    #[arg(long, value_enum, default_value = "configurations")]
    pub layout: ReportLayout,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// HTML: the run whose interval series (measured with `run -i D`) the throughput-over-time
    /// chart shows, numbered as `wirebench show` lists them (one campaign). Default: the run
    /// with the longest series.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub run: Option<u64>,
    /// The ids (or --last) are DNS campaigns, as `wirebench dns` printed them (several, such as
    /// UDP, TCP and TCP with a new connection, pool into one table): --format html charts UDP
    /// loss against TCP retransmissions and the response time against concurrency; table,
    /// markdown and csv print what was answered and how fast; json their results.
    #[arg(long, conflicts_with_all = ["run", "layout"])]
    pub dns: bool,
    /// The ids (or --last) are rr or ping sweeps, as `wirebench rr` and `ping` printed them
    /// (several pool into one report): --format html charts UDP loss and TCP/QUIC
    /// retransmissions, response time and requests/s against the requests in flight (or the
    /// flows); table, markdown, csv, with each session's throughput in bit/s; json their
    /// results.
    #[arg(long, conflicts_with_all = ["run", "dns", "layout"])]
    pub rr: bool,
    /// The id (or --last) is an rpm campaign, as `wirebench rpm` printed it: RPM with the
    /// draft's rating, its components, idle and loaded latency and the intervals; --format html
    /// charts probe latency over time above the goodput; table, markdown, csv (one row per
    /// interval) or json.
    #[arg(long, conflicts_with_all = ["run", "dns", "rr", "layout"])]
    pub rpm: bool,
    /// The id (or --last) is a latency campaign, as `wirebench latency` printed it: the clock
    /// bound, each phase's round trip, up and down delays and goodput; --format html charts
    /// each direction's delay over time with the phases named; table, markdown, csv (one row
    /// per phase) or json.
    #[arg(long, conflicts_with_all = ["run", "dns", "rr", "rpm", "layout"])]
    pub latency: bool,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// The table layouts of `wirebench report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportLayout {
    /// One block per configuration (what `run --repeat` ends with).
    Configurations,
    /// Rows = totals or sizes, columns = protocol × mechanism, cells min / avg / max.
    Grid,
}

/// The formats of `wirebench report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Plain-text tables ("Statistics for TCP Streaming ...").
    Table,
    /// Markdown tables (per configuration, or the grid).
    Markdown,
    /// CSV: one row per configuration × view × metric, or one per row of the grid.
    Csv,
    /// One JSON document.
    Json,
    /// One self-contained HTML file with SVG charts and the tables.
    Html,
}

/// Flags of `wirebench show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Campaign id, as `wirebench runs` lists it.
    pub id: i64,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Flags of `wirebench export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Campaign id, as `wirebench runs` lists it.
    pub id: i64,
    /// The id is a DNS campaign.
    #[arg(long)]
    pub dns: bool,
    /// The id is an rr (or ping) sweep.
    #[arg(long, conflicts_with = "dns")]
    pub rr: bool,
    /// The id is an rpm campaign.
    #[arg(long, conflicts_with_all = ["dns", "rr"])]
    pub rpm: bool,
    /// The id is a latency campaign.
    #[arg(long, conflicts_with_all = ["dns", "rr", "rpm"])]
    pub latency: bool,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Flags of `wirebench import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// JSON file written by `wirebench export` or `wirebench run --json`, or a spool file
    /// (`-` reads stdin); at most 256 MiB. A file whose figures cannot be true (a server that
    /// read more than its client sent, a negative time, more results than planned, a control
    /// character in any string) is refused whole, with the reason (docs/security.md).
    pub file: PathBuf,
    /// Import it even if the store already holds all of this campaign (the same uid, or for
    /// older exports the same start time, parameters and host), as a campaign of its own: by
    /// default a second import of one export is refused.
    #[arg(long)]
    pub again: bool,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// The subcommands of `wirebench store`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy the history of one store into another (an SQLite file, a PostgreSQL database).
    ///
    /// Every campaign, run (finished and aborted), DNS campaign, rr and ping sweep and rpm
    /// campaign of --from goes into --to, each campaign in one transaction; ids are given anew
    /// by --to. Campaigns --to already holds in full are skipped, so running it twice copies
    /// nothing twice; one --to holds unfinished (copied while it ran) is brought up to date.
    /// Both stores are migrated to the current schema first.
    #[command(visible_alias = "migrate")]
    Copy(StoreCopyArgs),
}

/// Flags of `wirebench store copy`.
#[derive(Debug, Args)]
pub struct StoreCopyArgs {
    /// The store to copy from: an SQLite file or a postgres://user@host/dbname URL.
    #[arg(long, value_name = "PATH|URL")]
    pub from: PathBuf,
    /// The store to copy into (created if it is a file that does not exist yet).
    #[arg(long, value_name = "PATH|URL")]
    pub to: PathBuf,
}
