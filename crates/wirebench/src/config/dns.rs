//! Validates the flags of `wirebench dns` into a [`DnsConfig`]; rejects impossible
//! combinations once, with a message that says what is allowed; and turns a run's outcome into
//! its result record (`dns_result`, shared by `wirebench dns` and the exporter's dns probes).
//! No I/O beyond resolving the resolver's name.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use wirebench_core::vocab::units::parse_duration;
use wirebench_core::wire::dns::{parse_transports, DnsTransport, Question};
use wirebench_core::wire::proto::{MAX_RR_CONCURRENCY, MAX_RR_FLOWS};

use super::error::usage;
use super::rr::{parse_list, MAX_CONNECTIONS, MAX_RETRIES};
use crate::cli::DnsArgs;
use crate::flows::dns::trust::DotTrust;
use crate::flows::dns::DnsOutcome;
use wirebench_core::record::dns::DnsResult;
use wirebench_core::record::TransportRecord;
use wirebench_core::vocab::counters::TransportStats;
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::units::duration_ns;

/// Everything `wirebench dns` needs, validated.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// The resolver as the user named it (for output).
    pub resolver_name: String,
    /// The resolver's address for UDP and TCP.
    pub resolver: SocketAddr,
    /// The resolver's address for DoT.
    pub dot_addr: SocketAddr,
    /// Transports, in the order they run.
    pub transports: Vec<DnsTransport>,
    /// The question.
    pub question: Arc<Question>,
    /// Queries per flow.
    pub count: u64,
    /// Queries outstanding per flow; one run per value, in order.
    pub concurrency: Vec<u32>,
    /// Flows.
    pub flows: u32,
    /// TCP/DoT: a connection per query.
    pub new_connection: bool,
    /// Per-query (UDP: per-copy) timeout.
    pub timeout: Duration,
    /// UDP retries per query.
    pub retries: u32,
    /// DoT trust, when DoT runs.
    pub dot_trust: Option<DotTrust>,
    /// DoT server name (SNI).
    pub dot_name: String,
    /// One JSON document instead of text.
    pub json: bool,
}

impl DnsConfig {
    /// Validates `wirebench dns` flags.
    pub fn from_args(args: &DnsArgs) -> Result<Self, UsageError> {
        let transports =
            parse_transports(&args.transport).map_err(|e| usage(format!("--transport: {e}")))?;
        let question = Question::new(&args.name, &args.rtype).map_err(|e| {
            usage(format!(
                "--name/--type: {e}{}",
                if e.to_string().contains("record type") {
                    ""
                } else {
                    " (e.g. --name example.org)"
                }
            ))
        })?;
        let (host, resolver) = resolve(&args.resolver)?;
        let dot_addr = SocketAddr::new(resolver.ip(), args.dot_port);
        if args.count == 0 {
            return Err(usage("--count must be at least 1"));
        }
        let concurrency = parse_list("--concurrency", &args.concurrency, MAX_RR_CONCURRENCY)?;
        if args.flows == 0 || args.flows > MAX_RR_FLOWS {
            return Err(usage(format!(
                "--flows {} is out of range: allowed 1 to {MAX_RR_FLOWS}",
                args.flows
            )));
        }
        let most_k = concurrency.iter().copied().max().unwrap_or(1);
        let connections = u64::from(args.flows) * u64::from(most_k);
        if args.new_connection && connections > MAX_CONNECTIONS {
            return Err(usage(format!(
                "--new-connection with --flows {} x --concurrency {most_k} would keep {connections} connections opening at once: allowed up to {MAX_CONNECTIONS}",
                args.flows
            )));
        }
        let timeout =
            parse_duration(&args.timeout).map_err(|e| usage(format!("--timeout: {e}")))?;
        if timeout < Duration::from_micros(100) || timeout > Duration::from_secs(60) {
            return Err(usage(format!(
                "--timeout {} is out of range: allowed 100us to 60s",
                args.timeout
            )));
        }
        if args.retries > MAX_RETRIES {
            return Err(usage(format!(
                "--retries {} is out of range: allowed 0 to {MAX_RETRIES}",
                args.retries
            )));
        }
        let dot_trust = match (&args.dot_ca, args.dot_insecure) {
            (Some(path), _) => Some(DotTrust::Ca(path.clone())),
            (None, true) => Some(DotTrust::Insecure),
            (None, false) => None,
        };
        if transports.contains(&DnsTransport::Dot) && dot_trust.is_none() {
            return Err(usage(
                "--transport dot needs --dot-ca PEM (the CA that issued the resolver's certificate) or --dot-insecure (accept any certificate)",
            ));
        }
        Ok(DnsConfig {
            resolver_name: args.resolver.clone(),
            resolver,
            dot_addr,
            transports,
            question: Arc::new(question),
            count: args.count,
            concurrency,
            flows: args.flows,
            new_connection: args.new_connection,
            timeout,
            retries: args.retries,
            dot_trust,
            dot_name: args.dot_name.clone().unwrap_or(host),
            json: args.json,
        })
    }

    /// Where `transport` reaches the resolver.
    pub fn addr_for(&self, transport: DnsTransport) -> SocketAddr {
        match transport {
            DnsTransport::Dot => self.dot_addr,
            DnsTransport::Udp | DnsTransport::Tcp => self.resolver,
        }
    }
}

/// The result record of one run of `cfg` over `transport` with `concurrency`.
/// (Shared by `wirebench dns` and the exporter's dns probes.)
pub fn dns_result(
    cfg: &DnsConfig,
    transport: DnsTransport,
    concurrency: u32,
    out: &DnsOutcome,
) -> DnsResult {
    let c = out.counts;
    let secs = out.elapsed.as_secs_f64();
    DnsResult {
        transport,
        resolver_addr: cfg.addr_for(transport).to_string(),
        flows: cfg.flows,
        concurrency,
        new_connection: cfg.new_connection && transport != DnsTransport::Udp,
        count_per_flow: cfg.count,
        timeout_ns: duration_ns(cfg.timeout),
        retries_allowed: cfg.retries,
        counts: c,
        timeout_ratio: c.timeout_pct() / 100.0,
        elapsed_ns: duration_ns(out.elapsed),
        queries_per_second: if secs > 0.0 {
            c.answered as f64 / secs
        } else {
            0.0
        },
        response: out.response,
        tcp_connect: out.connect,
        tls_handshake: out.tls_handshake,
        retrans_rate: out
            .transport
            .as_ref()
            .and_then(TransportStats::retrans_rate),
        transport_stats: out.transport.as_ref().map(TransportRecord::of),
        answer: out.answer.clone(),
    }
}

/// `ADDR`, `ADDR:PORT`, `[V6]:PORT`, `HOST` or `HOST:PORT` (port 53 by default) → the host part
/// as typed and one address.
fn resolve(text: &str) -> Result<(String, SocketAddr), UsageError> {
    let bad = || {
        usage(format!(
            "--resolver {text:?}: expected ADDR or ADDR:PORT, e.g. 127.0.0.1:5353 or [::1]:53"
        ))
    };
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok((ip.to_string(), SocketAddr::new(ip, 53)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok((addr.ip().to_string(), addr));
    }
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, p.parse::<u16>().map_err(|_| bad())?),
        Some(_) => return Err(bad()),
        None => (text, 53),
    };
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| usage(format!("--resolver {text:?}: cannot resolve {host}: {e}")))?
        .next()
        .ok_or_else(bad)?;
    Ok((host.to_string(), addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolver_forms() {
        assert_eq!(
            resolve("127.0.0.1").unwrap(),
            ("127.0.0.1".into(), "127.0.0.1:53".parse().unwrap())
        );
        assert_eq!(
            resolve("127.0.0.1:5353").unwrap().1,
            "127.0.0.1:5353".parse().unwrap()
        );
        assert_eq!(resolve("[::1]:53").unwrap().1, "[::1]:53".parse().unwrap());
        assert_eq!(resolve("::1").unwrap().1, "[::1]:53".parse().unwrap());
        assert!(resolve("127.0.0.1:99999").is_err());
        assert!(resolve(":53").is_err());
    }

    #[test]
    fn concurrency_lists() {
        let parse_concurrency = |text| parse_list("--concurrency", text, MAX_RR_CONCURRENCY);
        assert_eq!(parse_concurrency("10, 20,40").unwrap(), vec![10, 20, 40]);
        assert!(parse_concurrency("0").is_err());
        assert!(parse_concurrency("10,x").is_err());
        assert!(parse_concurrency("10001").is_err());
    }
}
