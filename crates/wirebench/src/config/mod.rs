//! Turns raw command-line flags into validated, typed settings. The only module that imports
//! `cli`; everything after it works with values that are known to be allowed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use wirebench_core::machine::impair::Impairments;
use wirebench_core::vocab::plan::{
    self, Mechanism, Protocol, MAX_DATAGRAM_MSG_SIZE, MAX_STREAM_MSG_SIZE, MIN_MSG_SIZE,
};
use wirebench_core::vocab::sweep::{self, Point};
use wirebench_core::vocab::units::{parse_duration, BitRate, ByteSize, RateUnit};
use wirebench_core::wire::datagram;
use wirebench_core::wire::proto::DataPathOptions;

use crate::cli::{AddressArgs, DbArgs, RelayArgs, RunArgs, ServerArgs, StoreArgs, DEFAULT_PORT};
use crate::flows::server::{Limits, ServerOptions};
use crate::runner::{RunConfig, Target};
use crate::store;

pub mod args;
pub mod dns;
pub mod exporter;
pub mod latency_probe;
pub mod ratesearch;
pub mod rpm;
pub mod rr;

use wirebench_core::vocab::error::UsageError;

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

/// Where `run` stores its results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreTarget {
    /// `--no-store`.
    Off,
    /// This database: a file, or a PostgreSQL URL.
    File(store::Location),
}

impl StoreTarget {
    /// `--no-store`, `--db PATH|URL`, `$WIREBENCH_DB`, or the default database.
    pub fn from_args(args: &StoreArgs) -> anyhow::Result<Self> {
        if args.no_store {
            return Ok(StoreTarget::Off);
        }
        Ok(StoreTarget::File(db_path(&DbArgs {
            db: args.db.clone(),
        })?))
    }
}

/// The database `--db` names (a path or a `postgres://` URL), else the one `$WIREBENCH_DB`
/// names, else the default file.
pub fn db_path(args: &DbArgs) -> anyhow::Result<store::Location> {
    match &args.db {
        Some(db) => store::Location::parse(db.as_os_str()),
        None => match std::env::var_os(store::DB_ENV).filter(|v| !v.is_empty()) {
            Some(db) => store::Location::parse(&db)
                .map_err(|e| usage(format!("{e} (from ${})", store::DB_ENV)).into()),
            None => Ok(store::Location::File(store::default_path()?)),
        },
    }
}

/// Everything `wirebench server` needs, validated.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address and port for both TCP and UDP.
    pub listen: SocketAddr,
    /// Print session summaries as JSON lines.
    pub json: bool,
    /// Certificate and key files for QUIC; `None` makes a self-signed one.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    /// Where the iperf3 listener listens (`--iperf3`), if at all.
    pub iperf3: Option<SocketAddr>,
    /// Limits and authentication the server applies.
    pub options: ServerOptions,
    /// Where to serve the server's own counters (`--metrics`), if at all.
    pub metrics: Option<SocketAddr>,
}

impl ServerConfig {
    /// Validates `wirebench server` flags.
    pub fn from_args(args: &ServerArgs) -> Result<Self, UsageError> {
        let cert_and_key = match (&args.cert, &args.key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            _ => return Err(usage("--cert and --key must be given together")),
        };
        Ok(ServerConfig {
            listen: SocketAddr::new(args.bind, args.port),
            json: args.json,
            cert_and_key,
            iperf3: args
                .iperf3
                .then(|| SocketAddr::new(args.bind, args.iperf3_port)),
            options: ServerOptions {
                limits: server_limits(args)?,
                psk: args
                    .psk
                    .as_deref()
                    .map(crate::transport::control::auth::load_psk)
                    .transpose()?,
            },
            metrics: args
                .metrics
                .as_deref()
                .map(|a| exporter::socket_addr(a, "--metrics"))
                .transpose()?,
        })
    }
}

/// Validates the `server` limit flags.
fn server_limits(args: &ServerArgs) -> Result<Limits, UsageError> {
    use crate::flows::server::options::MIN_CONTROL_SIZE;
    use wirebench_core::wire::proto::MAX_CONTROL_FRAME;
    let duration = |flag: &str, text: &str, min: Duration, max: Duration| {
        let d = parse_duration(text).map_err(|e| usage(format!("{flag}: {e}")))?;
        if d < min || d > max {
            return Err(usage(format!(
                "{flag} {text} is out of range: allowed {min:?} to {max:?}"
            )));
        }
        Ok(d)
    };
    if !(1..=100_000).contains(&args.max_sessions) {
        return Err(usage(format!(
            "--max-sessions {} is out of range: allowed 1 to 100000",
            args.max_sessions
        )));
    }
    let per_client = args.max_sessions_per_client.unwrap_or(
        wirebench_core::vocab::limits::DEFAULT_MAX_SESSIONS_PER_CLIENT.min(args.max_sessions),
    );
    if per_client < 1 || per_client > args.max_sessions {
        return Err(usage(format!(
            "--max-sessions-per-client {per_client} is out of range: allowed 1 to --max-sessions ({})",
            args.max_sessions
        )));
    }
    if !(MIN_CONTROL_SIZE..=MAX_CONTROL_FRAME).contains(&args.max_control_size) {
        return Err(usage(format!(
            "--max-control-size {} is out of range: allowed {MIN_CONTROL_SIZE} to {MAX_CONTROL_FRAME} bytes",
            args.max_control_size
        )));
    }
    let max_bytes = args
        .max_bytes
        .parse::<ByteSize>()
        .map_err(|e| usage(format!("--max-bytes: {e}")))?
        .0;
    if max_bytes == 0 {
        return Err(usage("--max-bytes must be at least 1 byte"));
    }
    let max_rate_bps = match &args.max_rate {
        None => None,
        Some(text) => match text.parse::<BitRate>() {
            Ok(BitRate(0)) => return Err(usage("--max-rate must be above 0 bit/s")),
            Ok(BitRate(r)) => Some(r),
            Err(e) => return Err(usage(format!("--max-rate: {e}"))),
        },
    };
    Ok(Limits {
        max_sessions: args.max_sessions,
        max_sessions_per_client: per_client,
        max_duration: duration(
            "--max-duration",
            &args.max_duration,
            Duration::from_millis(100),
            Duration::from_secs(7 * 24 * 3600),
        )?,
        max_bytes,
        max_rate_bps,
        max_control_size: args.max_control_size,
        hello_timeout: duration(
            "--hello-timeout",
            &args.hello_timeout,
            Duration::from_millis(100),
            Duration::from_secs(60),
        )?,
        shutdown_grace: duration(
            "--shutdown-grace",
            &args.shutdown_grace,
            Duration::ZERO,
            Duration::from_secs(3600),
        )?,
    })
}

impl RunConfig {
    /// Validates `wirebench run` flags; resolves the server name once.
    pub fn from_args(args: &RunArgs) -> Result<Self, UsageError> {
        let protocols: Vec<Protocol> =
            plan::parse_list(&args.protocols).map_err(|e| usage(format!("--proto: {e}")))?;
        let mechanisms: Vec<Mechanism> =
            plan::parse_list(&args.mechanisms).map_err(|e| usage(format!("--mode: {e}")))?;
        let target = resolve_target(args.server.as_deref(), &args.address)?;
        let msg_sizes = sweep::parse_sizes(&args.msg_size)
            .map_err(|e| usage(format!("-l/--msg-size: {e}")))?
            .into_iter()
            .map(|s| check_msg_size(s, &protocols, target.is_ipv6()))
            .collect::<Result<Vec<u32>, UsageError>>()?;
        let omit = args.iperf3.omit.as_deref().map(parse_omit).transpose()?;
        let time = match &args.iperf3.time {
            None => None,
            Some(t) => {
                let d = parse_run_time(t)?;
                if d < MIN_RUN_TIME || d > MAX_RUN_TIME {
                    return Err(usage(format!(
                        "-t/--time {t} is out of range: allowed 100ms to 24h"
                    )));
                }
                Some(d)
            }
        };
        let totals = match time {
            // A timed run: the total is only an upper bound.
            Some(_) => vec![wirebench_core::wire::proto::UNBOUNDED_TOTAL],
            None => {
                sweep::parse_sizes(&args.total).map_err(|e| usage(format!("-n/--total: {e}")))?
            }
        };
        if totals.contains(&0) {
            return Err(usage("-n/--total must be at least 1 byte"));
        }
        let points: Vec<Point> = msg_sizes
            .iter()
            .flat_map(|&msg_size| {
                totals.iter().map(move |&total_bytes| Point {
                    msg_size,
                    total_bytes,
                })
            })
            .collect();
        let Some(&first) = points.first() else {
            return Err(usage(
                "-l/--msg-size and -n/--total need at least one value each",
            ));
        };
        if points.len() > 1 && args.json {
            return Err(usage(
                "--json prints one document for one message size and total; a sweep is stored: \
                 run it without --json, then `wirebench export ID`",
            ));
        }
        if args.repeat == 0 {
            return Err(usage("--repeat must be at least 1"));
        }
        let rto = match &args.rto {
            None => None,
            Some(s) => {
                let d = parse_duration(s).map_err(|e| usage(format!("--rto: {e}")))?;
                if d < Duration::from_micros(100) || d > Duration::from_secs(60) {
                    return Err(usage(format!(
                        "--rto {s} is out of range: allowed 100us to 60s"
                    )));
                }
                Some(d)
            }
        };
        let search_max = ratesearch::is_max(args.rate.as_deref());
        let rate = match &args.rate {
            None => None,
            Some(_) if search_max => None,
            Some(s) => Some(
                s.parse::<BitRate>()
                    .map_err(|e| usage(format!("--rate: {e}")))?,
            ),
        };
        let grace = parse_duration(&args.grace).map_err(|e| usage(format!("--grace: {e}")))?;
        if grace > Duration::from_secs(60) {
            return Err(usage("--grace is out of range: allowed 0s to 60s"));
        }
        let options = parse_options(args, &protocols)?;
        if !(1..=MAX_PARALLEL).contains(&args.parallel) {
            return Err(usage(format!(
                "-P/--parallel {} is out of range: allowed 1 to {MAX_PARALLEL}",
                args.parallel
            )));
        }
        if let Some(p) = points
            .iter()
            .find(|p| plan::split_flows(p.total_bytes, p.msg_size, args.parallel).is_none())
        {
            return Err(usage(format!(
                "-P/--parallel {} needs at least one message per flow, but {} B in {} B messages is {} message(s): \
                 lower -P or raise -n",
                args.parallel,
                p.total_bytes,
                p.msg_size,
                plan::message_count(p.total_bytes, p.msg_size)
            )));
        }
        let interval = match &args.interval {
            None => None,
            Some(s) => {
                let d = parse_duration(s).map_err(|e| usage(format!("-i/--interval: {e}")))?;
                if d < MIN_INTERVAL {
                    return Err(usage(format!(
                        "-i/--interval {s} is too short: allowed 10ms or more"
                    )));
                }
                Some(d)
            }
        };
        let combinations = plan::matrix(&protocols, &mechanisms);
        let search = ratesearch::plan(
            search_max,
            &args.search,
            &ratesearch::Around {
                combinations: &combinations,
                reverse: args.reverse,
                parallel: args.parallel,
            },
        )?;
        check_flags_apply(&combinations, rto.is_some(), rate.is_some())?;
        check_bidir_and_omit(args, search_max, time, omit)?;
        Ok(RunConfig {
            bidir: args.bidir,
            omit,
            reverse: args.reverse,
            parallel: args.parallel,
            interval,
            options,
            target,
            combinations,
            msg_size: first.msg_size,
            total_bytes: first.total_bytes,
            repeat: args.repeat,
            rto,
            rate,
            grace,
            json: args.json,
            points,
            warmup: args.plan.warmup,
            impair: parse_impair(args, &protocols)?,
            psk: args
                .psk
                .as_deref()
                .map(crate::transport::control::auth::load_psk)
                .transpose()?,
            search,
            time,
            latency_probe: latency_probe::plan(
                args.latency_probe.as_deref(),
                args.probe_interval.as_deref(),
            )?,
            rate_unit: args
                .rate_unit
                .as_deref()
                .map(|u| u.parse::<RateUnit>())
                .transpose()
                .map_err(|e| usage(format!("-f/--rate-unit: {e}")))?,
        })
    }
}

/// Refuses `--rto` and `--rate` when no run of the plan would use them: a flag that does
/// nothing must not look as if it did. `--rto` is UDP stop-and-wait's retransmission timeout;
/// `--rate` paces UDP streaming, TCP (SO_MAX_PACING_RATE, Linux) and QUIC, not UDP
/// stop-and-wait (one datagram in flight).
fn check_flags_apply(
    combinations: &[plan::Combination],
    rto: bool,
    rate: bool,
) -> Result<(), UsageError> {
    let udp_saw = |c: &plan::Combination| {
        c.protocol == Protocol::Udp && c.mechanism == Mechanism::StopAndWait
    };
    if rto && !combinations.iter().any(udp_saw) {
        return Err(usage(
            "--rto is the retransmission timeout of UDP stop-and-wait, and this plan has no \
             UDP stop-and-wait run: add --proto udp --mode saw, or drop --rto",
        ));
    }
    if rate && combinations.iter().all(udp_saw) {
        return Err(usage(
            "--rate paces UDP streaming, TCP and QUIC; UDP stop-and-wait has one datagram in \
             flight and is never paced: add --mode stream, or drop --rate",
        ));
    }
    if rate
        && !cfg!(target_os = "linux")
        && combinations.iter().any(|c| c.protocol == Protocol::Tcp)
    {
        return Err(usage(
            "--rate on TCP paces with SO_MAX_PACING_RATE, which needs Linux: \
             drop tcp from --proto, or drop --rate",
        ));
    }
    Ok(())
}

/// The server `run`, `ping` and `rr` test against: `--server` with `-p`, `-4` and `-6`
/// applied, or the embedded server on 127.0.0.1 (`-6`: ::1).
pub fn resolve_target(server: Option<&str>, address: &AddressArgs) -> Result<Target, UsageError> {
    match server {
        None => {
            if let Some(port) = address.port {
                return Err(usage(format!(
                    "-p/--port {port} is the port of a server elsewhere: add --server HOST \
                     (without it, the embedded server takes a free port)"
                )));
            }
            Ok(Target::Embedded(if address.ipv6 {
                IpAddr::V6(Ipv6Addr::LOCALHOST)
            } else {
                IpAddr::V4(Ipv4Addr::LOCALHOST)
            }))
        }
        Some(name) => {
            let (name, addr) = resolve_address(name, address, DEFAULT_PORT, "--server")?;
            Ok(Target::Remote { name, addr })
        }
    }
}

/// Resolves HOST, HOST:PORT or [V6]:PORT: a HOST alone gets `-p` or `default_port`; `-4`/`-6`
/// pick the address family. Returns the name for messages (with the `-p` port joined to it, as
/// if typed HOST:PORT) and the address.
fn resolve_address(
    name: &str,
    address: &AddressArgs,
    default_port: u16,
    flag: &str,
) -> Result<(String, SocketAddr), UsageError> {
    let bare = name.parse::<IpAddr>().is_ok() || !name.contains(':');
    if !bare && address.port.is_some() {
        return Err(usage(format!(
            "{flag} {name} already names a port: drop -p/--port or the :PORT"
        )));
    }
    let named = if bare {
        let port = address.port.unwrap_or(default_port);
        match name.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
            _ => format!("{name}:{port}"),
        }
    } else {
        name.to_string()
    };
    let all: Vec<SocketAddr> = named
        .to_socket_addrs()
        .map_err(|e| {
            usage(format!(
                "{flag} {name}: cannot resolve ({e}); expected HOST, HOST:PORT or [IPv6]:PORT"
            ))
        })?
        .collect();
    let (family, wanted): (&str, fn(&SocketAddr) -> bool) = if address.ipv4 {
        (" IPv4", SocketAddr::is_ipv4)
    } else if address.ipv6 {
        (" IPv6", SocketAddr::is_ipv6)
    } else {
        ("", |_| true)
    };
    let addr = all.iter().copied().find(wanted).ok_or_else(|| {
        usage(format!(
            "{flag} {name}: the name resolves to no{family} address"
        ))
    })?;
    let shown = if address.port.is_some() {
        named
    } else {
        name.to_string()
    };
    Ok((shown, addr))
}

/// Most flows `-P` accepts.
use wirebench_core::vocab::limits::MAX_PARALLEL;

/// `-O/--omit`: a bare number of seconds or a duration with a unit, at least 1 ms and
/// under 24 h.
fn parse_omit(text: &str) -> Result<Duration, UsageError> {
    let t = text.trim();
    let parsed = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        parse_duration(&format!("{t}s"))
    } else {
        parse_duration(t)
    };
    let d =
        parsed.map_err(|e| usage(format!("-O/--omit: {e} (a bare number is seconds: -O 2)")))?;
    if d < Duration::from_millis(1) || d >= MAX_RUN_TIME {
        return Err(usage(format!(
            "-O/--omit {text} is out of range: allowed 1ms to under 24h"
        )));
    }
    Ok(d)
}

/// `--bidir` and `-O` against the rest of a run's flags: --bidir contradicts -R and doubles
/// the sessions; -O must leave some of a timed run; neither goes with the rate search.
fn check_bidir_and_omit(
    args: &RunArgs,
    search_max: bool,
    time: Option<Duration>,
    omit: Option<Duration>,
) -> Result<(), UsageError> {
    if args.bidir && args.reverse {
        return Err(usage(
            "--bidir already runs both directions (-R is server → client only): give one of them",
        ));
    }
    let most = MAX_PARALLEL / 2;
    if args.bidir && args.parallel > most {
        return Err(usage(format!(
            "-P/--parallel {} with --bidir is out of range: allowed 1 to {most} (N flows each way, 2N sessions)",
            args.parallel
        )));
    }
    if search_max && (args.bidir || omit.is_some()) {
        return Err(usage(
            "--rate max searches one direction over whole trials: drop --bidir and -O/--omit",
        ));
    }
    if let (Some(o), Some(t)) = (omit, time) {
        if o >= t {
            return Err(usage(format!(
                "-O/--omit {o:?} leaves nothing of -t/--time {t:?} to measure: give an omit span shorter than the time"
            )));
        }
    }
    Ok(())
}

/// Shortest `run -t` against a wirebench server.
const MIN_RUN_TIME: Duration = Duration::from_millis(100);
/// Longest `run -t`.
const MAX_RUN_TIME: Duration = Duration::from_secs(86_400);

/// `-t/--time`: a duration with a unit (`10s`, `500ms`, `2m`), or a bare number of seconds as
/// in iperf3 (`-t 10`).
pub(crate) fn parse_run_time(text: &str) -> Result<Duration, UsageError> {
    let t = text.trim();
    let parsed = if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        parse_duration(&format!("{t}s"))
    } else {
        parse_duration(t)
    };
    parsed.map_err(|e| usage(format!("-t/--time: {e} (a bare number is seconds: -t 10)")))
}

/// Shortest `-i` accepted: interval lines faster than this are noise, not a time series.
const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Smallest and largest `-w` accepted.
const WINDOW_RANGE: (u64, u64) = (4 * 1024, 1 << 30);

/// Parses the data-path options (`-w`, `-C`, `--nodelay`, `--busy-poll`).
fn parse_options(args: &RunArgs, protocols: &[Protocol]) -> Result<DataPathOptions, UsageError> {
    let window = match &args.window {
        None => None,
        Some(text) => {
            let w: ByteSize = text
                .parse()
                .map_err(|e| usage(format!("-w/--window: {e}")))?;
            if w.0 < WINDOW_RANGE.0 || w.0 > WINDOW_RANGE.1 {
                return Err(usage(format!(
                    "-w/--window {} is out of range: allowed {} to {} bytes",
                    w.0, WINDOW_RANGE.0, WINDOW_RANGE.1
                )));
            }
            u32::try_from(w.0).ok()
        }
    };
    let congestion = match &args.congestion {
        None => None,
        Some(name) => {
            let valid = !name.is_empty()
                && name.len() < 16
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid {
                return Err(usage(format!(
                    "-C/--congestion {name:?} is not an algorithm name: expected e.g. cubic, bbr or reno"
                )));
            }
            if let Some(available) = crate::transport::net::available_congestion_controls() {
                if !available.iter().any(|a| a == name) {
                    return Err(usage(format!(
                        "-C/--congestion {name} is not available here: allowed {}",
                        available.join(", ")
                    )));
                }
            }
            Some(name.clone())
        }
    };
    if args.busy_poll && (args.reverse || args.bidir) && protocols.contains(&Protocol::Udp) {
        return Err(usage(
            "--busy-poll with -R applies to TCP: the reversed UDP client does not spin; run UDP without one of them",
        ));
    }
    if args.busy_poll && protocols.contains(&Protocol::Quic) {
        return Err(usage(
            "--busy-poll applies to TCP and UDP; run QUIC without it",
        ));
    }
    if let Some(mtu) = args.quic_mtu {
        if !(1200..=65527).contains(&mtu) {
            return Err(usage(format!(
                "--quic-mtu {mtu} is out of range: QUIC needs 1200..65527 bytes of UDP payload"
            )));
        }
        if !protocols.contains(&Protocol::Quic) {
            return Err(usage("--quic-mtu applies to QUIC only: add --proto quic"));
        }
    }
    Ok(DataPathOptions {
        window,
        congestion,
        nodelay: args.nodelay,
        busy_poll: args.busy_poll,
        receipt_us: None,
        quic_mtu: args.quic_mtu,
    })
}

/// Parses `-l`, checking it against the limits of every protocol that will run.
/// Parses one `-l` value, checking it against the limits of every protocol that will run.
#[cfg(test)]
fn parse_msg_size(text: &str, protocols: &[Protocol], ipv6: bool) -> Result<u32, UsageError> {
    let size: ByteSize = text
        .parse()
        .map_err(|e| usage(format!("-l/--msg-size: {e}")))?;
    check_msg_size(size.0, protocols, ipv6)
}

/// Checks one message size against the limits of every protocol that will run.
fn check_msg_size(size: u64, protocols: &[Protocol], ipv6: bool) -> Result<u32, UsageError> {
    let size = ByteSize(size);
    let stream_only = protocols.iter().all(|p| *p != Protocol::Udp);
    let max = if stream_only {
        MAX_STREAM_MSG_SIZE
    } else {
        MAX_DATAGRAM_MSG_SIZE
    };
    if size.0 < u64::from(MIN_MSG_SIZE) || size.0 > u64::from(max) {
        let hint = if stream_only {
            String::new()
        } else {
            format!(" (TCP and QUIC alone allow up to {MAX_STREAM_MSG_SIZE})")
        };
        return Err(usage(format!(
            "-l/--msg-size {} is out of range: allowed {MIN_MSG_SIZE} to {max} bytes{hint}",
            size.0
        )));
    }
    // The range check above bounds the value by MAX_STREAM_MSG_SIZE, which fits in u32.
    let size = u32::try_from(size.0).map_err(|_| usage("-l/--msg-size is too large"))?;
    if protocols.contains(&Protocol::Udp) {
        let udp_max = datagram::max_message_size(ipv6);
        if size > udp_max {
            return Err(usage(format!(
                "-l/--msg-size {size} does not fit one UDP datagram: the largest UDP message over {} is {udp_max} bytes \
                 ({} bytes of payload minus our {}-byte header)",
                if ipv6 { "IPv6" } else { "IPv4" },
                if ipv6 { datagram::MAX_UDP_PAYLOAD_V6 } else { datagram::MAX_UDP_PAYLOAD_V4 },
                datagram::HEADER_LEN
            )));
        }
    }
    Ok(size)
}

/// Resolves HOST, HOST:PORT or [V6]:PORT; the port defaults to [`DEFAULT_PORT`].
fn resolve_server(name: &str) -> Result<Target, UsageError> {
    let with_port = if name.parse::<IpAddr>().is_ok() || !name.contains(':') {
        // A bare address or host name: add the default port (bracketing IPv6).
        match name.parse::<IpAddr>() {
            Ok(IpAddr::V6(v6)) => format!("[{v6}]:{DEFAULT_PORT}"),
            _ => format!("{name}:{DEFAULT_PORT}"),
        }
    } else {
        name.to_string()
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| {
            usage(format!(
                "--server {name}: cannot resolve ({e}); expected HOST, HOST:PORT or [IPv6]:PORT"
            ))
        })?
        .next()
        .ok_or_else(|| usage(format!("--server {name}: the name resolves to no address")))?;
    Ok(Target::Remote {
        name: name.to_string(),
        addr,
    })
}

/// What `--impair` does to TCP, for the refusal message.
const TCP_IMPAIR_NOTE: &str = "loss, reorder and duplicate apply to UDP and QUIC only: TCP is \
     relayed as a byte stream (delay, jitter and rate apply)";

/// Parses `run --impair`; refuses packet impairments when TCP runs.
fn parse_impair(
    args: &RunArgs,
    protocols: &[Protocol],
) -> Result<Option<(Impairments, u64)>, UsageError> {
    let Some(text) = &args.impair else {
        return Ok(None);
    };
    let impairments = Impairments::parse_list(text).map_err(|e| usage(format!("--impair: {e}")))?;
    if impairments.has_packet_only() && protocols.contains(&Protocol::Tcp) {
        return Err(usage(format!(
            "--impair {text} with --proto tcp: {TCP_IMPAIR_NOTE}; run TCP without them"
        )));
    }
    Ok(Some((impairments, args.impair_seed)))
}

/// Validates `wirebench relay` flags.
pub fn relay_config(args: &RelayArgs) -> Result<crate::flows::relay::RelayConfig, UsageError> {
    let listen: SocketAddr = args.listen.parse().map_err(|_| {
        usage(format!(
            "--listen {}: expected ADDR:PORT, e.g. 127.0.0.1:5311 or [::1]:5311",
            args.listen
        ))
    })?;
    let upstream =
        match resolve_server(&args.to).map_err(|e| usage(e.0.replacen("--server", "--to", 1)))? {
            Target::Remote { addr, .. } => addr,
            Target::Embedded(_) => return Err(usage("--to: expected HOST:PORT")),
        };
    let mut impairments = Impairments::default();
    for (key, values) in [
        ("loss", &args.loss),
        ("delay", &args.delay),
        ("jitter", &args.jitter),
        ("reorder", &args.reorder),
        ("duplicate", &args.duplicate),
        ("rate", &args.rate),
        ("queue", &args.queue),
    ] {
        for value in values {
            impairments
                .set(key, value)
                .map_err(|e| usage(format!("--{e}")))?;
        }
    }
    let (mut tcp, mut udp) = (false, false);
    for p in args.proto.split(',').map(str::trim) {
        match p {
            "tcp" => tcp = true,
            "udp" => udp = true,
            other => {
                return Err(usage(format!(
                    "--proto {other}: expected tcp, udp or tcp,udp"
                )))
            }
        }
    }
    if tcp && !udp && impairments.has_packet_only() {
        return Err(usage(format!("--proto tcp: {TCP_IMPAIR_NOTE}")));
    }
    Ok(crate::flows::relay::RelayConfig {
        listen,
        upstream,
        impairments,
        seed: args.seed,
        tcp,
        udp,
    })
}

/// `run --iperf3`: the validated iperf3 client test, or None without `--iperf3`.
pub fn iperf3_client(
    args: &RunArgs,
) -> Result<Option<crate::flows::iperf3::client::ClientConfig>, UsageError> {
    use crate::flows::iperf3::client::{ClientConfig, Limit};
    use wirebench_core::wire::iperf3 as ip3;
    let i = &args.iperf3;
    let Some(name) = &i.iperf3 else {
        return Ok(None);
    };
    if i.omit.is_some() || args.bidir {
        return Err(usage(
            "-O/--omit and --bidir apply to wirebench servers, not --iperf3: drop them",
        ));
    }
    if args.perf.perf_server.is_some() {
        return Err(usage(
            "--iperf3 and --perf-server are two kinds of test: give one",
        ));
    }
    let protocols: Vec<Protocol> =
        plan::parse_list(&args.protocols).map_err(|e| usage(format!("--proto: {e}")))?;
    let udp = match protocols.as_slice() {
        [Protocol::Tcp] => false,
        [Protocol::Udp] => true,
        _ => return Err(usage(
            "--iperf3 runs one test over --proto tcp or --proto udp (iperf3 does not speak QUIC)",
        )),
    };
    let mechanisms: Vec<Mechanism> =
        plan::parse_list(&args.mechanisms).map_err(|e| usage(format!("--mode: {e}")))?;
    if mechanisms != [Mechanism::Stream] {
        return Err(usage(
            "--iperf3 streams; drop --mode (stop-and-wait is wirebench's own)",
        ));
    }
    if args.repeat != 1 || args.plan.warmup != 0 {
        return Err(usage("--iperf3 runs one test: drop --repeat and --warmup"));
    }
    if args.window.is_some()
        || args.congestion.is_some()
        || args.nodelay
        || args.busy_poll
        || args.rto.is_some()
        || args.interval.is_some()
        || args.impair.is_some()
    {
        return Err(usage(
            "-w, -C, --nodelay, --busy-poll, --rto, -i and --impair apply to wirebench servers, \
             not --iperf3",
        ));
    }
    if args.parallel == 0 || args.parallel > ip3::MAX_PARALLEL {
        return Err(usage(format!(
            "-P/--parallel {} is out of range: allowed 1 to {}",
            args.parallel,
            ip3::MAX_PARALLEL
        )));
    }
    let single = |text: &str, flag: &str| -> Result<u64, UsageError> {
        match sweep::parse_sizes(text)
            .map_err(|e| usage(format!("{flag}: {e}")))?
            .as_slice()
        {
            [one] => Ok(*one),
            _ => Err(usage(format!(
                "{flag}: --iperf3 takes one value, not a sweep"
            ))),
        }
    };
    let len = single(&args.msg_size, "-l/--msg-size")?;
    let (min, max) = if udp {
        (
            ip3::udp_header_len(false) as u64,
            u64::from(ip3::MAX_UDP_BLOCK),
        )
    } else {
        (1, u64::from(ip3::MAX_TCP_BLOCK))
    };
    if len < min || len > max {
        return Err(usage(format!(
            "-l/--msg-size {len} is out of range for an iperf3 {} test: allowed {min} to {max} bytes",
            if udp { "UDP" } else { "TCP" }
        )));
    }
    let limit = match &i.time {
        Some(t) => {
            let d = parse_run_time(t)?;
            if d < Duration::from_secs(1) || d > Duration::from_secs(86_400) {
                return Err(usage(format!(
                    "-t/--time {t} is out of range: allowed 1s to 24h"
                )));
            }
            Limit::Time(d)
        }
        None => {
            let n = single(&args.total, "-n/--total")?;
            if n == 0 {
                return Err(usage("-n/--total must be at least 1 byte"));
            }
            Limit::Bytes(n)
        }
    };
    let rate_bps = match &args.rate {
        Some(_) if !udp => {
            return Err(usage("--rate paces UDP; an iperf3 TCP test runs unpaced"));
        }
        Some(s) => {
            s.parse::<BitRate>()
                .map_err(|e| usage(format!("--rate: {e}")))?
                .0
        }
        // iperf3's own default for UDP.
        None if udp => 1_000_000,
        None => 0,
    };
    let (name, server) = resolve_address(name, &args.address, ip3::DEFAULT_PORT, "--iperf3")?;
    Ok(Some(ClientConfig {
        name: name.clone(),
        server,
        udp,
        reverse: args.reverse,
        parallel: args.parallel,
        // Range-checked above against limits below u32::MAX.
        len: len as u32,
        limit,
        rate_bps,
        json: args.json,
    }))
}

/// `run --perf-server`: the validated QUIC perf test, or None without `--perf-server`.
pub fn perf_client(
    args: &RunArgs,
) -> Result<Option<crate::flows::perf::client::PerfConfig>, UsageError> {
    use crate::flows::perf::client::{PerfConfig, Trust};
    let p = &args.perf;
    let Some(name) = &p.perf_server else {
        if p.upload.is_some() || p.download.is_some() || p.perf_insecure || p.perf_ca.is_some() {
            return Err(usage(
                "--upload, --download, --perf-ca and --perf-insecure apply to --perf-server tests",
            ));
        }
        return Ok(None);
    };
    if args.iperf3.time.is_some() {
        return Err(usage(
            "-t/--time does not apply to --perf-server tests: give --upload/--download sizes",
        ));
    }
    if args.iperf3.omit.is_some() || args.bidir {
        return Err(usage(
            "-O/--omit and --bidir do not apply to --perf-server tests (--upload and --download \
             together run both directions)",
        ));
    }
    let protocols: Vec<Protocol> =
        plan::parse_list(&args.protocols).map_err(|e| usage(format!("--proto: {e}")))?;
    if protocols != [Protocol::Quic] {
        return Err(usage("--perf-server speaks QUIC: add --proto quic"));
    }
    let bytes = |text: &Option<String>, flag: &str| -> Result<Option<u64>, UsageError> {
        text.as_deref()
            .map(|t| {
                t.parse::<ByteSize>()
                    .map(|b| b.0)
                    .map_err(|e| usage(format!("{flag}: {e}")))
            })
            .transpose()
    };
    let mut upload = bytes(&p.upload, "--upload")?;
    let mut download = bytes(&p.download, "--download")?;
    if upload.is_none() && download.is_none() {
        upload = Some(10 << 20);
        download = Some(10 << 20);
    }
    let host = host_part(name);
    let trust = match (&p.perf_ca, p.perf_insecure) {
        (Some(ca), false) => Trust::Ca {
            file: ca.clone(),
            server_name: p.perf_server_name.clone().unwrap_or_else(|| host.clone()),
        },
        (None, true) => Trust::Insecure,
        _ => return Err(usage(
            "--perf-server needs a trust choice: --perf-ca FILE (verify the server's certificate) \
                 or --perf-insecure (accept any certificate)",
        )),
    };
    let (name, server) = resolve_address(name, &args.address, DEFAULT_PORT, "--perf-server")?;
    Ok(Some(PerfConfig {
        name: name.clone(),
        server,
        upload,
        download,
        trust,
        json: args.json,
    }))
}

/// The HOST of HOST, HOST:PORT or [V6]:PORT.
fn host_part(name: &str) -> String {
    if name.parse::<IpAddr>().is_ok() {
        return name.to_string();
    }
    if let Some(rest) = name.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    name.rsplit_once(':').map_or(name, |(h, _)| h).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_size_limit_names_the_largest_allowed() {
        let err = parse_msg_size("65492", &[Protocol::Udp], false).unwrap_err();
        assert!(err.0.contains("65491"), "{}", err.0);
        assert_eq!(
            parse_msg_size("65491", &[Protocol::Udp], false).unwrap(),
            65491
        );
        assert_eq!(
            parse_msg_size("65511", &[Protocol::Udp], true).unwrap(),
            65511
        );
    }

    #[test]
    fn stream_protocols_allow_large_messages() {
        assert_eq!(
            parse_msg_size("16MiB", &[Protocol::Tcp, Protocol::Quic], false).unwrap(),
            16 * 1024 * 1024
        );
        assert!(parse_msg_size("100000", &[Protocol::Tcp, Protocol::Udp], false).is_err());
        assert!(parse_msg_size("0", &[Protocol::Tcp], false).is_err());
    }

    fn run_args(l: &str, n: &str, json: bool) -> RunArgs {
        use clap::Parser;
        let mut argv = vec!["wirebench", "run", "--proto", "tcp,udp", "-l", l, "-n", n];
        if json {
            argv.push("--json");
        }
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Run(args) => *args,
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn sweeps_expand_sizes_outer_totals_inner() {
        let cfg = RunConfig::from_args(&run_args("100..400:x2", "1KiB,2KiB", false)).unwrap();
        let points: Vec<(u32, u64)> = cfg
            .points
            .iter()
            .map(|p| (p.msg_size, p.total_bytes))
            .collect();
        assert_eq!(
            points,
            [
                (100, 1024),
                (100, 2048),
                (200, 1024),
                (200, 2048),
                (400, 1024),
                (400, 2048)
            ]
        );
        assert_eq!((cfg.msg_size, cfg.total_bytes), (100, 1024));
        // Every size is checked against every protocol: UDP's limit applies to the whole list.
        let err = RunConfig::from_args(&run_args("1000,65492", "1MiB", false)).unwrap_err();
        assert!(err.0.contains("65491"), "{}", err.0);
        let err = RunConfig::from_args(&run_args("100,200", "1MiB", true)).unwrap_err();
        assert!(err.0.contains("wirebench export"), "{}", err.0);
        assert!(RunConfig::from_args(&run_args("100", "1MiB", true)).is_ok());
        let err = RunConfig::from_args(&run_args("100", "0,1", false)).unwrap_err();
        assert!(err.0.contains("at least 1 byte"), "{}", err.0);
    }

    #[test]
    fn server_names_get_the_default_port() {
        let t = resolve_server("127.0.0.1").unwrap();
        assert_eq!(
            t,
            Target::Remote {
                name: "127.0.0.1".into(),
                addr: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT))
            }
        );
        let t = resolve_server("::1").unwrap();
        assert!(t.is_ipv6());
        let t = resolve_server("[::1]:9000").unwrap();
        assert!(matches!(t, Target::Remote { addr, .. } if addr.port() == 9000));
    }

    fn parse_run(argv: &[&str]) -> RunArgs {
        use clap::Parser;
        let mut all = vec!["wirebench", "run"];
        all.extend_from_slice(argv);
        match crate::cli::Cli::parse_from(all).command {
            crate::cli::Command::Run(args) => *args,
            other => panic!("not run: {other:?}"),
        }
    }

    fn parse_server(argv: &[&str]) -> ServerArgs {
        use clap::Parser;
        let mut all = vec!["wirebench", "server"];
        all.extend_from_slice(argv);
        match crate::cli::Cli::parse_from(all).command {
            crate::cli::Command::Server(args) => args,
            other => panic!("not server: {other:?}"),
        }
    }

    #[test]
    fn per_client_limit_follows_a_lower_session_limit() {
        let limits = |argv: &[&str]| server_limits(&parse_server(argv)).unwrap();
        assert_eq!(limits(&[]).max_sessions_per_client, 128);
        // Lowering --max-sessions alone lowers the per-client default with it.
        let l = limits(&["--max-sessions", "64"]);
        assert_eq!((l.max_sessions, l.max_sessions_per_client), (64, 64));
        let l = limits(&["--max-sessions", "64", "--max-sessions-per-client", "4"]);
        assert_eq!(l.max_sessions_per_client, 4);
    }

    #[test]
    fn iperf3_tests_take_iperf3_defaults() {
        use crate::flows::iperf3::client::Limit;
        let c = iperf3_client(&parse_run(&["--iperf3", "127.0.0.1", "--proto", "udp"]))
            .unwrap()
            .unwrap();
        assert_eq!(c.server, SocketAddr::from(([127, 0, 0, 1], 5201)));
        assert!(c.udp && !c.reverse);
        assert_eq!((c.parallel, c.len, c.rate_bps), (1, 1024, 1_000_000));
        assert_eq!(c.limit, Limit::Bytes(100 << 20));
        let c = iperf3_client(&parse_run(&[
            "--iperf3",
            "[::1]:5202",
            "-t",
            "1500ms",
            "-P",
            "3",
            "-R",
            "-l",
            "128KiB",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.server.port(), 5202);
        assert!(!c.udp && c.reverse);
        assert_eq!((c.parallel, c.len, c.rate_bps), (3, 128 * 1024, 0));
        assert_eq!(c.limit, Limit::Time(Duration::from_millis(1500)));
        assert!(iperf3_client(&parse_run(&[])).unwrap().is_none());
        let err = iperf3_client(&parse_run(&["--iperf3", "h", "--rate", "1Mbit"])).unwrap_err();
        assert!(err.0.contains("paces UDP"), "{}", err.0);
        let err = iperf3_client(&parse_run(&["--iperf3", "h", "-P", "0"])).unwrap_err();
        assert!(err.0.contains("allowed 1 to 128"), "{}", err.0);
    }

    #[test]
    fn perf_tests_need_a_trust_choice_and_default_to_both_directions() {
        use crate::flows::perf::client::Trust;
        let c = perf_client(&parse_run(&[
            "--proto",
            "quic",
            "--perf-server",
            "localhost:4433",
            "--perf-ca",
            "ca.pem",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((c.upload, c.download), (Some(10 << 20), Some(10 << 20)));
        assert_eq!(
            c.trust,
            Trust::Ca {
                file: "ca.pem".into(),
                server_name: "localhost".into()
            }
        );
        let c = perf_client(&parse_run(&[
            "--proto",
            "quic",
            "--perf-server",
            "127.0.0.1:4433",
            "--perf-insecure",
            "--download",
            "1MiB",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.upload, c.download, c.trust),
            (None, Some(1 << 20), Trust::Insecure)
        );
        assert_eq!(host_part("[::1]:4433"), "::1");
        assert_eq!(host_part("example.org:4433"), "example.org");
        assert_eq!(host_part("::1"), "::1");
    }

    /// Parses `argv` after `wirebench` and validates it as the binary would, as Debug text (the
    /// configs hold no PartialEq; their Debug shows every field).
    fn validated(argv: &[&str]) -> String {
        use clap::Parser;
        let mut all = vec!["wirebench"];
        all.extend_from_slice(argv);
        match crate::cli::Cli::parse_from(all).command {
            crate::cli::Command::Run(args) => match iperf3_client(&args).unwrap() {
                Some(c) => format!("{c:?}"),
                None => format!("{:?}", RunConfig::from_args(&args).unwrap()),
            },
            crate::cli::Command::Ping(args) => {
                format!("{:?}", rr::RrConfig::from_ping(&args).unwrap())
            }
            crate::cli::Command::Rr(args) => format!("{:?}", rr::RrConfig::from_rr(&args).unwrap()),
            crate::cli::Command::Dns(args) => {
                format!("{:?}", dns::DnsConfig::from_args(&args).unwrap())
            }
            other => panic!("not run, ping, rr or dns: {other:?}"),
        }
    }

    #[test]
    fn iperf3_style_aliases_mean_what_their_long_forms_mean() {
        let same: &[(&[&str], &[&str])] = &[
            (&["run", "-u"], &["run", "--proto", "udp"]),
            (&["run", "--udp"], &["run", "--proto", "udp"]),
            (
                &["run", "-u", "-b", "100M"],
                &["run", "--proto", "udp", "--rate", "100M"],
            ),
            (&["run", "-J"], &["run", "--json"]),
            (
                &["run", "-c", "127.0.0.1", "-p", "5201"],
                &["run", "-c", "127.0.0.1:5201"],
            ),
            (
                &["run", "-c", "::1", "-p", "5201"],
                &["run", "-c", "[::1]:5201"],
            ),
            (
                &["run", "-4", "-c", "127.0.0.1"],
                &["run", "-c", "127.0.0.1"],
            ),
            (
                &["run", "--version6", "-c", "::1"],
                &["run", "--ipv6", "-c", "::1"],
            ),
            (
                &[
                    "run",
                    "--iperf3",
                    "127.0.0.1",
                    "-p",
                    "5202",
                    "-u",
                    "-b",
                    "5M",
                    "-J",
                ],
                &[
                    "run",
                    "--iperf3",
                    "127.0.0.1:5202",
                    "--proto",
                    "udp",
                    "--rate",
                    "5M",
                    "--json",
                ],
            ),
            (
                &["ping", "-u", "-J", "127.0.0.1", "-p", "7000"],
                &[
                    "ping",
                    "--proto",
                    "udp",
                    "--json",
                    "--server",
                    "127.0.0.1:7000",
                ],
            ),
            // ping(8)'s -c is the count; run's and rr's -c the server, as iperf3's.
            (&["ping", "-c", "5"], &["ping", "--count", "5"]),
            (&["rr", "-c", "127.0.0.1"], &["rr", "--server", "127.0.0.1"]),
            (
                &["ping", "-t", "2s", "--gap", "1ms"],
                &["ping", "--duration", "2s", "--interval", "1ms"],
            ),
            (&["ping", "-l", "100"], &["ping", "--size", "100"]),
            (
                &["rr", "-u", "-6", "--count", "5"],
                &["rr", "--proto", "udp", "--ipv6", "--count", "5"],
            ),
            (
                &[
                    "dns",
                    "--resolver",
                    "127.0.0.1",
                    "--name",
                    "a.example",
                    "-J",
                ],
                &[
                    "dns",
                    "--resolver",
                    "127.0.0.1",
                    "--name",
                    "a.example",
                    "--json",
                ],
            ),
        ];
        for (alias, long) in same {
            assert_eq!(validated(alias), validated(long), "{alias:?} vs {long:?}");
        }
        // What the aliases change, against the defaults.
        assert_ne!(validated(&["run", "-u"]), validated(&["run"]));
        let six = validated(&["run", "-6"]);
        assert!(six.contains("Embedded(::1)"), "{six}");
        assert!(validated(&["ping", "-6"]).contains("Embedded(::1)"));
        let c = RunConfig::from_args(&parse_run(&["-f", "m"])).unwrap();
        assert_eq!(c.rate_unit, Some("m".parse().unwrap()));
        assert_eq!(
            RunConfig::from_args(&parse_run(&[])).unwrap().rate_unit,
            None
        );
        // -p needs a server and a name without a port; -4 refuses an IPv6 address.
        let err = RunConfig::from_args(&parse_run(&["-p", "5201"])).unwrap_err();
        assert!(err.0.contains("add --server HOST"), "{}", err.0);
        let err = RunConfig::from_args(&parse_run(&["-c", "127.0.0.1:1", "-p", "2"])).unwrap_err();
        assert!(err.0.contains("already names a port"), "{}", err.0);
        let err = RunConfig::from_args(&parse_run(&["-4", "-c", "::1"])).unwrap_err();
        assert!(err.0.contains("no IPv4 address"), "{}", err.0);
        let err = RunConfig::from_args(&parse_run(&["-f", "q"])).unwrap_err();
        assert!(err.0.contains("-f/--rate-unit"), "{}", err.0);
    }

    #[test]
    fn quic_mtu_is_checked_and_reaches_the_session_options() {
        let quic = [Protocol::Quic];
        let opts = parse_options(&parse_run(&["--quic-mtu", "1452"]), &quic).unwrap();
        assert_eq!(opts.quic_mtu, Some(1452));
        let err = parse_options(&parse_run(&["--quic-mtu", "1100"]), &quic).unwrap_err();
        assert!(err.0.contains("1200..65527"), "{}", err.0);
        let err = parse_options(&parse_run(&["--quic-mtu", "1452"]), &[Protocol::Tcp]).unwrap_err();
        assert!(err.0.contains("QUIC only"), "{}", err.0);
        assert_eq!(
            parse_options(&parse_run(&[]), &quic).unwrap().quic_mtu,
            None
        );
    }
}
