//! SVG charts for the HTML report, drawn with plotters' SVG backend into strings: goodput
//! against message size (log scale) per protocol × mechanism for a size sweep, or, for a
//! campaign of one size, grouped bars of goodput and transfer time with min–max whiskers;
//! round-trip-time percentiles for stop-and-wait, throughput over time of one run, and UDP
//! loss against offered load. Owns chart layout only; must not open files, read clocks or
//! compute statistics (every median, minimum and maximum comes from the result model).

use std::io;

use plotters::coord::combinators::WithKeyPoints;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::series::{LossPoint, Timeline};
use wirebench_core::record::summary::ConfigurationSummary as Configuration;
use wirebench_core::record::total_label;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::vocab::stats::Summary;

pub(super) const SIZE: (u32, u32) = (760, 420);
pub(super) const FONT: &str = "sans-serif";

/// The series colours, distinct in print as well (dark enough on white).
pub(super) const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// A named, coloured line of (x, y) points.
type Series = (String, RGBColor, Vec<(f64, f64)>);

/// The colour of a protocol × mechanism, the same in every chart.
fn colour_of(c: &Configuration) -> RGBColor {
    let p = c.key.protocol as usize;
    let m = c.key.mechanism as usize;
    COLOURS[(p * 2 + m) % COLOURS.len()]
}

/// Draws one series as a line with a dot on each point, and gives it a legend entry.
pub(super) fn line_with_dots<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    name: &str,
    colour: RGBColor,
    points: &[(X::ValueType, Y::ValueType)],
) -> io::Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged,
    Y: Ranged,
    X::ValueType: Copy + 'static,
    Y::ValueType: Copy + 'static,
{
    chart
        .draw_series(LineSeries::new(
            points.iter().copied(),
            colour.stroke_width(2),
        ))
        .map_err(chart_error)?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
        .map_err(chart_error)?;
    Ok(())
}

/// The legend box, in the corner where a chart's data is not (upper left for most here).
pub(super) fn legend<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    corner: SeriesLabelPosition,
) -> io::Result<()>
where
    DB: DrawingBackend + 'a,
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(corner)
        .draw()
        .map_err(chart_error)
}

pub(super) fn chart_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("cannot draw the chart: {e}"))
}

/// Median goodput against message size, one series per protocol × mechanism (configurations
/// with no run long enough to time are left out).
pub fn throughput_by_size(configs: &[Configuration]) -> io::Result<String> {
    let mut series: Vec<Series> = Vec::new();
    // With several totals, each total is a series of its own.
    let several_totals = configs.iter().any(|c| {
        configs
            .first()
            .is_some_and(|f| f.key.total_bytes != c.key.total_bytes)
    });
    for c in configs {
        let Some(goodput) = &c.goodput_bps else {
            continue;
        };
        let point = (f64::from(c.key.msg_size), goodput.median);
        let name = if several_totals {
            format!("{}, {}", c.title(), total_label(c.key.total_bytes))
        } else {
            c.title()
        };
        match series.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, points)) => points.push(point),
            None => {
                let colour = if several_totals {
                    COLOURS[series.len() % COLOURS.len()]
                } else {
                    colour_of(c)
                };
                series.push((name, colour, vec![point]));
            }
        }
    }
    for (_, _, points) in &mut series {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let all = series.iter().flat_map(|(_, _, p)| p.iter());
    let (mut x_lo, mut x_hi, mut y_hi) = (f64::MAX, 1.0f64, 0.0f64);
    for &(x, y) in all {
        x_lo = x_lo.min(x);
        x_hi = x_hi.max(x);
        y_hi = y_hi.max(y);
    }
    if x_lo == f64::MAX {
        x_lo = 1.0;
    }
    // Room either side on the log axis, so single sizes are not drawn on the frame.
    let (x_lo, x_hi) = ((x_lo / 2.0).max(0.5), x_hi * 2.0);
    let (scale, unit) = if y_hi >= 1e9 {
        (1e9, "Gbit/s")
    } else {
        (1e6, "Mbit/s")
    };
    let y_hi = (y_hi / scale * 1.15).max(1e-3);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Goodput (median) against message size", (FONT, 20))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(log_axis(x_lo, x_hi, X_AXIS_PX, X_LABEL_GAP_PX), 0f64..y_hi)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc("Message size (bytes, log scale)")
            .y_desc(format!("Goodput ({unit})"))
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .x_label_formatter(&|x| log_label(*x))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .draw()
            .map_err(chart_error)?;
        for (name, colour, points) in &series {
            let scaled: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x, y / scale)).collect();
            line_with_dots(&mut chart, name, *colour, &scaled)?;
        }
        // Throughput grows with message size: the upper left is the emptiest corner.
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

/// Whether every configuration has the same message size and total: the "against message
/// size" chart would then have one x value, so the report draws [`configuration_bars`] instead.
pub fn single_size(configs: &[Configuration]) -> bool {
    configs.windows(2).all(|w| {
        (w[0].key.msg_size, w[0].key.total_bytes) == (w[1].key.msg_size, w[1].key.total_bytes)
    })
}

/// Which figure a bar chart of a single-size campaign shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarFigure {
    /// Goodput (bit/s): configurations with no run long enough to time have no bar.
    Goodput,
    /// Transfer time (seconds) of every run.
    Time,
}

/// One bar per protocol × mechanism, grouped by protocol: the median of `figure` over the
/// configuration's runs, with a whisker from its minimum to its maximum (all three from the
/// result model's summary). The chart a campaign of one message size × one total gets in place
/// of the "against message size" line chart.
pub fn configuration_bars(configs: &[Configuration], figure: BarFigure) -> io::Result<String> {
    // Protocols in the order they ran; each configuration gets a slot in its protocol's group.
    let mut groups: Vec<Protocol> = Vec::new();
    for c in configs {
        if !groups.contains(&c.key.protocol) {
            groups.push(c.key.protocol);
        }
    }
    let slots_per_group = groups
        .iter()
        .map(|p| configs.iter().filter(|c| c.key.protocol == *p).count())
        .max()
        .unwrap_or(1)
        .max(1);
    let summary = |c: &Configuration| -> Option<Summary> {
        match figure {
            BarFigure::Goodput => c.goodput_bps,
            BarFigure::Time => Some(c.seconds),
        }
        // A hand-made import could hold any number; only real figures are drawable.
        .filter(|s| {
            [s.min, s.median, s.max]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0)
        })
    };
    let top = configs
        .iter()
        .filter_map(summary)
        .map(|s| s.max)
        .fold(0.0f64, f64::max);
    let (scale, unit, what) = match figure {
        BarFigure::Goodput => {
            let (scale, unit) = rate_unit(top);
            (scale, unit, "Goodput")
        }
        BarFigure::Time => {
            let (scale, unit) = time_unit(top);
            (scale, unit, "Transfer time")
        }
    };
    // Headroom above the highest whisker and its label for the legend (upper right), whose
    // rows are about 17 px each: the legend stays off the bars however many there are.
    let reserved_px = configs.len() as f64 * 17.0 + 14.0 + 24.0;
    let headroom = 1.0 / (1.0 - reserved_px / Y_AXIS_PX).max(0.3);
    let y_hi = if top > 0.0 {
        (top / scale * headroom).max(1e-3)
    } else {
        1.0
    };
    let first = configs.first().map(|c| c.key);
    let caption = match first {
        Some(k) => format!(
            "{what} per protocol × mechanism, {}-byte messages, {}",
            k.msg_size,
            total_label(k.total_bytes)
        ),
        None => format!("{what} per protocol × mechanism"),
    };
    let names: Vec<&'static str> = groups.iter().map(|p| protocol_name(*p)).collect();
    let group_label = |x: &f64| -> String {
        let i = x.round();
        if (x - i).abs() > 1e-6 || i < 0.0 {
            return String::new();
        }
        names
            .get(i as usize)
            .map_or_else(String::new, |n| (*n).to_string())
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        // Group g is centred on x = g; its bars share the middle 80 % of [g - 0.5, g + 0.5].
        let x_hi = groups.len().max(1) as f64 - 0.5;
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, (FONT, 18))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(-0.5f64..x_hi, 0f64..y_hi)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            // Over -0.5..G-0.5, G labels fall on the group centres 0..G (see the test).
            .x_labels(groups.len().max(1))
            .x_label_formatter(&group_label)
            .x_desc("Protocol (one bar per mechanism)")
            .y_desc(format!("{what}, median and min–max ({unit})"))
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .y_label_formatter(&|y| tick(*y, y_hi))
            .draw()
            .map_err(chart_error)?;
        let slot = 0.8 / slots_per_group as f64;
        for (g, protocol) in groups.iter().enumerate() {
            let members = configs.iter().filter(|c| c.key.protocol == *protocol);
            for (j, c) in members.enumerate() {
                let left = g as f64 - 0.4 + j as f64 * slot;
                let (x0, x1) = (left + slot * 0.1, left + slot * 0.9);
                let centre = (x0 + x1) / 2.0;
                let colour = colour_of(c);
                let Some(s) = summary(c) else {
                    // No bar is not a zero: say why there is none.
                    chart
                        .draw_series(std::iter::once(Text::new(
                            "not timed",
                            (centre, 0.0),
                            (FONT, 12)
                                .into_font()
                                .color(&BLACK)
                                .pos(Pos::new(HPos::Center, VPos::Bottom)),
                        )))
                        .map_err(chart_error)?;
                    continue;
                };
                let (min, median, max) = (s.min / scale, s.median / scale, s.max / scale);
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x0, 0.0), (x1, median)],
                        colour.filled(),
                    )))
                    .map_err(chart_error)?
                    .label(c.title())
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 14, y + 6)], colour.filled())
                    });
                let cap = slot * 0.15;
                let whisker = [
                    vec![(centre, min), (centre, max)],
                    vec![(centre - cap, min), (centre + cap, min)],
                    vec![(centre - cap, max), (centre + cap, max)],
                ];
                chart
                    .draw_series(
                        whisker
                            .into_iter()
                            .map(|path| PathElement::new(path, BLACK.stroke_width(2))),
                    )
                    .map_err(chart_error)?;
                // The median in its own unit above the whisker: a bar dwarfed by a faster
                // configuration's still reads as a figure.
                let text = match figure {
                    BarFigure::Goodput => {
                        let (scale, unit) = rate_unit(s.median);
                        format!("{} {unit}", three_digits(s.median / scale))
                    }
                    BarFigure::Time => {
                        let (scale, unit) = time_unit(s.median);
                        format!("{} {unit}", three_digits(s.median / scale))
                    }
                };
                let style = (FONT, 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom));
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((centre, max)) + Text::new(text, (0, -5), style),
                    ))
                    .map_err(chart_error)?;
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

/// A figure with three significant digits (whole numbers from 100 up): 7.35, 62.7, 0.0627, 512.
fn three_digits(v: f64) -> String {
    if v >= 100.0 || v <= 0.0 {
        format!("{v:.0}")
    } else {
        let decimals = (2.0 - v.log10().floor()).clamp(0.0, 9.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// "TCP", "UDP", "QUIC": the group labels of the bar charts.
fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Tcp => "TCP",
        Protocol::Udp => "UDP",
        Protocol::Quic => "QUIC",
    }
}

/// The unit a time axis reads in, chosen by its largest value (seconds): (divisor, name).
fn time_unit(max_s: f64) -> (f64, &'static str) {
    if max_s >= 2.0 {
        (1.0, "s")
    } else if max_s >= 2e-3 {
        (1e-3, "ms")
    } else {
        (1e-6, "µs")
    }
}

const RTT_FIGURES_CAPTION: &str = "Minimum, median, mean, 99th percentile and maximum round-trip time; each the median over the runs.";
const RTT_BY_SIZE_CAPTION: &str = "Median (thick, dots) and 99th percentile (thin, triangles) round-trip time against the message size; each the median over the runs.";

const PERCENTILES: [&str; 5] = ["min", "p50", "mean", "p99", "max"];

/// Round-trip-time figures of each stop-and-wait configuration (medians over runs), in µs on a
/// log scale (values below its floor are drawn on it);
/// with a single message size; against message size when there are several. Returns the SVG and
/// its caption; `None` when no configuration has any.
pub fn rtt_percentiles(configs: &[Configuration]) -> io::Result<Option<(String, &'static str)>> {
    let sizes = configs
        .iter()
        .filter(|c| c.rtt.is_some())
        .map(|c| c.key.msg_size)
        .collect::<std::collections::BTreeSet<u32>>();
    if sizes.len() > 1 {
        return rtt_by_size(configs).map(|svg| Some((svg, RTT_BY_SIZE_CAPTION)));
    }
    let series: Vec<(String, RGBColor, [f64; 5])> = configs
        .iter()
        .filter_map(|c| {
            let r = c.rtt.as_ref()?;
            Some((
                format!("{}, {} B", c.title(), c.key.msg_size),
                colour_of(c),
                [r.min_ns, r.p50_ns, r.mean_ns, r.p99_ns, r.max_ns].map(|ns| ns / 1000.0),
            ))
        })
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let values = || series.iter().flat_map(|(_, _, v)| v.iter().copied());
    // Log scale: minimum and tail differ by orders of magnitude.
    let y_hi = (values().fold(0.0f64, f64::max) * 2.0).max(1.0);
    let y_lo =
        (values().filter(|v| *v > 0.0).fold(f64::MAX, f64::min) / 2.0).clamp(0.01, y_hi / 10.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Stop-and-wait round-trip time (median over runs)",
                (FONT, 20),
            )
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(-1i32..5i32, log_axis(y_lo, y_hi, Y_AXIS_PX, Y_LABEL_GAP_PX))
            .map_err(chart_error)?;
        let label = |x: &i32| {
            usize::try_from(*x)
                .ok()
                .and_then(|i| PERCENTILES.get(i))
                .map_or_else(String::new, |s| (*s).to_string())
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(7)
            .x_label_formatter(&label)
            .x_desc("Round-trip figure of each run")
            .y_desc("Round-trip time (µs, log scale)")
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .y_label_formatter(&|y| log_label(*y))
            .draw()
            .map_err(chart_error)?;
        for (name, colour, figures) in &series {
            let points: Vec<(i32, f64)> =
                (0i32..).zip(figures.iter().map(|v| v.max(y_lo))).collect();
            line_with_dots(&mut chart, name, *colour, &points)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(chart_error)?;
    }
    Ok(Some((svg, RTT_FIGURES_CAPTION)))
}

/// Stop-and-wait round-trip time (p50 and p99, medians over runs) against message size on log
/// axes, one colour per protocol × mechanism: the form of the RTT chart for a size sweep.
fn rtt_by_size(configs: &[Configuration]) -> io::Result<String> {
    // (name, colour, is_p99, points)
    type RttSeries = (String, RGBColor, bool, Vec<(f64, f64)>);
    let mut series: Vec<RttSeries> = Vec::new();
    for c in configs {
        let Some(r) = &c.rtt else { continue };
        for (is_p99, ns) in [(false, r.p50_ns), (true, r.p99_ns)] {
            let name = format!("{} {}", c.title(), if is_p99 { "p99" } else { "p50" });
            let point = (f64::from(c.key.msg_size), ns / 1000.0);
            match series.iter_mut().find(|s| s.0 == name) {
                Some(s) => s.3.push(point),
                None => series.push((name, colour_of(c), is_p99, vec![point])),
            }
        }
    }
    for s in &mut series {
        s.3.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let all = || series.iter().flat_map(|s| s.3.iter().copied());
    let x_lo = (all().map(|p| p.0).fold(f64::MAX, f64::min) / 2.0).max(0.5);
    let x_hi = all().map(|p| p.0).fold(1.0, f64::max) * 2.0;
    let y_hi = (all().map(|p| p.1).fold(0.0, f64::max) * 3.0).max(1.0);
    let y_lo = (all()
        .map(|p| p.1)
        .filter(|v| *v > 0.0)
        .fold(f64::MAX, f64::min)
        / 2.0)
        .clamp(0.01, y_hi / 10.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Stop-and-wait round-trip time against message size",
                (FONT, 20),
            )
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(
                log_axis(x_lo, x_hi, X_AXIS_PX, X_LABEL_GAP_PX),
                log_axis(y_lo, y_hi, Y_AXIS_PX, Y_LABEL_GAP_PX),
            )
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc("Message size (bytes, log scale)")
            .y_desc("Round-trip time (µs, log scale)")
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .x_label_formatter(&|x| log_label(*x))
            .y_label_formatter(&|y| log_label(*y))
            .draw()
            .map_err(chart_error)?;
        for (name, colour, is_p99, points) in &series {
            let colour = *colour;
            // p50 solid and thick with dots; p99 thin with triangles.
            let width = if *is_p99 { 1 } else { 2 };
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(width)))
                .map_err(chart_error)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(width))
                });
            if *is_p99 {
                chart
                    .draw_series(
                        points
                            .iter()
                            .map(|&p| TriangleMarker::new(p, 5, colour.filled())),
                    )
                    .map_err(chart_error)?;
            } else {
                chart
                    .draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
                    .map_err(chart_error)?;
            }
        }
        chart
            .configure_series_labels()
            .label_font((FONT, 12))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(chart_error)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

/// Length of a chart's x axis in pixels, about (the width less margins and the y labels).
const X_AXIS_PX: f64 = 650.0;
/// Length of a chart's y axis in pixels, about (the height less margins, title and x labels).
const Y_AXIS_PX: f64 = 300.0;
/// Room from one x label to the next, pixels: "100000" is about 40 wide.
const X_LABEL_GAP_PX: f64 = 60.0;
/// Room from one y label to the next, pixels.
const Y_LABEL_GAP_PX: f64 = 22.0;

/// A log axis over `lo..hi`, `length_px` long, labelled at round values at least `gap_px`
/// apart: powers of ten, with 2 and 5 (or 3) between them when there is room, and a light grid
/// line at each whole multiple where that is not crowded. plotters' own log ticks label every
/// multiple of a decade (1000, 2000, …, 9000 and 10000 twice) when the axis spans under two
/// decades, and those labels collide.
fn log_axis(lo: f64, hi: f64, length_px: f64, gap_px: f64) -> WithKeyPoints<LogCoord<f64>> {
    let (labels, grid) = log_ticks(lo, hi, length_px, gap_px);
    (lo..hi)
        .log_scale()
        .with_key_points(labels)
        .with_light_points(grid)
}

/// The labelled values and the light grid values of [`log_axis`], each ascending.
fn log_ticks(lo: f64, hi: f64, length_px: f64, gap_px: f64) -> (Vec<f64>, Vec<f64>) {
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
fn log_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        let decimals = (-v.log10().floor()).clamp(1.0, 6.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// The unit a bit-rate axis reads in, chosen by its largest value: (divisor, name).
pub(super) fn rate_unit(max_bps: f64) -> (f64, &'static str) {
    if max_bps >= 1e9 {
        (1e9, "Gbit/s")
    } else if max_bps >= 1e6 {
        (1e6, "Mbit/s")
    } else {
        (1e3, "kbit/s")
    }
}

/// Tick labels with as many decimals as the axis range needs.
pub(super) fn tick(v: f64, range: f64) -> String {
    if range >= 20.0 {
        format!("{v:.0}")
    } else if range >= 2.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// What the client sent and the server read per interval of one run, against time since the
/// session started (each interval drawn at its middle).
pub fn throughput_over_time(t: &Timeline) -> io::Result<String> {
    let all = || t.client.iter().chain(t.server.iter());
    let t_hi = all().map(|i| i.end_s).fold(0.0f64, f64::max);
    let y_max = all().map(|i| i.bits_per_second).fold(0.0f64, f64::max);
    let (scale, unit) = rate_unit(y_max);
    // Short runs read better in milliseconds.
    let (t_scale, t_unit) = if t_hi < 2.0 { (1e3, "ms") } else { (1.0, "s") };
    let x_hi = (t_hi * t_scale * 1.02).max(1e-3);
    // Headroom above the highest interval keeps the legend (upper right) off the lines.
    let y_hi = if y_max > 0.0 {
        (y_max / scale * 1.4).max(1e-3)
    } else {
        1.0 // nothing moved: an axis of 0..1 rather than a degenerate one
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Throughput over time, run {}", t.run), (FONT, 20))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..x_hi, 0f64..y_hi)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc(format!("Time since the session started ({t_unit})"))
            .y_desc(format!("Throughput per interval ({unit})"))
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .x_label_formatter(&|x| tick(*x, x_hi))
            .y_label_formatter(&|y| tick(*y, y_hi))
            .draw()
            .map_err(chart_error)?;
        let points = |series: &[super::series::Interval]| -> Vec<(f64, f64)> {
            series
                .iter()
                .map(|i| {
                    (
                        (i.start_s + i.end_s) / 2.0 * t_scale,
                        i.bits_per_second / scale,
                    )
                })
                .collect()
        };
        if !t.client.is_empty() {
            line_with_dots(&mut chart, "Client sent", COLOURS[0], &points(&t.client))?;
        }
        if !t.server.is_empty() {
            // Triangles, so a server line lying on the client's stays visible.
            let colour = COLOURS[1];
            let server = points(&t.server);
            chart
                .draw_series(LineSeries::new(server.clone(), colour.stroke_width(2)))
                .map_err(chart_error)?
                .label("Server read")
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(
                    server
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 5, colour.filled())),
                )
                .map_err(chart_error)?;
        }
        // Rates ramp up from the left: the upper right stays clear.
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

/// Server loss (percent of the messages sent) against offered load (what the client sent) of
/// every UDP streaming run, one series per message size; `None` when there are no such runs.
pub fn loss_against_load(points: &[LossPoint]) -> io::Result<Option<String>> {
    if points.is_empty() {
        return Ok(None);
    }
    let x_max = points.iter().map(|p| p.offered_bps).fold(0.0f64, f64::max);
    let (scale, unit) = rate_unit(x_max);
    let series = group_series(points.iter().map(|p| {
        let name = format!("{} B messages", p.msg_size);
        (name, (p.offered_bps / scale, p.loss_pct))
    }));
    let y_max = points.iter().map(|p| p.loss_pct).fold(0.0f64, f64::max);
    percent_chart(
        &PercentChart {
            caption: "UDP streaming: server loss against offered load",
            x_desc: format!("Offered load: sent rate ({unit})"),
            y_desc: "Server loss (% of messages sent)",
            x_hi: (x_max / scale * 1.1).max(1e-3),
            y_max,
        },
        &series,
    )
    .map(Some)
}

/// DNS queries never answered (percent of those sent) against the queries outstanding per flow
/// (K) of every result of a `wirebench dns` campaign, one series per transport; `None` when
/// there are no results.
pub fn dns_timeouts_against_concurrency(
    points: &[super::dns::DnsPoint],
) -> io::Result<Option<String>> {
    if points.is_empty() {
        return Ok(None);
    }
    let series = group_series(points.iter().map(|p| {
        let name = p.transport.to_uppercase();
        (name, (f64::from(p.concurrency), p.timeout_pct))
    }));
    let x_max = points
        .iter()
        .map(|p| f64::from(p.concurrency))
        .fold(0.0f64, f64::max);
    let y_max = points.iter().map(|p| p.timeout_pct).fold(0.0f64, f64::max);
    percent_chart(
        &PercentChart {
            caption: "DNS: queries never answered against concurrency",
            x_desc: "Queries outstanding per flow (K)".to_string(),
            y_desc: "Timeouts (% of queries sent)",
            x_hi: (x_max * 1.1).max(2.0),
            y_max,
        },
        &series,
    )
    .map(Some)
}

/// `wirebench rr`: UDP requests lost and TCP/QUIC retransmissions (percent) against the
/// requests in flight per flow, one series each; `None` without points.
pub fn rr_repair_against_concurrency(points: &[super::rr::RrPoint]) -> io::Result<Option<String>> {
    if points.is_empty() {
        return Ok(None);
    }
    let series = group_series(
        points
            .iter()
            .map(|p| (p.series.clone(), (f64::from(p.concurrency), p.pct))),
    );
    let x_max = points
        .iter()
        .map(|p| f64::from(p.concurrency))
        .fold(0.0f64, f64::max);
    let y_max = points.iter().map(|p| p.pct).fold(0.0f64, f64::max);
    percent_chart(
        &PercentChart {
            caption: "Loss and retransmissions against requests in flight",
            x_desc: "Requests in flight per flow (K)".to_string(),
            y_desc: "Lost or retransmitted (% of sent)",
            x_hi: (x_max * 1.1).max(2.0),
            y_max,
        },
        &series,
    )
    .map(Some)
}

/// Named points grouped into series in the order the names first appear, each series sorted
/// by x, with a colour each.
fn group_series(points: impl Iterator<Item = (String, (f64, f64))>) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for (name, point) in points {
        match series.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, pts)) => pts.push(point),
            None => {
                let colour = COLOURS[series.len() % COLOURS.len()];
                series.push((name, colour, vec![point]));
            }
        }
    }
    for (_, _, pts) in &mut series {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// A chart of percentages (loss, timeouts) against some x, from 0.
struct PercentChart<'a> {
    caption: &'a str,
    x_desc: String,
    y_desc: &'a str,
    /// Right end of the x axis, in the series' units.
    x_hi: f64,
    /// Largest percentage drawn.
    y_max: f64,
}

/// Draws `series` (x already in the axis' units) as lines with dots and a legend upper left.
fn percent_chart(spec: &PercentChart<'_>, series: &[Series]) -> io::Result<String> {
    let x_hi = spec.x_hi;
    // Headroom keeps the legend (upper left) off the points; a floor of 0.1 % keeps clean
    // campaigns from stretching noise over the whole height.
    let y_hi = (spec.y_max * 1.5).max(0.1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(spec.caption, (FONT, 20))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..x_hi, 0f64..y_hi)
            .map_err(chart_error)?;
        chart
            .configure_mesh()
            .x_desc(spec.x_desc.as_str())
            .y_desc(spec.y_desc)
            .axis_desc_style((FONT, 15))
            .label_style((FONT, 13))
            .x_label_formatter(&|x| tick(*x, x_hi))
            .y_label_formatter(&|y| tick(*y, y_hi))
            .draw()
            .map_err(chart_error)?;
        for (name, colour, pts) in series {
            line_with_dots(&mut chart, name, *colour, pts)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(chart_error)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::series::Interval;

    #[test]
    fn log_axes_label_round_values_far_enough_apart() {
        // Sizes 1000 and 8000 (the axis runs from half the smallest to twice the largest).
        let (labels, grid) = log_ticks(500.0, 16000.0, X_AXIS_PX, X_LABEL_GAP_PX);
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
    fn bar_groups_get_one_label_each_at_their_centre() {
        use plotters::coord::types::RangedCoordf64;
        for groups in 1..=3usize {
            let axis: RangedCoordf64 = (-0.5..groups as f64 - 0.5).into();
            let expected: Vec<f64> = (0..groups).map(|g| g as f64).collect();
            assert_eq!(axis.key_points(groups), expected);
        }
    }

    #[test]
    fn degenerate_run_charts_still_draw() {
        // Nothing moved in any interval, and the server kept no series: an axis of 0..1.
        let t = Timeline {
            run: 2,
            label: "run 2".into(),
            client: vec![Interval {
                start_s: 0.0,
                end_s: 0.05,
                bits_per_second: 0.0,
            }],
            server: Vec::new(),
            udp_stream: false,
        };
        let svg = throughput_over_time(&t).unwrap();
        assert!(svg.contains("Throughput over time, run 2"));
        assert!(svg.contains("Client sent") && !svg.contains("Server read"));
        assert!(svg.contains("Time since the session started (ms)"));
        // No UDP streaming run: no loss chart.
        assert_eq!(loss_against_load(&[]).unwrap(), None);
        let one = LossPoint {
            msg_size: 1000,
            offered_bps: 2e8,
            loss_pct: 0.0,
        };
        let svg = loss_against_load(&[one])
            .unwrap()
            .expect("one point, one chart");
        assert!(svg.contains("Offered load: sent rate (Mbit/s)"));
        assert!(svg.contains("1000 B messages"));
    }
}
