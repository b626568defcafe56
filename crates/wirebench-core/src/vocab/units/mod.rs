//! Units: owns parsing and formatting of byte sizes, bit rates and durations; must not do I/O,
//! read clocks or decide which values are allowed for a run (the app's config does).
//!
//! Bytes are shown in IEC units (KiB, MiB), bit rates in SI units (Mbit/s), as the style guide
//! asks (docs/dev/style.md, "Units").

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::vocab::plan::EmptyListItem;

/// An exact number of bytes, parsed from forms such as `1024`, `64KiB`, `500MB` or `1.5GiB`.
///
/// `K`/`M`/`G`/`T` (either case) and `KiB`/`MiB`/`GiB`/`TiB` are binary; `kB`/`KB`/`MB`/`GB`/`TB` are decimal.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

/// A rate in bits per second, parsed from forms such as `100Mbit`, `1Gbps`, `500k`, `50MB/s` or `10MiB/s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BitRate(pub u64);

/// Why a size, rate or duration could not be parsed; each message says what was wrong and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// The text is not a number followed by a known size unit.
    #[error(
        "invalid size \"{0}\": expected a number with a unit such as 1024, 64KiB, 500MB, 1GiB \
         (K/M/G/KiB/MiB/GiB are binary, kB/MB/GB decimal)"
    )]
    InvalidSize(String),
    /// The size has a fraction that does not come to a whole number of bytes.
    #[error(
        "size \"{0}\" is not a whole number of bytes: use an integer, \
         or a fraction that gives whole bytes such as 1.5KiB"
    )]
    FractionalSize(String),
    /// The size does not fit in 64 bits.
    #[error("size \"{0}\" is too large: the largest size is 18446744073709551615 B (16 EiB)")]
    SizeOverflow(String),
    /// The text is not a number followed by a known rate unit.
    #[error(
        "invalid rate \"{0}\": expected a number with a unit such as 100Mbit, 1Gbps, 500k, 50MB/s, 10MiB/s \
         (bit units and bare k/M/G/T are SI bits per second; B/s units are bytes per second)"
    )]
    InvalidRate(String),
    /// The rate has a fraction that does not come to a whole number of bits per second.
    #[error(
        "rate \"{0}\" is not a whole number of bits per second: use an integer, \
         or a fraction that gives whole bits such as 1.5Mbit"
    )]
    FractionalRate(String),
    /// The text is not one of iperf3's `-f` letters.
    #[error(
        "invalid rate unit \"{0}\": expected k, m, g, t (kbit/s .. Tbit/s) or K, M, G, T \
         (KiB/s .. TiB/s), as iperf3's -f"
    )]
    InvalidRateUnit(String),
    /// The rate is zero, which would never send anything.
    #[error("rate \"{0}\" is zero: give a positive rate such as 100Mbit")]
    ZeroRate(String),
    /// The rate does not fit in 64 bits.
    #[error("rate \"{0}\" is too large: the largest rate is 18446744073709551615 bit/s")]
    RateOverflow(String),
    /// The text is not a number followed by a known time unit.
    #[error(
        "invalid duration \"{0}\": expected a number with a unit such as 1s, 250ms, 100us, 5ns, 1.5s, 2m, 1h \
         (units: ns, us, µs, ms, s, m, h)"
    )]
    InvalidDuration(String),
    /// The duration has a fraction finer than one nanosecond.
    #[error(
        "duration \"{0}\" is not a whole number of nanoseconds: use fewer decimals, such as 1.5ms or 0.25s"
    )]
    FractionalDuration(String),
    /// The duration does not fit in a `Duration`.
    #[error("duration \"{0}\" is too long: the longest duration is about 584 billion years")]
    DurationOverflow(String),
    /// A comma-separated list of sizes or rates had an empty item (see [`crate::vocab::plan::parse_list`]).
    #[error(transparent)]
    EmptyListItem(#[from] EmptyListItem),
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let (number, unit) = split_number(text);
        let multiplier =
            size_multiplier(unit).ok_or_else(|| UnitError::InvalidSize(text.to_owned()))?;
        match scale_decimal(number, multiplier) {
            Ok(bytes) => u64::try_from(bytes)
                .map(ByteSize)
                .map_err(|_| UnitError::SizeOverflow(text.to_owned())),
            Err(NumError::Syntax) => Err(UnitError::InvalidSize(text.to_owned())),
            Err(NumError::NotWhole) => Err(UnitError::FractionalSize(text.to_owned())),
            Err(NumError::Overflow) => Err(UnitError::SizeOverflow(text.to_owned())),
        }
    }
}

impl fmt::Display for ByteSize {
    /// `"524288000 B (500 MiB)"`: the exact count, then IEC with at most two decimals; just `"1000 B"` below 1 KiB.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let (value, index) = scale_down(self.0 as f64, 1024.0, IEC_UNITS.len());
        let human = trim_decimals(format!("{value:.2}"));
        write!(f, "{} B ({human} {})", self.0, IEC_UNITS[index])
    }
}

impl FromStr for BitRate {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let text = s.trim();
        let (number, unit) = split_number(text);
        let multiplier =
            rate_multiplier(unit).ok_or_else(|| UnitError::InvalidRate(text.to_owned()))?;
        let bits = match scale_decimal(number, multiplier) {
            Ok(bits) => {
                u64::try_from(bits).map_err(|_| UnitError::RateOverflow(text.to_owned()))?
            }
            Err(NumError::Syntax) => return Err(UnitError::InvalidRate(text.to_owned())),
            Err(NumError::NotWhole) => return Err(UnitError::FractionalRate(text.to_owned())),
            Err(NumError::Overflow) => return Err(UnitError::RateOverflow(text.to_owned())),
        };
        if bits == 0 {
            return Err(UnitError::ZeroRate(text.to_owned()));
        }
        Ok(BitRate(bits))
    }
}

impl fmt::Display for BitRate {
    /// `"500 Mbit/s"`: exact, in the largest SI unit not above the value (`"1.5 Mbit/s"`, `"999 bit/s"`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Integer arithmetic so a configured rate is shown exactly, never rounded.
        const UNITS: [(u64, usize, &str); 4] = [
            (1_000_000_000_000, 12, "Tbit/s"),
            (1_000_000_000, 9, "Gbit/s"),
            (1_000_000, 6, "Mbit/s"),
            (1_000, 3, "kbit/s"),
        ];
        for (divisor, digits, unit) in UNITS {
            if self.0 >= divisor {
                let whole = self.0 / divisor;
                let frac = self.0 % divisor;
                if frac == 0 {
                    return write!(f, "{whole} {unit}");
                }
                let frac = format!("{frac:0digits$}");
                return write!(f, "{whole}.{} {unit}", frac.trim_end_matches('0'));
            }
        }
        write!(f, "{} bit/s", self.0)
    }
}

/// Human IEC form of a byte count: `"512 B"` below 1 KiB, otherwise two decimals (`"500.00 MiB"`, `"1.00 GiB"`).
pub fn format_bytes_iec(bytes: f64) -> String {
    let (value, index) = scale_down(bytes, 1024.0, IEC_UNITS.len());
    if index == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.2} {}", IEC_UNITS[index])
    }
}

/// Human SI form of a bit rate: `"3 bit/s"` below 1 kbit/s, otherwise two decimals (`"812.40 Mbit/s"`).
pub fn format_bitrate(bits_per_second: f64) -> String {
    let (value, index) = scale_down(bits_per_second, 1000.0, SI_RATE_UNITS.len());
    if index == 0 {
        format!("{value:.0} bit/s")
    } else {
        format!("{value:.2} {}", SI_RATE_UNITS[index])
    }
}

/// The SI bit-rate unit a set of figures reads best in, chosen by the largest of them, so a
/// table row of rates shares one unit and a 150 kbit/s run is not shown as 0.000 Gbit/s:
/// returns the unit's name and how many bit/s it holds.
pub fn bitrate_unit(largest_bits_per_second: f64) -> (&'static str, f64) {
    let (_, index) = scale_down(largest_bits_per_second, 1000.0, SI_RATE_UNITS.len());
    (SI_RATE_UNITS[index], 1000f64.powi(index as i32))
}

/// Human IEC form of a byte rate: `"692.50 MiB/s"`, `"512 B/s"`.
pub fn format_byterate_iec(bytes_per_second: f64) -> String {
    format!("{}/s", format_bytes_iec(bytes_per_second))
}

/// A fixed unit for printing rates, as iperf3's `-f`: `k`, `m`, `g`, `t` are kbit/s, Mbit/s,
/// Gbit/s, Tbit/s (SI, 1000); `K`, `M`, `G`, `T` are KiB/s, MiB/s, GiB/s, TiB/s (IEC, 1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateUnit {
    /// Bytes per second instead of bits per second.
    pub bytes: bool,
    /// Power of 1000 (bits) or 1024 (bytes): 1 = k/K, ..., 4 = t/T.
    pub power: u8,
}

impl RateUnit {
    /// The unit's label: `"Mbit/s"`, `"MiB/s"`.
    pub fn label(self) -> &'static str {
        let i = usize::from(self.power.clamp(1, 4));
        if self.bytes {
            ["B/s", "KiB/s", "MiB/s", "GiB/s", "TiB/s"][i]
        } else {
            ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"][i]
        }
    }

    /// `bits_per_second` in this unit.
    pub fn scale(self, bits_per_second: f64) -> f64 {
        let power = i32::from(self.power.clamp(1, 4));
        if self.bytes {
            bits_per_second / 8.0 / 1024f64.powi(power)
        } else {
            bits_per_second / 1000f64.powi(power)
        }
    }

    /// `bits_per_second` in this unit with two decimals: `"812.40 Mbit/s"`.
    pub fn format(self, bits_per_second: f64) -> String {
        format!("{:.2} {}", self.scale(bits_per_second), self.label())
    }
}

impl FromStr for RateUnit {
    type Err = UnitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (bytes, power) = match s.trim() {
            "k" => (false, 1),
            "m" => (false, 2),
            "g" => (false, 3),
            "t" => (false, 4),
            "K" => (true, 1),
            "M" => (true, 2),
            "G" => (true, 3),
            "T" => (true, 4),
            _ => return Err(UnitError::InvalidRateUnit(s.to_owned())),
        };
        Ok(RateUnit { bytes, power })
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (about 584 years): the one
/// conversion every record's `*_ns` field goes through.
pub fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Parses a duration with a required unit: `ns`, `us`/`µs`, `ms`, `s`, `m` (minutes), `h`; fractions allowed
/// (`"1.5s"`) as long as they come to whole nanoseconds. A bare number is an error because `5` is ambiguous.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let text = s.trim();
    let (number, unit) = split_number(text);
    let nanos_per_unit: u128 = match unit {
        "ns" => 1,
        // Both the micro sign (U+00B5) and the Greek mu (U+03BC) are typed for microseconds.
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        _ => return Err(UnitError::InvalidDuration(text.to_owned())),
    };
    let nanos = match scale_decimal(number, nanos_per_unit) {
        Ok(nanos) => nanos,
        Err(NumError::Syntax) => return Err(UnitError::InvalidDuration(text.to_owned())),
        Err(NumError::NotWhole) => return Err(UnitError::FractionalDuration(text.to_owned())),
        Err(NumError::Overflow) => return Err(UnitError::DurationOverflow(text.to_owned())),
    };
    duration_from_nanos(nanos).ok_or_else(|| UnitError::DurationOverflow(text.to_owned()))
}

/// A `Duration` of `nanos` nanoseconds, or `None` when it does not fit (shared with the RTO arithmetic).
pub(crate) fn duration_from_nanos(nanos: u128) -> Option<Duration> {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let secs = u64::try_from(nanos / NANOS_PER_SEC).ok()?;
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).ok()?;
    Some(Duration::new(secs, subsec))
}

const IEC_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
const SI_RATE_UNITS: [&str; 6] = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s", "Pbit/s"];

/// Why a decimal number could not be scaled to an exact integer.
enum NumError {
    Syntax,
    NotWhole,
    Overflow,
}

/// Splits `"1.5 KiB"` into `("1.5", "KiB")`; `text` is already trimmed, whitespace before the unit is allowed.
fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(end);
    (number, unit.trim_start())
}

fn size_multiplier(unit: &str) -> Option<u128> {
    const KI: u128 = 1 << 10;
    Some(match unit {
        "" | "B" => 1,
        "K" | "k" | "KiB" => KI,
        "M" | "m" | "MiB" => KI.pow(2),
        "G" | "g" | "GiB" => KI.pow(3),
        "T" | "t" | "TiB" => KI.pow(4),
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    })
}

fn rate_multiplier(unit: &str) -> Option<u128> {
    const KI: u128 = 1 << 10;
    Some(match unit {
        // The "x bit/s" forms are what Display prints, so a shown rate parses back.
        "bit" | "bps" | "bit/s" => 1,
        "k" | "K" | "kbit" | "kbps" | "kbit/s" => 1_000,
        "M" | "Mbit" | "Mbps" | "Mbit/s" => 1_000_000,
        "G" | "Gbit" | "Gbps" | "Gbit/s" => 1_000_000_000,
        "T" | "Tbit" | "Tbps" | "Tbit/s" => 1_000_000_000_000,
        "B/s" => 8,
        "kB/s" => 8 * 1_000,
        "MB/s" => 8 * 1_000_000,
        "GB/s" => 8 * 1_000_000_000,
        "KiB/s" => 8 * KI,
        "MiB/s" => 8 * KI.pow(2),
        "GiB/s" => 8 * KI.pow(3),
        // No bare number: "100" could mean bits or bytes per second.
        _ => return None,
    })
}

/// Exactly `number × multiplier` for an unsigned decimal such as `"1.5"`, `"64"` or `".25"`.
///
/// Works on the digits as an integer over a power of ten, so "1.5KiB" is 1536 with no float rounding.
fn scale_decimal(number: &str, multiplier: u128) -> Result<u128, NumError> {
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    // A second '.' lands in frac_part and fails the digit check.
    if (int_part.is_empty() && frac_part.is_empty())
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return Err(NumError::Syntax);
    }
    let frac_part = frac_part.trim_end_matches('0');
    let mut mantissa: u128 = 0;
    for digit in int_part.bytes().chain(frac_part.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(digit - b'0')))
            .ok_or(NumError::Overflow)?;
    }
    let product = mantissa.checked_mul(multiplier).ok_or(NumError::Overflow)?;
    // More than 38 significant decimals cannot divide a u128 product (< 10^39) evenly unless it is zero,
    // and a zero mantissa has no significant fraction digits left after trimming.
    let denominator = u32::try_from(frac_part.len())
        .ok()
        .and_then(|digits| 10u128.checked_pow(digits))
        .ok_or(NumError::NotWhole)?;
    if product % denominator != 0 {
        return Err(NumError::NotWhole);
    }
    Ok(product / denominator)
}

/// Divides `value` by `base` until it is below `base`, returning it and the unit index (< `units`).
///
/// Steps up at the rounding threshold, so 1048575 bytes print as "1.00 MiB" rather than "1024.00 KiB".
fn scale_down(value: f64, base: f64, units: usize) -> (f64, usize) {
    let mut value = value;
    let mut index = 0;
    while index + 1 < units {
        // Index 0 prints no decimals, the others two: promote where that rounding would reach `base`.
        let limit = if index == 0 { base - 0.5 } else { base - 0.005 };
        if value.abs() < limit {
            break;
        }
        value /= base;
        index += 1;
    }
    (value, index)
}

/// `"1.50"` → `"1.5"`, `"500.00"` → `"500"`.
fn trim_decimals(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests;
