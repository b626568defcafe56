//! `wirebench server`'s flags as a validated [`ServerConfig`]: address, identity, limits, services.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::units::{parse_duration, BitRate, ByteSize};

use crate::cli::ServerArgs;
use crate::flows::server::{Limits, ServerOptions};

use super::error::usage;
use super::exporter;

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
    /// `-1`: stop after the first session, as on SIGTERM.
    pub one_off: bool,
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
                udp_lanes: udp_lanes(args.udp_lanes)?,
            },
            metrics: args
                .metrics
                .as_deref()
                .map(|a| exporter::socket_addr(a, "--metrics"))
                .transpose()?,
            one_off: args.one_off,
        })
    }
}

/// Validates `--udp-lanes`.
fn udp_lanes(lanes: Option<usize>) -> Result<Option<usize>, UsageError> {
    use crate::engine::udp::lanes::MAX_LANES;
    match lanes {
        Some(n) if n > MAX_LANES => Err(usage(format!(
            "--udp-lanes {n} is out of range: allowed 0 to {MAX_LANES}"
        ))),
        other => Ok(other),
    }
}

/// Validates the `server` limit flags.
pub(super) fn server_limits(args: &ServerArgs) -> Result<Limits, UsageError> {
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
        Some(text) => match averaged_rate(text)?.parse::<BitRate>() {
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
            &bare_seconds(&args.max_duration),
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

/// A bare number as iperf3's `--server-max-duration` gives it: seconds.
fn bare_seconds(text: &str) -> String {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        format!("{t}s")
    } else {
        t.to_string()
    }
}

/// iperf3's `--server-bitrate-limit RATE[/SECS]` averages the rate over SECS; wirebench's
/// server holds each session to its rate as it goes, so `/SECS` is refused with what to give.
fn averaged_rate(text: &str) -> Result<&str, UsageError> {
    match text.split_once('/') {
        // `50MB/s` is a rate in bytes per second, not an averaging interval.
        Some((rate, secs)) if !secs.eq_ignore_ascii_case("s") => Err(usage(format!(
            "--max-rate {text}: iperf3's /{secs} (seconds to average over) has no wirebench \
             equivalent: the server holds each session to the rate as it goes; give --max-rate {rate}"
        ))),
        _ => Ok(text),
    }
}
