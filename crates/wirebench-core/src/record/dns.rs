//! DNS probe results (`wirebench dns`): one record per transport × concurrency, and the
//! campaign records the store keeps for them. Owns the layout of docs/dns-output.schema.json.

use serde::{Deserialize, Serialize};

use super::lifecycle::{CampaignKind, SweepPlan};
use super::run::{RttFigures, TransportRecord};
use crate::wire::dns::{DnsCounts, DnsTransport};

/// Version of the JSON document below; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole `--json` output of one `wirebench dns` command.
#[derive(Debug, Serialize, Deserialize)]
pub struct DnsDocument {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always `"dns"`.
    pub command: String,
    /// The resolver as named on the command line.
    pub resolver: String,
    /// The name asked for, fully qualified.
    pub name: String,
    /// The record type asked for.
    pub record_type: String,
    /// One result per transport × concurrency, in the order they ran.
    pub results: Vec<DnsResult>,
}

/// One transport × concurrency run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DnsResult {
    /// udp, tcp or dot.
    pub transport: DnsTransport,
    /// The address queried.
    pub resolver_addr: String,
    /// Flows (UDP sockets or connections).
    pub flows: u32,
    /// Queries outstanding per flow.
    pub concurrency: u32,
    /// TCP/DoT: a fresh connection per query.
    pub new_connection: bool,
    /// Queries per flow asked for.
    pub count_per_flow: u64,
    /// Per-query (UDP: per-copy) timeout, ns.
    pub timeout_ns: u64,
    /// UDP retries allowed per query.
    pub retries_allowed: u32,
    /// What was counted.
    pub counts: DnsCounts,
    /// timeouts / sent (0 when nothing was sent).
    pub timeout_ratio: f64,
    /// First query → last settled, ns.
    pub elapsed_ns: u64,
    /// answered / elapsed.
    pub queries_per_second: f64,
    /// Query sent → valid answer, ns.
    pub response: Option<RttFigures>,
    /// TCP connect, ns, one sample per connection (UDP: its TC fallbacks').
    pub tcp_connect: Option<RttFigures>,
    /// TLS handshake after the connect, ns, one sample per DoT connection.
    pub tls_handshake: Option<RttFigures>,
    /// TCP/DoT: (total_retrans - dsack_dups) / data_segs_out from TCP_INFO, summed over the
    /// connections; UDP: retries / datagrams sent; null when unknown.
    pub retrans_rate: Option<f64>,
    /// The client's transport counters.
    pub transport_stats: Option<TransportRecord>,
    /// The first valid answer's answer section, one record per line.
    pub answer: Vec<String>,
}

/// What is known about a DNS campaign when it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewDnsCampaign {
    /// Start time, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// The resolver as named.
    pub resolver: String,
    /// The name asked for, fully qualified.
    pub name: String,
    /// The record type asked for.
    pub record_type: String,
    /// Transports in run order (`udp,tcp,dot`).
    pub transports: String,
    /// Concurrencies in run order (`10,20,40`).
    pub concurrency: String,
    /// Results planned (transports x concurrencies).
    pub planned_results: u64,
    /// The host it ran on.
    pub host_name: Option<String>,
    /// The wirebench that ran it.
    pub wirebench_version: String,
}

impl SweepPlan for NewDnsCampaign {
    const KIND: CampaignKind = CampaignKind::Dns;
}
