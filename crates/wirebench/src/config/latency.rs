//! Validates the flags of `wirebench latency` into a [`LatencyConfig`]; rejects out-of-range
//! values once, with a message that says what is allowed. No I/O beyond resolving the server
//! name and reading the key file.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use wirebench_core::record::load_phases::{LoadPhase, LoadPhasesPlan};
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::vocab::units::{duration_ns, parse_duration, ByteSize};

use super::address::resolve_server;
use super::error::usage;
use crate::cli::LatencyArgs;
use crate::runner::Target;

/// Most load flows per direction.
pub const MAX_STREAMS: u32 = 16;

/// A probe unanswered this long is lost.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Everything `wirebench latency` needs, validated.
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    /// Server to test against.
    pub target: Target,
    /// The phases, in order.
    pub phases: Vec<LoadPhase>,
    /// Probes, load and timing.
    pub plan: LoadPhasesPlan,
    /// One JSON document instead of text.
    pub json: bool,
    /// Pre-shared key to authenticate with; the embedded server requires it too.
    pub psk: Option<Arc<wirebench_core::security::auth::Psk>>,
}

impl LatencyConfig {
    /// Validates `wirebench latency` flags.
    pub fn from_args(args: &LatencyArgs) -> Result<Self, UsageError> {
        let mut phases = Vec::new();
        for name in args.phases.split(',').map(str::trim) {
            let phase = LoadPhase::from_name(name).ok_or_else(|| {
                usage(format!(
                    "--phases {:?}: {name:?} is no phase: allowed idle, upload, download, both (comma separated)",
                    args.phases
                ))
            })?;
            if phases.contains(&phase) {
                return Err(usage(format!(
                    "--phases {:?}: {name} is given twice",
                    args.phases
                )));
            }
            phases.push(phase);
        }
        let phase_time = bounded_duration(
            "-t/--time",
            &args.phase_time,
            Duration::from_secs(1),
            Duration::from_secs(300),
        )?;
        let interval = bounded_duration(
            "--probe-interval",
            &args.probe_interval,
            Duration::from_millis(1),
            Duration::from_secs(1),
        )?;
        let load = match args.load.trim() {
            "tcp" => Protocol::Tcp,
            "quic" => Protocol::Quic,
            other => {
                return Err(usage(format!(
                    "--load {other:?}: expected tcp or quic (a UDP load has no congestion control to queue behind)"
                )))
            }
        };
        let probe: Protocol = args.probe.parse().map_err(|_| {
            usage(format!(
                "--probe {:?}: expected udp, tcp or quic",
                args.probe
            ))
        })?;
        if !(1..=MAX_STREAMS).contains(&args.streams) {
            return Err(usage(format!(
                "-P/--parallel {} is out of range: allowed 1 to {MAX_STREAMS}",
                args.streams
            )));
        }
        let msg_size = args
            .msg_size
            .parse::<ByteSize>()
            .ok()
            .and_then(|b| u32::try_from(b.0).ok())
            .filter(|n| (1..=16 << 20).contains(n))
            .ok_or_else(|| {
                usage(format!(
                    "-l/--msg-size {:?}: expected 1 to 16MiB, e.g. 128KiB",
                    args.msg_size
                ))
            })?;
        let server = args.target.as_deref().or(args.server.as_deref());
        let target = match server {
            None => Target::Embedded(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Some(name) => resolve_server(name)?,
        };
        Ok(LatencyConfig {
            target,
            phases,
            plan: LoadPhasesPlan {
                probe,
                load,
                streams: args.streams,
                msg_size,
                phase_ns: duration_ns(phase_time),
                interval_ns: duration_ns(interval),
                timeout_ns: duration_ns(PROBE_TIMEOUT),
            },
            json: args.json,
            psk: args
                .psk
                .as_deref()
                .map(crate::transport::control::auth::load_psk)
                .transpose()?,
        })
    }
}

/// `text` as a duration within `min..=max`, or a one-line error naming `flag`.
fn bounded_duration(
    flag: &str,
    text: &str,
    min: Duration,
    max: Duration,
) -> Result<Duration, UsageError> {
    let d = parse_duration(text).map_err(|e| usage(format!("{flag}: {e}")))?;
    if d < min || d > max {
        return Err(usage(format!(
            "{flag} {text} is out of range: allowed {min:?} to {max:?}"
        )));
    }
    Ok(d)
}
