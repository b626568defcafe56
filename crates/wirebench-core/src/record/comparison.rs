//! Two campaigns compared per configuration, like benchstat: median goodput and (UDP) loss of
//! each, their ratio, and a two-sided Mann–Whitney U test of the goodput samples and of the
//! loss samples. Owns the comparison model; renderers only print it.

use serde::{Deserialize, Serialize};

use super::run::RunRecord;
use super::summary::{configuration_keys, runs_of, ConfigurationKey};
use crate::vocab::stats::{MannWhitney, Summary};
use crate::vocab::sweep::Point;

/// Significance level: a difference counts when the test's p-value is below this.
pub const ALPHA: f64 = 0.05;

/// Two campaigns side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The baseline campaign.
    pub a: i64,
    /// The campaign compared with it.
    pub b: i64,
    /// Configurations with timed runs in both, in A's order.
    pub rows: Vec<Row>,
    /// Configurations not compared, each with the reason ("tcp stream, 1000 B × 100000 B:
    /// only in A").
    pub unmatched: Vec<String>,
}

/// One configuration in both campaigns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Which configuration.
    #[serde(flatten)]
    pub key: ConfigurationKey,
    /// Timed runs in A and in B.
    pub runs: (usize, usize),
    /// Median goodput in A and in B, bit/s.
    pub median_goodput_bps: (f64, f64),
    /// B's median goodput over A's (0.5: B delivers half as fast).
    pub goodput_ratio: f64,
    /// Median transfer time in A and in B, seconds.
    pub median_seconds: (f64, f64),
    /// Mann–Whitney U test of A's goodputs against B's.
    pub test: MannWhitney,
    /// UDP: median loss (% of messages sent) in A and B, and the test of the loss samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossComparison>,
}

/// UDP loss of one configuration in both campaigns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossComparison {
    /// Median loss in A and in B, % of messages sent.
    pub median_lost_pct: (f64, f64),
    /// Mann–Whitney U test of A's loss shares against B's.
    pub test: MannWhitney,
}

impl Row {
    /// Whether the goodput difference is significant at [`ALPHA`].
    pub fn significant(&self) -> bool {
        self.test.p_value < ALPHA
    }

    /// Change of B's median goodput against A's, percent (−50: half as fast).
    pub fn goodput_change_pct(&self) -> f64 {
        (self.goodput_ratio - 1.0) * 100.0
    }

    /// Whether B is significantly worse than A beyond `pct`: goodput lower by more than `pct`
    /// percent, or loss higher by more than `pct` percentage points.
    pub fn is_regression(&self, pct: f64) -> bool {
        let slower = self.significant() && -self.goodput_change_pct() > pct;
        let lossier = self.loss.as_ref().is_some_and(|l| {
            l.test.p_value < ALPHA && l.median_lost_pct.1 - l.median_lost_pct.0 > pct
        });
        slower || lossier
    }

    /// "tcp stream, 1000 B × 100000 B".
    pub fn name(&self) -> String {
        key_name(&self.key)
    }
}

/// A configuration's short name: "tcp stream, 1000 B × 100000 B".
pub fn key_name(k: &ConfigurationKey) -> String {
    format!(
        "{} {}, {} B × {} B",
        k.protocol, k.mechanism, k.msg_size, k.total_bytes
    )
}

/// Compares campaign `b` with the baseline `a`, per configuration, in A's order.
pub fn compare(
    (a, runs_a): (i64, &[(Point, RunRecord)]),
    (b, runs_b): (i64, &[(Point, RunRecord)]),
) -> Comparison {
    let (ka, kb) = (configuration_keys(runs_a), configuration_keys(runs_b));
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for &key in &ka {
        if !kb.contains(&key) {
            unmatched.push(format!("{}: only in campaign {a}", key_name(&key)));
            continue;
        }
        match row(key, runs_a, runs_b) {
            Some(row) => rows.push(row),
            None => unmatched.push(format!(
                "{}: no run long enough to time on one side",
                key_name(&key)
            )),
        }
    }
    for key in kb.iter().filter(|k| !ka.contains(k)) {
        unmatched.push(format!("{}: only in campaign {b}", key_name(key)));
    }
    Comparison {
        a,
        b,
        rows,
        unmatched,
    }
}

fn row(
    key: ConfigurationKey,
    runs_a: &[(Point, RunRecord)],
    runs_b: &[(Point, RunRecord)],
) -> Option<Row> {
    let (ha, hb) = (runs_of(runs_a, key), runs_of(runs_b, key));
    let goodput = |h: &[(&RunRecord, super::headline::Headline)]| -> Vec<f64> {
        h.iter().filter_map(|(_, h)| h.goodput_bps).collect()
    };
    let seconds = |h: &[(&RunRecord, super::headline::Headline)]| -> Vec<f64> {
        h.iter().map(|(_, h)| h.transfer_seconds()).collect()
    };
    let lost = |h: &[(&RunRecord, super::headline::Headline)]| -> Vec<f64> {
        h.iter()
            .filter_map(|(_, h)| h.delivery.map(|d| d.lost_pct))
            .collect()
    };
    let (ga, gb) = (goodput(&ha), goodput(&hb));
    let (sa, sb) = (Summary::of(&ga)?, Summary::of(&gb)?);
    let loss = match (Summary::of(&lost(&ha)), Summary::of(&lost(&hb))) {
        (Some(la), Some(lb)) => Some(LossComparison {
            median_lost_pct: (la.median, lb.median),
            test: MannWhitney::test(&lost(&ha), &lost(&hb))?,
        }),
        _ => None,
    };
    Some(Row {
        key,
        runs: (sa.count, sb.count),
        median_goodput_bps: (sa.median, sb.median),
        goodput_ratio: if sa.median > 0.0 {
            sb.median / sa.median
        } else {
            f64::NAN
        },
        median_seconds: (
            Summary::of(&seconds(&ha))?.median,
            Summary::of(&seconds(&hb))?.median,
        ),
        test: MannWhitney::test(&ga, &gb)?,
        loss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::headline::tests::run;
    use crate::vocab::plan::Protocol;

    fn campaign(read: &[u64], ns: u64) -> Vec<(Point, RunRecord)> {
        let point = Point {
            msg_size: 1000,
            total_bytes: 1_000_000,
        };
        read.iter()
            .enumerate()
            .map(|(i, &r)| (point, run(Protocol::Udp, 1000, r, ns + i as u64 * 1000)))
            .collect()
    }

    #[test]
    fn half_the_goodput_is_a_regression_and_so_is_more_loss() {
        let a = campaign(&[1000; 6], 100_000_000);
        // Twice as long: half the goodput.
        let slow = campaign(&[1000; 6], 200_000_000);
        let c = compare((1, &a), (2, &slow));
        let row = &c.rows[0];
        assert!((row.goodput_ratio - 0.5).abs() < 1e-3);
        assert!(row.significant() && row.is_regression(10.0));
        // Same time, 20 % lost: goodput 0.8× and loss up by 20 points.
        let lossy = campaign(&[800; 6], 100_000_000);
        let row = &compare((1, &a), (3, &lossy)).rows[0];
        let loss = row.loss.as_ref().unwrap();
        assert_eq!(loss.median_lost_pct, (0.0, 20.0));
        assert!(row.is_regression(15.0), "20 points more loss");
        // Identical campaigns: nothing to report.
        let row = &compare((1, &a), (4, &a.clone())).rows[0];
        assert!(!row.significant() && !row.is_regression(1.0));
    }

    #[test]
    fn configurations_only_one_side_has_are_named() {
        let a = campaign(&[1000; 3], 100_000_000);
        let mut b = a.clone();
        for (p, _) in &mut b {
            p.msg_size = 500;
        }
        let c = compare((1, &a), (2, &b));
        assert!(c.rows.is_empty());
        assert_eq!(c.unmatched.len(), 2);
        assert!(
            c.unmatched[0].ends_with("only in campaign 1"),
            "{:?}",
            c.unmatched
        );
    }
}
