//! Validates the flags of `wirebench rpm` into an [`RpmConfig`]; rejects out-of-range values
//! once, with a message that says what is allowed. No I/O beyond resolving the server name and
//! reading the key file.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use wirebench_core::machine::impair::Impairments;
use wirebench_core::machine::responsiveness::{LoadDirection, Parameters};
use wirebench_core::vocab::units::parse_duration;

use super::address::resolve_server;
use super::error::usage;
use crate::cli::RpmArgs;
use crate::flows::rpm::RpmSettings;
use crate::runner::Target;
use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::units::duration_ns;

/// Largest --max-flows.
pub const MAX_FLOWS: u32 = 64;

/// How long a probe may wait for its answer before it counts as failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything `wirebench rpm` needs, validated.
#[derive(Debug, Clone)]
pub struct RpmConfig {
    /// Server to test against.
    pub target: Target,
    /// The test's settings.
    pub settings: RpmSettings,
    /// An in-process relay between client and server (`--impair`) and its seed.
    pub impair: Option<(Impairments, u64)>,
    /// One JSON document instead of text.
    pub json: bool,
    /// Pre-shared key to authenticate with; the embedded server requires it too.
    pub psk: Option<Arc<wirebench_core::security::auth::Psk>>,
}

impl RpmConfig {
    /// Validates `wirebench rpm` flags.
    pub fn from_args(args: &RpmArgs) -> Result<Self, UsageError> {
        let direction = match args.direction.as_str() {
            "download" | "down" => LoadDirection::Download,
            "upload" | "up" => LoadDirection::Upload,
            "both" => LoadDirection::Both,
            other => {
                return Err(usage(format!(
                    "--direction {other:?}: expected download, upload or both"
                )))
            }
        };
        if args.max_flows == 0 || args.max_flows > MAX_FLOWS {
            return Err(usage(format!(
                "--max-flows {} is out of range: allowed 1 to {MAX_FLOWS}",
                args.max_flows
            )));
        }
        let interval = parse_duration(&args.ramp_interval)
            .map_err(|e| usage(format!("--ramp-interval: {e}")))?;
        if interval < Duration::from_millis(100) || interval > Duration::from_secs(5) {
            return Err(usage(format!(
                "--ramp-interval {} is out of range: allowed 100ms to 5s",
                args.ramp_interval
            )));
        }
        let max_duration =
            parse_duration(&args.max_load).map_err(|e| usage(format!("--max-load: {e}")))?;
        if max_duration < Duration::from_secs(1) || max_duration > Duration::from_secs(300) {
            return Err(usage(format!(
                "--max-load {} is out of range: allowed 1s to 300s",
                args.max_load
            )));
        }
        if !(1..=100).contains(&args.probe_rate) {
            return Err(usage(format!(
                "--probe-rate {} is out of range: allowed 1 to 100 probe pairs per second",
                args.probe_rate
            )));
        }
        if args.idle_probes > 100 {
            return Err(usage(format!(
                "--idle-probes {} is out of range: allowed 0 to 100",
                args.idle_probes
            )));
        }
        let impair = match &args.impair {
            None => None,
            Some(text) => {
                let i =
                    Impairments::parse_list(text).map_err(|e| usage(format!("--impair: {e}")))?;
                if i.has_packet_only() {
                    return Err(usage(format!(
                        "--impair {text}: rpm runs over TCP, which takes delay, jitter, rate and queue only; drop loss, reorder and duplicate"
                    )));
                }
                Some((i, 1))
            }
        };
        let target = match &args.server {
            None => Target::Embedded(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Some(name) => resolve_server(name)?,
        };
        let params = Parameters {
            interval_ns: duration_ns(interval),
            max_flows: args.max_flows,
            max_probes_per_second: args.probe_rate,
            ..Parameters::draft()
        };
        Ok(RpmConfig {
            target,
            settings: RpmSettings {
                direction,
                params,
                max_duration,
                idle_probes: args.idle_probes,
                probe_timeout: PROBE_TIMEOUT,
            },
            impair,
            json: args.json,
            psk: args
                .psk
                .as_deref()
                .map(crate::transport::control::auth::load_psk)
                .transpose()?,
        })
    }
}
