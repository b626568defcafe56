//! `wirebench exporter` flags and `/probe` queries → validated values: the exporter's limits
//! and allow-list here, and one probe's configuration by kind in `probe.rs` (built by the same
//! parser and checks as `wirebench run`, `ping`, `rr`, `dns` and `run --iperf3`, so a probe
//! means what the same flags mean there). Refusals carry the HTTP status and a one-line reason;
//! nothing here runs a probe.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use ipnet::IpNet;
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::units::{parse_duration, ByteSize};

use crate::cli::ExporterArgs;

mod limits;
mod probe;
pub use limits::{Allowed, ProbeLimits};
pub use probe::*;

/// Most probes `--max-concurrent` allows.
const MAX_CONCURRENT: usize = 64;

/// Everything `wirebench exporter` needs, validated.
#[derive(Debug, Clone)]
pub struct ExporterConfig {
    /// Where to serve HTTP.
    pub listen: SocketAddr,
    /// What a probe may do.
    pub limits: ProbeLimits,
    /// Probes that may run at once.
    pub max_concurrent: usize,
    /// Where finished probes are stored (`--store`, `--db`); `None`: not stored.
    pub store: Option<crate::store::Location>,
}

impl ExporterConfig {
    /// Validates `wirebench exporter` flags.
    pub fn from_args(args: &ExporterArgs) -> Result<Self, UsageError> {
        let listen = socket_addr(&args.listen, "--listen")?;
        let max_total = args
            .max_total
            .parse::<ByteSize>()
            .map_err(|e| UsageError(format!("--max-total {}: {e}", args.max_total)))?
            .0;
        if max_total == 0 {
            return Err(UsageError("--max-total must be at least 1 byte".into()));
        }
        let max_time = parse_duration(&args.max_time)
            .map_err(|e| UsageError(format!("--max-time {}: {e}", args.max_time)))?;
        if max_time < Duration::from_millis(100) || max_time > Duration::from_secs(3600) {
            return Err(UsageError(format!(
                "--max-time {}: allowed 100ms to 1h",
                args.max_time
            )));
        }
        if !(1..=MAX_CONCURRENT).contains(&args.max_concurrent) {
            return Err(UsageError(format!(
                "--max-concurrent {}: allowed 1 to {MAX_CONCURRENT}",
                args.max_concurrent
            )));
        }
        let allow = if args.allow.is_empty() {
            // new_assert: 8 and 128 are valid prefix lengths for these families.
            vec![
                Allowed::Net(IpNet::new_assert(Ipv4Addr::LOCALHOST.into(), 8)),
                Allowed::Net(IpNet::new_assert(Ipv6Addr::LOCALHOST.into(), 128)),
            ]
        } else {
            args.allow
                .iter()
                .map(|a| allowed(a))
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(ExporterConfig {
            listen,
            limits: ProbeLimits {
                max_total,
                max_time,
                allow,
            },
            max_concurrent: args.max_concurrent,
            store: match (&args.db, args.store) {
                (Some(db), _) => Some(
                    crate::store::Location::parse(db.as_os_str())
                        .map_err(|e| UsageError(format!("{e:#}")))?,
                ),
                (None, true) => Some(
                    super::store_target::db_path(&crate::cli::DbArgs::default())
                        .map_err(|e| UsageError(format!("--store: {e:#}; give --db PATH")))?,
                ),
                (None, false) => None,
            },
        })
    }
}

/// ADDR:PORT or [V6]:PORT for a listening flag (no name lookup).
pub fn socket_addr(text: &str, flag: &str) -> Result<SocketAddr, UsageError> {
    text.parse().map_err(|_| {
        UsageError(format!(
            "{flag} {text}: expected ADDRESS:PORT, e.g. 127.0.0.1:9310 or [::1]:9310"
        ))
    })
}

/// One `--allow` entry: IP, IP:PORT, [V6]:PORT, CIDR, or a host name (every address it
/// resolves to, now), with or without a port.
fn allowed(text: &str) -> Result<Allowed, UsageError> {
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(Allowed::Net(net));
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(Allowed::Net(IpNet::from(ip)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(Allowed::Addr(addr));
    }
    // HOST:PORT by name: its first address.
    let resolved = text
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .or_else(|| {
            (text, 0)
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .map(|a| SocketAddr::new(a.ip(), 0))
        });
    match resolved {
        Some(a) if a.port() == 0 => Ok(Allowed::Net(IpNet::from(a.ip()))),
        Some(a) => Ok(Allowed::Addr(a)),
        None => Err(UsageError(format!(
            "--allow {text}: expected an address, ADDRESS:PORT, a CIDR block (10.0.0.0/8) or a host name"
        ))),
    }
}

#[cfg(test)]
mod tests;
