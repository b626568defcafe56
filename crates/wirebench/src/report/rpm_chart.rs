//! The chart of a stored responsiveness test: probe round trips under load (the loaded p50 and
//! p99 of each interval, the idle round trip as a dashed line) above the goodput of each
//! interval, two panels sharing one time axis. Draws with plotters' SVG backend into a string;
//! owns layout only — every percentile comes from the result model
//! (`wirebench_core::record::rpm::timeline`); never opens files or reads clocks.

use std::io;

use plotters::prelude::*;

use wirebench_core::record::rpm::IntervalPoint;

use super::chart::{chart_error, legend, line_with_dots, rate_unit, tick, COLOURS, FONT, SIZE};

/// Height of each of the two panels, pixels.
const PANEL: u32 = 300;

/// Room left of each panel for its axis labels: the same in both, so their time axes line up.
const Y_LABELS: u32 = 72;

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
    let x_hi = (t_hi * 1.02).max(1e-3);
    let mid = |p: &IntervalPoint| (p.start_s + p.end_s) / 2.0;
    let ms = |ns: u64| ns as f64 / 1e6;
    let p50: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((mid(p), ms(p.latency.all?.p50_ns))))
        .collect();
    let p99: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((mid(p), ms(p.latency.all?.p99_ns))))
        .collect();
    let lat_max = p99
        .iter()
        .map(|p| p.1)
        .chain(idle_ms)
        .fold(0.0f64, f64::max);
    // Headroom above the highest p99 keeps the legend off the lines.
    let lat_hi = if lat_max > 0.0 { lat_max * 1.4 } else { 1.0 };
    let rate_max = points
        .iter()
        .map(|p| p.download_bps.max(p.upload_bps))
        .fold(0.0f64, f64::max);
    let (scale, unit) = rate_unit(rate_max);
    let rate_hi = if rate_max > 0.0 {
        rate_max / scale * 1.4
    } else {
        1.0 // nothing moved: an axis of 0..1 rather than a degenerate one
    };
    let download: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (mid(p), p.download_bps / scale))
        .collect();
    let upload: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (mid(p), p.upload_bps / scale))
        .collect();

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, 2 * PANEL + 40)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let root = root.titled(title, (FONT, 20)).map_err(chart_error)?;
        let (upper, lower) = root.split_vertically(PANEL);

        let mut top = ChartBuilder::on(&upper)
            .margin(16)
            .x_label_area_size(32)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d(0f64..x_hi, 0f64..lat_hi)
            .map_err(chart_error)?;
        top.configure_mesh()
            .y_desc("Probe round trip (ms)")
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .x_label_formatter(&|x| tick(*x, x_hi))
            .y_label_formatter(&|y| tick(*y, lat_hi))
            .draw()
            .map_err(chart_error)?;
        if !p99.is_empty() {
            line_with_dots(&mut top, "Loaded p99", COLOURS[1], &p99)?;
        }
        if !p50.is_empty() {
            line_with_dots(&mut top, "Loaded p50", COLOURS[0], &p50)?;
        }
        if let Some(idle) = idle_ms {
            let grey = RGBColor(90, 90, 90);
            top.draw_series(DashedLineSeries::new(
                [(0.0, idle), (x_hi, idle)],
                6,
                4,
                grey.stroke_width(2),
            ))
            .map_err(chart_error)?
            .label("Idle")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(2))
            });
        }
        // Round trips grow as flows are added: the upper left is the emptiest corner.
        legend(&mut top, SeriesLabelPosition::UpperLeft)?;

        let mut bottom = ChartBuilder::on(&lower)
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(Y_LABELS)
            .build_cartesian_2d(0f64..x_hi, 0f64..rate_hi)
            .map_err(chart_error)?;
        bottom
            .configure_mesh()
            .x_desc("Time since the load started (s)")
            .y_desc(format!("Goodput per interval ({unit})"))
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .x_label_formatter(&|x| tick(*x, x_hi))
            .y_label_formatter(&|y| tick(*y, rate_hi))
            .draw()
            .map_err(chart_error)?;
        // A direction without load is a line at zero: left out.
        if points.iter().any(|p| p.download_bps > 0.0) {
            line_with_dots(&mut bottom, "Download", COLOURS[2], &download)?;
        }
        if points.iter().any(|p| p.upload_bps > 0.0) {
            line_with_dots(&mut bottom, "Upload", COLOURS[3], &upload)?;
        }
        legend(&mut bottom, SeriesLabelPosition::UpperRight)?;
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
