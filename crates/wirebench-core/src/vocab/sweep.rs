//! Sweep lists of byte sizes for `-l` and `-n`: comma lists of sizes and ranges such as
//! `1..65535:x2` (geometric) or `1KiB..8KiB:+1KiB` (arithmetic). Owns the grammar and its
//! expansion into a fixed, documented order; must not know which protocol will use the sizes.
//!
//! Grammar: `LIST := ITEM (',' ITEM)*`, `ITEM := SIZE | SIZE '..' SIZE [':' STEP]`,
//! `STEP := 'x' FACTOR | '+' SIZE`, the default step being `x2`. A range starts at its lower
//! bound, steps up, and always ends at its upper bound (`1..100:x2` is 1, 2, 4, …, 64, 100).
//! Values keep the order written; repeats are dropped (first one kept).

use crate::vocab::units::{ByteSize, UnitError};

/// One point of a sweep: a message size with a total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Point {
    /// Message size, bytes.
    pub msg_size: u32,
    /// Bytes per run.
    pub total_bytes: u64,
}

/// The most values one list may expand to: a sweep is a plan people wait for.
pub const MAX_VALUES: usize = 10_000;

/// Why a sweep list was refused; each message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    /// A size that does not parse.
    #[error("\"{text}\": {source}")]
    Size {
        /// The text given.
        text: String,
        /// Why.
        source: UnitError,
    },
    /// An empty item (`1,,2`) or list.
    #[error("empty item in \"{0}\": expected SIZE or FROM..TO[:xFACTOR|:+STEP], comma-separated")]
    Empty(String),
    /// A step that is neither `xN` (N ≥ 2) nor `+SIZE` (≥ 1).
    #[error("step \"{0}\": expected xFACTOR (a whole number of 2 or more, e.g. x2) or +SIZE (e.g. +1KiB)")]
    Step(String),
    /// A range whose upper bound is below its lower bound.
    #[error("range \"{0}\" runs downwards: write FROM..TO with FROM ≤ TO")]
    Backwards(String),
    /// More than [`MAX_VALUES`] values.
    #[error("\"{0}\" expands to more than {MAX_VALUES} values; use a coarser step")]
    TooMany(String),
}

/// Expands a sweep list into its values, in order, without repeats.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>, SweepError> {
    let mut out: Vec<u64> = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(SweepError::Empty(text.to_string()));
        }
        for v in expand(item)? {
            if !out.contains(&v) {
                out.push(v);
            }
            if out.len() > MAX_VALUES {
                return Err(SweepError::TooMany(text.to_string()));
            }
        }
    }
    Ok(out)
}

fn size(text: &str) -> Result<u64, SweepError> {
    text.parse::<ByteSize>()
        .map(|b| b.0)
        .map_err(|source| SweepError::Size {
            text: text.trim().to_string(),
            source,
        })
}

enum Step {
    Times(u64),
    Plus(u64),
}

fn expand(item: &str) -> Result<Vec<u64>, SweepError> {
    let Some((from, rest)) = item.split_once("..") else {
        return Ok(vec![size(item)?]);
    };
    let (to, step) = match rest.split_once(':') {
        None => (rest, Step::Times(2)),
        Some((to, step)) => {
            let step = step.trim();
            let parsed = if let Some(f) = step.strip_prefix('x') {
                f.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|f| *f >= 2)
                    .map(Step::Times)
            } else if let Some(s) = step.strip_prefix('+') {
                size(s).ok().filter(|s| *s >= 1).map(Step::Plus)
            } else {
                None
            };
            (
                to,
                parsed.ok_or_else(|| SweepError::Step(step.to_string()))?,
            )
        }
    };
    let (from, to) = (size(from)?, size(to)?);
    if to < from {
        return Err(SweepError::Backwards(item.to_string()));
    }
    let mut values = Vec::new();
    let mut v = from;
    while v < to {
        values.push(v);
        if values.len() > MAX_VALUES {
            return Err(SweepError::TooMany(item.to_string()));
        }
        let next = match step {
            // A zero start would never grow: step from 1 instead.
            Step::Times(f) => v.max(1).checked_mul(f),
            Step::Plus(s) => v.checked_add(s),
        };
        match next {
            Some(n) => v = n,
            None => break,
        }
    }
    values.push(to);
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometric_range_ends_at_its_upper_bound() {
        let v = parse_sizes("1..65535:x2").unwrap();
        assert_eq!(v.len(), 17);
        assert_eq!(&v[..4], &[1, 2, 4, 8]);
        assert_eq!(&v[15..], &[32768, 65535]);
        assert_eq!(parse_sizes("1..64").unwrap(), [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(parse_sizes("10..1000:x10").unwrap(), [10, 100, 1000]);
    }

    #[test]
    fn arithmetic_ranges_units_and_lists_keep_order_without_repeats() {
        assert_eq!(
            parse_sizes("1KiB..4KiB:+1KiB").unwrap(),
            [1024, 2048, 3072, 4096]
        );
        assert_eq!(
            parse_sizes("64KiB, 1024, 1..4, 1024").unwrap(),
            [65536, 1024, 1, 2, 4]
        );
        assert_eq!(parse_sizes("500MiB").unwrap(), [500 * 1024 * 1024]);
        assert_eq!(parse_sizes("7..7").unwrap(), [7]);
    }

    #[test]
    fn bad_lists_say_what_is_allowed() {
        let msg = |t: &str| parse_sizes(t).unwrap_err().to_string();
        assert!(msg("1,,2").contains("FROM..TO"), "{}", msg("1,,2"));
        assert!(msg("1..10:x1").contains("x2"));
        assert!(msg("1..10:*3").contains("+SIZE"));
        assert!(msg("10..1").contains("FROM ≤ TO"));
        assert!(msg("1..1G:+1").contains("coarser step"));
        assert!(matches!(parse_sizes("12XB"), Err(SweepError::Size { .. })));
    }
}
