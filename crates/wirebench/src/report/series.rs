//! The per-run data behind two HTML charts: the interval series of one chosen run (throughput
//! over time) and, for UDP streaming runs, server loss against offered load. Owns picking the
//! run and the arithmetic; must not draw, open files or read clocks.

use wirebench_core::plan::{Mechanism, Protocol};
use wirebench_core::sweep::Point;
use wirebench_core::units::ByteSize;

use super::Configuration;
use crate::output::json::{IntervalJson, RunJson};

/// The interval series of one run, as the throughput-over-time chart draws them.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// 1-based number of the run in the campaign (as `wirebench show` numbers it).
    pub run: usize,
    /// What the run was: "run 3: UDP Streaming, 1000 B × 1 MiB, repeat 1".
    pub label: String,
    /// What the client sent: (interval start, interval end) in seconds since the session
    /// started, and bit/s over the interval.
    pub client: Vec<Interval>,
    /// What the server read, in the same form.
    pub server: Vec<Interval>,
    /// Whether it is a UDP streaming run, whose last intervals are the grace period (nothing
    /// sent while the server waits for late datagrams).
    pub udp_stream: bool,
}

/// One interval of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Start, seconds since the session started.
    pub start_s: f64,
    /// End, seconds since the session started.
    pub end_s: f64,
    /// Rate over the interval, bit/s.
    pub bits_per_second: f64,
}

/// One UDP streaming run on the loss-against-load chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossPoint {
    /// Message size, bytes (one series per size).
    pub msg_size: u32,
    /// Offered load: what the client sent, bit/s.
    pub offered_bps: f64,
    /// Server loss: lost / (messages read + lost), percent.
    pub loss_pct: f64,
}

/// The run the throughput-over-time chart shows: run `chosen` (1-based) when given, which must
/// exist and have interval series; otherwise the first run that has any (`None` when no run
/// has). The error says what was wrong and what is allowed.
pub fn timeline(
    runs: &[(Point, RunJson)],
    chosen: Option<usize>,
) -> Result<Option<Timeline>, String> {
    let has_series = |r: &RunJson| {
        !r.client.measured.intervals.is_empty() || !r.server.measured.intervals.is_empty()
    };
    let index = match chosen {
        Some(n) => {
            let Some((_, run)) = n.checked_sub(1).and_then(|i| runs.get(i)) else {
                return Err(format!(
                    "--run {n}: the campaign has {} finished run(s), numbered 1 to {} as `wirebench show` lists them",
                    runs.len(),
                    runs.len()
                ));
            };
            if !has_series(run) {
                return Err(format!(
                    "--run {n}: that run has no interval series; runs measured with -i D (e.g. -i 100ms) have them"
                ));
            }
            n - 1
        }
        None => match runs.iter().position(|(_, r)| has_series(r)) {
            Some(i) => i,
            None => return Ok(None),
        },
    };
    let (point, run) = &runs[index];
    let title = Configuration::title_of(run.protocol, run.mechanism);
    Ok(Some(Timeline {
        run: index + 1,
        label: format!(
            "run {}: {title}, {} B × {}, repeat {}",
            index + 1,
            point.msg_size,
            ByteSize(point.total_bytes),
            run.repeat_index + 1
        ),
        client: intervals(&run.client.measured.intervals),
        server: intervals(&run.server.measured.intervals),
        udp_stream: run.protocol == Protocol::Udp && run.mechanism == Mechanism::Stream,
    }))
}

/// Every UDP streaming run as a loss-against-load point, in run order; runs whose server saw
/// nothing at all (no message read, none lost) are left out: they have no loss rate.
pub fn loss_points(runs: &[(Point, RunJson)]) -> Vec<LossPoint> {
    runs.iter()
        .filter(|(_, r)| r.protocol == Protocol::Udp && r.mechanism == Mechanism::Stream)
        .filter_map(|(point, r)| {
            let seen = r.server.messages.checked_add(r.server.lost)?;
            // A hand-made import could hold any number; only a real rate is drawable.
            let offered = r.client.throughput_bps;
            (seen > 0 && offered.is_finite() && offered >= 0.0).then(|| LossPoint {
                msg_size: point.msg_size,
                offered_bps: offered,
                loss_pct: r.server.lost as f64 * 100.0 / seen as f64,
            })
        })
        .collect()
}

fn intervals(samples: &[IntervalJson]) -> Vec<Interval> {
    samples
        .iter()
        .filter(|s| s.bits_per_second.is_finite() && s.bits_per_second >= 0.0)
        .map(|s| Interval {
            start_s: s.sample.start_ns as f64 / 1e9,
            end_s: s.sample.end_ns as f64 / 1e9,
            bits_per_second: s.bits_per_second,
        })
        .collect()
}
