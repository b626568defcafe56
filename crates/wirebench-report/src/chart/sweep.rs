//! The charts of the request sweeps, `wirebench rr` and `wirebench dns`, over the series model:
//! what each transport had to repair (UDP requests or queries lost, TCP/QUIC packets sent
//! again) on one chart as the load grows, response times with their spread, and requests per
//! second. The load is the requests in flight per flow, or the number of flows when only that
//! varies. Owns chart layout only; every figure comes from the stored records.

use std::collections::BTreeSet;
use std::io;

use wirebench_core::record::dns::DnsResult;
use wirebench_core::record::rr::RrResult;
use wirebench_core::record::RttFigures;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::dns::DnsTransport;

use super::plot::{self, Plot};
use super::series::{group, Mark, Palette};
use super::Figure;

/// What the x axis of a sweep's charts counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Load {
    /// Requests (queries) outstanding per flow, K.
    InFlight,
    /// Flows (connections or sockets), when only they vary.
    Flows,
}

impl Load {
    /// The load of a sweep whose results ran at these (flows, K).
    pub fn of(points: impl Iterator<Item = (u32, u32)>) -> Load {
        let (flows, ks): (BTreeSet<u32>, BTreeSet<u32>) = points.unzip();
        if ks.len() <= 1 && flows.len() > 1 {
            Load::Flows
        } else {
            Load::InFlight
        }
    }

    /// Whether the sweep ran at more than one load: with one, an "against" chart would be a
    /// point per series, so the table says it instead.
    pub fn varies(points: impl Iterator<Item = (u32, u32)>) -> bool {
        let (flows, ks): (BTreeSet<u32>, BTreeSet<u32>) = points.unzip();
        flows.len() > 1 || ks.len() > 1
    }

    /// The x axis of a chart against this load: whole numbers only (no half a flow).
    fn axis(self, what: &str, series: &[super::series::Series]) -> super::axis::Axis {
        plot::x_from_zero(self.desc(what), series).integers()
    }

    fn x(self, flows: u32, k: u32) -> f64 {
        f64::from(match self {
            Load::InFlight => k,
            Load::Flows => flows,
        })
    }

    fn desc(self, what: &str) -> String {
        match self {
            Load::InFlight => format!("{what} in flight per flow (K, count)"),
            Load::Flows => "Flows (connections or sockets, count)".to_string(),
        }
    }

    /// "the requests in flight per flow" (`plural` "requests"; "queries" for DNS).
    fn words(self, plural: &str) -> String {
        match self {
            Load::InFlight => format!("the {plural} in flight per flow"),
            Load::Flows => "the number of flows".to_string(),
        }
    }
}

/// The charts of an rr sweep: loss and retransmissions, response time, requests per second.
/// `labels` (one per result, or none) name the sweep each result came from where pooled
/// sweeps would otherwise put two points of one series at one load ("TCP, ping sweep 1").
pub fn rr(results: &[RrResult], labels: &[String]) -> io::Result<Vec<Figure>> {
    if !Load::varies(results.iter().map(|r| (r.flows, r.concurrency))) {
        return Ok(one_load(results)?.into_iter().collect());
    }
    let load = Load::of(results.iter().map(|r| (r.flows, r.concurrency)));
    let flows: BTreeSet<u32> = results.iter().map(|r| r.flows).collect();
    // With both varying, K is on x and each number of flows is a series of its own.
    let suffix = |r: &RrResult| {
        if load == Load::InFlight && flows.len() > 1 {
            format!(", {} flows", r.flows)
        } else {
            String::new()
        }
    };
    let proto = |r: &RrResult| {
        let p = match r.protocol {
            Protocol::Udp => "UDP",
            Protocol::Tcp => "TCP",
            Protocol::Quic => "QUIC",
        };
        // Results are compared by address: `r` is one of `results`.
        let label = results
            .iter()
            .position(|x| std::ptr::eq(x, r))
            .and_then(|i| labels.get(i))
            .filter(|l| !l.is_empty())
            .map_or_else(String::new, |l| format!(", {l}"));
        format!(
            "{p}{}{}{label}",
            new_connection(r.new_connection),
            suffix(r)
        )
    };
    // One palette for the page: a protocol keeps its colour and shape on every chart.
    let mut palette = Palette::default();
    let mut out = Vec::new();
    let mut repair = group(
        results.iter().filter_map(|r| {
            Some((
                proto(r),
                Mark::at(load.x(r.flows, r.concurrency), r.repair_pct()?),
            ))
        }),
        &mut palette,
    );
    for s in &mut repair {
        // "UDP, 2 flows" → "UDP requests lost, 2 flows": the chart says what each line counts.
        let what = match s.name.split(',').next() {
            Some("UDP") => " requests lost",
            Some("TCP") => " segments retransmitted",
            _ => " packets lost",
        };
        s.name = match s.name.split_once(", ") {
            Some((p, rest)) => format!("{p}{what}, {rest}"),
            None => format!("{}{what}", s.name),
        };
    }
    if !repair.is_empty() {
        out.push(figure(
            Plot {
                title: format!("Loss and retransmissions against {}", short(load, "requests")),
                x: load.axis("Requests", &repair),
                y: plot::y_from_zero("Lost or retransmitted (% of sent)".into(), &repair, None),
                bars: false,
                series: &repair,
                notes: Vec::new(),
            },
            "Loss and retransmissions against load",
            format!(
                "UDP: requests never answered (after their retries), as a share of those sent; TCP and QUIC: packets the client sent again (or lost), as a share of those sent; against {}.",
                load.words("requests")
            ),
        )?);
    }
    let times = group(
        results.iter().filter_map(|r| {
            let name = proto(r);
            Some((
                name,
                response_mark(load.x(r.flows, r.concurrency), r.response.as_ref()?),
            ))
        }),
        &mut palette,
    );
    if !times.is_empty() {
        out.push(response_figure(&times, load, "Requests", "request")?);
    }
    let rates = group(
        results.iter().map(|r| {
            (
                proto(r),
                Mark::at(load.x(r.flows, r.concurrency), r.requests_per_second),
            )
        }),
        &mut palette,
    );
    out.push(figure(
        Plot {
            title: format!("Requests per second against {}", short(load, "requests")),
            x: load.axis("Requests", &rates),
            y: plot::y_from_zero("Requests answered per second (1/s)".into(), &rates, None),
            bars: false,
            series: &rates,
            notes: Vec::new(),
        },
        "Requests per second against load",
        format!(
            "Requests answered per second of the whole run (first request to the last answer or loss), against {}.",
            load.words("requests")
        ),
    )?);
    Ok(out)
}

/// The charts of a DNS sweep: UDP queries lost against TCP (and DoT) segments retransmitted,
/// and response time with its minimum and maximum.
pub fn dns(results: &[DnsResult]) -> io::Result<Vec<Figure>> {
    if !Load::varies(results.iter().map(|r| (r.flows, r.concurrency))) {
        return Ok(Vec::new());
    }
    let load = Load::of(results.iter().map(|r| (r.flows, r.concurrency)));
    let transport = |r: &DnsResult| {
        format!(
            "{}{}",
            r.transport.name().to_uppercase(),
            new_connection(r.new_connection)
        )
    };
    // One palette for the page: a transport keeps its colour and shape on every chart.
    let mut palette = Palette::default();
    let mut repair = group(
        results.iter().filter_map(|r| {
            let pct = match r.transport {
                DnsTransport::Udp => r.timeout_ratio * 100.0,
                DnsTransport::Tcp | DnsTransport::Dot => r.retrans_rate? * 100.0,
            };
            Some((transport(r), Mark::at(load.x(r.flows, r.concurrency), pct)))
        }),
        &mut palette,
    );
    for s in &mut repair {
        let what = if s.name.starts_with("UDP") {
            " queries lost (timeouts)"
        } else {
            " segments retransmitted"
        };
        s.name = match s.name.split_once(", ") {
            Some((t, rest)) => format!("{t}{what}, {rest}"),
            None => format!("{}{what}", s.name),
        };
    }
    let mut out = Vec::new();
    if !repair.is_empty() {
        out.push(figure(
            Plot {
                title: format!(
                    "DNS: UDP loss and TCP retransmissions against {}",
                    short(load, "queries")
                ),
                x: load.axis("Queries", &repair),
                y: plot::y_from_zero("Lost or retransmitted (% of sent)".into(), &repair, None),
                bars: false,
                series: &repair,
                notes: Vec::new(),
            },
            "UDP loss and TCP retransmissions against load",
            format!(
                "UDP: queries never answered after their last retry, as a share of those sent; TCP and DoT: segments the client sent again (TCP_INFO total_retrans less D-SACKed, over data segments sent); against {}.",
                load.words("queries")
            ),
        )?);
    }
    let times = group(
        results.iter().filter_map(|r| {
            let name = transport(r);
            Some((
                name,
                response_mark(load.x(r.flows, r.concurrency), r.response.as_ref()?),
            ))
        }),
        &mut palette,
    );
    if !times.is_empty() {
        out.push(response_figure(&times, load, "Queries", "query")?);
    }
    Ok(out)
}

/// ", new connection" for a sweep that opened a connection per request; empty otherwise.
fn new_connection(new: bool) -> &'static str {
    if new {
        ", new connection"
    } else {
        ""
    }
}

/// "requests in flight" ("queries in flight"), or "flows".
fn short(load: Load, noun: &str) -> String {
    match load {
        Load::InFlight => format!("{noun} in flight"),
        Load::Flows => "flows".to_string(),
    }
}

/// A response-time mark: the mean, with a whisker from the minimum to the maximum (µs).
fn response_mark(x: f64, r: &RttFigures) -> Mark {
    Mark {
        spread: Some((r.min_ns as f64 / 1e3, r.max_ns as f64 / 1e3)),
        ..Mark::at(x, r.mean_ns / 1e3)
    }
}

fn response_figure(
    series: &[super::series::Series],
    load: Load,
    what: &str,
    noun: &str,
) -> io::Result<Figure> {
    let log = plot::spans_decades(series);
    let desc = format!(
        "Response time, avg and min–max (µs{})",
        if log { ", log scale" } else { "" }
    );
    figure(
        Plot {
            title: format!("Response time against {}", short(load, &format!("{noun}s"))),
            x: load.axis(what, series),
            y: if log {
                plot::y_log(desc, series)
            } else {
                plot::y_from_zero(desc, series, None)
            },
            bars: false,
            series,
            notes: Vec::new(),
        },
        "Response time against load",
        format!(
            "Average time from a {noun} being sent to its answer (mark), with a whisker from the fastest to the slowest, against {}.",
            load.words(&what.to_lowercase())
        ),
    )
}

/// A sweep of one load (a `ping`): no "against" chart of one point per series, but bars of
/// the response time of each protocol (average, whisker from the fastest to the slowest).
/// `None` without response times.
fn one_load(results: &[RrResult]) -> io::Result<Option<Figure>> {
    let mut palette = Palette::default();
    let bars = group(
        results.iter().filter_map(|r| {
            let name = format!(
                "{}{}",
                r.protocol.as_str().to_uppercase(),
                new_connection(r.new_connection)
            );
            let mut mark = response_mark(0.0, r.response.as_ref()?);
            mark.label = mark.y.map(|us| format!("{us:.1} µs"));
            Some((name, mark))
        }),
        &mut palette,
    );
    if bars.is_empty() {
        return Ok(None);
    }
    let load = results.first().map_or_else(String::new, |r| {
        format!("{} flow(s), {} in flight each", r.flows, r.concurrency)
    });
    let log = plot::spans_decades(&bars);
    let desc = format!(
        "Response time, avg and min–max (µs{})",
        if log { ", log scale" } else { "" }
    );
    let y = if log {
        plot::y_log_bars(desc, &bars, 1)
    } else {
        plot::y_from_zero(desc, &bars, Some(1))
    };
    let plot = Plot {
        title: "Response time per protocol".into(),
        x: super::axis::Axis::categories("Load (one bar per protocol)", vec![load]),
        y,
        bars: true,
        series: &bars,
        notes: Vec::new(),
    };
    Ok(Some(figure(
        plot,
        "Response time per protocol",
        "Average time from a request being sent to its answer, with a whisker from the fastest to the slowest; one load, so no chart against it (the table has every figure).".into(),
    )?))
}

fn figure(plot: Plot<'_>, heading: &str, caption: String) -> io::Result<Figure> {
    Ok(Figure {
        heading: heading.into(),
        svg: plot::svg(&plot)?,
        caption,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_is_what_varies() {
        assert_eq!(Load::of([(1, 1), (2, 1), (3, 1)].into_iter()), Load::Flows);
        assert_eq!(Load::of([(2, 1), (2, 8)].into_iter()), Load::InFlight);
        assert_eq!(Load::of([(1, 1), (2, 8)].into_iter()), Load::InFlight);
        assert_eq!(Load::of([(1, 1)].into_iter()), Load::InFlight);
        assert!(
            !Load::varies([(1, 1), (1, 1)].into_iter()),
            "a ping: no load swept"
        );
        assert!(Load::varies([(1, 1), (2, 1)].into_iter()));
    }
}
