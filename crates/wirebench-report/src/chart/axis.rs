//! The axes of every chart: a linear axis (from zero or over a range), a log axis and a
//! categorical one, each with its tick labels placed far enough apart to be read, and the units
//! a rate or a time axis reads in. Drawn coordinates are the value itself on a linear axis and
//! its base-10 logarithm on a log axis, so one plot routine draws both. Owns tick placement and
//! label text only.

/// An axis as the plot draws it: its description, its range in drawn coordinates, where its
/// labels go (and what they say) and where its light grid lines go.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// What the axis measures, with its unit in the last parentheses: "Goodput (Mbit/s)".
    pub desc: String,
    /// Log scale: drawn coordinates are log10 of the values.
    pub log: bool,
    /// Lower end, drawn coordinates.
    pub lo: f64,
    /// Upper end, drawn coordinates.
    pub hi: f64,
    /// Labels: drawn coordinate and text, ascending.
    pub labels: Vec<(f64, String)>,
    /// Light grid lines, drawn coordinates.
    pub grid: Vec<f64>,
    /// Category names (a categorical axis: category i is drawn at i).
    pub categories: Vec<String>,
}

/// Length of a chart's x axis in pixels, about (the plot's width less margins and y labels).
pub const X_AXIS_PX: f64 = 616.0;
/// Length of a chart's y axis in pixels, about (the height less margins, title and x labels).
pub const Y_AXIS_PX: f64 = 300.0;
/// Room from one x label to the next, pixels: "100000" is about 40 wide.
pub const X_LABEL_GAP_PX: f64 = 60.0;
/// Room from one y label to the next, pixels.
pub const Y_LABEL_GAP_PX: f64 = 22.0;

impl Axis {
    /// A linear axis over `lo..hi` (values), labelled at round steps at least `gap_px` apart.
    pub fn linear(desc: impl Into<String>, lo: f64, hi: f64, length_px: f64, gap_px: f64) -> Axis {
        let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
        let labels = linear_ticks(lo, hi, length_px, gap_px);
        Axis {
            desc: desc.into(),
            log: false,
            lo,
            hi,
            // The labels carry the mesh's lines already.
            grid: Vec::new(),
            labels,
            categories: Vec::new(),
        }
    }

    /// A log axis over `lo..hi` (values, both above zero), labelled at round values at least
    /// `gap_px` apart: powers of ten, with 2 and 5 (or 3) between them when there is room, and
    /// a light grid line at each whole multiple where that is not crowded. (plotters' own log
    /// ticks label every multiple of a decade when an axis spans under two decades, and those
    /// labels collide.)
    pub fn log(desc: impl Into<String>, lo: f64, hi: f64, length_px: f64, gap_px: f64) -> Axis {
        let lo = if lo > 0.0 && lo.is_finite() { lo } else { 1.0 };
        let hi = if hi > lo && hi.is_finite() {
            hi
        } else {
            lo * 10.0
        };
        let (labels, grid) = log_ticks(lo, hi, length_px, gap_px);
        Axis {
            desc: desc.into(),
            log: true,
            lo: lo.log10(),
            hi: hi.log10(),
            labels: labels
                .into_iter()
                .map(|v| (v.log10(), log_label(v)))
                .collect(),
            grid: grid.into_iter().map(f64::log10).collect(),
            categories: Vec::new(),
        }
    }

    /// A categorical axis: category i drawn at i, labelled with its name.
    pub fn categories(desc: impl Into<String>, names: Vec<String>) -> Axis {
        let n = names.len().max(1) as f64;
        Axis {
            desc: desc.into(),
            log: false,
            lo: -0.5,
            hi: n - 0.5,
            labels: names
                .iter()
                .enumerate()
                .map(|(i, name)| (i as f64, name.clone()))
                .collect(),
            grid: Vec::new(),
            categories: names,
        }
    }

    /// The same axis labelled at `values` (value, text) instead of at round numbers, leaving
    /// out any label nearer than `gap_px` to the one before it: an axis of the totals a
    /// campaign measured reads "1 MB  10 MB  2 GB" where they were measured.
    pub fn labelled_at(mut self, values: &[(f64, String)], length_px: f64, gap_px: f64) -> Axis {
        let per_px = (self.hi - self.lo) / length_px;
        let mut labels: Vec<(f64, String)> = Vec::new();
        let apart = |a: f64, b: f64| (a - b).abs() >= gap_px * per_px;
        for (i, (v, text)) in values.iter().enumerate() {
            let at = self.at(*v);
            match labels.last() {
                Some((last, _)) if !apart(at, *last) => {
                    // The largest value keeps its label: its neighbour gives way.
                    if i + 1 == values.len() && labels.len() > 1 {
                        labels.pop();
                        labels.push((at, text.clone()));
                    }
                }
                _ => labels.push((at, text.clone())),
            }
        }
        self.grid = values.iter().map(|(v, _)| self.at(*v)).collect();
        self.labels = labels;
        self
    }

    /// The same linear axis labelled at whole numbers only (flows, sessions: there is no half
    /// a session), at least one apart.
    pub fn integers(mut self) -> Axis {
        self.labels.retain(|(v, _)| v.fract() == 0.0);
        for (v, text) in &mut self.labels {
            *text = format!("{v:.0}");
        }
        self
    }

    /// Where `value` is drawn; on a log axis a value at or below zero is drawn at the bottom.
    pub fn at(&self, value: f64) -> f64 {
        if self.log {
            if value > 0.0 {
                value.log10().max(self.lo)
            } else {
                self.lo
            }
        } else {
            value
        }
    }

    /// The axis as plotters' coordinate: drawn coordinates mapped linearly, labels at the
    /// label positions, light lines at the grid positions.
    pub fn coord(&self) -> Coord {
        Coord {
            lo: self.lo,
            hi: self.hi,
            labels: self.labels.iter().map(|(at, _)| *at).collect(),
            grid: self.grid.clone(),
        }
    }

    /// The label text at drawn coordinate `v` (empty between labels).
    pub fn label_at(&self, v: f64) -> String {
        let tolerance = ((self.hi - self.lo).abs() * 1e-9).max(1e-12);
        self.labels
            .iter()
            .find(|(at, _)| (at - v).abs() <= tolerance)
            .map_or_else(String::new, |(_, text)| text.clone())
    }
}

/// An axis as plotters maps it: linear over drawn coordinates, its bold and light points
/// given (plotters' own f64 axis places its labels itself and, with points given, loses its
/// label formatting).
#[derive(Debug, Clone, PartialEq)]
pub struct Coord {
    lo: f64,
    hi: f64,
    labels: Vec<f64>,
    grid: Vec<f64>,
}

impl plotters::coord::ranged1d::Ranged for Coord {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span == 0.0 || !value.is_finite() {
            return (limit.0 + limit.1) / 2;
        }
        let share = (value - self.lo) / span;
        limit.0 + (f64::from(limit.1 - limit.0) * share + 1e-3).floor() as i32
    }

    fn key_points<H: plotters::coord::ranged1d::KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.grid.clone()
        } else {
            self.labels.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// Labels of a linear axis: multiples of the smallest step of 1, 2 or 5 × 10^k that keeps them
/// `gap_px` apart, with as many decimals as the step needs.
fn linear_ticks(lo: f64, hi: f64, length_px: f64, gap_px: f64) -> Vec<(f64, String)> {
    let most = (length_px / gap_px).floor().max(1.0);
    let raw = (hi - lo) / most;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    let decimals = (-step.log10().floor()).clamp(0.0, 9.0) as usize;
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last)
        .map(|i| {
            let v = i as f64 * step;
            // -0.0 prints as "-0": a zero is a zero.
            let v = if v == 0.0 { 0.0 } else { v };
            (v, format!("{v:.decimals$}"))
        })
        .collect()
}

/// The labelled values and the light grid values of a log axis, each ascending.
pub fn log_ticks(lo: f64, hi: f64, length_px: f64, gap_px: f64) -> (Vec<f64>, Vec<f64>) {
    let decades = (hi / lo).log10().max(1e-9);
    let px_per_decade = length_px / decades;
    // Each set of mantissas with the smallest gap between neighbours, in decades.
    let sets: [(&[f64], f64); 3] = [
        (&[1.0, 2.0, 5.0], 2f64.log10()),
        (&[1.0, 3.0], 3f64.log10()),
        (&[1.0], 1.0),
    ];
    let mantissas = sets
        .iter()
        .find(|(_, gap)| gap * px_per_decade >= gap_px)
        .map_or(&[1.0][..], |(m, _)| *m);
    // Powers of ten only, and even those too dense: every n-th.
    let every = ((gap_px / px_per_decade).ceil() as i32).max(1);
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let inside = |v: &f64| (lo..=hi).contains(v);
    let labels = (first..=last)
        .filter(|e| mantissas.len() > 1 || e.rem_euclid(every) == 0)
        .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
        .filter(inside)
        .collect();
    let grid_multiples: &[f64] = if px_per_decade >= 60.0 {
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    } else {
        &[1.0]
    };
    let grid = (first..=last)
        .flat_map(|e| grid_multiples.iter().map(move |m| m * 10f64.powi(e)))
        .filter(inside)
        .collect();
    (labels, grid)
}

/// A log-axis label: whole numbers from 1 up, as many decimals as a smaller one needs.
pub fn log_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let decimals = (-v.log10().floor()).clamp(1.0, 6.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// The unit a bit-rate axis reads in, chosen by its largest value: (divisor, name).
pub fn rate_unit(max_bps: f64) -> (f64, &'static str) {
    if max_bps >= 1e9 {
        (1e9, "Gbit/s")
    } else if max_bps >= 1e6 {
        (1e6, "Mbit/s")
    } else {
        (1e3, "kbit/s")
    }
}

/// The unit a time axis reads in, chosen by its largest value (seconds): (divisor, name).
pub fn time_unit(max_s: f64) -> (f64, &'static str) {
    if max_s >= 2.0 {
        (1.0, "s")
    } else if max_s >= 2e-3 {
        (1e-3, "ms")
    } else {
        (1e-6, "µs")
    }
}

/// A figure with three significant digits (whole numbers from 100 up): 7.35, 62.7, 0.0627, 512.
pub fn three_digits(v: f64) -> String {
    if v >= 100.0 || v <= 0.0 || !v.is_finite() {
        format!("{v:.0}")
    } else {
        let decimals = (2.0 - v.log10().floor()).clamp(0.0, 9.0) as usize;
        format!("{v:.decimals$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_axes_label_round_values_far_enough_apart() {
        // Sizes 1000 and 8000 (the axis runs from half the smallest to twice the largest).
        let (labels, grid) = log_ticks(500.0, 16000.0, 650.0, X_LABEL_GAP_PX);
        assert_eq!(labels, [500.0, 1000.0, 2000.0, 5000.0, 10000.0]);
        assert_eq!(grid.len(), 9 + 6, "500, 600, …, 900, 1000, …, 9000, 10000");
        // A sweep of 1 B to 64 KiB: powers of ten only.
        let (labels, _) = log_ticks(0.5, 131070.0, X_AXIS_PX, X_LABEL_GAP_PX);
        assert_eq!(labels, [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0]);
        // Round trips of 7 µs to 9 ms on the y axis; and a narrow range.
        let (labels, _) = log_ticks(7.0, 9000.0, Y_AXIS_PX, Y_LABEL_GAP_PX);
        assert_eq!(
            labels,
            [10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0]
        );
        let (labels, _) = log_ticks(0.05, 40.0, Y_AXIS_PX, Y_LABEL_GAP_PX);
        assert_eq!(labels.first(), Some(&0.05));
        for (lo, hi, px, gap) in [
            (500.0, 16000.0, X_AXIS_PX, X_LABEL_GAP_PX),
            (0.5, 131070.0, X_AXIS_PX, X_LABEL_GAP_PX),
            (1e-2, 1e9, Y_AXIS_PX, Y_LABEL_GAP_PX),
            (150.0, 600.0, X_AXIS_PX, X_LABEL_GAP_PX),
        ] {
            let (labels, _) = log_ticks(lo, hi, px, gap);
            assert!(!labels.is_empty(), "{lo}..{hi}");
            let per_decade = px / (hi / lo).log10();
            for pair in labels.windows(2) {
                assert!(
                    (pair[1] / pair[0]).log10() * per_decade >= gap,
                    "{lo}..{hi}: {pair:?}"
                );
            }
        }
        assert_eq!(
            [7.351, 62.74, 0.06274, 512.4, 0.0].map(three_digits),
            ["7.35", "62.7", "0.0627", "512", "0"]
        );
        assert_eq!(
            [0.05, 0.2, 1.0, 5000.0].map(log_label),
            ["0.05", "0.2", "1", "5000"]
        );
    }

    #[test]
    fn linear_axes_label_round_steps_that_fit() {
        let a = Axis::linear("x (s)", 0.0, 7.3, Y_AXIS_PX, Y_LABEL_GAP_PX);
        let texts: Vec<&str> = a.labels.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["0", "1", "2", "3", "4", "5", "6", "7"]);
        let a = Axis::linear("x (%)", 0.0, 0.15, Y_AXIS_PX, Y_LABEL_GAP_PX);
        assert_eq!(a.label_at(0.02), "0.02");
        let a = Axis::linear("x", 0.0, 1234.0, X_AXIS_PX, X_LABEL_GAP_PX);
        let texts: Vec<&str> = a.labels.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["0", "200", "400", "600", "800", "1000", "1200"]);
        for pair in a.labels.windows(2) {
            let px = (pair[1].0 - pair[0].0) / 1234.0 * X_AXIS_PX;
            assert!(px >= X_LABEL_GAP_PX, "{pair:?}");
        }
        assert_eq!(a.label_at(400.0), "400");
        assert_eq!(a.label_at(401.0), "");
        // A degenerate range still makes an axis.
        let a = Axis::linear("x", 0.0, 0.0, X_AXIS_PX, X_LABEL_GAP_PX);
        assert!(a.hi > a.lo && !a.labels.is_empty());
    }

    #[test]
    fn log_and_categorical_axes_draw_where_they_say() {
        let a = Axis::log("size (bytes)", 500.0, 16000.0, X_AXIS_PX, X_LABEL_GAP_PX);
        assert!((a.at(1000.0) - 3.0).abs() < 1e-12);
        assert_eq!(a.label_at(3.0), "1000");
        assert_eq!(a.at(0.0), a.lo, "nothing below the axis");
        let c = Axis::categories("total", vec!["1 MiB".into(), "2 MiB".into()]);
        assert_eq!((c.lo, c.hi), (-0.5, 1.5));
        assert_eq!(
            (c.label_at(0.0), c.label_at(1.0)),
            ("1 MiB".into(), "2 MiB".into())
        );
        assert_eq!(c.label_at(0.5), "");
    }

    /// Flows and sessions tick at whole numbers: 1, 2, 3, never 0.5.
    #[test]
    fn an_integer_axis_ticks_at_whole_numbers_only() {
        let a = Axis::linear("Flows (count)", 0.0, 3.2, X_AXIS_PX, X_LABEL_GAP_PX).integers();
        let texts: Vec<&str> = a.labels.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(texts, ["0", "1", "2", "3"]);
    }

    /// An axis of measured totals is labelled at those totals, crowded ones left out.
    #[test]
    fn an_axis_labelled_at_its_values_leaves_out_crowded_labels() {
        let values: Vec<(f64, String)> = [1e6, 1.1e6, 1e7, 1e9, 1.2e9]
            .iter()
            .map(|v| (*v, format!("{v}")))
            .collect();
        let a = Axis::log("Total (bytes)", 5e5, 2e9, X_AXIS_PX, X_LABEL_GAP_PX).labelled_at(
            &values,
            X_AXIS_PX,
            X_LABEL_GAP_PX,
        );
        let texts: Vec<&str> = a.labels.iter().map(|(_, t)| t.as_str()).collect();
        assert_eq!(
            texts,
            ["1000000", "10000000", "1200000000"],
            "the largest kept"
        );
        assert_eq!(a.grid.len(), 5, "a light line at every value");
    }
}
