//! The draft's aggregation of samples: the single-sided trimmed mean, the standard deviation,
//! the moving-average stability test over the last MAD intervals and the moving-average
//! goodput.

/// Single-sided trimmed mean: the mean of the values at or below the `percent` percentile —
/// the highest `floor(n × (100 − percent) / 100)` values are dropped (with 95 %: one value in
/// every 20, none below 20 samples). `None` for no values; NaNs are ignored.
pub fn trimmed_mean(values: &[f64], percent: f64) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let drop_fraction = ((100.0 - percent) / 100.0).clamp(0.0, 1.0);
    // Values are counted exactly: 20 × 0.05 must drop exactly one, not 0.999…
    let drop = ((v.len() as f64 * drop_fraction) + 1e-9).floor() as usize;
    let keep = (v.len() - drop.min(v.len() - 1)).max(1);
    Some(v[..keep].iter().sum::<f64>() / keep as f64)
}

/// Population standard deviation (divided by n) of `values`; 0 for fewer than two.
pub fn stddev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt()
}

/// The draft's stability test on a series of moving averages (oldest first): stable when there
/// are at least `mad` of them and the standard deviation of the last `mad` is less than
/// `tolerance_percent` of the most recent one.
pub fn is_stable(moving_averages: &[f64], mad: usize, tolerance_percent: f64) -> bool {
    if mad == 0 || moving_averages.len() < mad {
        return false;
    }
    let last = &moving_averages[moving_averages.len() - mad..];
    let current = last[mad - 1];
    current.is_finite() && stddev(last) < tolerance_percent / 100.0 * current.abs()
}

/// The moving-average aggregate goodput at the last interval: the bytes of the last `mad`
/// intervals × 8 over `mad × interval`, bit/s. `None` before `mad` intervals have run.
pub fn moving_average_goodput_bps(
    bytes_per_interval: &[u64],
    mad: usize,
    interval_ns: u64,
) -> Option<f64> {
    if mad == 0 || bytes_per_interval.len() < mad || interval_ns == 0 {
        return None;
    }
    let bytes: u64 = bytes_per_interval[bytes_per_interval.len() - mad..]
        .iter()
        .sum();
    Some(bytes as f64 * 8.0 / (mad as f64 * interval_ns as f64 / 1e9))
}
