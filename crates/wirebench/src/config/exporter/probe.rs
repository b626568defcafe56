//! One `/probe` query → one probe's validated configuration by kind (`run`, `ping`, `rr`,
//! `dns`, `iperf3`), built by the same parser and checks as the command with the same flags,
//! held to the exporter's limits and allow-list; refusals carry the HTTP status and a one-line
//! reason.

use std::net::SocketAddr;

use clap::Parser;
use wirebench_core::vocab::units::ByteSize;

use crate::cli::{DnsArgs, PingArgs, RrArgs, RunArgs};
use crate::config::dns::DnsConfig;
use crate::config::rr::RrConfig;
use crate::flows::iperf3::client::{ClientConfig, Limit};
use crate::runner::{RunConfig, Target};
use wirebench_core::wire::dns::DnsTransport;

use super::limits::ProbeLimits;

/// Total of a probe whose query names none (or `--max-total`, when smaller).
pub const DEFAULT_PROBE_TOTAL: &str = "10MiB";
/// Round trips of a ping probe whose query names no count.
pub const DEFAULT_PING_COUNT: u64 = 100;
/// Most round trips one ping probe may ask for.
pub const MAX_PING_COUNT: u64 = 100_000;
/// Requests per flow of an rr probe whose query names no count.
pub const DEFAULT_RR_COUNT: u64 = 1000;
/// Queries per flow of a dns probe whose query names no count.
pub const DEFAULT_DNS_COUNT: u64 = 100;
/// What one DNS query and its answer count against `--max-total`: 512 bytes each way, the
/// classic DNS message limit (a query is far smaller; most answers are too).
pub const DNS_BYTES_PER_QUERY: u64 = 1024;
/// What one probe runs.
#[derive(Debug, Clone)]
pub enum Probe {
    /// A transfer (`wirebench run`), the default.
    Run(Box<RunConfig>),
    /// Round trips over one connection (`wirebench ping`, `kind=ping`).
    Ping(RrConfig),
    /// Requests with K in flight over T flows (`wirebench rr`, `kind=rr`): one protocol, one K.
    Rr(RrConfig),
    /// Queries against a DNS server (`wirebench dns`, `kind=dns`): one transport, one K.
    Dns(Box<DnsConfig>),
    /// A transfer against a real iperf3 server (`run --iperf3`, `kind=iperf3`), by bytes.
    Iperf3(Box<ClientConfig>),
}

impl Probe {
    /// The `kind=` name.
    pub fn kind(&self) -> &'static str {
        match self {
            Probe::Run(_) => "run",
            Probe::Ping(_) => "ping",
            Probe::Rr(_) => "rr",
            Probe::Dns(_) => "dns",
            Probe::Iperf3(_) => "iperf3",
        }
    }
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
        Some("rr") => rr_config(&rest, limits).map(Probe::Rr),
        Some("dns") => dns_config(&rest, limits).map(|c| Probe::Dns(Box::new(c))),
        Some("iperf3") => iperf3_config(&rest, limits).map(|c| Probe::Iperf3(Box::new(c))),
        Some(other) => Err(ProbeRefusal {
            status: 400,
            reason: format!("kind={other}: expected run (the default), ping, rr, dns or iperf3"),
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

/// A 400 refusal.
fn bad(reason: String) -> ProbeRefusal {
    ProbeRefusal {
        status: 400,
        reason,
    }
}

/// The argv of a probe query: each key mapped to its command's flag by `flags` (`(key,
/// flag)`), one token per flag so a value cannot be read as another flag; any other key is
/// refused. Also returns the target as given.
fn probe_argv(
    kind: &str,
    query: &[(String, String)],
    target_flag: &str,
    flags: &[(&str, &str)],
) -> Result<(Vec<String>, String), ProbeRefusal> {
    let mut argv = vec!["probe".to_string()];
    let mut target = None;
    for (key, value) in query {
        let flag = if key == "target" {
            target = Some(value.clone());
            target_flag
        } else if let Some((_, flag)) = flags.iter().find(|(k, _)| k == key) {
            flag
        } else {
            let keys: Vec<&str> = flags.iter().map(|(k, _)| *k).collect();
            return Err(bad(format!(
                "unknown parameter {key:?} for kind={kind}: allowed target, {}",
                keys.join(", ")
            )));
        };
        argv.push(format!("--{flag}={value}"));
    }
    let target = target.ok_or_else(|| bad("target=HOST:PORT is required".into()))?;
    Ok((argv, target))
}

/// Whether `key` appears in the query.
fn has(query: &[(String, String)], key: &str) -> bool {
    query.iter().any(|(k, _)| k == key)
}

/// Parses `argv` as the flags of `P`, refusing with clap's first line.
fn parse_argv<P: Parser>(argv: &[String]) -> Result<P, ProbeRefusal> {
    P::try_parse_from(argv).map_err(|e| {
        bad(e
            .to_string()
            .lines()
            .next()
            .unwrap_or("bad query")
            .to_string())
    })
}

/// 400 when `volume` bytes are more than a probe may move.
fn within_volume(volume: u64, what: &str, limits: &ProbeLimits) -> Result<(), ProbeRefusal> {
    if volume > limits.max_total {
        return Err(bad(format!(
            "{what} = {} is more than this exporter allows per probe: at most {} (--max-total)",
            ByteSize(volume),
            ByteSize(limits.max_total)
        )));
    }
    Ok(())
}

/// Requests in flight one probe may hold at once (flows x concurrency): each is a socket (TCP,
/// QUIC) or a pending request with its buffers, so a scrape is priced by what it opens, not
/// only by the bytes it moves (`flows=1024&concurrency=10000` held 437-520 MB and about 1,000
/// descriptors within `--max-total`).
pub const MAX_PROBE_IN_FLIGHT: u64 = 256;

/// Refuses a probe whose `flows` x `concurrency` passes [`MAX_PROBE_IN_FLIGHT`].
fn within_in_flight(flows: u32, concurrency: u32) -> Result<(), ProbeRefusal> {
    let in_flight = u64::from(flows).saturating_mul(u64::from(concurrency));
    if in_flight > MAX_PROBE_IN_FLIGHT {
        return Err(bad(format!(
            "flows x concurrency = {in_flight} is more than one probe may hold in flight: at most {MAX_PROBE_IN_FLIGHT}"
        )));
    }
    Ok(())
}

/// A `kind=rr` query: as `wirebench rr` with one protocol and one concurrency, run for a
/// count (never a time, so its volume is known before it starts).
fn rr_config(query: &[(String, String)], limits: &ProbeLimits) -> Result<RrConfig, ProbeRefusal> {
    let (mut argv, target) = probe_argv(
        "rr",
        query,
        "server",
        &[
            ("proto", "proto"),
            ("request", "request"),
            ("response", "response"),
            ("concurrency", "concurrency"),
            ("flows", "flows"),
            ("count", "count"),
            ("timeout", "timeout"),
            ("retries", "retries"),
        ],
    )?;
    if !has(query, "count") {
        argv.push(format!("--count={DEFAULT_RR_COUNT}"));
    }
    argv.push("--no-store".into());
    let args: RrArgv = parse_argv(&argv)?;
    let cfg = RrConfig::from_rr(&args.rr).map_err(|e| bad(e.0))?;
    if cfg.protocols.len() != 1 || cfg.concurrency.len() != 1 || cfg.flows.len() != 1 {
        return Err(bad(
            "a probe runs one test: give one proto, one concurrency and one flows".into(),
        ));
    }
    within_in_flight(
        cfg.most_flows(),
        cfg.concurrency.iter().copied().max().unwrap_or(1),
    )?;
    // Every request may go out 1 + retries times; every answer comes back once.
    let count = cfg.count.unwrap_or(DEFAULT_RR_COUNT);
    let per_request = u64::from(cfg.request)
        .saturating_mul(1 + u64::from(cfg.retries))
        .saturating_add(u64::from(cfg.response));
    let volume = count
        .saturating_mul(u64::from(cfg.most_flows()))
        .saturating_mul(per_request);
    within_volume(
        volume,
        "count x flows x (request x (1 + retries) + response)",
        limits,
    )?;
    let Target::Remote { addr, .. } = cfg.target else {
        return Err(bad("target=HOST:PORT is required".into()));
    };
    allowed_target(&target, addr, limits)?;
    Ok(cfg)
}

/// A `kind=dns` query: as `wirebench dns` against the target as resolver, one transport (UDP
/// or TCP: DoT needs a CA file, which a scrape may not name) and one concurrency.
fn dns_config(query: &[(String, String)], limits: &ProbeLimits) -> Result<DnsConfig, ProbeRefusal> {
    let (mut argv, target) = probe_argv(
        "dns",
        query,
        "resolver",
        &[
            ("transport", "transport"),
            ("name", "name"),
            ("type", "type"),
            ("count", "count"),
            ("concurrency", "concurrency"),
            ("flows", "flows"),
            ("timeout", "timeout"),
            ("retries", "retries"),
        ],
    )?;
    if !has(query, "name") {
        return Err(bad(
            "name= is required for kind=dns: the name every query asks for, e.g. name=example.org"
                .into(),
        ));
    }
    // Before the flags are checked, which would ask for the CA file.
    if query
        .iter()
        .any(|(k, v)| k == "transport" && v.split(',').any(|t| t.trim() == "dot"))
    {
        return Err(bad(
            "transport=dot is not offered to scrapes (it needs a CA file): use udp or tcp".into(),
        ));
    }
    if !has(query, "count") {
        argv.push(format!("--count={DEFAULT_DNS_COUNT}"));
    }
    argv.push("--no-store".into());
    let args: DnsArgv = parse_argv(&argv)?;
    let cfg = DnsConfig::from_args(&args.dns).map_err(|e| bad(e.0))?;
    if cfg.transports.len() != 1 || cfg.concurrency.len() != 1 {
        return Err(bad(
            "a probe runs one test: give one transport and one concurrency".into(),
        ));
    }
    if cfg.transports.contains(&DnsTransport::Dot) {
        return Err(bad(
            "transport=dot is not offered to scrapes: use udp or tcp".into(),
        ));
    }
    within_in_flight(
        cfg.flows,
        cfg.concurrency.iter().copied().max().unwrap_or(1),
    )?;
    let volume = cfg
        .count
        .saturating_mul(u64::from(cfg.flows))
        .saturating_mul(1 + u64::from(cfg.retries))
        .saturating_mul(DNS_BYTES_PER_QUERY);
    within_volume(
        volume,
        "count x flows x (1 + retries) x 1 KiB per query",
        limits,
    )?;
    allowed_target(&target, cfg.resolver, limits)?;
    Ok(cfg)
}

/// Bytes per block of a `kind=iperf3` probe without size=.
const PROBE_IPERF3_LEN: u32 = 1024;

/// A `kind=iperf3` query: as `run --iperf3` against the target, limited by bytes (total=,
/// default as kind=run's), never by time.
fn iperf3_config(
    query: &[(String, String)],
    limits: &ProbeLimits,
) -> Result<ClientConfig, ProbeRefusal> {
    // reverse= is a switch on the command line: taken out here, as on kind=run.
    let mut reverse = false;
    let mut rest = Vec::new();
    for (key, value) in query {
        if key == "reverse" {
            reverse = match value.as_str() {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => return Err(bad(format!("reverse={value}: expected true or false"))),
            };
        } else {
            rest.push((key.clone(), value.clone()));
        }
    }
    let (mut argv, target) = probe_argv(
        "iperf3",
        &rest,
        "iperf3",
        &[
            ("proto", "proto"),
            ("total", "total"),
            ("size", "msg-size"),
            ("parallel", "parallel"),
            ("rate", "rate"),
            ("reverse", "reverse"),
        ],
    )?;
    if !has(&rest, "total") {
        argv.push(format!("--total={}", default_total(limits)));
    }
    // 1 KiB blocks unless size= says otherwise, not `run --iperf3`'s iperf3 defaults: a UDP
    // total is rounded up to whole blocks, and 1460-byte ones would take a total of exactly
    // --max-total past it.
    if !has(&rest, "size") {
        argv.push(format!("--msg-size={PROBE_IPERF3_LEN}"));
    }
    if reverse {
        argv.push("--reverse".into());
    }
    argv.push("--no-store".into());
    let args: ProbeArgv = parse_argv(&argv)?;
    let cfg = crate::config::interop::iperf3_client(&args.run)
        .map_err(|e| bad(e.0))?
        .ok_or_else(|| bad("target=HOST:PORT is required".into()))?;
    let Limit::Bytes(bytes) = cfg.limit else {
        return Err(bad(
            "an iperf3 probe is limited by total=, not by time".into()
        ));
    };
    within_volume(bytes, "total", limits)?;
    // UDP is paced (iperf3's 1 Mbit/s per stream unless rate= says otherwise): a total that
    // cannot be sent within --max-time would only ever time out, so say so now.
    if cfg.udp && cfg.rate_bps > 0 {
        let bps = cfg.rate_bps.saturating_mul(u64::from(cfg.parallel.max(1)));
        let secs = bytes as f64 * 8.0 / bps as f64;
        if secs > limits.max_time.as_secs_f64() {
            return Err(bad(format!(
                "total={} at {} bit/s takes {secs:.1} s, more than this exporter's --max-time {:?}: raise rate= or lower total=",
                ByteSize(bytes),
                bps,
                limits.max_time
            )));
        }
    }
    allowed_target(&target, cfg.server, limits)?;
    Ok(cfg)
}

/// Total of a transfer probe without total=: [`DEFAULT_PROBE_TOTAL`], or `--max-total` when
/// smaller.
fn default_total(limits: &ProbeLimits) -> String {
    match DEFAULT_PROBE_TOTAL.parse::<ByteSize>() {
        Ok(d) if d.0 > limits.max_total => limits.max_total.to_string(),
        _ => DEFAULT_PROBE_TOTAL.to_string(),
    }
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

/// The `rr` flags, parsed from an rr probe query's argv.
#[derive(Parser)]
struct RrArgv {
    #[command(flatten)]
    rr: RrArgs,
}

/// The `dns` flags, parsed from a dns probe query's argv.
#[derive(Parser)]
struct DnsArgv {
    #[command(flatten)]
    dns: DnsArgs,
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
