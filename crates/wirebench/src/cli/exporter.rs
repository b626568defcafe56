//! The flags of `wirebench exporter`: where it listens, who may probe, and the limits of a probe.

use std::path::PathBuf;

use clap::Args;

/// Flags of `wirebench exporter`.
#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Address and port to serve HTTP on (/probe, /metrics).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9311")]
    pub listen: String,
    /// Targets a probe may test: IP, IP:PORT, [IPv6]:PORT, a CIDR block (10.0.0.0/8) or a host
    /// name (resolved once, at start); repeat the flag for more. Default: loopback only
    /// (127.0.0.0/8 and ::1). Others get 403; a probe's target is checked on its resolved address.
    #[arg(long, value_name = "HOST[:PORT]|CIDR", action = clap::ArgAction::Append)]
    pub allow: Vec<String>,
    /// Largest total one probe may transfer (a larger total= gets 400). Whatever the total, a
    /// probe holds at most 256 requests in flight (flows x concurrency).
    #[arg(long, value_name = "SIZE", default_value = "100MiB")]
    pub max_total: String,
    /// Longest a probe may run; a smaller scrape timeout (X-Prometheus-Scrape-Timeout-Seconds,
    /// less 0.5s) wins. A probe that runs out of time answers wirebench_probe_success 0.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub max_time: String,
    /// Probes that may run at once; more get 429 (1 to 64).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_concurrent: usize,
    /// Store every finished probe in the results database, as `run`, `rr`, `dns` and
    /// `run --iperf3` store theirs (run and iperf3 probes as one-run campaigns, ping and rr as
    /// rr sweeps, dns as DNS campaigns), so `wirebench runs` and Prometheus agree. Default: no.
    #[arg(long)]
    pub store: bool,
    /// The database --store writes to (implies --store): a file or a postgres:// URL.
    /// Default: $WIREBENCH_DB, else the default results database.
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}
