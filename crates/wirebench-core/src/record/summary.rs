//! Summaries of a configuration's runs (protocol × mechanism × message size × total): min /
//! mean / median / max / stddev of every figure, computed here once. The `--repeat` tables,
//! the run document, every report format and `compare` read these; none computes its own.

use serde::{Deserialize, Serialize};

use super::headline::Headline;
use super::run::RunRecord;
use crate::vocab::plan::{Mechanism, Protocol};
use crate::vocab::stats::Summary;
use crate::vocab::sweep::Point;

/// Which configuration a run belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigurationKey {
    /// Protocol.
    pub protocol: Protocol,
    /// Mechanism.
    pub mechanism: Mechanism,
    /// Message size, bytes.
    pub msg_size: u32,
    /// Bytes per run.
    pub total_bytes: u64,
}

impl ConfigurationKey {
    /// The key of `run`, measured at `point`.
    pub fn of(point: Point, run: &RunRecord) -> Self {
        ConfigurationKey {
            protocol: run.protocol,
            mechanism: run.mechanism,
            msg_size: point.msg_size,
            total_bytes: point.total_bytes,
        }
    }

    /// "TCP Streaming", "UDP Stop and Wait", as the tables title it.
    pub fn title(&self) -> String {
        title(self.protocol, self.mechanism)
    }
}

/// The title of a protocol × mechanism: "TCP Streaming", "UDP Stop and Wait".
pub fn title(protocol: Protocol, mechanism: Mechanism) -> String {
    format!(
        "{} {}",
        match protocol {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Quic => "QUIC",
        },
        match mechanism {
            Mechanism::Stream => "Streaming",
            Mechanism::StopAndWait => "Stop and Wait",
        }
    )
}

/// The statistics of one configuration over its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationSummary {
    /// Which configuration.
    #[serde(flatten)]
    pub key: ConfigurationKey,
    /// Runs summarised.
    pub runs: usize,
    /// Runs too short to time (under `MIN_TIMED_NS`): left out of the rates.
    pub untimed_runs: usize,
    /// Transfer time, seconds (the span goodput is taken over).
    pub seconds: Summary,
    /// Goodput, bit/s: what the receiver got over the transfer time; null when no run was
    /// long enough to time.
    pub goodput_bps: Option<Summary>,
    /// The sender's offered rate, bit/s, over the same span; null likewise.
    pub sent_bps: Option<Summary>,
    /// `run --rate max`: the rate each run was paced at, as its search found it, bit/s; absent
    /// when no run's rate was searched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_found_bps: Option<Summary>,
    /// UDP: loss, duplicates and reordering, counts and shares of the messages sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliverySummary>,
    /// Share of the sender's packets sent again or lost, over the runs that report it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retrans_rate: Option<Summary>,
    /// Stop-and-wait round trips: each figure the median over the runs of that run's figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt: Option<RttSummary>,
    /// Stop-and-wait: each run's median round trip, ns, over the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_p50_ns: Option<Summary>,
    /// Stop-and-wait: each run's 99th-percentile round trip, ns, over the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_p99_ns: Option<Summary>,
    /// What the client counted: messages, bytes, and its time.
    pub client: SideSummary,
    /// What the server counted: messages, bytes, and its own (shorter) span.
    pub server: SideSummary,
    /// `--bidir` runs: the rates and counts of the headline add both directions up (the
    /// client and server counts are the client → server direction's). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub both_directions: bool,
    /// Where the runs were measured, when a report holds campaigns from more than one place
    /// (client host and server host): "laptop", "laptop → 10.0.0.2". The same configuration
    /// at two sites is two summaries, side by side, never pooled. Absent with one site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
}

/// One side's counts over the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideSummary {
    /// Messages.
    pub messages: Summary,
    /// Bytes.
    pub bytes: Summary,
    /// This side's span, seconds.
    pub seconds: Summary,
}

/// UDP delivery over the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliverySummary {
    /// Messages lost.
    pub lost: Summary,
    /// Lost, % of messages sent.
    pub lost_pct: Summary,
    /// Duplicates.
    pub duplicates: Summary,
    /// Duplicates, % of messages sent.
    pub duplicates_pct: Summary,
    /// Out of order.
    pub out_of_order: Summary,
    /// Out of order, % of messages sent.
    pub out_of_order_pct: Summary,
    /// Lost messages the receiving host dropped, over the runs whose loss is split (see
    /// `record::loss`); absent when none is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_receiving_host: Option<Summary>,
    /// Lost messages the sending host did not send, over the same runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_sending_host: Option<Summary>,
    /// Lost messages the path lost, over the same runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_path: Option<Summary>,
}

/// Round trips of a stop-and-wait configuration (nanoseconds): medians over its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RttSummary {
    /// Runs with round-trip figures.
    pub runs: usize,
    /// Smallest round trip.
    pub min_ns: f64,
    /// 50th percentile.
    pub p50_ns: f64,
    /// Mean.
    pub mean_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Largest round trip.
    pub max_ns: f64,
}

/// The distinct configurations of `runs`, in order of first appearance (the plan's order).
pub fn configuration_keys(runs: &[(Point, RunRecord)]) -> Vec<ConfigurationKey> {
    let mut keys = Vec::new();
    for (point, r) in runs {
        let key = ConfigurationKey::of(*point, r);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    keys
}

/// The runs of `runs` in configuration `key`, with their headline figures.
pub fn runs_of(runs: &[(Point, RunRecord)], key: ConfigurationKey) -> Vec<(&RunRecord, Headline)> {
    runs.iter()
        .filter(|(p, r)| ConfigurationKey::of(*p, r) == key)
        .map(|(_, r)| (r, r.headline()))
        .collect()
}

/// One summary per configuration of `runs`, in the plan's order.
pub fn summarise(runs: &[(Point, RunRecord)]) -> Vec<ConfigurationSummary> {
    configuration_keys(runs)
        .into_iter()
        .filter_map(|key| ConfigurationSummary::of(key, &runs_of(runs, key)))
        .collect()
}

/// A site's name (`None`: the report names no sites) and the runs measured there.
pub type SiteRuns = (Option<String>, Vec<(Point, RunRecord)>);

/// One summary per configuration and site, each site given with its runs (`None`: the
/// report names no sites): configurations in the order of their first run, and under each its
/// sites in the order given, so one configuration measured at two sites stands side by side.
pub fn summarise_sites(sites: &[SiteRuns]) -> Vec<ConfigurationSummary> {
    let all: Vec<(Point, RunRecord)> = sites
        .iter()
        .flat_map(|(_, runs)| runs.iter().cloned())
        .collect();
    let mut out = Vec::new();
    for key in configuration_keys(&all) {
        for (site, runs) in sites {
            if let Some(mut summary) = ConfigurationSummary::of(key, &runs_of(runs, key)) {
                summary.site = site.clone();
                out.push(summary);
            }
        }
    }
    out
}

impl ConfigurationSummary {
    /// The summary of one configuration's runs; `None` when there are none.
    pub fn of(key: ConfigurationKey, runs: &[(&RunRecord, Headline)]) -> Option<Self> {
        let column = |f: &dyn Fn(&RunRecord, &Headline) -> f64| {
            Summary::of(&runs.iter().map(|(r, h)| f(r, h)).collect::<Vec<_>>())
        };
        let optional = |f: &dyn Fn(&RunRecord, &Headline) -> Option<f64>| {
            Summary::of(&runs.iter().filter_map(|(r, h)| f(r, h)).collect::<Vec<_>>())
        };
        let delivery = if key.protocol == Protocol::Udp {
            let d = |f: &dyn Fn(&super::headline::Delivery) -> f64| {
                optional(&|_, h| h.delivery.as_ref().map(f))
            };
            let split = |f: &dyn Fn(&super::loss::LossSplit) -> u64| {
                optional(&|_, h| h.delivery.and_then(|d| d.loss_split).map(|s| f(&s) as f64))
            };
            Some(DeliverySummary {
                lost: d(&|x| x.lost as f64)?,
                lost_pct: d(&|x| x.lost_pct)?,
                duplicates: d(&|x| x.duplicates as f64)?,
                duplicates_pct: d(&|x| x.duplicates_pct)?,
                out_of_order: d(&|x| x.out_of_order as f64)?,
                out_of_order_pct: d(&|x| x.out_of_order_pct)?,
                lost_receiving_host: split(&|s| s.receiving_host),
                lost_sending_host: split(&|s| s.sending_host),
                lost_path: split(&|s| s.path),
            })
        } else {
            None
        };
        let rtt_median = |f: &dyn Fn(&super::run::RttFigures) -> f64| {
            optional(&|_, h| h.rtt.as_ref().map(f)).map(|s| s.median)
        };
        let rtt_runs = runs.iter().filter(|(_, h)| h.rtt.is_some()).count();
        let rtt = (rtt_runs > 0).then(|| -> Option<RttSummary> {
            Some(RttSummary {
                runs: rtt_runs,
                min_ns: rtt_median(&|r| r.min_ns as f64)?,
                p50_ns: rtt_median(&|r| r.p50_ns as f64)?,
                mean_ns: rtt_median(&|r| r.mean_ns)?,
                p99_ns: rtt_median(&|r| r.p99_ns as f64)?,
                max_ns: rtt_median(&|r| r.max_ns as f64)?,
            })
        });
        Some(ConfigurationSummary {
            key,
            runs: runs.len(),
            untimed_runs: runs.iter().filter(|(_, h)| !h.timed()).count(),
            seconds: column(&|_, h| h.transfer_seconds())?,
            goodput_bps: optional(&|_, h| h.goodput_bps),
            sent_bps: optional(&|_, h| h.sent_bps),
            rate_found_bps: optional(&|r, _| {
                r.rate_search
                    .as_ref()
                    .and_then(|s| s.rate_bps)
                    .map(|b| b as f64)
            }),
            delivery,
            retrans_rate: optional(&|_, h| h.retrans_rate),
            rtt: rtt.flatten(),
            rtt_p50_ns: optional(&|_, h| h.rtt.map(|r| r.p50_ns as f64)),
            rtt_p99_ns: optional(&|_, h| h.rtt.map(|r| r.p99_ns as f64)),
            client: SideSummary {
                messages: column(&|r, _| r.client.messages as f64)?,
                bytes: column(&|r, _| r.client.bytes as f64)?,
                seconds: column(&|r, _| r.client.seconds)?,
            },
            server: SideSummary {
                messages: column(&|r, _| r.server.messages as f64)?,
                bytes: column(&|r, _| r.server.bytes as f64)?,
                seconds: column(&|r, _| r.server.seconds)?,
            },
            both_directions: runs.iter().any(|(_, h)| h.both_directions),
            site: None,
        })
    }

    /// "TCP Streaming", "UDP Stop and Wait"; "TCP Streaming, both directions" for `--bidir`;
    /// "TCP Streaming on laptop" where the report names sites.
    pub fn title(&self) -> String {
        let mut title = self.key.title();
        if self.both_directions {
            title.push_str(", both directions");
        }
        if let Some(site) = &self.site {
            title.push_str(&format!(" on {site}"));
        }
        title
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::headline::tests::run;

    #[test]
    fn one_summary_per_configuration_with_goodput_and_loss() {
        let point = Point {
            msg_size: 1000,
            total_bytes: 1_000_000,
        };
        // Three UDP runs: 1000 sent in 1 s, read 1000, 900 and 500.
        let runs: Vec<(Point, RunRecord)> = [1000, 900, 500]
            .into_iter()
            .map(|read| (point, run(Protocol::Udp, 1000, read, 1_000_000_000)))
            .chain([(point, run(Protocol::Tcp, 1000, 1000, 500_000))])
            .collect();
        let all = summarise(&runs);
        assert_eq!(all.len(), 2, "UDP and TCP");
        let udp = &all[0];
        assert_eq!((udp.runs, udp.untimed_runs), (3, 0));
        // Goodput: 8, 7.2 and 4 Mbit/s.
        let g = udp.goodput_bps.unwrap();
        assert_eq!((g.min, g.median, g.max), (4e6, 7.2e6, 8e6));
        assert!((g.mean - 6.4e6).abs() < 1e-6);
        assert_eq!(udp.sent_bps.unwrap().median, 8e6);
        let d = udp.delivery.as_ref().unwrap();
        assert_eq!((d.lost.min, d.lost.max), (0.0, 500.0));
        assert_eq!((d.lost_pct.median, d.lost_pct.max), (10.0, 50.0));
        // The TCP run took 0.5 ms: too short to time, so no rate at all.
        let tcp = &all[1];
        assert_eq!((tcp.runs, tcp.untimed_runs), (1, 1));
        assert!(tcp.goodput_bps.is_none() && tcp.delivery.is_none());
        assert_eq!(tcp.client.messages.mean, 1000.0);
        assert_eq!(tcp.title(), "TCP Streaming");
        assert!(udp.rate_found_bps.is_none(), "no rate was searched");
    }

    #[test]
    fn the_rate_found_is_summarised_over_the_runs_that_carry_a_search() {
        use crate::record::ratesearch::RateSearchRecord;
        let point = Point {
            msg_size: 1000,
            total_bytes: 1_000_000,
        };
        let search = |rate_bps| RateSearchRecord {
            outcome: "found".into(),
            rate_bps: Some(rate_bps),
            msg_size: 1000,
            low_bps: 1,
            high_bps: 10_000_000_000,
            resolution_pct: 1.0,
            max_loss_pct: 0.0,
            trial_ns: 200_000_000,
            trial_grace_us: 30_000,
            elapsed_ns: 1,
            trials: Vec::new(),
        };
        // Two repeats at one search's 900 Mbit/s, one at another's 1 Gbit/s.
        let runs: Vec<(Point, RunRecord)> = [900_000_000, 900_000_000, 1_000_000_000]
            .into_iter()
            .map(|rate| {
                let mut r = run(Protocol::Udp, 1000, 1000, 1_000_000_000);
                r.rate_search = Some(search(rate));
                (point, r)
            })
            .collect();
        let found = summarise(&runs)[0].rate_found_bps.unwrap();
        assert_eq!((found.min, found.median, found.max), (9e8, 9e8, 1e9));
    }
}
