//! The interop targets of `wirebench run`: `--iperf3 HOST` and `--perf-server HOST` as validated
//! client configurations.

use std::time::Duration;

use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::plan::{self, Mechanism, Protocol};
use wirebench_core::vocab::sweep;
use wirebench_core::vocab::units::ByteSize;

use crate::cli::{RunArgs, DEFAULT_PORT};

use super::address::host_part;
use super::address::resolve_address;
use super::error::usage;
use super::run::parse_run_time;

/// iperf3's default TCP block (`-l`), bytes.
const IPERF3_TCP_LEN: u64 = 128 * 1024;
/// iperf3's default UDP block (`-l`), bytes.
const IPERF3_UDP_LEN: u64 = 1460;
/// iperf3's default test length (`-t`) when neither `-n`, `-k` nor `-t` is given.
const IPERF3_TIME: Duration = Duration::from_secs(10);

/// `run --iperf3`: the validated iperf3 client test, or None without `--iperf3`.
pub fn iperf3_client(
    args: &RunArgs,
) -> Result<Option<crate::flows::iperf3::client::ClientConfig>, UsageError> {
    use crate::flows::iperf3::client::ClientConfig;
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
    if args.busy_poll || args.rto.is_some() || args.impair.is_some() {
        return Err(usage(
            "--busy-poll, --rto and --impair apply to wirebench servers, not --iperf3",
        ));
    }
    // Every second unless -i says otherwise, as iperf3's client reports (-i 0: none).
    let interval = match args.interval {
        None => Some(std::time::Duration::from_secs(1)),
        Some(_) => super::run::parse_interval(args)?,
    };
    if args.parallel == 0 || args.parallel > ip3::MAX_PARALLEL {
        return Err(usage(format!(
            "-P/--parallel {} is out of range: allowed 1 to {}",
            args.parallel,
            ip3::MAX_PARALLEL
        )));
    }
    if args.iperf3_flags.dont_fragment && !udp {
        return Err(usage(
            "--dont-fragment sets Don't Fragment on UDP datagrams, as iperf3's: add -u",
        ));
    }
    let len = iperf3_len(args, udp)?;
    let (limit, notes) = iperf3_limit(args, udp, len)?;
    let (fq_rate_bps, options, rate_bps) = iperf3_pacing(args, udp)?;
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
        notes,
        options,
        fq_rate_bps,
        server_output: args.iperf3_flags.get_server_output,
        // `-A N,M`'s M belongs to the run's output flags: `run_command` sets it from the
        // RunOutput it has already validated.
        server_cpu: None,
        counters_64bit: args.iperf3_flags.udp_counters_64bit,
        dont_fragment: args.iperf3_flags.dont_fragment,
        interval,
    }))
}

/// `text` as one size: `flag` under `--iperf3` takes no sweep.
fn single(text: &str, flag: &str) -> Result<u64, UsageError> {
    match sweep::parse_sizes(text)
        .map_err(|e| usage(format!("{flag}: {e}")))?
        .as_slice()
    {
        [one] => Ok(*one),
        _ => Err(usage(format!(
            "{flag}: --iperf3 takes one value, not a sweep"
        ))),
    }
}

/// `-l` of an iperf3 test, within iperf3's limits for its protocol.
fn iperf3_len(args: &RunArgs, udp: bool) -> Result<u64, UsageError> {
    use wirebench_core::wire::iperf3 as ip3;
    // iperf3's own default block: 128 KiB for TCP, 1460 bytes for UDP (its man page's
    // "1460 for UDP"; it may size UDP by the control connection's MSS instead).
    let len = match args.msg_size.as_deref() {
        Some(text) => single(text, "-l/--msg-size")?,
        None if udp => IPERF3_UDP_LEN,
        None => IPERF3_TCP_LEN,
    };
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
    Ok(len)
}

/// How an iperf3 test of `len`-byte blocks ends (`-k`, `-t`, `-n`, or iperf3's 10 seconds),
/// and the notes on what was changed to get there.
fn iperf3_limit(
    args: &RunArgs,
    udp: bool,
    len: u64,
) -> Result<(crate::flows::iperf3::client::Limit, Vec<String>), UsageError> {
    use crate::flows::iperf3::client::Limit;
    let mut notes = Vec::new();
    let blocks = args
        .iperf3_flags
        .blockcount
        .as_deref()
        .map(super::iperf3_flags::blockcount)
        .transpose()?;
    let limit = match (&args.iperf3.time, blocks, args.total.as_deref()) {
        (None, Some(k), _) => Limit::Bytes(k.checked_mul(len).ok_or_else(|| {
            usage(format!(
                "-k/--blockcount {k} is too large: {k} blocks of {len} B would pass {} bytes",
                u64::MAX
            ))
        })?),
        (Some(t), _, _) => {
            let d = parse_run_time(t)?;
            if d < Duration::from_secs(1) || d > Duration::from_secs(86_400) {
                return Err(usage(format!(
                    "-t/--time {t} is out of range: allowed 1s to 24h"
                )));
            }
            Limit::Time(d)
        }
        // Neither -n, -k nor -t: iperf3's own default, a 10-second test.
        (None, None, None) => Limit::Time(IPERF3_TIME),
        (None, None, Some(total)) => {
            let n = single(total, "-n/--total")?;
            if n == 0 {
                return Err(usage("-n/--total must be at least 1 byte"));
            }
            // iperf3 3.21 servers (GRO) count only datagrams of the whole -l: a short last one
            // would arrive uncounted. Whole datagrams, as iperf3's own client sends.
            let whole = if udp {
                n.checked_next_multiple_of(len).ok_or_else(|| {
                    usage(format!(
                        "-n/--total {n} is too large: whole datagrams of {len} B would pass {} bytes",
                        u64::MAX
                    ))
                })?
            } else {
                n
            };
            if whole != n {
                notes.push(format!(
                    "-n {n} is {} datagrams of {len} B and a {} B rest: sending {} whole datagrams, {whole} B (iperf3 3.21 servers do not count a datagram shorter than -l)",
                    n / len,
                    n % len,
                    whole / len
                ));
            }
            Limit::Bytes(whole)
        }
    };
    Ok((limit, notes))
}

/// An iperf3 test's pacing and data-path options: `--fq-rate` (TCP, bits/s; 0 without), the
/// options both ends apply, and `--rate` (UDP, bits/s; iperf3's 1 Mbit/s without, 0 for TCP).
fn iperf3_pacing(
    args: &RunArgs,
    udp: bool,
) -> Result<(u64, wirebench_core::wire::proto::DataPathOptions, u64), UsageError> {
    let fq_rate_bps = match &args.iperf3_flags.fq_rate {
        None => 0,
        Some(_) if udp => {
            return Err(usage(
                "--fq-rate paces TCP in the kernel; pace an iperf3 UDP test with --rate",
            ))
        }
        Some(text) => super::iperf3_flags::fq_rate(text)?.0,
    };
    let protocol = if udp { Protocol::Udp } else { Protocol::Tcp };
    let options = super::run::parse_options(args, &[protocol])?;
    let rate_bps = match &args.rate {
        Some(_) if !udp => {
            return Err(usage(
                "--rate paces UDP; pace an iperf3 TCP test in the kernel with --fq-rate",
            ));
        }
        // 0 (-b 0) is unpaced, as iperf3's.
        Some(s) => super::iperf3_flags::pacing_rate(s)?.map_or(0, |r| r.0),
        // iperf3's own default for UDP.
        None if udp => 1_000_000,
        None => 0,
    };
    Ok((fq_rate_bps, options, rate_bps))
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
