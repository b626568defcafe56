//! The flags of `wirebench dns`: the resolver, the query, transports, load and DoT trust.

use clap::Args;

use super::common::StoreArgs;

/// Flags of `wirebench dns`.
#[derive(Debug, Args)]
pub struct DnsArgs {
    /// The resolver, ADDR or ADDR:PORT (IPv6 as [ADDR]:PORT). The port (default 53) is used for
    /// UDP and TCP; DoT uses --dot-port.
    #[arg(long)]
    pub resolver: String,
    /// The name every query asks for (e.g. example.org).
    #[arg(long)]
    pub name: String,
    /// The record type asked for: A, AAAA, MX, TXT, NS, SOA, CNAME, ...
    #[arg(long = "type", default_value = "A")]
    pub rtype: String,
    /// Transport(s): udp, tcp, dot (DNS-over-TLS); a comma list runs each in turn.
    #[arg(long, default_value = "udp")]
    pub transport: String,
    /// Queries per flow, at least 1.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub count: u64,
    /// Queries outstanding per flow (K), 1 to 10000; a comma list (10,20,40,80) runs each in
    /// turn and prints the timeout/loss curve.
    #[arg(long, default_value = "1")]
    pub concurrency: String,
    /// Flows (T), 1 to 1024: each its own UDP socket or TCP/TLS connection.
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// TCP and DoT: open a fresh connection for every query (UDP has none to open and ignores
    /// it); the connect and handshake times are reported apart from the response time.
    #[arg(long)]
    pub new_connection: bool,
    /// How long a query waits for its answer (100us to 60s). UDP: then it is sent again
    /// (--retries) or counted as a timeout; TCP/DoT: a connection silent this long loses its
    /// outstanding queries (timeouts) and is opened again.
    #[arg(long, default_value = "1s")]
    pub timeout: String,
    /// UDP: times a query is sent again (same ID) after a timeout before it counts as a
    /// timeout (0 to 100).
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// DoT: the resolver's TLS port.
    #[arg(long, default_value_t = 853)]
    pub dot_port: u16,
    /// DoT: the name sent as SNI and checked against the certificate. Default: the resolver
    /// as given in --resolver (an IP address then needs an IP in the certificate).
    #[arg(long)]
    pub dot_name: Option<String>,
    /// DoT: trust certificates issued by the CA certificate(s) in this PEM file.
    #[arg(long, value_name = "PEM")]
    pub dot_ca: Option<std::path::PathBuf>,
    /// DoT: accept any certificate. The queries are still encrypted, but anyone on the path
    /// can pose as the resolver: for tests against your own resolver only.
    #[arg(long, conflicts_with = "dot_ca")]
    pub dot_insecure: bool,
    /// Print one JSON document (schema: docs/dns-output.schema.json) instead of text (-J as
    /// iperf3's).
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Where the results are stored (each result committed as it finishes); `wirebench report
    /// --dns ID` charts a stored DNS campaign.
    #[command(flatten)]
    pub store: StoreArgs,
}
