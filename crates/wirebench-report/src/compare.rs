//! The text form of a comparison of two campaigns (`wirebench compare`): per configuration,
//! median goodput of each, the ratio, UDP loss, the Mann–Whitney U test and a verdict. The
//! comparison itself is the result model's (`wirebench_core::record::comparison`); this only
//! prints it and must not compute a figure.

use std::io::{self, Write};

use wirebench_core::record::comparison::{Comparison, ALPHA};
use wirebench_core::vocab::units::format_bitrate;

/// The comparison as a text table; with `fail_pct`, rows over it are marked REGRESSION.
pub fn write_text(c: &Comparison, fail_pct: Option<f64>, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Campaign {} (A) against campaign {} (B): median goodput (what the receiver got over the \
         transfer time) per configuration, and UDP loss.\n\
         Test: Mann–Whitney U, two-sided, normal approximation with tie and continuity correction; \
         significant when p < {ALPHA}.",
        c.a, c.b
    )?;
    writeln!(
        out,
        "\n{:<34} {:>7} {:>14} {:>14} {:>7} {:>12} {:>12} {:>17} {:>8}  RESULT",
        "CONFIGURATION",
        "RUNS",
        "A GOODPUT",
        "B GOODPUT",
        "B/A",
        "A TIME (s)",
        "B TIME (s)",
        "LOST A → B (%)",
        "P"
    )?;
    for r in &c.rows {
        let goodput = r.goodput_change_pct();
        let time = if r.median_seconds.0 > 0.0 {
            (r.median_seconds.1 / r.median_seconds.0 - 1.0) * 100.0
        } else {
            f64::NAN
        };
        let mut verdict = if !r.significant() {
            "~ (no significant difference)".to_string()
        } else if goodput < 0.0 {
            format!("slower ({goodput:+.1}% goodput, {time:+.1}% time)")
        } else {
            format!("faster ({goodput:+.1}% goodput, {time:+.1}% time)")
        };
        if let Some(l) = r.loss.as_ref().filter(|l| l.test.p_value < ALPHA) {
            let more = l.median_lost_pct.1 > l.median_lost_pct.0;
            verdict.push_str(if more { ", more loss" } else { ", less loss" });
        }
        let flag = match fail_pct {
            Some(pct) if r.is_regression(pct) => " REGRESSION",
            _ => "",
        };
        let lost = r.loss.as_ref().map_or("n/a".to_string(), |l| {
            format!("{:.3} → {:.3}", l.median_lost_pct.0, l.median_lost_pct.1)
        });
        writeln!(
            out,
            "{:<34} {:>7} {:>14} {:>14} {:>7.3} {:>12.6} {:>12.6} {:>17} {:>8.4}  {verdict}{flag}",
            r.name(),
            format!("{}/{}", r.runs.0, r.runs.1),
            format_bitrate(r.median_goodput_bps.0),
            format_bitrate(r.median_goodput_bps.1),
            r.goodput_ratio,
            r.median_seconds.0,
            r.median_seconds.1,
            lost,
            r.test.p_value,
        )?;
    }
    for what in &c.unmatched {
        writeln!(out, "{what}: not compared")?;
    }
    Ok(())
}
