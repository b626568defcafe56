//! The charts of a transfer report, chosen by the shape of what was measured: one message size
//! (any number of totals) gets grouped bars per total of goodput and of transfer time, a sweep
//! of message sizes gets goodput and transfer time against message size with one line per
//! protocol × mechanism × total; stop-and-wait round trips per total; throughput over time of
//! one run; UDP loss against offered load. Every chart is built from the series model; every
//! median, minimum and maximum comes from the result model's summaries.

use std::collections::BTreeSet;
use std::io;

use wirebench_core::record::summary::ConfigurationSummary as Configuration;
use wirebench_core::record::MIN_TIMED_NS;
use wirebench_core::vocab::stats::Summary;

use super::axis::{rate_unit, three_digits, time_unit, Axis, X_AXIS_PX, X_LABEL_GAP_PX};
use super::plot::{self, Plot};
use super::series::{group, Mark, Marker, Palette, Series};
use super::shape::{Dim, Shape};
use super::Figure;
use crate::model::short_size;
use crate::series::{LossPoint, Timeline};

/// Which figure of a configuration a chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Figured {
    Goodput,
    Time,
}

impl Figured {
    fn summary(self, c: &Configuration) -> Option<Summary> {
        match self {
            Figured::Goodput => c.goodput_bps,
            Figured::Time => Some(c.seconds),
        }
        // A hand-made import could hold any number; only real figures are drawable.
        .filter(|s| {
            [s.min, s.median, s.max]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0)
        })
    }

    /// (divisor, unit) of the axis over `configs`.
    fn unit(self, configs: &[&Configuration]) -> (f64, &'static str) {
        let top = configs
            .iter()
            .filter_map(|c| self.summary(c))
            .map(|s| s.max)
            .fold(0.0f64, f64::max);
        match self {
            Figured::Goodput => rate_unit(top),
            Figured::Time => time_unit(top),
        }
    }

    fn what(self) -> &'static str {
        match self {
            Figured::Goodput => "Goodput",
            Figured::Time => "Transfer time",
        }
    }

    /// The median in a unit of its own: a bar dwarfed by a faster one still reads as a figure.
    fn value_text(self, v: f64) -> String {
        let (scale, unit) = match self {
            Figured::Goodput => rate_unit(v),
            Figured::Time => time_unit(v),
        };
        format!("{} {unit}", three_digits(v / scale))
    }
}

/// The charts of a report over `configs` (the plan's order), with the run `timeline` shows and
/// the UDP streaming runs of `loss`. One palette colours the whole page: a series keeps its
/// colour and marker from chart to chart, and no colour stands for two series.
pub fn figures(
    configs: &[Configuration],
    timeline: Option<&Timeline>,
    loss: &[LossPoint],
) -> io::Result<Vec<Figure>> {
    let all: Vec<&Configuration> = configs.iter().collect();
    let shape = Shape::of(&all);
    let palette = &mut Palette::default();
    let mut out = Vec::new();
    for figured in [Figured::Goodput, Figured::Time] {
        out.push(if shape.lines() {
            against(configs, figured, &shape, palette)?
        } else {
            bars(configs, figured, &shape, palette)?
        });
    }
    if let Some(f) = round_trips(configs, &shape, palette)? {
        out.push(f);
    }
    if let Some(t) = timeline {
        out.push(throughput_over_time(t, palette)?);
    }
    if let Some(f) = loss_against_load(loss, palette)? {
        out.push(f);
    }
    Ok(out)
}

/// A y axis for `figured` over `series`: a log one where the figures span decades (streaming
/// and stop-and-wait times side by side), from zero otherwise.
fn y_axis(figured: Figured, unit: &str, series: &[Series], bars: Option<usize>) -> (Axis, bool) {
    let log = plot::spans_decades(series);
    let desc = format!(
        "{}, median and min–max ({unit}{})",
        figured.what(),
        if log { ", log scale" } else { "" }
    );
    if log {
        let axis = match bars {
            Some(categories) => plot::y_log_bars(desc, series, categories),
            None => plot::y_log(desc, series),
        };
        (axis, true)
    } else {
        (plot::y_from_zero(desc, series, bars), false)
    }
}

/// The mark of `figured` of `c` at `x`: the median with a whisker from the minimum to the
/// maximum, or a place marked "no figure".
fn mark(c: &Configuration, figured: Figured, x: f64, scale: f64, labelled: bool) -> Mark {
    match figured.summary(c) {
        Some(s) => Mark {
            x,
            y: Some(s.median / scale),
            spread: Some((s.min / scale, s.max / scale)),
            label: labelled.then(|| match (figured, timed_note(c)) {
                (Figured::Goodput, Some(note)) => {
                    format!("{} ({note})", figured.value_text(s.median))
                }
                _ => figured.value_text(s.median),
            }),
            partial: figured == Figured::Goodput && c.untimed_runs > 0,
        },
        None => Mark {
            y: None,
            ..Mark::at(x, 0.0)
        },
    }
}

/// "3 of 10 timed" when some runs of `c` were too short to time.
fn timed_note(c: &Configuration) -> Option<String> {
    (c.untimed_runs > 0).then(|| format!("{} of {} timed", c.runs - c.untimed_runs, c.runs))
}

/// The sentence of a caption that names the configurations with runs too short to time.
fn untimed_sentence(configs: &[&Configuration]) -> String {
    let partly: Vec<String> = configs
        .iter()
        .filter(|c| c.untimed_runs > 0)
        .map(|c| {
            format!(
                "{} at {} B × {}: {} of {} runs",
                c.title(),
                c.key.msg_size,
                short_size(c.key.total_bytes),
                c.untimed_runs,
                c.runs
            )
        })
        .collect();
    if partly.is_empty() {
        String::new()
    } else {
        format!(
            " Too short to time (under {} ms), so left out of the goodput: {}.",
            MIN_TIMED_NS / 1_000_000,
            partly.join("; ")
        )
    }
}

/// Grouped bars: one group per value of x (ascending; the one total when nothing was swept),
/// one bar per series, each the median of `figured` over the runs with a whisker from the
/// minimum to the maximum.
fn bars(
    configs: &[Configuration],
    figured: Figured,
    shape: &Shape,
    palette: &mut Palette,
) -> io::Result<Figure> {
    let all: Vec<&Configuration> = configs.iter().collect();
    let (scale, unit) = figured.unit(&all);
    let marks = configs
        .iter()
        .map(|c| (shape.name(c), mark(c, figured, shape.x_of(c), scale, true)));
    let series = group(marks, palette);
    let names: Vec<String> = shape.x_values.iter().map(|v| shape.x_label(*v)).collect();
    let (y, _) = y_axis(figured, unit, &series, Some(names.len()));
    let per = match shape.one_size(&all) {
        Some(size) => format!(", {size}-byte messages"),
        None => String::new(),
    };
    let x_desc = format!(
        "{} (one bar per {})",
        match shape.x {
            Some(Dim::Size) => "Message size",
            _ => "Total per run",
        },
        shape.series_words()
    );
    let plot = Plot {
        title: format!("{}{per}", figured.what()),
        x: Axis::categories(x_desc, names),
        y,
        bars: true,
        series: &series,
        notes: Vec::new(),
    };
    let what = match figured {
        Figured::Goodput => "Median goodput (what the receiver got over the transfer time)",
        Figured::Time => "Median transfer time",
    };
    let caption = format!(
        "{what} of each {}, per {}; the whisker runs from the smallest to the largest run.{}",
        shape.series_words(),
        shape.x_words(),
        if figured == Figured::Goodput {
            untimed_sentence(&all)
        } else {
            String::new()
        }
    );
    Ok(Figure {
        heading: format!("{} per {}", figured.what(), shape.x_words()),
        svg: plot::svg(&plot)?,
        caption,
    })
}

/// The x axis of a line chart along `shape`'s dimension: the message size on a log axis, or the
/// total (log where the totals span decades) labelled with the totals measured.
fn x_axis(shape: &Shape, series: &[Series]) -> Axis {
    match shape.x {
        Some(Dim::Total) => {
            let values: Vec<(f64, String)> = shape
                .x_values
                .iter()
                .map(|v| (*v as f64, shape.x_label(*v)))
                .collect();
            let lo = shape.x_values.first().copied().unwrap_or(1) as f64;
            let hi = shape.x_values.last().copied().unwrap_or(1) as f64;
            let axis = if lo > 0.0 && hi / lo >= 20.0 {
                Axis::log(
                    "Total per run (bytes, log scale)",
                    lo / 1.5,
                    hi * 1.5,
                    X_AXIS_PX,
                    X_LABEL_GAP_PX,
                )
            } else {
                plot::x_from_zero("Total per run (bytes)".into(), series)
            };
            axis.labelled_at(&values, X_AXIS_PX, X_LABEL_GAP_PX)
        }
        _ => plot::x_log("Message size (bytes, log scale)".into(), series),
    }
}

/// `figured` against x (the swept dimension with the most values), one line per series: the
/// median with a whisker from the minimum to the maximum; hollow where some runs were too
/// short to time, a cross on the axis where none was long enough.
fn against(
    configs: &[Configuration],
    figured: Figured,
    shape: &Shape,
    palette: &mut Palette,
) -> io::Result<Figure> {
    let all: Vec<&Configuration> = configs.iter().collect();
    let (scale, unit) = figured.unit(&all);
    let marks = configs
        .iter()
        .map(|c| (shape.name(c), mark(c, figured, shape.x_of(c), scale, false)));
    let series = group(marks, palette);
    let mut notes = Vec::new();
    if series.iter().flat_map(|s| &s.marks).any(|m| m.partial) {
        notes.push("hollow: some runs too short to time".to_string());
    }
    if series.iter().flat_map(|s| &s.marks).any(|m| m.y.is_none()) {
        notes.push("× on the axis: no run long enough to time".to_string());
    }
    let (y, _) = y_axis(figured, unit, &series, None);
    let x = x_axis(shape, &series);
    let plot = Plot {
        title: format!("{} against {}", figured.what(), shape.x_words()),
        x,
        y,
        bars: false,
        series: &series,
        notes,
    };
    let what = match figured {
        Figured::Goodput => "Median goodput (what the receiver got over the transfer time)",
        Figured::Time => "Median transfer time",
    };
    Ok(Figure {
        heading: format!("{} against {}", figured.what(), shape.x_words()),
        svg: plot::svg(&plot)?,
        caption: format!(
            "{what} of each {} against the {}; the whisker runs from the smallest to the largest run.{}",
            shape.series_words(),
            shape.x_words(),
            if figured == Figured::Goodput {
                untimed_sentence(&all)
            } else {
                String::new()
            }
        ),
    })
}

const FIGURE_NAMES: [&str; 5] = ["min", "p50", "mean", "p99", "max"];

/// Stop-and-wait round trips, one series per stop-and-wait series of the page's shape: along
/// its x axis, the median round trip with a whisker from the shortest to the 99th percentile;
/// with nothing swept, min / p50 / mean / p99 / max of each (each the median over the runs).
/// `None` without stop-and-wait runs.
fn round_trips(
    configs: &[Configuration],
    shape: &Shape,
    palette: &mut Palette,
) -> io::Result<Option<Figure>> {
    let with_rtt: Vec<&Configuration> = configs.iter().filter(|c| c.rtt.is_some()).collect();
    if with_rtt.is_empty() {
        return Ok(None);
    }
    let us = |ns: f64| ns / 1000.0;
    let marks = with_rtt.iter().flat_map(|c| {
        let name = shape.name(c);
        let marks: Vec<Mark> = match c.rtt.as_ref() {
            Some(r) if shape.x.is_some() => vec![Mark {
                spread: Some((us(r.min_ns), us(r.p99_ns))),
                ..Mark::at(shape.x_of(c), us(r.p50_ns))
            }],
            Some(r) => [r.min_ns, r.p50_ns, r.mean_ns, r.p99_ns, r.max_ns]
                .iter()
                .enumerate()
                .map(|(i, ns)| Mark::at(i as f64, us(*ns)))
                .collect(),
            None => Vec::new(),
        };
        marks.into_iter().map(move |m| (name.clone(), m))
    });
    let series = group(marks, palette);
    let y = plot::y_log("Round-trip time (µs, log scale)".into(), &series);
    let size = shape
        .one_size(&with_rtt)
        .map_or_else(String::new, |s| format!(", {s}-byte messages"));
    let (title, x, caption) = match shape.x {
        Some(_) => (
            format!(
                "Stop-and-wait round-trip time {} {}{size}",
                if shape.lines() { "against" } else { "per" },
                shape.x_words()
            ),
            if shape.lines() {
                x_axis(shape, &series)
            } else {
                let names = shape.x_values.iter().map(|v| shape.x_label(*v)).collect();
                Axis::categories(format!("{} per run", capitalised(shape.x_words())), names)
            },
            format!("The median round trip (mark) of each stop-and-wait {} against the {}, with a whisker from the shortest round trip to the 99th percentile; each the median over the runs.", shape.series_words(), shape.x_words()),
        ),
        None => (
            format!("Stop-and-wait round-trip time{size}"),
            Axis::categories(
                "Round-trip figure of each run",
                FIGURE_NAMES.iter().map(|s| s.to_string()).collect(),
            ),
            "Minimum, median, mean, 99th percentile and maximum round-trip time of each stop-and-wait configuration; each the median over the runs.".to_string(),
        ),
    };
    let plot = Plot {
        title,
        x,
        y,
        bars: false,
        series: &series,
        notes: Vec::new(),
    };
    Ok(Some(Figure {
        heading: "Stop-and-wait round-trip time".into(),
        svg: plot::svg(&plot)?,
        caption,
    }))
}

fn capitalised(words: &str) -> String {
    let mut c = words.chars();
    c.next()
        .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// What the client sent and the server read per interval of one run, against time since the
/// session started (each interval drawn at its middle).
pub fn throughput_over_time(t: &Timeline, palette: &mut Palette) -> io::Result<Figure> {
    let all = || t.client.iter().chain(t.server.iter());
    let t_hi = all().map(|i| i.end_s).fold(0.0f64, f64::max);
    let y_max = all().map(|i| i.bits_per_second).fold(0.0f64, f64::max);
    let (scale, unit) = rate_unit(y_max);
    // Short runs read better in milliseconds.
    let (t_scale, t_unit) = if t_hi < 2.0 { (1e3, "ms") } else { (1.0, "s") };
    let points = |series: &[crate::series::Interval]| -> Vec<Mark> {
        series
            .iter()
            .map(|i| {
                Mark::at(
                    (i.start_s + i.end_s) / 2.0 * t_scale,
                    i.bits_per_second / scale,
                )
            })
            .collect()
    };
    let mut series = Vec::new();
    if !t.client.is_empty() {
        series.push(Series::new(
            "Client sent",
            palette.of("Client sent"),
            points(&t.client),
        ));
    }
    if !t.server.is_empty() {
        // Triangles, so a server line lying on the client's stays visible.
        series.push(
            Series::new("Server read", palette.of("Server read"), points(&t.server))
                .with_marker(Marker::Triangle),
        );
    }
    let plot = Plot {
        title: format!("Throughput over time, {}", t.name()),
        x: plot::x_from_zero(
            format!("Time since the session started ({t_unit})"),
            &series,
        ),
        y: plot::y_from_zero(format!("Throughput per interval ({unit})"), &series, None),
        bars: false,
        series: &series,
        notes: Vec::new(),
    };
    Ok(Figure {
        heading: "Throughput over time".into(),
        svg: plot::svg(&plot)?,
        caption: format!(
            "Bit rate per interval of {}: what the client sent and what the server read{} (wirebench report --run N picks another run).",
            t.label,
            if t.udp_stream {
                "; the intervals at zero after the last datagram are the grace period, while the server waits for late datagrams (--grace)"
            } else {
                ""
            }
        ),
    })
}

/// Server loss (percent of the messages sent) against offered load (what the client sent) of
/// every UDP streaming run, one line per message size × total, joined in order of load;
/// `None` when no line would have two points (no runs, or one timed run per line): a point
/// alone is no curve, and the tables give its loss.
pub fn loss_against_load(
    points: &[LossPoint],
    palette: &mut Palette,
) -> io::Result<Option<Figure>> {
    if points.is_empty() {
        return Ok(None);
    }
    let x_max = points.iter().map(|p| p.offered_bps).fold(0.0f64, f64::max);
    let (scale, unit) = rate_unit(x_max);
    let totals: BTreeSet<u64> = points.iter().map(|p| p.total_bytes).collect();
    let series = group(
        points.iter().map(|p| {
            let mut name = if totals.len() > 1 {
                format!("{} B messages, {}", p.msg_size, short_size(p.total_bytes))
            } else {
                format!("{} B messages", p.msg_size)
            };
            if let Some(site) = &p.site {
                name.push_str(&format!(" on {site}"));
            }
            (name, Mark::at(p.offered_bps / scale, p.loss_pct))
        }),
        palette,
    );
    if series.iter().all(|s| s.marks.len() < 2) {
        return Ok(None);
    }
    let plot = Plot {
        title: "UDP streaming: server loss against offered load".into(),
        x: plot::x_from_zero(format!("Offered load: sent rate ({unit})"), &series),
        y: plot::y_from_zero("Server loss (% of messages sent)".into(), &series, None),
        bars: false,
        series: &series,
        notes: Vec::new(),
    };
    Ok(Some(Figure {
        heading: "UDP loss against load".into(),
        svg: plot::svg(&plot)?,
        caption: "Each UDP streaming run: messages the receiver never got, as a share of those sent, against the rate they were sent at; one line per message size (and total), joined in order of load.".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::shape::tests::config;
    use wirebench_core::vocab::plan::{Mechanism, Protocol};

    /// The fill colours of a chart's legend swatches and data marks, by series name: the
    /// legend lists names in order, and `group` gives each its palette colour.
    fn colour_of(svg: &str, name: &str, palette: &mut Palette) -> bool {
        let c = palette.of(name);
        let hex = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        svg.contains(name) && svg.contains(&hex)
    }

    /// Protocols × mechanisms at 500 MiB and 1 GiB: the bars and the round-trip chart of one
    /// page give "UDP Streaming" and "UDP Stop and Wait" one colour each, never the other's.
    #[test]
    fn two_charts_on_one_page_give_a_series_the_same_colour() {
        let mut configs = Vec::new();
        for total in [500 << 20, 1 << 30] {
            for (p, m) in [
                (Protocol::Tcp, Mechanism::Stream),
                (Protocol::Udp, Mechanism::Stream),
                (Protocol::Udp, Mechanism::StopAndWait),
            ] {
                configs.push(config(p, m, 1000, total, 1.0));
            }
        }
        let figures = figures(&configs, None, &[]).unwrap();
        let titles: Vec<&str> = figures.iter().map(|f| f.heading.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Goodput per total",
                "Transfer time per total",
                "Stop-and-wait round-trip time"
            ]
        );
        // The page's palette, replayed in the order the charts asked for names.
        let mut palette = Palette::default();
        for name in ["TCP Streaming", "UDP Streaming", "UDP Stop and Wait"] {
            palette.of(name);
        }
        let saw = palette.of("UDP Stop and Wait");
        let udp = palette.of("UDP Streaming");
        assert_ne!(saw, udp);
        for f in &figures {
            assert!(
                colour_of(&f.svg, "UDP Stop and Wait", &mut palette),
                "{}",
                f.heading
            );
        }
        // The round-trip chart is per total, with the bars' series names: no new colour.
        assert!(figures[2].svg.contains("500 MiB") && figures[2].svg.contains("1 GiB"));
        assert!(!figures[2].svg.contains("UDP Stop and Wait, 500 MiB"));
        let udp_hex = format!("#{:02X}{:02X}{:02X}", udp.0, udp.1, udp.2);
        assert!(
            !figures[2].svg.contains(&udp_hex),
            "the streaming colour is not reused"
        );
    }

    /// Streaming in milliseconds beside stop-and-wait in seconds: the time bars are on a log
    /// axis, so the streaming bars are not squashed to nothing; goodput within 20× stays
    /// linear.
    #[test]
    fn time_bars_spanning_decades_get_a_log_axis() {
        let configs = [
            config(Protocol::Tcp, Mechanism::Stream, 1000, 500 << 20, 0.5),
            config(Protocol::Udp, Mechanism::StopAndWait, 1000, 500 << 20, 60.0),
        ];
        let apart = figures(&configs, None, &[]).unwrap();
        assert!(apart[1]
            .svg
            .contains("Transfer time, median and min–max (s, log scale)"));
        // 500 MiB in 0.5 s and in 60 s: 8.4 Gbit/s and 70 Mbit/s, over a hundredfold.
        assert!(apart[0].svg.contains("log scale"));
        let close = [
            config(Protocol::Tcp, Mechanism::Stream, 1000, 500 << 20, 0.5),
            config(Protocol::Udp, Mechanism::Stream, 1000, 500 << 20, 2.0),
        ];
        let near = figures(&close, None, &[]).unwrap();
        assert!(!near[0].svg.contains("log scale"), "4× apart: linear");
        assert!(!near[1].svg.contains("log scale"));
    }

    /// Totals 1 MB … 2 GB with TCP at 65535 B and UDP at 32767 B: time and goodput against the
    /// total, on a log axis labelled "2 GB", one series per protocol × mechanism (the size
    /// names it, it does not split the axis).
    #[test]
    fn a_totals_campaign_charts_against_total_with_one_series_per_protocol_and_mechanism() {
        let totals = [
            1_000_000u64,
            10_000_000,
            100_000_000,
            1_000_000_000,
            2_000_000_000,
        ];
        let mut configs = Vec::new();
        for total in totals {
            for (p, m, size) in [
                (Protocol::Tcp, Mechanism::Stream, 65535),
                (Protocol::Tcp, Mechanism::StopAndWait, 65535),
                (Protocol::Udp, Mechanism::Stream, 32767),
                (Protocol::Udp, Mechanism::StopAndWait, 32767),
            ] {
                configs.push(config(p, m, size, total, total as f64 / 1e8));
            }
        }
        let figures = figures(&configs, None, &[]).unwrap();
        let titles: Vec<&str> = figures.iter().map(|f| f.heading.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Goodput against total",
                "Transfer time against total",
                "Stop-and-wait round-trip time"
            ]
        );
        let time = &figures[1].svg;
        for name in [
            "TCP Streaming, 65535 B",
            "TCP Stop and Wait, 65535 B",
            "UDP Streaming, 32767 B",
            "UDP Stop and Wait, 32767 B",
        ] {
            assert_eq!(time.matches(&format!(">\n{name}\n<")).count(), 1, "{name}");
        }
        // Four lines and four legend strokes (the axes and whiskers are thinner).
        assert_eq!(
            time.matches("stroke-width=\"2\" points=").count(),
            8,
            "{time}"
        );
        assert!(time.contains("Total per run (bytes, log scale)"));
        assert!(time.contains("2 GB") && time.contains("1 MB"));
        assert!(!time.contains("KiB"));
        assert!(
            time.contains("log scale"),
            "times over three decades: a log y axis"
        );
    }
}
