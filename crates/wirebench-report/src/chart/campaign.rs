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

use super::axis::{rate_unit, three_digits, time_unit, Axis};
use super::plot::{self, Plot};
use super::series::{group, Mark, Marker, Palette, Series};
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
/// the UDP streaming runs of `loss`.
pub fn figures(
    configs: &[Configuration],
    timeline: Option<&Timeline>,
    loss: &[LossPoint],
) -> io::Result<Vec<Figure>> {
    let sizes: BTreeSet<u32> = configs.iter().map(|c| c.key.msg_size).collect();
    let mut out = Vec::new();
    for figured in [Figured::Goodput, Figured::Time] {
        let palette = &mut Palette::default();
        out.push(if sizes.len() <= 1 {
            bars(configs, figured, palette)?
        } else {
            against_size(configs, figured, palette)?
        });
    }
    if let Some(f) = round_trips(configs, &mut Palette::default())? {
        out.push(f);
    }
    if let Some(t) = timeline {
        out.push(throughput_over_time(t)?);
    }
    if let Some(f) = loss_against_load(loss)? {
        out.push(f);
    }
    Ok(out)
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

/// Grouped bars: one group per total (ascending), one bar per protocol × mechanism, each the
/// median of `figured` over the runs with a whisker from the minimum to the maximum.
fn bars(configs: &[Configuration], figured: Figured, palette: &mut Palette) -> io::Result<Figure> {
    let all: Vec<&Configuration> = configs.iter().collect();
    let totals: Vec<u64> = configs
        .iter()
        .map(|c| c.key.total_bytes)
        .collect::<BTreeSet<u64>>()
        .into_iter()
        .collect();
    let (scale, unit) = figured.unit(&all);
    let marks = configs.iter().map(|c| {
        let x = totals
            .iter()
            .position(|t| *t == c.key.total_bytes)
            .unwrap_or(0) as f64;
        let mark = match figured.summary(c) {
            Some(s) => Mark {
                x,
                y: Some(s.median / scale),
                spread: Some((s.min / scale, s.max / scale)),
                label: Some(match (figured, timed_note(c)) {
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
        };
        (c.title(), mark)
    });
    let series = group(marks, palette);
    let size = configs.first().map_or(0, |c| c.key.msg_size);
    let names: Vec<String> = totals.iter().map(|t| short_size(*t)).collect();
    let plot = Plot {
        title: format!("{}, {size}-byte messages", figured.what()),
        x: Axis::categories("Total per run (one bar per protocol × mechanism)", names),
        y: plot::y_from_zero(
            format!("{}, median and min–max ({unit})", figured.what()),
            &series,
            Some(totals.len()),
        ),
        bars: true,
        series: &series,
        notes: Vec::new(),
    };
    let caption = match figured {
        Figured::Goodput => format!(
            "Median goodput (what the receiver got over the transfer time) of each protocol × mechanism, per total; the whisker runs from the slowest to the fastest run.{}",
            untimed_sentence(&all)
        ),
        Figured::Time => "Median transfer time of each protocol × mechanism, per total; the whisker runs from the shortest to the longest run.".to_string(),
    };
    Ok(Figure {
        heading: format!("{} per total", figured.what()),
        svg: plot::svg(&plot)?,
        caption,
    })
}

/// The series name of a configuration on a chart whose x is the message size: protocol ×
/// mechanism, and its total when the report has several.
fn line_name(c: &Configuration, several_totals: bool) -> String {
    if several_totals {
        format!("{}, {}", c.title(), short_size(c.key.total_bytes))
    } else {
        c.title()
    }
}

fn several_totals(configs: &[&Configuration]) -> bool {
    configs
        .iter()
        .map(|c| c.key.total_bytes)
        .collect::<BTreeSet<u64>>()
        .len()
        > 1
}

/// `figured` against the message size (log scale), one line per protocol × mechanism ×
/// total: the median with a whisker from the minimum to the maximum; hollow where some runs
/// were too short to time, a cross on the axis where none was long enough.
fn against_size(
    configs: &[Configuration],
    figured: Figured,
    palette: &mut Palette,
) -> io::Result<Figure> {
    let all: Vec<&Configuration> = configs.iter().collect();
    let several = several_totals(&all);
    let (scale, unit) = figured.unit(&all);
    let marks = configs.iter().map(|c| {
        let x = f64::from(c.key.msg_size);
        let mark = match figured.summary(c) {
            Some(s) => Mark {
                x,
                y: Some(s.median / scale),
                spread: Some((s.min / scale, s.max / scale)),
                label: None,
                partial: figured == Figured::Goodput && c.untimed_runs > 0,
            },
            None => Mark {
                y: None,
                ..Mark::at(x, 0.0)
            },
        };
        (line_name(c, several), mark)
    });
    let series = group(marks, palette);
    let mut notes = Vec::new();
    if series.iter().flat_map(|s| &s.marks).any(|m| m.partial) {
        notes.push("hollow: some runs too short to time".to_string());
    }
    if series.iter().flat_map(|s| &s.marks).any(|m| m.y.is_none()) {
        notes.push("× on the axis: no run long enough to time".to_string());
    }
    let log_y = figured == Figured::Time && plot::spans_decades(&series);
    let y_desc = format!(
        "{}, median and min–max ({unit}{})",
        figured.what(),
        if log_y { ", log scale" } else { "" }
    );
    let plot = Plot {
        title: format!("{} against message size", figured.what()),
        x: plot::x_log("Message size (bytes, log scale)".into(), &series),
        y: if log_y {
            plot::y_log(y_desc, &series)
        } else {
            plot::y_from_zero(y_desc, &series, None)
        },
        bars: false,
        series: &series,
        notes,
    };
    let what = match figured {
        Figured::Goodput => "Median goodput (what the receiver got over the transfer time)",
        Figured::Time => "Median transfer time",
    };
    Ok(Figure {
        heading: format!("{} against message size", figured.what()),
        svg: plot::svg(&plot)?,
        caption: format!(
            "{what} of each protocol × mechanism{} against the message size (log scale); the whisker runs from the smallest to the largest run.{}",
            if several { " × total" } else { "" },
            if figured == Figured::Goodput {
                untimed_sentence(&all)
            } else {
                String::new()
            }
        ),
    })
}

const FIGURE_NAMES: [&str; 5] = ["min", "p50", "mean", "p99", "max"];

/// Stop-and-wait round trips, one series per protocol × mechanism × total: with one message
/// size, min / p50 / mean / p99 / max (each the median over the runs); with several, the median
/// round trip against the message size with a whisker from the shortest to the 99th
/// percentile. `None` without stop-and-wait runs.
fn round_trips(configs: &[Configuration], palette: &mut Palette) -> io::Result<Option<Figure>> {
    let with_rtt: Vec<&Configuration> = configs.iter().filter(|c| c.rtt.is_some()).collect();
    if with_rtt.is_empty() {
        return Ok(None);
    }
    let sizes: BTreeSet<u32> = with_rtt.iter().map(|c| c.key.msg_size).collect();
    let several = several_totals(&with_rtt);
    let us = |ns: f64| ns / 1000.0;
    let by_size = sizes.len() > 1;
    let marks = with_rtt.iter().flat_map(|c| {
        let name = line_name(c, several);
        let r = c.rtt.as_ref();
        let marks: Vec<Mark> = match r {
            Some(r) if by_size => vec![Mark {
                spread: Some((us(r.min_ns), us(r.p99_ns))),
                ..Mark::at(f64::from(c.key.msg_size), us(r.p50_ns))
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
    let (title, x, caption) = if by_size {
        (
            "Stop-and-wait round-trip time against message size".to_string(),
            plot::x_log("Message size (bytes, log scale)".into(), &series),
            "The median round trip (dot) of each stop-and-wait configuration against the message size, with a whisker from the shortest round trip to the 99th percentile; each the median over the runs.",
        )
    } else {
        (
            format!(
                "Stop-and-wait round-trip time, {}-byte messages",
                sizes.first().copied().unwrap_or(0)
            ),
            Axis::categories(
                "Round-trip figure of each run",
                FIGURE_NAMES.iter().map(|s| s.to_string()).collect(),
            ),
            "Minimum, median, mean, 99th percentile and maximum round-trip time of each stop-and-wait configuration; each the median over the runs.",
        )
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
        caption: caption.into(),
    }))
}

/// What the client sent and the server read per interval of one run, against time since the
/// session started (each interval drawn at its middle).
pub fn throughput_over_time(t: &Timeline) -> io::Result<Figure> {
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
    let mut palette = Palette::default();
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
/// `None` when there are no such runs.
pub fn loss_against_load(points: &[LossPoint]) -> io::Result<Option<Figure>> {
    if points.is_empty() {
        return Ok(None);
    }
    let x_max = points.iter().map(|p| p.offered_bps).fold(0.0f64, f64::max);
    let (scale, unit) = rate_unit(x_max);
    let totals: BTreeSet<u64> = points.iter().map(|p| p.total_bytes).collect();
    let mut palette = Palette::default();
    let series = group(
        points.iter().map(|p| {
            let name = if totals.len() > 1 {
                format!("{} B messages, {}", p.msg_size, short_size(p.total_bytes))
            } else {
                format!("{} B messages", p.msg_size)
            };
            (name, Mark::at(p.offered_bps / scale, p.loss_pct))
        }),
        &mut palette,
    );
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
