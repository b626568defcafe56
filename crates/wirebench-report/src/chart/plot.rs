//! Draws one chart of the series model with plotters' SVG backend: a title over the whole
//! figure, the plot with both axes described, and the legend in a panel of its own to the right
//! of the plot, so it never covers a data mark. Series are lines (dots, triangles or dashed)
//! or grouped bars; every mark may carry a min–max whisker, a hollow mark says its figure stands
//! for part of the runs, and a mark without a figure is marked ("×" on the axis, or "not timed"
//! in a bar's place), never left out. Owns layout only.

use std::io;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::attributes;
use super::axis::{Axis, Coord, X_AXIS_PX, Y_AXIS_PX};
use super::series::{Marker, Series};

/// The font of every text.
pub const FONT: &str = "sans-serif";
/// Width of the plot (axes and marks), pixels; the legend panel is added to its right.
pub const PLOT_WIDTH: u32 = 720;
/// Height of a chart, pixels (more when its legend needs more).
pub const HEIGHT: u32 = 420;
/// Height of one legend entry, pixels.
const LEGEND_ROW: i32 = 18;
/// Height of one line of a legend note, pixels.
const NOTE_ROW: i32 = 15;
/// About how wide one character of the legend's 13 px text is, pixels.
const CHAR_PX: f64 = 7.0;
/// About how wide one character of a 12 px value label is, pixels.
const LABEL_CHAR_PX: f64 = 6.6;

/// One chart.
#[derive(Debug, Clone)]
pub struct Plot<'a> {
    /// Its title.
    pub title: String,
    /// The x axis (a categorical one for bars).
    pub x: Axis,
    /// The y axis.
    pub y: Axis,
    /// Grouped bars (one group per category of x, one bar per series) instead of lines.
    pub bars: bool,
    /// The series, in legend order.
    pub series: &'a [Series],
    /// Lines under the legend's entries that explain marks: hollow, "×", dashed.
    pub notes: Vec<String>,
}

/// The error of a chart that cannot be drawn.
pub fn chart_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("cannot draw the chart: {e}"))
}

/// The chart as a standalone SVG element.
pub fn svg(plot: &Plot<'_>) -> io::Result<String> {
    let legend_width = legend_width(plot);
    let height = (HEIGHT as i32).max(legend_height(plot) + 80) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH + legend_width, height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(chart_error)?;
        let area = root.titled(&plot.title, (FONT, 20)).map_err(chart_error)?;
        draw(&area, plot)?;
        root.present().map_err(chart_error)?;
    }
    Ok(match svg.strip_prefix("<svg ") {
        Some(rest) => format!(
            "<svg {} {rest}",
            attributes::of(plot.bars, &plot.x, &plot.y, plot.series)
        ),
        None => svg,
    })
}

/// The width of `plot`'s legend panel, pixels: its longest entry, or a note (wrapped at 44
/// characters).
pub fn legend_width(plot: &Plot<'_>) -> u32 {
    let longest = plot
        .series
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let note = plot
        .notes
        .iter()
        .map(|n| n.chars().count().min(44))
        .max()
        .unwrap_or(0) as f64;
    (longest * CHAR_PX + 56.0)
        .max(note * 6.2 + 40.0)
        .clamp(170.0, 360.0) as u32
}

fn legend_height(plot: &Plot<'_>) -> i32 {
    let notes: usize = plot
        .notes
        .iter()
        .map(|n| wrap(n, note_chars(legend_width(plot))).len())
        .sum();
    plot.series.len() as i32 * LEGEND_ROW + notes as i32 * NOTE_ROW + 16
}

fn note_chars(legend_width: u32) -> usize {
    ((f64::from(legend_width) - 30.0) / 6.2).max(12.0) as usize
}

/// Draws `plot` (without its title) on `area`: the plot on the left, the legend on the right.
pub fn draw(area: &DrawingArea<SVGBackend<'_>, Shift>, plot: &Plot<'_>) -> io::Result<()> {
    let (plot_area, legend_area) = area.split_horizontally(PLOT_WIDTH);
    let (x, y) = (&plot.x, &plot.y);
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x.coord(), y.coord())
        .map_err(chart_error)?;
    let x_label = |v: &f64| x.label_at(*v);
    let y_label = |v: &f64| y.label_at(*v);
    let mut mesh = chart.configure_mesh();
    if !x.categories.is_empty() {
        mesh.disable_x_mesh();
    }
    mesh.x_desc(x.desc.as_str())
        .y_desc(y.desc.as_str())
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .draw()
        .map_err(chart_error)?;
    if plot.bars {
        draw_bars(&mut chart, plot)?;
    } else {
        // Whiskers of several series at one x would lie on each other: each series is moved
        // a few pixels aside (by its place in the legend).
        let whiskers = plot
            .series
            .iter()
            .flat_map(|s| &s.marks)
            .any(|m| m.spread.is_some());
        let n = plot.series.len();
        for (j, s) in plot.series.iter().enumerate() {
            let dodge = if whiskers && n > 1 {
                (j as f64 - (n - 1) as f64 / 2.0) * (x.hi - x.lo) * 4.0 / X_AXIS_PX
            } else {
                0.0
            };
            draw_line(&mut chart, plot, s, dodge)?;
        }
    }
    legend(&legend_area, plot)
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Coord, Coord>>;

/// One line series, `dodge` (drawn coordinates) aside: its segments (a mark without a figure
/// breaks the line), whiskers, marks.
fn draw_line(chart: &mut Chart<'_, '_>, plot: &Plot<'_>, s: &Series, dodge: f64) -> io::Result<()> {
    let (x, y) = (&plot.x, &plot.y);
    let at_x = |v: f64| x.at(v) + dodge;
    let colour = s.colour;
    let mut segment: Vec<(f64, f64)> = Vec::new();
    let mut segments = Vec::new();
    for m in &s.marks {
        match m.y {
            Some(v) => segment.push((at_x(m.x), y.at(v))),
            None => segments.push(std::mem::take(&mut segment)),
        }
    }
    segments.push(segment);
    for points in segments.into_iter().filter(|p| p.len() > 1) {
        if s.marker == Marker::Dashed {
            chart
                .draw_series(DashedLineSeries::new(points, 6, 4, colour.stroke_width(2)))
                .map_err(chart_error)?;
        } else {
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(chart_error)?;
        }
    }
    for m in &s.marks {
        let px = at_x(m.x);
        let Some(v) = m.y else {
            // No figure at this x: a cross on the axis says so.
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((px, y.lo)) + Cross::new((0, -7), 5, colour.stroke_width(2)),
                ))
                .map_err(chart_error)?;
            continue;
        };
        if let Some((lo, hi)) = m.spread {
            whisker(chart, px, y.at(lo), y.at(hi), colour)?;
        }
        let at = (px, y.at(v));
        if s.marker != Marker::Dashed {
            mark_shape(chart.plotting_area(), at, s.marker, m.partial, colour)?;
        }
        if let Some(text) = &m.label {
            let style = (FONT, 12)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center));
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at(at) + Text::new(text.clone(), (7, 0), style),
                ))
                .map_err(chart_error)?;
        }
    }
    Ok(())
}

/// The corners of a polygon marker `r` pixels about its centre; `None` for a dot.
pub fn corners(marker: Marker, r: i32) -> Option<Vec<(i32, i32)>> {
    Some(match marker {
        Marker::Dot | Marker::Dashed => return None,
        Marker::Triangle => vec![(0, -r - 1), (r + 1, r), (-r - 1, r)],
        Marker::InvertedTriangle => vec![(0, r + 1), (r + 1, -r), (-r - 1, -r)],
        Marker::Square => vec![(-r, -r), (r, -r), (r, r), (-r, r)],
        Marker::Diamond => vec![(0, -r - 1), (r + 1, 0), (0, r + 1), (-r - 1, 0)],
    })
}

/// Draws one mark's shape at `at` on `area`: its series' marker, filled, or white inside with a
/// coloured outline when `hollow` (the figure stands for part of the runs only). Shapes are
/// circles and polygons, never rectangles (those are the bars').
pub fn mark_shape<CT>(
    area: &DrawingArea<SVGBackend<'_>, CT>,
    at: CT::From,
    marker: Marker,
    hollow: bool,
    colour: RGBColor,
) -> io::Result<()>
where
    CT: plotters::coord::CoordTranslate,
    CT::From: Clone,
{
    let r = 4;
    match (corners(marker, r), hollow) {
        (None, false) => area
            .draw(&(EmptyElement::at(at) + Circle::new((0, 0), r, colour.filled())))
            .map_err(chart_error),
        (None, true) => {
            area.draw(&(EmptyElement::at(at.clone()) + Circle::new((0, 0), r, WHITE.filled())))
                .map_err(chart_error)?;
            area.draw(&(EmptyElement::at(at) + Circle::new((0, 0), r, colour.stroke_width(2))))
                .map_err(chart_error)
        }
        (Some(c), false) => area
            .draw(&(EmptyElement::at(at) + Polygon::new(c, colour.filled())))
            .map_err(chart_error),
        (Some(c), true) => {
            let mut ring = c.clone();
            ring.extend(c.first().copied());
            area.draw(&(EmptyElement::at(at.clone()) + Polygon::new(c, WHITE.filled())))
                .map_err(chart_error)?;
            area.draw(&(EmptyElement::at(at) + PathElement::new(ring, colour.stroke_width(2))))
                .map_err(chart_error)
        }
    }
}

/// A vertical whisker from `lo` to `hi` (drawn coordinates) at `x`, with caps.
fn whisker(
    chart: &mut Chart<'_, '_>,
    x: f64,
    lo: f64,
    hi: f64,
    colour: RGBColor,
) -> io::Result<()> {
    let style = colour.mix(0.9).stroke_width(1);
    chart
        .draw_series([
            EmptyElement::at((x, lo)) + PathElement::new(vec![(-4, 0), (4, 0)], style),
            EmptyElement::at((x, hi)) + PathElement::new(vec![(-4, 0), (4, 0)], style),
        ])
        .map_err(chart_error)?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(x, lo), (x, hi)],
            style,
        )))
        .map_err(chart_error)?;
    Ok(())
}

/// Whether bar value labels are turned upright: when the bars are too narrow for them.
pub fn bar_labels_upright(categories: usize, slots: usize, longest_label: usize) -> bool {
    let slot_px = X_AXIS_PX / categories.max(1) as f64 * 0.8 / slots.max(1) as f64;
    longest_label as f64 * LABEL_CHAR_PX > slot_px * 1.1
}

/// Pixels a bar's value label needs above its whisker.
pub fn bar_label_px(categories: usize, slots: usize, longest_label: usize) -> f64 {
    if bar_labels_upright(categories, slots, longest_label) {
        longest_label as f64 * LABEL_CHAR_PX + 12.0
    } else {
        20.0
    }
}

/// The longest value label of `series`, characters.
pub fn longest_label(series: &[Series]) -> usize {
    series
        .iter()
        .flat_map(|s| &s.marks)
        .map(|m| {
            m.label
                .as_ref()
                .map_or(if m.y.is_none() { 9 } else { 0 }, |l| l.chars().count())
        })
        .max()
        .unwrap_or(0)
}

/// Grouped bars: category c of x holds one slot per series (the same slot in every group), a
/// bar from zero to the figure, its whisker and its value above.
fn draw_bars(chart: &mut Chart<'_, '_>, plot: &Plot<'_>) -> io::Result<()> {
    let y = &plot.y;
    let slots = plot.series.len().max(1);
    let slot = 0.8 / slots as f64;
    let upright = bar_labels_upright(plot.x.categories.len(), slots, longest_label(plot.series));
    let label_style = |anchor| {
        let font = (FONT, 12).into_font();
        let font = if upright {
            font.transform(FontTransform::Rotate270)
        } else {
            font
        };
        font.color(&BLACK).pos(anchor)
    };
    for (j, s) in plot.series.iter().enumerate() {
        let colour = s.colour;
        for m in &s.marks {
            let left = m.x - 0.4 + j as f64 * slot;
            let (x0, x1) = (left + slot * 0.1, left + slot * 0.9);
            let centre = (x0 + x1) / 2.0;
            let Some(v) = m.y else {
                // No bar is not a zero: say why there is none.
                let anchor = if upright {
                    Pos::new(HPos::Left, VPos::Center)
                } else {
                    Pos::new(HPos::Center, VPos::Bottom)
                };
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((centre, y.lo))
                            + Text::new("not timed", (0, -4), label_style(anchor)),
                    ))
                    .map_err(chart_error)?;
                continue;
            };
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, y.at(0.0).max(y.lo)), (x1, y.at(v))],
                    colour.filled(),
                )))
                .map_err(chart_error)?;
            let mut top = y.at(v);
            if let Some((lo, hi)) = m.spread {
                whisker(chart, centre, y.at(lo), y.at(hi), BLACK)?;
                top = top.max(y.at(hi));
            }
            if let Some(text) = &m.label {
                let anchor = if upright {
                    Pos::new(HPos::Left, VPos::Center)
                } else {
                    Pos::new(HPos::Center, VPos::Bottom)
                };
                chart
                    .draw_series(std::iter::once(
                        EmptyElement::at((centre, top))
                            + Text::new(text.clone(), (0, -5), label_style(anchor)),
                    ))
                    .map_err(chart_error)?;
            }
        }
    }
    Ok(())
}

/// The legend panel: a black-bordered box with one entry per series (its swatch and name),
/// then the notes.
fn legend(area: &DrawingArea<SVGBackend<'_>, Shift>, plot: &Plot<'_>) -> io::Result<()> {
    if plot.series.is_empty() {
        return Ok(());
    }
    let (width, _) = area.dim_in_pixel();
    let right = width as i32 - 10;
    let top = 16;
    let bottom = top + legend_height(plot);
    area.draw(&Rectangle::new(
        [(4, top), (right, bottom)],
        BLACK.stroke_width(1),
    ))
    .map_err(chart_error)?;
    let text = (FONT, 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, s) in plot.series.iter().enumerate() {
        let y = top + 14 + i as i32 * LEGEND_ROW;
        let colour = s.colour;
        if plot.bars {
            area.draw(&Rectangle::new([(12, y - 6), (30, y + 6)], colour.filled()))
                .map_err(chart_error)?;
        } else if s.marker == Marker::Dashed {
            for x in [10, 20] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 6, y)],
                    colour.stroke_width(2),
                ))
                .map_err(chart_error)?;
            }
        } else {
            area.draw(&PathElement::new(
                vec![(10, y), (32, y)],
                colour.stroke_width(2),
            ))
            .map_err(chart_error)?;
            mark_shape(area, (21, y), s.marker, false, colour)?;
        }
        area.draw(&Text::new(s.name.clone(), (38, y), text.clone()))
            .map_err(chart_error)?;
    }
    let note = (FONT, 12)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = top + 14 + plot.series.len() as i32 * LEGEND_ROW;
    for line in plot.notes.iter().flat_map(|n| wrap(n, note_chars(width))) {
        area.draw(&Text::new(line, (12, y), note.clone()))
            .map_err(chart_error)?;
        y += NOTE_ROW;
    }
    Ok(())
}

/// `text` in lines of at most `chars` characters, broken at spaces.
fn wrap(text: &str, chars: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > chars {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The largest figure of `series` (whiskers included), and the smallest above zero.
pub fn extent(series: &[Series]) -> Option<(f64, f64)> {
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| &s.marks)
        .flat_map(|m| {
            m.y.into_iter()
                .chain(m.spread.into_iter().flat_map(|(lo, hi)| [lo, hi]))
        })
        .filter(|v| v.is_finite())
        .collect();
    let hi = values.iter().copied().fold(f64::NAN, f64::max);
    let lo = values
        .iter()
        .copied()
        .filter(|v| *v > 0.0)
        .fold(f64::NAN, f64::min);
    (!hi.is_nan()).then_some((if lo.is_nan() { hi } else { lo }, hi))
}

/// Whether the figures of `series` span so many orders of magnitude (20× or more) that a log
/// axis reads better.
pub fn spans_decades(series: &[Series]) -> bool {
    extent(series).is_some_and(|(lo, hi)| lo > 0.0 && hi / lo >= 20.0)
}

/// A y axis for `series` from zero to above the highest figure: lines get a tenth more, bars
/// room for their value labels.
pub fn y_from_zero(desc: String, series: &[Series], bars: Option<usize>) -> Axis {
    let top = extent(series).map_or(0.0, |(_, hi)| hi.max(0.0));
    let headroom = match bars {
        Some(categories) => {
            let px = bar_label_px(categories, series.len(), longest_label(series));
            1.0 / (1.0 - px / Y_AXIS_PX).max(0.35)
        }
        None => 1.1,
    };
    let hi = if top > 0.0 { top * headroom } else { 1.0 };
    Axis::linear(desc, 0.0, hi, Y_AXIS_PX, super::axis::Y_LABEL_GAP_PX)
}

/// A log y axis for `series`: from half the smallest figure to twice the largest.
pub fn y_log(desc: String, series: &[Series]) -> Axis {
    let (lo, hi) = extent(series).unwrap_or((1.0, 10.0));
    let hi = (hi * 2.0).max(1e-9);
    let lo = (lo / 2.0).clamp(hi * 1e-9, hi / 10.0);
    Axis::log(desc, lo, hi, Y_AXIS_PX, super::axis::Y_LABEL_GAP_PX)
}

/// A log y axis for bars over `categories`: [`y_log`] with room above the highest bar for
/// its value label.
pub fn y_log_bars(desc: String, series: &[Series], categories: usize) -> Axis {
    let axis = y_log(desc.clone(), series);
    let px = bar_label_px(categories, series.len(), longest_label(series));
    let share = (px / Y_AXIS_PX).min(0.65);
    // The top value lies a decade above its mark's log; room of `share` of the axis above it.
    let top = extent(series).map_or(axis.hi, |(_, hi)| hi.max(1e-9).log10());
    let hi = top + (top - axis.lo) * share / (1.0 - share);
    Axis::log(
        desc,
        10f64.powf(axis.lo),
        10f64.powf(hi.max(axis.hi)),
        Y_AXIS_PX,
        super::axis::Y_LABEL_GAP_PX,
    )
}

/// The x values of `series`: (smallest, largest).
pub fn x_extent(series: &[Series]) -> Option<(f64, f64)> {
    let xs = series.iter().flat_map(|s| &s.marks).map(|m| m.x);
    let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    (lo <= hi).then_some((lo, hi))
}

/// A log x axis for `series`: from half the smallest x to twice the largest.
pub fn x_log(desc: String, series: &[Series]) -> Axis {
    let (lo, hi) = x_extent(series).unwrap_or((1.0, 1.0));
    Axis::log(
        desc,
        (lo / 2.0).max(0.5),
        hi.max(1.0) * 2.0,
        X_AXIS_PX,
        super::axis::X_LABEL_GAP_PX,
    )
}

/// A linear x axis for `series` from zero to a little past the largest x.
pub fn x_from_zero(desc: String, series: &[Series]) -> Axis {
    let hi = x_extent(series).map_or(1.0, |(_, hi)| hi);
    let hi = if hi > 0.0 { hi * 1.06 } else { 1.0 };
    Axis::linear(desc, 0.0, hi, X_AXIS_PX, super::axis::X_LABEL_GAP_PX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::series::{Mark, Series, COLOURS};

    #[test]
    fn notes_wrap_at_spaces() {
        assert_eq!(
            wrap("hollow: some runs too short to time", 16),
            ["hollow: some", "runs too short", "to time"]
        );
        assert_eq!(wrap("", 10), Vec::<String>::new());
    }

    #[test]
    fn the_legend_sits_beside_the_plot_and_every_mark_is_drawn() {
        let series = [
            Series::new(
                "a",
                COLOURS[0],
                vec![
                    Mark::at(1.0, 2.0),
                    Mark {
                        y: None,
                        ..Mark::at(2.0, 0.0)
                    },
                    Mark {
                        partial: true,
                        spread: Some((1.0, 4.0)),
                        ..Mark::at(3.0, 3.0)
                    },
                ],
            ),
            Series::new("b", COLOURS[1], vec![Mark::at(1.0, 1.0)]),
        ];
        let plot = Plot {
            title: "t".into(),
            x: x_from_zero("x (s)".into(), &series),
            y: y_from_zero("y (%)".into(), &series, None),
            bars: false,
            series: &series,
            notes: vec!["hollow: part of the runs".into()],
        };
        let svg = svg(&plot).unwrap();
        // Two filled dots (a's first, b's), one ring (white inside, coloured outside), a cross.
        // And a dot on each of the two legend entries.
        assert_eq!(svg.matches("<circle").count(), 6, "{svg}");
        assert!(svg.contains("hollow: part of the runs"));
        assert!((y_from_zero("y".into(), &series, None).hi - 4.4).abs() < 1e-9);
        assert_eq!(extent(&series), Some((1.0, 4.0)));
        assert!(!spans_decades(&series));
        // The shape in the <svg> element itself (attributes.rs).
        assert!(svg.starts_with("<svg class=\"wb-chart\" data-kind=\"lines\""));
    }
}
