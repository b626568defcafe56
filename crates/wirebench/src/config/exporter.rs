//! `wirebench exporter` flags and `/probe` queries → validated values: the exporter's limits
//! and allow-list, and one probe's [`RunConfig`] (built by the same parser and checks as
//! `wirebench run`, so a probe means what the same `run` flags mean). Refusals carry the HTTP
//! status and a one-line reason; nothing here runs a probe.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Parser;
use ipnet::IpNet;
use wirebench_core::error::UsageError;
use wirebench_core::units::{parse_duration, ByteSize};

use crate::cli::{ExporterArgs, PingArgs, RunArgs};
use crate::config::rr::RrConfig;
use crate::runner::{RunConfig, Target};

/// Total of a probe whose query names none (or `--max-total`, when smaller).
pub const DEFAULT_PROBE_TOTAL: &str = "10MiB";
/// Round trips of a ping probe whose query names no count.
pub const DEFAULT_PING_COUNT: u64 = 100;
/// Most round trips one ping probe may ask for.
pub const MAX_PING_COUNT: u64 = 100_000;
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
}

/// What one probe may do, and to whom.
#[derive(Debug, Clone)]
pub struct ProbeLimits {
    /// Largest total one probe may transfer.
    pub max_total: u64,
    /// Longest a probe may run.
    pub max_time: Duration,
    /// Targets probes may test.
    pub allow: Vec<Allowed>,
}

/// One allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// Any port of the addresses in a block (a bare address is a /32 or /128).
    Net(IpNet),
    /// One address and port.
    Addr(SocketAddr),
}

impl Allowed {
    fn admits(&self, addr: SocketAddr) -> bool {
        let ip = canonical(addr.ip());
        match self {
            Allowed::Net(net) => net.contains(&ip),
            Allowed::Addr(a) => canonical(a.ip()) == ip && a.port() == addr.port(),
        }
    }
}

/// What one probe runs.
#[derive(Debug, Clone)]
pub enum Probe {
    /// A transfer (`wirebench run`), the default.
    Run(Box<RunConfig>),
    /// Round trips over one connection (`wirebench ping`, `kind=ping`).
    Ping(RrConfig),
}

/// A refused probe query: the HTTP status and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ProbeRefusal {
    /// 400 (a bad or too large query) or 403 (a target off the allow-list).
    pub status: u16,
    /// Why, saying what is allowed.
    pub reason: String,
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

/// The run one `/probe` query asks for, checked against `limits`. The query's keys are the
/// `run` flags' names (target is `--server`, size is `--msg-size`); any other key is refused,
/// so a scrape cannot reach a flag that writes files or runs long.
pub fn probe_config(query: &str, limits: &ProbeLimits) -> Result<Probe, ProbeRefusal> {
    let mut kind = None;
    let mut rest = Vec::new();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "kind" {
            kind = Some(value.into_owned());
        } else {
            rest.push((key.into_owned(), value.into_owned()));
        }
    }
    match kind.as_deref() {
        None | Some("run") => run_config(&rest, limits).map(|c| Probe::Run(Box::new(c))),
        Some("ping") => ping_config(&rest, limits).map(Probe::Ping),
        Some(other) => Err(ProbeRefusal {
            status: 400,
            reason: format!("kind={other}: expected run (the default) or ping"),
        }),
    }
}

/// A `kind=ping` query: target, proto, size (bytes each way), count (round trips).
fn ping_config(query: &[(String, String)], limits: &ProbeLimits) -> Result<RrConfig, ProbeRefusal> {
    let bad = |reason: String| ProbeRefusal {
        status: 400,
        reason,
    };
    let mut argv = vec!["probe".to_string()];
    let mut count = DEFAULT_PING_COUNT;
    let mut size = 64u64;
    let mut target = None;
    for (key, value) in query {
        let flag = match key.as_str() {
            "target" => {
                target = Some(value.clone());
                "server"
            }
            "proto" => "proto",
            "size" => {
                size = value
                    .parse::<ByteSize>()
                    .map_err(|e| bad(format!("size={value}: {e}")))?
                    .0;
                "size"
            }
            "count" => {
                count = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_PING_COUNT).contains(n))
                    .ok_or_else(|| bad(format!("count={value}: expected 1 to {MAX_PING_COUNT}")))?;
                continue;
            }
            other => {
                return Err(bad(format!(
                    "unknown parameter {other:?} for kind=ping: allowed target, proto, size, count"
                )))
            }
        };
        argv.push(format!("--{flag}={value}"));
    }
    let Some(target) = target else {
        return Err(bad("target=HOST:PORT is required".into()));
    };
    // Both directions count against the volume limit.
    let volume = count.saturating_mul(size).saturating_mul(2);
    if volume > limits.max_total {
        return Err(bad(format!(
            "count={count} x size={size} B x 2 directions is more than this exporter allows per probe: at most {} (--max-total)",
            ByteSize(limits.max_total)
        )));
    }
    argv.push(format!("--count={count}"));
    let args = PingArgv::try_parse_from(&argv).map_err(|e| {
        bad(e
            .to_string()
            .lines()
            .next()
            .unwrap_or("bad query")
            .to_string())
    })?;
    let cfg = RrConfig::from_ping(&args.ping).map_err(|e| bad(e.0))?;
    if cfg.protocols.len() != 1 {
        return Err(bad("a probe runs one test: give one proto".into()));
    }
    let Target::Remote { addr, .. } = cfg.target else {
        return Err(bad("target=HOST:PORT is required".into()));
    };
    allowed_target(&target, addr, limits)?;
    Ok(cfg)
}

/// A transfer query (the default kind).
fn run_config(query: &[(String, String)], limits: &ProbeLimits) -> Result<RunConfig, ProbeRefusal> {
    let bad = |reason: String| ProbeRefusal {
        status: 400,
        reason,
    };
    let mut target = None;
    let mut argv = vec!["probe".to_string(), "--no-store".to_string()];
    // Without total=, the default, or --max-total when that is smaller.
    let mut total = match DEFAULT_PROBE_TOTAL.parse::<ByteSize>() {
        Ok(d) if d.0 > limits.max_total => limits.max_total.to_string(),
        _ => DEFAULT_PROBE_TOTAL.to_string(),
    };
    for (key, value) in query {
        let flag = match key.as_str() {
            "target" => {
                target = Some(value.to_string());
                "server"
            }
            "proto" => "proto",
            "mode" => "mode",
            "size" => "msg-size",
            "total" => {
                total = value.to_string();
                continue;
            }
            "reverse" => match value.as_str() {
                "true" | "1" => {
                    argv.push("--reverse".into());
                    continue;
                }
                "false" | "0" => continue,
                _ => return Err(bad(format!("reverse={value}: expected true or false"))),
            },
            other => {
                return Err(bad(format!(
                    "unknown parameter {other:?}: allowed target, proto, mode, total, size, reverse"
                )))
            }
        };
        // One token, so a value cannot be read as another flag.
        argv.push(format!("--{flag}={value}"));
    }
    let Some(target) = target else {
        return Err(bad("target=HOST:PORT is required".into()));
    };
    let bytes = total
        .parse::<ByteSize>()
        .map_err(|e| bad(format!("total={total}: {e}")))?
        .0;
    if bytes > limits.max_total {
        return Err(bad(format!(
            "total={total} is more than this exporter allows per probe: at most {} (--max-total)",
            ByteSize(limits.max_total)
        )));
    }
    argv.push(format!("--total={total}"));
    let args = ProbeArgv::try_parse_from(&argv).map_err(|e| {
        let text = e.to_string();
        bad(text.lines().next().unwrap_or("bad query").to_string())
    })?;
    let cfg = RunConfig::from_args(&args.run).map_err(|e| bad(e.0))?;
    if cfg.combinations.len() != 1 || cfg.points.len() != 1 {
        return Err(bad(
            "a probe runs one test: give one proto, one mode, one size and one total".into(),
        ));
    }
    let Target::Remote { addr, .. } = cfg.target else {
        return Err(bad("target=HOST:PORT is required".into()));
    };
    allowed_target(&target, addr, limits)?;
    Ok(cfg)
}

/// 403 unless `addr` (what `target` resolved to) is on the allow-list.
fn allowed_target(
    target: &str,
    addr: SocketAddr,
    limits: &ProbeLimits,
) -> Result<(), ProbeRefusal> {
    if limits.allow.iter().any(|a| a.admits(addr)) {
        return Ok(());
    }
    Err(ProbeRefusal {
        status: 403,
        reason: format!("target {target} ({addr}) is not on this exporter's allow-list (--allow)"),
    })
}

/// The `ping` flags, parsed from a ping probe query's argv.
#[derive(Parser)]
struct PingArgv {
    #[command(flatten)]
    ping: PingArgs,
}

/// The `run` flags, parsed from a probe query's argv.
#[derive(Parser)]
struct ProbeArgv {
    #[command(flatten)]
    run: RunArgs,
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

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ProbeLimits {
        ProbeLimits {
            max_total: 1 << 20,
            max_time: Duration::from_secs(5),
            allow: vec![
                allowed("127.0.0.0/8").unwrap(),
                allowed("[::1]:9000").unwrap(),
            ],
        }
    }

    #[test]
    fn a_query_becomes_one_run() {
        let Probe::Run(cfg) = probe_config(
            "target=127.0.0.1:5310&proto=udp&mode=saw&total=64KiB&size=512",
            &limits(),
        )
        .unwrap() else {
            panic!("a run")
        };
        assert_eq!(cfg.total_bytes, 65536);
        assert_eq!(cfg.msg_size, 512);
        assert_eq!(cfg.combinations.len(), 1);
    }

    #[test]
    fn a_ping_query_is_bounded_too() {
        let l = limits();
        let Probe::Ping(cfg) = probe_config(
            "kind=ping&target=127.0.0.1:5310&proto=udp&count=50&size=128",
            &l,
        )
        .unwrap() else {
            panic!("a ping")
        };
        assert_eq!((cfg.count, cfg.request), (Some(50), 128));
        let r = probe_config("kind=ping&target=127.0.0.1:1&count=10000&size=1KiB", &l).unwrap_err();
        assert!(r.reason.contains("--max-total"), "{}", r.reason);
        assert_eq!(
            probe_config("kind=ping&target=10.0.0.1:1", &l)
                .unwrap_err()
                .status,
            403
        );
        assert_eq!(
            probe_config("kind=dns&target=127.0.0.1:1", &l)
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(
            probe_config("kind=ping&target=127.0.0.1:1&total=1", &l)
                .unwrap_err()
                .status,
            400
        );
    }

    #[test]
    fn refusals_say_why_with_their_status() {
        let l = limits();
        let r = probe_config("target=127.0.0.1:1&total=2MiB", &l).unwrap_err();
        assert_eq!(r.status, 400);
        assert!(r.reason.contains("--max-total"), "{}", r.reason);
        let r = probe_config("target=10.0.0.1:1&total=1KiB", &l).unwrap_err();
        assert_eq!(r.status, 403);
        assert!(probe_config("target=[::1]:9000&total=1KiB", &l).is_ok());
        assert_eq!(
            probe_config("target=[::1]:9001&total=1KiB", &l)
                .unwrap_err()
                .status,
            403
        );
        let r = probe_config("target=127.0.0.1:1&db=/tmp/x", &l).unwrap_err();
        assert!(r.reason.contains("unknown parameter"), "{}", r.reason);
        let r = probe_config("target=127.0.0.1:1&proto=tcp,udp&total=1KiB", &l).unwrap_err();
        assert!(r.reason.contains("one test"), "{}", r.reason);
        let r = probe_config("target=127.0.0.1:1&size=--db&total=1KiB", &l).unwrap_err();
        assert_eq!(r.status, 400);
        assert!(!r.reason.contains('\n'));
        assert_eq!(probe_config("proto=tcp", &l).unwrap_err().status, 400);
        // Without total=, the default is cut to --max-total (1 MiB here).
        let Probe::Run(cfg) = probe_config("target=127.0.0.1:1", &l).unwrap() else {
            panic!("a run")
        };
        assert_eq!(cfg.total_bytes, 1 << 20);
    }
}
