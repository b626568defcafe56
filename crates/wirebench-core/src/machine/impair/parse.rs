//! Parsing of impairment settings (`loss=5%,delay=up:10ms`, `--loss ge:1%/25%`); must not
//! decide anything about packets.

use std::time::Duration;

use super::spec::{Impairment, Impairments, Loss, DEFAULT_QUEUE_LIMIT};
use crate::vocab::units::{parse_duration, BitRate, ByteSize};

/// An impairment setting that cannot be parsed; the message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ImpairError(pub String);

/// The keys [`Impairments::set`] knows.
pub const KEYS: &str = "loss, delay, jitter, reorder, duplicate, rate, queue";

impl Impairments {
    /// Whether either direction changes anything.
    pub fn is_active(&self) -> bool {
        self.up.is_active() || self.down.is_active()
    }

    /// Whether either direction uses loss, reorder or duplicate.
    pub fn has_packet_only(&self) -> bool {
        self.up.has_packet_only() || self.down.has_packet_only()
    }

    /// Parses `key=value[,key=value...]` (what `run --impair` takes), e.g.
    /// `loss=5%,delay=10ms,rate=down:50Mbit`.
    pub fn parse_list(text: &str) -> Result<Impairments, ImpairError> {
        let mut out = Impairments::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| {
                ImpairError(format!(
                    "\"{item}\" is not KEY=VALUE: expected e.g. loss=5%,delay=10ms (keys: {KEYS})"
                ))
            })?;
            out.set(key.trim(), value.trim())?;
        }
        Ok(out)
    }

    /// Sets one impairment. `value` applies to both directions, or to one with an `up:`
    /// (client → server) or `down:` (server → client) prefix.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ImpairError> {
        let (up, down, value) = if let Some(v) = value.strip_prefix("up:") {
            (true, false, v)
        } else if let Some(v) = value.strip_prefix("down:") {
            (false, true, v)
        } else {
            (true, true, value)
        };
        let mut targets: Vec<&mut Impairment> = Vec::with_capacity(2);
        if up {
            targets.push(&mut self.up);
        }
        if down {
            targets.push(&mut self.down);
        }
        let bad = |what: &str| ImpairError(format!("{key}={value}: {what}"));
        match key {
            "loss" => {
                let loss = parse_loss(value).map_err(|e| bad(&e))?;
                targets.into_iter().for_each(|t| t.loss = loss);
            }
            "delay" | "jitter" => {
                let d = parse_duration(value).map_err(|e| bad(&e.to_string()))?;
                if d > Duration::from_secs(60) {
                    return Err(bad("out of range: allowed 0ms to 60s"));
                }
                for t in targets {
                    if key == "delay" {
                        t.delay = d;
                    } else {
                        t.jitter = d;
                    }
                }
            }
            "reorder" | "duplicate" => {
                let p = parse_percent(value).map_err(|e| bad(&e))?;
                for t in targets {
                    if key == "reorder" {
                        t.reorder = p;
                    } else {
                        t.duplicate = p;
                    }
                }
            }
            "rate" => {
                let r: BitRate = value
                    .parse()
                    .map_err(|e: crate::vocab::units::UnitError| bad(&e.to_string()))?;
                for t in targets {
                    t.rate = Some(r);
                    if t.queue_limit.0 == 0 {
                        t.queue_limit = DEFAULT_QUEUE_LIMIT;
                    }
                }
            }
            "queue" => {
                let q: ByteSize = value
                    .parse()
                    .map_err(|e: crate::vocab::units::UnitError| bad(&e.to_string()))?;
                if q.0 < 1500 {
                    return Err(bad("too small: the queue must hold at least 1500 bytes"));
                }
                targets.into_iter().for_each(|t| t.queue_limit = q);
            }
            _ => {
                return Err(ImpairError(format!(
                    "unknown impairment \"{key}\": allowed {KEYS}"
                )))
            }
        }
        Ok(())
    }
}

/// Parses `5%` (0 to 100 percent) into a probability.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text
        .strip_suffix('%')
        .ok_or_else(|| format!("\"{text}\" is not a percentage: expected e.g. 5% or 0.5%"))?;
    let p: f64 = number
        .parse()
        .map_err(|_| format!("\"{text}\" is not a percentage: expected e.g. 5% or 0.5%"))?;
    if !(0.0..=100.0).contains(&p) {
        return Err(format!("{text} is out of range: allowed 0% to 100%"));
    }
    Ok(p / 100.0)
}

/// Parses a loss setting: `5%` (random) or `ge:P/R[/H[/K]]` (Gilbert–Elliott: P = good→bad,
/// R = bad→good, H = loss in the bad state, default 100%, K = loss in the good state, default 0%).
pub fn parse_loss(text: &str) -> Result<Loss, String> {
    if let Some(ge) = text.strip_prefix("ge:") {
        let parts = ge
            .split('/')
            .map(parse_percent)
            .collect::<Result<Vec<f64>, String>>()?;
        if !(2..=4).contains(&parts.len()) {
            return Err(format!(
                "\"{text}\": Gilbert–Elliott loss is ge:P/R[/H[/K]], e.g. ge:1%/25%"
            ));
        }
        return Ok(Loss::GilbertElliott {
            p: parts[0],
            r: parts[1],
            loss_bad: parts.get(2).copied().unwrap_or(1.0),
            loss_good: parts.get(3).copied().unwrap_or(0.0),
        });
    }
    let p = parse_percent(text)?;
    Ok(if p == 0.0 {
        Loss::None
    } else {
        Loss::Random(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_per_direction() {
        let i =
            Impairments::parse_list("loss=5%,delay=up:10ms,jitter=down:1ms,rate=100Mbit").unwrap();
        assert_eq!(i.up.loss, Loss::Random(0.05));
        assert_eq!(i.down.loss, Loss::Random(0.05));
        assert_eq!(i.up.delay, Duration::from_millis(10));
        assert_eq!(i.down.delay, Duration::ZERO);
        assert_eq!(i.down.jitter, Duration::from_millis(1));
        assert_eq!(i.up.rate, Some(BitRate(100_000_000)));
        assert_eq!(i.up.queue_limit, DEFAULT_QUEUE_LIMIT);
        let ge = Impairments::parse_list("loss=ge:1%/25%").unwrap();
        assert!(matches!(ge.up.loss, Loss::GilbertElliott { loss_bad, .. } if loss_bad == 1.0));
        for bad in [
            "loss=5",
            "loss=120%",
            "speed=1",
            "delay=5",
            "loss",
            "queue=10",
            "loss=ge:1%",
        ] {
            let err = Impairments::parse_list(bad).unwrap_err();
            assert!(!err.0.is_empty(), "{bad}");
        }
        assert!(Impairments::parse_list("speed=1")
            .unwrap_err()
            .0
            .contains(KEYS));
    }
}
