//! Comparison of two campaigns per configuration, like benchstat: medians of the client's
//! transfer time, their ratio, and a two-sided Mann–Whitney U test. Owns the comparison model and
//! its text form; must not open files, read clocks or know about the store.

use std::io::{self, Write};

use serde::Serialize;
use wirebench_core::plan::{Mechanism, Protocol};
use wirebench_core::stats::{MannWhitney, Summary};
use wirebench_core::sweep::Point;
use wirebench_core::units::format_bitrate;

use super::configuration_keys;
use crate::output::json::RunJson;

/// Significance level: a difference counts when the test's p-value is below this.
pub const ALPHA: f64 = 0.05;

/// One side of a comparison: a campaign's id and its runs with their sizes.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// Campaign id.
    pub id: i64,
    /// Its runs.
    pub runs: &'a [(Point, RunJson)],
}

/// Two campaigns side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The baseline campaign.
    pub a: i64,
    /// The campaign compared with it.
    pub b: i64,
    /// Configurations with runs in both, in A's order.
    pub rows: Vec<Row>,
    /// Configurations only one side has ("tcp stream, 1000-byte messages, 100000 B").
    pub unmatched: Vec<String>,
}

/// One configuration in both campaigns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Protocol.
    pub protocol: Protocol,
    /// Mechanism.
    pub mechanism: Mechanism,
    /// Message size, bytes.
    pub msg_size: u32,
    /// Bytes per run.
    pub total_bytes: u64,
    /// Runs in A and in B.
    pub runs: (usize, usize),
    /// Median client transfer time in A and in B, seconds.
    pub median_seconds: (f64, f64),
    /// Median client throughput in A and in B, bit/s.
    pub median_throughput_bps: (f64, f64),
    /// B's median time over A's (2.0: B takes twice as long).
    pub time_ratio: f64,
    /// Mann–Whitney U test of A's times against B's.
    pub test: MannWhitney,
}

impl Row {
    /// Whether the difference is significant at [`ALPHA`].
    pub fn significant(&self) -> bool {
        self.test.p_value < ALPHA
    }

    /// Whether B is significantly slower than A by more than `pct` percent (median time).
    pub fn is_regression(&self, pct: f64) -> bool {
        self.significant() && (self.time_ratio - 1.0) * 100.0 > pct
    }

    fn name(&self) -> String {
        config_name(
            self.protocol,
            self.mechanism,
            self.msg_size,
            self.total_bytes,
        )
    }
}

fn config_name(p: Protocol, m: Mechanism, msg_size: u32, total: u64) -> String {
    format!("{p} {m}, {msg_size} B × {total} B")
}

/// Compares campaign `b` with the baseline `a`, per configuration (message size, total,
/// protocol, mechanism), in A's order.
pub fn compare(a: Side<'_>, b: Side<'_>) -> Comparison {
    let (ka, kb) = (configuration_keys(a.runs), configuration_keys(b.runs));
    let samples = |s: &Side<'_>, key: (Point, Protocol, Mechanism)| -> (Vec<f64>, Vec<f64>) {
        s.runs
            .iter()
            .filter(|(p, r)| (*p, r.protocol, r.mechanism) == key)
            .map(|(_, r)| (r.client.seconds, r.client.throughput_bps))
            .unzip()
    };
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for &key in &ka {
        let (point, p, m) = key;
        let (ta, ra) = samples(&a, key);
        let (tb, rb) = samples(&b, key);
        let row = kb.contains(&key).then_some(()).and_then(|()| {
            let (sa, sb) = (Summary::of(&ta)?, Summary::of(&tb)?);
            Some(Row {
                protocol: p,
                mechanism: m,
                msg_size: point.msg_size,
                total_bytes: point.total_bytes,
                runs: (sa.count, sb.count),
                median_seconds: (sa.median, sb.median),
                median_throughput_bps: (Summary::of(&ra)?.median, Summary::of(&rb)?.median),
                time_ratio: if sa.median > 0.0 {
                    sb.median / sa.median
                } else {
                    f64::NAN
                },
                test: MannWhitney::test(&ta, &tb)?,
            })
        });
        match row {
            Some(row) => rows.push(row),
            None => unmatched.push(config_name(p, m, point.msg_size, point.total_bytes)),
        }
    }
    for &(point, p, m) in kb.iter().filter(|k| !ka.contains(k)) {
        unmatched.push(config_name(p, m, point.msg_size, point.total_bytes));
    }
    Comparison {
        a: a.id,
        b: b.id,
        rows,
        unmatched,
    }
}

/// The comparison as a text table; with `fail_pct`, rows over it are marked REGRESSION.
pub fn write_text(c: &Comparison, fail_pct: Option<f64>, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Campaign {} (A) against campaign {} (B): median client transfer time per configuration.\n\
         Test: Mann–Whitney U, two-sided, normal approximation with tie and continuity correction; \
         significant when p < {ALPHA}.",
        c.a, c.b
    )?;
    writeln!(
        out,
        "\n{:<34} {:>7} {:>12} {:>12} {:>14} {:>14} {:>7} {:>8}  RESULT",
        "CONFIGURATION", "RUNS", "A TIME (s)", "B TIME (s)", "A RATE", "B RATE", "B/A", "P"
    )?;
    for r in &c.rows {
        let change = (r.time_ratio - 1.0) * 100.0;
        let verdict = if !r.significant() {
            "~ (no significant difference)".to_string()
        } else if change > 0.0 {
            format!("slower (+{change:.1}% time)")
        } else {
            format!("faster ({change:.1}% time)")
        };
        let flag = match fail_pct {
            Some(pct) if r.is_regression(pct) => " REGRESSION",
            _ => "",
        };
        writeln!(
            out,
            "{:<34} {:>7} {:>12.6} {:>12.6} {:>14} {:>14} {:>7.3} {:>8.4}  {verdict}{flag}",
            r.name(),
            format!("{}/{}", r.runs.0, r.runs.1),
            r.median_seconds.0,
            r.median_seconds.1,
            format_bitrate(r.median_throughput_bps.0),
            format_bitrate(r.median_throughput_bps.1),
            r.time_ratio,
            r.test.p_value,
        )?;
    }
    for name in &c.unmatched {
        writeln!(out, "{name:<34} only in one campaign: not compared")?;
    }
    Ok(())
}
