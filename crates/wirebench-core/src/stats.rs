//! Summary statistics over repeated runs: owns min, mean, median, max and sample standard
//! deviation; must not know what the numbers measure.

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
