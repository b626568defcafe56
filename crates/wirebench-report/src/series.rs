//! The per-run data behind two HTML charts: the interval series of one chosen run (throughput
//! over time) and, for UDP streaming runs, server loss against offered load. Owns picking the
//! run and the arithmetic; must not draw, open files or read clocks.

use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::sweep::Point;

use wirebench_core::record::summary::title;
use wirebench_core::record::{IntervalRecord, RunRecord};

/// The interval series of one run, as the throughput-over-time chart draws them.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    /// The campaign, named when a report has several (the chart then says whose run it is).
    pub campaign: Option<i64>,
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

impl Timeline {
    /// How many intervals the chart draws.
    pub fn len(&self) -> usize {
        self.client.len() + self.server.len()
    }

    /// Whether it draws none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same run, named as run `run` of campaign `campaign`.
    pub fn of_campaign(mut self, campaign: i64) -> Timeline {
        self.campaign = Some(campaign);
        self.label = format!("campaign {campaign}, {}", self.label);
        self
    }

    /// "run 3", or "campaign 2, run 3" in a report of several campaigns.
    pub fn name(&self) -> String {
        match self.campaign {
            Some(c) => format!("campaign {c}, run {}", self.run),
            None => format!("run {}", self.run),
        }
    }
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
#[derive(Debug, Clone, PartialEq)]
pub struct LossPoint {
    /// Where it was measured, when the report names sites (one series per site too).
    pub site: Option<String>,
    /// Message size, bytes (one series per size and total).
    pub msg_size: u32,
    /// Bytes per run.
    pub total_bytes: u64,
    /// Offered load: what the sender sent over the transfer time, bit/s.
    pub offered_bps: f64,
    /// Loss: messages lost / messages sent, percent.
    pub loss_pct: f64,
}

/// The run the throughput-over-time chart shows: run `chosen` (1-based) when given, which must
/// exist and have interval series; otherwise the run with the longest series (the first of
/// equals; `None` when no run has any). The error says what was wrong and what is allowed.
pub fn timeline(
    runs: &[(Point, RunRecord)],
    chosen: Option<usize>,
) -> Result<Option<Timeline>, String> {
    let has_series = |r: &RunRecord| {
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
        // The run with the most intervals: a short first run would be a chart of one dot.
        None => match runs
            .iter()
            .enumerate()
            .filter(|(_, (_, r))| has_series(r))
            .max_by_key(|(i, (_, r))| {
                let n = r.client.measured.intervals.len() + r.server.measured.intervals.len();
                (n, std::cmp::Reverse(*i))
            }) {
            Some((i, _)) => i,
            None => return Ok(None),
        },
    };
    let (point, run) = &runs[index];
    let title = title(run.protocol, run.mechanism);
    Ok(Some(Timeline {
        campaign: None,
        run: index + 1,
        label: format!(
            "run {}: {title}, {} B × {}, repeat {}",
            index + 1,
            point.msg_size,
            wirebench_core::record::total_label(point.total_bytes),
            run.repeat_index + 1
        ),
        client: intervals(&run.client.measured.intervals),
        server: intervals(&run.server.measured.intervals),
        udp_stream: run.protocol == Protocol::Udp && run.mechanism == Mechanism::Stream,
    }))
}

/// Every UDP streaming run long enough to time as a loss-against-load point, in run order (the
/// chart sorts each line by load), measured at `site` when the report names sites:
/// its offered (sent) rate and its loss, both the run's headline figures.
pub fn loss_points(runs: &[(Point, RunRecord)], site: Option<&str>) -> Vec<LossPoint> {
    runs.iter()
        .filter(|(_, r)| r.protocol == Protocol::Udp && r.mechanism == Mechanism::Stream)
        .filter_map(|(point, r)| {
            let h = r.headline();
            // A hand-made import could hold any number; only a real rate is drawable.
            let offered = h.sent_bps.filter(|b| b.is_finite() && *b >= 0.0)?;
            Some(LossPoint {
                site: site.map(str::to_string),
                msg_size: point.msg_size,
                total_bytes: point.total_bytes,
                offered_bps: offered,
                loss_pct: h.delivery?.lost_pct,
            })
        })
        .collect()
}

fn intervals(samples: &[IntervalRecord]) -> Vec<Interval> {
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
