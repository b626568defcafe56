//! The chart of a stored responsiveness test: probe round trips under load (the loaded p50 and
//! p99 of each interval, the idle round trip as a dashed line) above the goodput of each
//! interval, two panels sharing one time axis. Draws with plotters' SVG backend into a string;
//! owns layout only — every percentile comes from the result model
//! (`wirebench_core::record::rpm::timeline`); never opens files or reads clocks.

use std::io;

use plotters::prelude::*;

use wirebench_core::record::rpm::IntervalPoint;

use super::axis::{rate_unit, Axis, X_AXIS_PX, X_LABEL_GAP_PX};
use super::plot::{self, chart_error, Plot, FONT, PLOT_WIDTH};
use super::series::{Mark, Marker, Palette, Series};

/// Height of each of the two panels, pixels.
const PANEL: u32 = 300;

/// Probe round trips (top) and goodput (bottom) per interval of one test against time since
/// the load started, each interval drawn at its middle; `idle_ms` is the idle round trip, drawn
/// across the top panel. `None` when the test has no interval.
pub fn latency_and_goodput_over_time(
    title: &str,
    points: &[IntervalPoint],
    idle_ms: Option<f64>,
) -> io::Result<Option<String>> {
    if points.is_empty() {
        return Ok(None);
    }
    let t_hi = points.iter().map(|p| p.end_s).fold(0.0f64, f64::max);
    let mid = |p: &IntervalPoint| (p.start_s + p.end_s) / 2.0;
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut palette = Palette::default();
    let mut latency: Vec<Series> = Vec::new();
    let p99: Vec<Mark> = points
        .iter()
        .filter_map(|p| Some(Mark::at(mid(p), ms(p.latency.all?.p99_ns))))
        .collect();
    let p50: Vec<Mark> = points
        .iter()
        .filter_map(|p| Some(Mark::at(mid(p), ms(p.latency.all?.p50_ns))))
        .collect();
    for (name, marks) in [("Loaded p99", p99), ("Loaded p50", p50)] {
        if !marks.is_empty() {
            latency.push(Series::new(name, palette.of(name), marks));
        }
    }
    if let Some(idle) = idle_ms {
        let grey = RGBColor(90, 90, 90);
        latency.push(
            Series::new(
                "Idle",
                grey,
                vec![Mark::at(0.0, idle), Mark::at(t_hi, idle)],
            )
            .with_marker(Marker::Dashed),
        );
    }
    let rate_max = points
        .iter()
        .map(|p| p.download_bps.max(p.upload_bps))
        .fold(0.0f64, f64::max);
    let (scale, unit) = rate_unit(rate_max);
    let mut goodput: Vec<Series> = Vec::new();
    // A direction without load is a line at zero: left out.
    for (name, of) in [
        (
            "Download",
            (|p: &IntervalPoint| p.download_bps) as fn(&IntervalPoint) -> f64,
        ),
        ("Upload", |p: &IntervalPoint| p.upload_bps),
    ] {
        if points.iter().any(|p| of(p) > 0.0) {
            let marks = points
                .iter()
                .map(|p| Mark::at(mid(p), of(p) / scale))
                .collect();
            goodput.push(Series::new(name, palette.of(name), marks));
        }
    }
    // One time axis for both panels, so their intervals line up.
    let time = |desc: &str| {
        Axis::linear(
            desc,
            0.0,
            (t_hi * 1.02).max(1e-3),
            X_AXIS_PX,
            X_LABEL_GAP_PX,
        )
    };
    let top = Plot {
        title: String::new(),
        x: time(""),
        y: plot::y_from_zero("Probe round trip (ms)".into(), &latency, None),
        bars: false,
        series: &latency,
        notes: Vec::new(),
    };
    let bottom = Plot {
        title: String::new(),
        x: time("Time since the load started (s)"),
        y: plot::y_from_zero(format!("Goodput per interval ({unit})"), &goodput, None),
        bars: false,
        series: &goodput,
        notes: Vec::new(),
    };
    let width = PLOT_WIDTH + plot::legend_width(&top).max(plot::legend_width(&bottom));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, 2 * PANEL + 40)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let root = root.titled(title, (FONT, 20)).map_err(chart_error)?;
        let (upper, lower) = root.split_vertically(PANEL);
        plot::draw(&upper, &top)?;
        plot::draw(&lower, &bottom)?;
        root.present().map_err(chart_error)?;
    }
    Ok(Some(svg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::record::rpm::{LatencyFigures, LoadedLatency};

    fn point(index: u32, p50_ms: Option<u64>, download_bps: f64) -> IntervalPoint {
        let figures = p50_ms.map(|m| LatencyFigures {
            samples: 4,
            p50_ns: m * 1_000_000,
            p90_ns: 2 * m * 1_000_000,
            p99_ns: 3 * m * 1_000_000,
            max_ns: 3 * m * 1_000_000,
        });
        IntervalPoint {
            index,
            start_s: f64::from(index),
            end_s: f64::from(index + 1),
            flows: index + 1,
            download_bps,
            upload_bps: 0.0,
            rpm: None,
            latency: LoadedLatency {
                all: figures,
                foreign: figures,
                own: None,
            },
        }
    }

    #[test]
    fn two_panels_share_the_time_axis() {
        assert_eq!(latency_and_goodput_over_time("t", &[], None).unwrap(), None);
        let points = [
            point(0, Some(10), 20e6),
            point(1, None, 20e6),
            point(2, Some(100), 19e6),
        ];
        let svg = latency_and_goodput_over_time("Test 1", &points, Some(1.5))
            .unwrap()
            .expect("a chart");
        for text in [
            "Test 1",
            "Probe round trip (ms)",
            "Loaded p99",
            "Loaded p50",
            "Idle",
            "Time since the load started (s)",
            "Goodput per interval (Mbit/s)",
            "Download",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // No upload load: no upload line.
        assert!(!svg.contains("Upload"));
        // Nothing measured anywhere still draws (axes of 0..1).
        let empty = [point(0, None, 0.0)];
        assert!(latency_and_goodput_over_time("t", &empty, None)
            .unwrap()
            .is_some());
    }
}
