//! Validates `run --latency-probe[=LIST]` and `--probe-interval` into a
//! [`ProbePlan`]: which probe flows run beside each run and how often they probe. Rejects
//! what is not allowed once, with a message that says what is; no I/O.

use std::time::Duration;

use wirebench_core::vocab::plan::Protocol;
use wirebench_core::vocab::units::parse_duration;

use super::error::usage;
use crate::flows::latency_probe::{
    ProbeKind, ProbePlan, DEFAULT_IDLE_PROBES, DEFAULT_INTERVAL, DEFAULT_TIMEOUT,
};
use wirebench_core::vocab::error::UsageError;

/// Shortest and longest `--probe-interval`.
const INTERVAL_RANGE: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(10));

/// The probe plan of `--latency-probe` (`None` without it) and `--probe-interval`.
pub fn plan(list: Option<&str>, interval: Option<&str>) -> Result<Option<ProbePlan>, UsageError> {
    let Some(list) = list else {
        return Ok(None);
    };
    let mut kinds = Vec::new();
    for word in list.split(',').map(str::trim) {
        let kind = match word.to_ascii_lowercase().as_str() {
            "same" => ProbeKind::Same,
            other => ProbeKind::Proto(other.parse::<Protocol>().map_err(|_| {
                usage(format!(
                    "--latency-probe: unknown probe '{word}': allowed udp, tcp, quic, same (the run's protocol), comma separated"
                ))
            })?),
        };
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    let interval = match interval {
        None => DEFAULT_INTERVAL,
        Some(text) => {
            let d = parse_duration(text).map_err(|e| usage(format!("--probe-interval: {e}")))?;
            if d < INTERVAL_RANGE.0 || d > INTERVAL_RANGE.1 {
                return Err(usage(format!(
                    "--probe-interval {text} is out of range: allowed 1ms to 10s"
                )));
            }
            d
        }
    };
    Ok(Some(ProbePlan {
        kinds,
        interval,
        idle_probes: DEFAULT_IDLE_PROBES,
        timeout: DEFAULT_TIMEOUT,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_intervals_parse_and_bad_ones_say_what_is_allowed() {
        assert_eq!(plan(None, None).unwrap(), None);
        let p = plan(Some("udp,same"), None).unwrap().unwrap();
        assert_eq!(
            p.kinds,
            vec![ProbeKind::Proto(Protocol::Udp), ProbeKind::Same]
        );
        assert_eq!(p.interval, DEFAULT_INTERVAL);
        // `same` of a UDP run is UDP: one flow, not two.
        assert_eq!(p.protocols(Protocol::Udp), vec![Protocol::Udp]);
        assert_eq!(
            p.protocols(Protocol::Quic),
            vec![Protocol::Udp, Protocol::Quic]
        );
        let p = plan(Some("tcp"), Some("10ms")).unwrap().unwrap();
        assert_eq!(p.interval, Duration::from_millis(10));
        assert_eq!(p.protocols(Protocol::Udp), vec![Protocol::Tcp]);
        let e = plan(Some("udp,icmp"), None).unwrap_err();
        assert!(e.0.contains("allowed udp, tcp, quic, same"), "{}", e.0);
        let e = plan(Some("udp"), Some("0ms")).unwrap_err();
        assert!(e.0.contains("allowed 1ms to 10s"), "{}", e.0);
        assert!(plan(Some("udp"), Some("soon")).is_err());
    }
}
