//! `wirebench run`'s flags as a validated [`RunConfig`]: the plan, message sizes, times, the
//! data-path options and impairments.

use std::time::Duration;

use wirebench_core::machine::impair::Impairments;
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::limits::MAX_PARALLEL;
use wirebench_core::vocab::plan::{
    self, Mechanism, Protocol, MAX_DATAGRAM_MSG_SIZE, MAX_STREAM_MSG_SIZE, MIN_MSG_SIZE,
};
use wirebench_core::vocab::sweep::{self, Point};
use wirebench_core::vocab::units::{parse_duration, BitRate, ByteSize, RateUnit};
use wirebench_core::wire::datagram;
use wirebench_core::wire::proto::{
    is_congestion_name, DataPathOptions, MAX_GRACE_US, MIN_INTERVAL_US, QUIC_MTU_RANGE,
    RTO_RANGE_US, WINDOW_RANGE,
};

use crate::cli::RunArgs;
use crate::runner::{Plan, RunConfig};

use super::address::resolve_target;
use super::error::usage;
use super::iperf3_flags;
use super::latency_probe;
use super::ratesearch;
use super::run_plan;

/// `-l` when not given (and not `--iperf3`, which takes iperf3's: see `interop`) for a plan
/// whose every run streams over TCP or QUIC: bulk data in iperf3's 128 KiB blocks. A stream
/// message is one write, and 1 KiB writes measured 0.24-0.75 of iperf3's first run
/// (docs/dev/benchmarking.md, issue 42), so a user's first run would read as a slower tool.
const DEFAULT_BULK_MSG_SIZE: &str = "128KiB";
/// `-l` when not given for any other plan: a round trip, a UDP datagram, and a plan that sets
/// protocols or mechanisms side by side measure one size across them, the lab reports' 1 KiB.
const DEFAULT_MSG_SIZE: &str = "1024";
/// `-n` when not given (and not `--iperf3`, which runs iperf3's 10 seconds: see `interop`).
const DEFAULT_TOTAL: &str = "100MiB";

impl RunConfig {
    /// Validates `wirebench run` flags; resolves the server name once; builds the plan.
    pub fn from_args(args: &RunArgs) -> Result<Self, UsageError> {
        let protocols: Vec<Protocol> =
            plan::parse_list(&args.protocols).map_err(|e| usage(format!("--proto: {e}")))?;
        let mechanisms: Vec<Mechanism> =
            plan::parse_list(&args.mechanisms).map_err(|e| usage(format!("--mode: {e}")))?;
        let target = resolve_target(args.server.as_deref(), &args.address)?;
        let combinations = plan::matrix(&protocols, &mechanisms);
        let default_size = if combinations.iter().all(plan::Combination::is_bulk_stream) {
            DEFAULT_BULK_MSG_SIZE
        } else {
            DEFAULT_MSG_SIZE
        };
        let msg_sizes = sweep::parse_sizes(args.msg_size.as_deref().unwrap_or(default_size))
            .map_err(|e| usage(format!("-l/--msg-size: {e}")))?
            .into_iter()
            .map(|s| check_msg_size(s, &protocols, target.is_ipv6()))
            .collect::<Result<Vec<u32>, UsageError>>()?;
        let omit = args.iperf3.omit.as_deref().map(parse_omit).transpose()?;
        let time = parse_time(args)?;
        let points = parse_points(args, &msg_sizes, time)?;
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
        let rto = parse_rto(args)?;
        let search_max = ratesearch::is_max(args.rate.as_deref());
        let rate = parse_rate(args, &protocols, search_max)?;
        let grace = parse_duration(&args.grace).map_err(|e| usage(format!("--grace: {e}")))?;
        if grace > Duration::from_micros(MAX_GRACE_US) {
            return Err(usage("--grace is out of range: allowed 0s to 60s"));
        }
        let options = parse_options(args, &protocols)?;
        check_parallel(args, &points)?;
        let interval = parse_interval(args)?;
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
        let mut cfg = RunConfig {
            bidir: args.bidir,
            omit,
            reverse: args.reverse,
            parallel: args.parallel,
            interval,
            options,
            target,
            combinations,
            msg_size: first.msg_size,
            default_msg_size: args.msg_size.is_none(),
            total_bytes: first.total_bytes,
            repeat: args.repeat,
            rto,
            rate,
            grace,
            // --json-stream's lines take the place of the text, as -J's document does.
            json: args.json || args.iperf3_flags.json_stream,
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
            plan: Plan::default(),
        };
        cfg.plan = run_plan::build(&cfg)?;
        Ok(cfg)
    }
}

/// `-t/--time`, within 100 ms to 24 h.
fn parse_time(args: &RunArgs) -> Result<Option<Duration>, UsageError> {
    let Some(t) = &args.iperf3.time else {
        return Ok(None);
    };
    let d = parse_run_time(t)?;
    if d < MIN_RUN_TIME || d > MAX_RUN_TIME {
        return Err(usage(format!(
            "-t/--time {t} is out of range: allowed 100ms to 24h"
        )));
    }
    Ok(Some(d))
}

/// The message size × total points: each size's `-k` blocks, or every size with every `-n`
/// total (one unbounded total for a timed run).
fn parse_points(
    args: &RunArgs,
    msg_sizes: &[u32],
    time: Option<Duration>,
) -> Result<Vec<Point>, UsageError> {
    let blocks = args
        .iperf3_flags
        .blockcount
        .as_deref()
        .map(iperf3_flags::blockcount)
        .transpose()?;
    let max_total = wirebench_core::wire::proto::UNBOUNDED_TOTAL;
    if let (None, Some(k)) = (time, blocks) {
        // -k: each message size's own total.
        return msg_sizes
            .iter()
            .map(|&msg_size| {
                let total_bytes = k
                    .checked_mul(u64::from(msg_size))
                    .filter(|t| *t <= max_total)
                    .ok_or_else(|| {
                        usage(format!(
                            "-k/--blockcount {k} messages of {msg_size} B pass the largest total, {max_total} bytes"
                        ))
                    })?;
                Ok(Point {
                    msg_size,
                    total_bytes,
                })
            })
            .collect();
    }
    let totals = match time {
        // A timed run: the total is only an upper bound.
        Some(_) => vec![max_total],
        None => sweep::parse_sizes(args.total.as_deref().unwrap_or(DEFAULT_TOTAL))
            .map_err(|e| usage(format!("-n/--total: {e}")))?,
    };
    if totals.contains(&0) {
        return Err(usage("-n/--total must be at least 1 byte"));
    }
    if let Some(t) = totals.iter().find(|t| **t > max_total) {
        return Err(usage(format!(
            "-n/--total {t} is out of range: allowed 1 to {max_total} bytes"
        )));
    }
    Ok(msg_sizes
        .iter()
        .flat_map(|&msg_size| {
            totals.iter().map(move |&total_bytes| Point {
                msg_size,
                total_bytes,
            })
        })
        .collect())
}

/// `--rto`, within its range.
fn parse_rto(args: &RunArgs) -> Result<Option<Duration>, UsageError> {
    let Some(s) = &args.rto else {
        return Ok(None);
    };
    let d = parse_duration(s).map_err(|e| usage(format!("--rto: {e}")))?;
    if d < Duration::from_micros(RTO_RANGE_US.0) || d > Duration::from_micros(RTO_RANGE_US.1) {
        return Err(usage(format!(
            "--rto {s} is out of range: allowed 100us to 60s"
        )));
    }
    Ok(Some(d))
}

/// The sender's pacing: `-b/--rate` (none for `--rate max`, which searches it) or TCP's
/// `--fq-rate`, not both.
fn parse_rate(
    args: &RunArgs,
    protocols: &[Protocol],
    search_max: bool,
) -> Result<Option<BitRate>, UsageError> {
    Ok(match (&args.rate, &args.iperf3_flags.fq_rate) {
        (Some(_), Some(_)) => {
            return Err(usage(
                "--fq-rate and -b/--rate both pace the sender: give one (on TCP both pace in the kernel)",
            ))
        }
        (None, Some(fq)) => {
            if protocols.iter().any(|p| *p != Protocol::Tcp) {
                return Err(usage(
                    "--fq-rate paces TCP in the kernel (the fq qdisc); pace UDP and QUIC with -b/--rate",
                ));
            }
            Some(iperf3_flags::fq_rate(fq)?)
        }
        (None, None) => None,
        (Some(_), None) if search_max => None,
        (Some(s), None) => iperf3_flags::pacing_rate(s)?,
    })
}

/// `-P/--parallel` within range, with at least one message per flow at every point.
fn check_parallel(args: &RunArgs, points: &[Point]) -> Result<(), UsageError> {
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
    Ok(())
}

/// `-i/--interval` (0: none), at least 10 ms; every second by default with `--json-stream`
/// and `--iperf3-shape`, as iperf3 reports.
pub(super) fn parse_interval(args: &RunArgs) -> Result<Option<Duration>, UsageError> {
    let interval = match args.interval.as_deref().map(iperf3_flags::interval) {
        None => None,
        Some(parsed) => match parsed? {
            Some(d) if d < Duration::from_micros(MIN_INTERVAL_US) => {
                return Err(usage(format!(
                    "-i/--interval {} is too short: allowed 10ms or more (0: none)",
                    args.interval.as_deref().unwrap_or("")
                )));
            }
            d => d,
        },
    };
    Ok(match interval {
        None if (args.iperf3_flags.json_stream || args.iperf3_flags.iperf3_shape)
            && args.interval.is_none() =>
        {
            Some(Duration::from_secs(1))
        }
        d => d,
    })
}

/// Refuses `--rto` and `--rate` when no run of the plan would use them: a flag that does
/// nothing must not look as if it did. `--rto` is UDP stop-and-wait's retransmission timeout;
/// `--rate` paces UDP streaming, TCP (SO_MAX_PACING_RATE, Linux) and QUIC, not UDP
/// stop-and-wait (one datagram in flight).
pub(super) fn check_flags_apply(
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

/// `-O/--omit`: a bare number of seconds or a duration with a unit, at least 1 ms and
/// under 24 h.
pub(super) fn parse_omit(text: &str) -> Result<Duration, UsageError> {
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
pub(super) fn check_bidir_and_omit(
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

/// Parses the data-path options (`-w`, `-C`, `--nodelay`, `--busy-poll`).
pub(super) fn parse_options(
    args: &RunArgs,
    protocols: &[Protocol],
) -> Result<DataPathOptions, UsageError> {
    let window = match &args.window {
        None => None,
        Some(text) => {
            let w: ByteSize = text
                .parse()
                .map_err(|e| usage(format!("-w/--window: {e}")))?;
            if w.0 < u64::from(WINDOW_RANGE.0) || w.0 > u64::from(WINDOW_RANGE.1) {
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
            if !is_congestion_name(name) {
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
    if args.iperf3_flags.dont_fragment {
        if !protocols.contains(&Protocol::Udp) {
            return Err(usage(
                "--dont-fragment sets Don't Fragment on UDP datagrams, as iperf3's: add --proto udp (-u)",
            ));
        }
        if (args.reverse || args.bidir) && args.iperf3.iperf3.is_none() {
            return Err(usage(
                "--dont-fragment marks the datagrams this client sends, and with -R or --bidir a wirebench server sends them: run the test from the other host without -R",
            ));
        }
    }
    if let Some(mtu) = args.quic_mtu {
        if !(QUIC_MTU_RANGE.0..=QUIC_MTU_RANGE.1).contains(&mtu) {
            return Err(usage(format!(
                "--quic-mtu {mtu} is out of range: QUIC needs {}..{} bytes of UDP payload",
                QUIC_MTU_RANGE.0, QUIC_MTU_RANGE.1
            )));
        }
        if !protocols.contains(&Protocol::Quic) {
            return Err(usage("--quic-mtu applies to QUIC only: add --proto quic"));
        }
    }
    let mss = args
        .iperf3_flags
        .mss
        .as_deref()
        .map(iperf3_flags::mss)
        .transpose()?;
    if mss.is_some() && protocols.iter().any(|p| *p != Protocol::Tcp) {
        return Err(usage(
            "-M/--set-mss applies to TCP only: run it with --proto tcp",
        ));
    }
    Ok(DataPathOptions {
        window,
        congestion,
        nodelay: args.nodelay,
        busy_poll: args.busy_poll,
        receipt_us: None,
        quic_mtu: args.quic_mtu,
        mss,
        tos: args
            .iperf3_flags
            .tos
            .as_deref()
            .map(iperf3_flags::tos)
            .transpose()?,
    })
}

/// Parses `-l`, checking it against the limits of every protocol that will run.
/// Parses one `-l` value, checking it against the limits of every protocol that will run.
#[cfg(test)]
pub(super) fn parse_msg_size(
    text: &str,
    protocols: &[Protocol],
    ipv6: bool,
) -> Result<u32, UsageError> {
    let size: ByteSize = text
        .parse()
        .map_err(|e| usage(format!("-l/--msg-size: {e}")))?;
    check_msg_size(size.0, protocols, ipv6)
}

/// Checks one message size against the limits of every protocol that will run.
pub(super) fn check_msg_size(
    size: u64,
    protocols: &[Protocol],
    ipv6: bool,
) -> Result<u32, UsageError> {
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

/// What `--impair` does to TCP, for the refusal message.
pub(super) const TCP_IMPAIR_NOTE: &str =
    "loss, reorder and duplicate apply to UDP and QUIC only: TCP is \
     relayed as a byte stream (delay, jitter and rate apply)";

/// Parses `run --impair`; refuses packet impairments when TCP runs.
pub(super) fn parse_impair(
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
