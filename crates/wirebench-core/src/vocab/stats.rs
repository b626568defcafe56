//! Summary statistics over repeated runs: owns min, mean, median, max and sample standard
//! deviation, nearest-rank percentiles, and the Mann–Whitney U test used to compare two sets of
//! runs; must not know what the numbers measure.

use serde::{Deserialize, Serialize};

/// The nearest-rank percentile of `sorted` (ascending) at `per_mille` ‰ (500 = the median,
/// 990 = p99): the smallest value with at least that share of the values at or below it;
/// `None` for no values. Integer arithmetic, so 99 % of 100 values is exactly rank 99.
pub fn nearest_rank<T: Copy>(sorted: &[T], per_mille: usize) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    // ceil(per_mille × n / 1000), clamped to ranks 1..=n (1-based).
    let rank = (per_mille * n).div_ceil(1000).clamp(1, n);
    Some(sorted[rank - 1])
}

/// Summary of a set of values.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Values summarised (NaNs excluded).
    pub count: usize,
    /// Smallest.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
    /// Sample standard deviation (n − 1); 0 for a single value.
    pub stddev: f64,
}

impl Summary {
    /// Summarises `values`, ignoring NaNs; `None` when nothing is left.
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let stddev = if n > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Summary {
            count: n,
            min: v[0],
            mean,
            median,
            max: v[n - 1],
            stddev,
        })
    }
}

/// Result of a two-sided Mann–Whitney U test of sample `a` against sample `b`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// U statistic of `a`: how many (a, b) pairs have a > b, ties counting one half.
    pub u: f64,
    /// Standard score of `u` (normal approximation, tie- and continuity-corrected); 0 when
    /// every value is equal.
    pub z: f64,
    /// Two-sided p-value from the normal approximation; 1 when every value is equal.
    pub p_value: f64,
}

impl MannWhitney {
    /// Tests whether `a` and `b` come from the same distribution: two-sided Mann–Whitney U with
    /// average ranks for ties, the normal approximation with the tie correction of the variance
    /// and a continuity correction of 0.5 (as scipy's `mannwhitneyu(method="asymptotic")`).
    /// NaNs are ignored; `None` when either side is then empty. With fewer than about 4 values
    /// per side no difference can reach p < 0.05.
    pub fn test(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
        let a: Vec<f64> = a.iter().copied().filter(|x| !x.is_nan()).collect();
        let b: Vec<f64> = b.iter().copied().filter(|x| !x.is_nan()).collect();
        if a.is_empty() || b.is_empty() {
            return None;
        }
        let (n1, n2) = (a.len() as f64, b.len() as f64);
        let mut all: Vec<(f64, bool)> = a
            .iter()
            .map(|&x| (x, true))
            .chain(b.iter().map(|&x| (x, false)))
            .collect();
        all.sort_by(|x, y| x.0.total_cmp(&y.0));
        let n = all.len();
        let mut rank_sum_a = 0.0;
        let mut tie_term = 0.0;
        let mut i = 0;
        while i < n {
            let mut j = i + 1;
            while j < n && all[j].0 == all[i].0 {
                j += 1;
            }
            // Positions i..j (0-based) share the average of ranks i+1..=j.
            let rank = (i + 1 + j) as f64 / 2.0;
            rank_sum_a += rank * all[i..j].iter().filter(|v| v.1).count() as f64;
            let t = (j - i) as f64;
            tie_term += t * t * t - t;
            i = j;
        }
        let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
        let mean = n1 * n2 / 2.0;
        let nf = n as f64;
        let variance = n1 * n2 / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
        if variance <= 0.0 || !variance.is_finite() {
            return Some(MannWhitney {
                u,
                z: 0.0,
                p_value: 1.0,
            });
        }
        let distance = ((u - mean).abs() - 0.5).max(0.0);
        let z = distance / variance.sqrt() * (u - mean).signum();
        let p_value = erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0);
        Some(MannWhitney { u, z, p_value })
    }
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, fractional error < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mann_whitney_matches_scipy() {
        // scipy.stats.mannwhitneyu([1,2,3,4,5], [6,7,8,9,10], method="asymptotic"):
        // U = 0, p = 0.012185.
        let r = MannWhitney::test(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert_eq!(r.u, 0.0);
        assert!((r.p_value - 0.012185).abs() < 1e-5, "{r:?}");
        assert!(r.z < 0.0);
        // With ties, by hand: ranks of a = 1, 3, 3, 5.5, so U = 12.5 - 10 = 2.5; mean 8; tie
        // term (3³ - 3) + (2³ - 2) = 30; variance 16/12 × (9 - 30/56) = 11.2857; z = -(5.5 - 0.5)
        // / 3.3594 = -1.48835; p = erfc(1.48835 / √2) = 0.13666.
        let r = MannWhitney::test(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(r.u, 2.5);
        assert!((r.z + 1.48835).abs() < 1e-4, "{r:?}");
        assert!((r.p_value - 0.13666).abs() < 1e-4, "{r:?}");
    }

    #[test]
    fn mann_whitney_identical_and_empty() {
        let same = [3.0, 3.0, 3.0, 3.0];
        let r = MannWhitney::test(&same, &same).unwrap();
        assert_eq!((r.z, r.p_value), (0.0, 1.0));
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!(MannWhitney::test(&a, &a).unwrap().p_value > 0.9);
        assert_eq!(MannWhitney::test(&[], &a), None);
        assert_eq!(MannWhitney::test(&a, &[f64::NAN]), None);
    }

    #[test]
    fn erfc_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_2).abs() < 1e-6);
        assert!((erfc(-1.0) - 1.842_700_8).abs() < 1e-6);
    }

    #[test]
    fn summary_of_known_values() {
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert_eq!(s.count, 8);
        assert_eq!((s.min, s.max, s.mean, s.median), (2.0, 9.0, 5.0, 4.5));
        // Sample variance: 32 / 7.
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn single_empty_and_nan() {
        let s = Summary::of(&[3.5]).unwrap();
        assert_eq!(
            (s.min, s.mean, s.median, s.max, s.stddev),
            (3.5, 3.5, 3.5, 3.5, 0.0)
        );
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
        let s = Summary::of(&[1.0, f64::NAN, 3.0]).unwrap();
        assert_eq!((s.count, s.median), (2, 2.0));
    }

    #[test]
    fn unsorted_input_even_and_odd_counts() {
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(
            (s.count, s.min, s.max, s.mean, s.median),
            (4, 1.0, 4.0, 2.5, 2.5)
        );
        // Sum of squared deviations 5, over n - 1 = 3.
        assert_eq!(s.stddev, (5.0f64 / 3.0).sqrt());
        let s = Summary::of(&[9.0, -1.0, 5.0]).unwrap();
        assert_eq!(
            (s.min, s.median, s.max, s.mean),
            (-1.0, 5.0, 9.0, 13.0 / 3.0)
        );
        // Sum of squared deviations 152/3, over n - 1 = 2; the mean is inexact, so allow rounding.
        assert!(
            (s.stddev - (76.0f64 / 3.0).sqrt()).abs() < 1e-12,
            "{}",
            s.stddev
        );
        let json = serde_json::to_string(&Summary::of(&[1.0]).unwrap()).unwrap();
        assert_eq!(
            json,
            r#"{"count":1,"min":1.0,"mean":1.0,"median":1.0,"max":1.0,"stddev":0.0}"#
        );
    }

    #[test]
    fn nearest_rank_is_the_smallest_value_covering_the_share() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 500), Some(50));
        assert_eq!(nearest_rank(&v, 990), Some(99));
        assert_eq!(nearest_rank(&v, 1000), Some(100));
        assert_eq!(nearest_rank(&v, 0), Some(1));
        assert_eq!(nearest_rank(&[7, 9], 500), Some(7));
        assert_eq!(nearest_rank(&[7, 9], 501), Some(9));
        assert_eq!(nearest_rank::<u64>(&[], 500), None);
    }
}
