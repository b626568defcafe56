//! Flag groups several commands share: how a server's address is resolved, and where results
//! are stored.

use std::path::PathBuf;

use clap::Args;

/// Where the server is beyond its name (iperf3's -p, -4 and -6), for `run`, `ping` and `rr`.
#[derive(Debug, Args, Clone, Default)]
pub struct AddressArgs {
    /// The server's port, as iperf3's -p: joined to a --server (or --iperf3) HOST given
    /// without one. Default: 5310 (--iperf3: 5201).
    #[arg(short = 'p', long = "port", value_name = "PORT")]
    pub port: Option<u16>,
    /// IPv4 only, as iperf3's -4: a server name resolves to an IPv4 address (the embedded server
    /// listens on 127.0.0.1, as by default).
    #[arg(
        short = '4',
        long = "ipv4",
        visible_alias = "version4",
        conflicts_with = "ipv6"
    )]
    pub ipv4: bool,
    /// IPv6 only, as iperf3's -6: a server name resolves to an IPv6 address; the embedded
    /// server listens on ::1.
    #[arg(short = '6', long = "ipv6", visible_alias = "version6")]
    pub ipv6: bool,
}

/// Where the results database is (for the subcommands that read or write it).
#[derive(Debug, Args, Clone, Default)]
pub struct DbArgs {
    /// Results database: a file, or a PostgreSQL database as postgres://user[:password]@host[:port]/dbname
    /// (no TLS). Default: $WIREBENCH_DB, else $XDG_DATA_HOME/wirebench/results.sqlite3
    /// (~/.local/share/wirebench/results.sqlite3 when XDG_DATA_HOME is unset).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}

/// Results-store flags of `wirebench run`.
#[derive(Debug, Args, Clone, Default)]
pub struct StoreArgs {
    /// Results database; every finished run is committed to it before the next starts. A file,
    /// or a PostgreSQL database as postgres://user[:password]@host[:port]/dbname (no TLS).
    /// Default: $WIREBENCH_DB, else $XDG_DATA_HOME/wirebench/results.sqlite3
    /// (~/.local/share/wirebench/...). A busy store is waited for ($WIREBENCH_STORE_WAIT,
    /// default 30s); a result it still cannot take is kept in a spool file, named on stderr,
    /// that the next command opening the store brings in (docs/store.md).
    #[arg(long, value_name = "PATH|URL", conflicts_with = "no_store")]
    pub db: Option<PathBuf>,
    /// Do not store the results.
    #[arg(long)]
    pub no_store: bool,
}
