//! Transport counters and CPU usage as each end of a session reports them, and the rates derived
//! from them; must not read sockets or clocks (the app fills these records from TCP_INFO, quinn's
//! connection stats, the UDP tallies and getrusage).
//!
//! One figure is comparable across TCP, QUIC and UDP: [`TransportStats::retrans_rate`], the
//! share of the data packets an end sent that the transport had to send again (or, where nothing
//! is ever sent again, that were lost):
//! - TCP: `(tcpi_total_retrans − tcpi_dsack_dups) / tcpi_data_segs_out` — retransmitted
//!   segments less those the receiver reported as needless duplicates (D-SACK), over data
//!   segments sent;
//! - QUIC: `lost_packets / sent_packets` from quinn's path statistics (a lost packet's frames
//!   are sent again in a new packet);
//! - UDP stop-and-wait: `retransmissions / datagrams sent`; UDP streaming (nothing is resent):
//!   `datagrams lost / datagrams sent`.

use serde::{Deserialize, Serialize};

/// Where a [`TransportStats`] record comes from.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum StatsSource {
    /// The kernel's TCP_INFO for the data socket.
    #[default]
    TcpInfo,
    /// quinn's connection statistics.
    Quic,
    /// wirebench's own UDP tallies (datagrams sent, retransmitted, lost).
    Udp,
}

/// What one end's transport did in a session.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct TransportStats {
    /// Where the figures come from.
    pub source: StatsSource,
    /// Data packets this end sent: TCP data segments (`tcpi_data_segs_out`), QUIC packets,
    /// UDP datagrams (with retransmissions).
    pub packets_sent: u64,
    /// Of those, packets sent again or lost (see the module documentation per transport).
    pub packets_retransmitted: u64,
    /// TCP only: `tcpi_total_retrans`, every retransmitted segment (spurious ones too).
    #[serde(default)]
    pub tcp_total_retrans: Option<u64>,
    /// TCP only: `tcpi_dsack_dups`, retransmissions the peer reported as duplicates.
    #[serde(default)]
    pub tcp_dsack_dups: Option<u64>,
    /// Smoothed round-trip time the transport estimated, microseconds.
    #[serde(default)]
    pub srtt_us: Option<u64>,
    /// Congestion window at the end, bytes.
    #[serde(default)]
    pub cwnd_bytes: Option<u64>,
    /// QUIC: congestion events (the window was cut).
    #[serde(default)]
    pub congestion_events: Option<u64>,
    /// QUIC: the path MTU this end sent with at the end (largest UDP payload, after PMTU
    /// discovery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u64>,
    /// QUIC, the sending end: how much stream data it could leave unacknowledged at the end
    /// (its send window, sized by message and grown to the path: see
    /// [`crate::machine::send_window`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_window_bytes: Option<u64>,
}

impl TransportStats {
    /// Packets retransmitted (or lost) per data packet sent; `None` when nothing was sent.
    pub fn retrans_rate(&self) -> Option<f64> {
        (self.packets_sent > 0)
            .then(|| self.packets_retransmitted as f64 / self.packets_sent as f64)
    }

    /// TCP: the record for TCP_INFO's counters; spurious retransmissions (D-SACK duplicates)
    /// are not counted as retransmitted, and never make the count negative.
    pub fn from_tcp(
        data_segs_out: u64,
        total_retrans: u64,
        dsack_dups: u64,
        srtt_us: u64,
        cwnd_bytes: u64,
    ) -> Self {
        TransportStats {
            source: StatsSource::TcpInfo,
            packets_sent: data_segs_out,
            packets_retransmitted: total_retrans.saturating_sub(dsack_dups),
            tcp_total_retrans: Some(total_retrans),
            tcp_dsack_dups: Some(dsack_dups),
            srtt_us: Some(srtt_us),
            cwnd_bytes: Some(cwnd_bytes),
            congestion_events: None,
            path_mtu: None,
            send_window_bytes: None,
        }
    }

    /// UDP: `datagrams` sent, of which `retransmitted_or_lost` were sent again (stop-and-wait)
    /// or never arrived (streaming).
    pub fn from_udp(datagrams: u64, retransmitted_or_lost: u64) -> Self {
        TransportStats {
            source: StatsSource::Udp,
            packets_sent: datagrams,
            packets_retransmitted: retransmitted_or_lost,
            ..TransportStats::default()
        }
    }
}

/// CPU time a process spent during a session (getrusage), microseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuUsage {
    /// User-mode CPU time, microseconds.
    pub user_us: u64,
    /// Kernel-mode CPU time, microseconds.
    pub system_us: u64,
    /// The figure covers the client and an in-process (embedded) server together, which share
    /// one process.
    #[serde(default)]
    pub shared_process: bool,
}

impl CpuUsage {
    /// User plus system time, seconds.
    pub fn total_seconds(&self) -> f64 {
        (self.user_us + self.system_us) as f64 / 1e6
    }

    /// CPU seconds per GiB (2^30 bytes) moved; `None` when no byte moved.
    pub fn seconds_per_gib(&self, bytes: u64) -> Option<f64> {
        (bytes > 0).then(|| self.total_seconds() / (bytes as f64 / (1u64 << 30) as f64))
    }

    /// This usage as a share of `seconds` of wall time, percent, as iperf3 reports its CPU:
    /// (user plus system, user, system); zeros over no time.
    pub fn percent_of(&self, seconds: f64) -> (f64, f64, f64) {
        let percent = |us: u64| {
            if seconds > 0.0 {
                us as f64 / 1e6 / seconds * 100.0
            } else {
                0.0
            }
        };
        (
            percent(self.user_us + self.system_us),
            percent(self.user_us),
            percent(self.system_us),
        )
    }

    /// The usage between two cumulative readings (`self` the later); a counter that went
    /// backwards counts as zero.
    pub fn since(&self, earlier: &CpuUsage) -> CpuUsage {
        CpuUsage {
            user_us: self.user_us.saturating_sub(earlier.user_us),
            system_us: self.system_us.saturating_sub(earlier.system_us),
            shared_process: self.shared_process,
        }
    }
}

/// What one end had moved by some moment of a session: cumulative counts an interval series
/// is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cumulative {
    /// Payload bytes so far.
    pub bytes: u64,
    /// UDP receiver: datagrams missing so far (below the highest sequence number seen).
    pub lost: Option<u64>,
    /// TCP sender: segments retransmitted so far (TCP_INFO, less D-SACK duplicates).
    pub retransmitted: Option<u64>,
    /// TCP sender: its window and round trip now (TCP_INFO).
    pub tcp: Option<TcpSnapshot>,
    /// UDP receiver: its running interarrival jitter estimate now (RFC 3550), nanoseconds.
    pub jitter_ns: Option<u64>,
}

/// A TCP sender's window and round trip at one moment, as TCP_INFO gives them: iperf3's
/// per-interval `snd_cwnd`, `snd_wnd`, `rtt`, `rttvar`, `pmtu` and `reorder`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpSnapshot {
    /// Congestion window, bytes (`tcpi_snd_cwnd` × `tcpi_snd_mss`).
    pub snd_cwnd: u64,
    /// The peer's advertised receive window, bytes (`tcpi_snd_wnd`, Linux 5.4; 0 before).
    pub snd_wnd: u64,
    /// Smoothed round trip, microseconds (`tcpi_rtt`).
    pub rtt_us: u64,
    /// Its mean deviation, microseconds (`tcpi_rttvar`).
    pub rttvar_us: u64,
    /// Path MTU, bytes (`tcpi_pmtu`).
    pub pmtu: u64,
    /// Reordering events seen so far (`tcpi_reord_seen`, Linux 4.19; 0 before, and in records
    /// stored before it was read): iperf3 3.20+'s `reorder`.
    #[serde(default)]
    pub reorder: u64,
}

/// One interval of a run (`-i`): what moved between `start_ns` and `end_ns`, counted from the
/// start of the session on the reporting end's clock.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntervalSample {
    /// Interval start, nanoseconds since the session started.
    pub start_ns: u64,
    /// Interval end, nanoseconds since the session started.
    pub end_ns: u64,
    /// Payload bytes moved in the interval.
    pub bytes: u64,
    /// UDP receiver: datagrams found missing in the interval (may be negative in effect when
    /// late ones arrive: then 0 here and fewer later); None elsewhere.
    #[serde(default)]
    pub lost: Option<u64>,
    /// TCP sender: segments retransmitted in the interval (TCP_INFO); None elsewhere.
    #[serde(default)]
    pub retransmitted: Option<u64>,
    /// TCP sender: its window and round trip at the interval's end; absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSnapshot>,
    /// UDP receiver: the running jitter estimate at the interval's end (as iperf3 reports an
    /// interval's jitter), nanoseconds; absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ns: Option<u64>,
}

impl IntervalSample {
    /// Bits per second over the interval; 0 for an empty interval.
    pub fn bits_per_second(&self) -> f64 {
        let ns = self.end_ns.saturating_sub(self.start_ns);
        if ns == 0 {
            0.0
        } else {
            self.bytes as f64 * 8.0 * 1e9 / ns as f64
        }
    }
}

/// Turns cumulative readings taken at moments into an interval series.
#[derive(Debug, Clone, Default)]
pub struct IntervalSeries {
    last_ns: u64,
    last: Cumulative,
    samples: Vec<IntervalSample>,
}

impl IntervalSeries {
    /// An empty series starting at 0 ns with nothing moved.
    pub fn new() -> Self {
        IntervalSeries::default()
    }

    /// Records the reading `now` taken `at_ns` after the start; returns the new interval.
    /// A reading earlier than the last one, or counters that went backwards, count as zero.
    pub fn push(&mut self, at_ns: u64, now: Cumulative) -> IntervalSample {
        let sample = IntervalSample {
            start_ns: self.last_ns,
            end_ns: at_ns.max(self.last_ns),
            bytes: now.bytes.saturating_sub(self.last.bytes),
            lost: now
                .lost
                .map(|l| l.saturating_sub(self.last.lost.unwrap_or(0))),
            retransmitted: now
                .retransmitted
                .map(|r| r.saturating_sub(self.last.retransmitted.unwrap_or(0))),
            tcp: now.tcp,
            jitter_ns: now.jitter_ns,
        };
        self.last_ns = sample.end_ns;
        self.last = Cumulative {
            bytes: now.bytes.max(self.last.bytes),
            lost: later(now.lost, self.last.lost),
            retransmitted: later(now.retransmitted, self.last.retransmitted),
            tcp: now.tcp,
            jitter_ns: now.jitter_ns,
        };
        self.samples.push(sample);
        sample
    }

    /// Where the last interval ended (0 before the first), nanoseconds since the start.
    pub fn end_ns(&self) -> u64 {
        self.last_ns
    }

    /// The intervals recorded so far.
    pub fn into_samples(self) -> Vec<IntervalSample> {
        self.samples
    }
}

/// Interarrival jitter as RFC 3550 (section 6.4.1, appendix A.8) estimates it: for each
/// datagram, in arrival order, the transit time is arrival time minus the sender's timestamp
/// (the clocks' offset cancels out); D is the change of transit time from the previous
/// datagram; J += (|D| − J) / 16. Times in microseconds; timestamps wrap at 2^32 µs (71 min),
/// which only the difference of two consecutive transits needs to survive.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct JitterEstimator {
    last_transit_us: Option<u32>,
    differences: u64,
    jitter_us: f64,
}

impl JitterEstimator {
    /// A new estimator with no datagram seen.
    pub fn new() -> Self {
        JitterEstimator::default()
    }

    /// Records a datagram the sender stamped `sent_us` that arrived at `arrived_us` (receiver's
    /// clock, any origin).
    pub fn record(&mut self, sent_us: u32, arrived_us: u64) {
        // Both clocks taken modulo 2^32: their difference is the transit plus a constant offset.
        let transit = (arrived_us as u32).wrapping_sub(sent_us);
        if let Some(last) = self.last_transit_us {
            let d = f64::from((transit.wrapping_sub(last) as i32).unsigned_abs());
            self.jitter_us += (d - self.jitter_us) / 16.0;
            self.differences += 1;
        }
        self.last_transit_us = Some(transit);
    }

    /// The estimate, microseconds; `None` before two datagrams were seen.
    pub fn jitter_us(&self) -> Option<f64> {
        (self.differences > 0).then_some(self.jitter_us)
    }
}

/// The larger of two cumulative readings, either of which may be missing.
fn later(now: Option<u64>, before: Option<u64>) -> Option<u64> {
    match (now, before) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_percent_is_of_the_wall_time_and_zero_over_none() {
        let usage = CpuUsage {
            user_us: 1_500_000,
            system_us: 500_000,
            shared_process: false,
        };
        assert_eq!(usage.percent_of(4.0), (50.0, 37.5, 12.5));
        assert_eq!(usage.percent_of(0.0), (0.0, 0.0, 0.0));
    }

    #[test]
    fn interval_series_are_deltas_of_cumulative_readings() {
        let mut series = IntervalSeries::new();
        let a = series.push(
            1_000_000_000,
            Cumulative {
                bytes: 125_000_000,
                lost: Some(3),
                retransmitted: None,
                tcp: None,
                jitter_ns: None,
            },
        );
        assert_eq!(
            (a.start_ns, a.end_ns, a.bytes, a.lost),
            (0, 1_000_000_000, 125_000_000, Some(3))
        );
        assert_eq!(a.bits_per_second(), 1e9);
        let b = series.push(
            1_500_000_000,
            Cumulative {
                bytes: 150_000_000,
                lost: Some(2),
                retransmitted: None,
                tcp: None,
                jitter_ns: None,
            },
        );
        // A datagram counted missing arrived late: no negative loss, and it is not counted twice.
        assert_eq!(
            (b.start_ns, b.bytes, b.lost),
            (1_000_000_000, 25_000_000, Some(0))
        );
        let c = series.push(
            2_000_000_000,
            Cumulative {
                bytes: 150_000_000,
                lost: Some(5),
                retransmitted: None,
                tcp: None,
                jitter_ns: None,
            },
        );
        assert_eq!((c.bytes, c.lost), (0, Some(2)));
        let samples = series.into_samples();
        assert_eq!(samples.iter().map(|s| s.bytes).sum::<u64>(), 150_000_000);
    }

    #[test]
    fn tcp_rate_leaves_out_spurious_retransmissions() {
        let s = TransportStats::from_tcp(1000, 30, 10, 25, 64_000);
        assert_eq!(s.packets_retransmitted, 20);
        assert_eq!(s.retrans_rate(), Some(0.02));
        // More D-SACKs than retransmissions (counters read at different moments) is not negative.
        assert_eq!(
            TransportStats::from_tcp(10, 1, 3, 0, 0).packets_retransmitted,
            0
        );
    }

    #[test]
    fn nothing_sent_has_no_rate() {
        assert_eq!(TransportStats::from_udp(0, 0).retrans_rate(), None);
        assert_eq!(TransportStats::from_udp(200, 5).retrans_rate(), Some(0.025));
    }

    #[test]
    fn cpu_per_gib_and_deltas() {
        let later = CpuUsage {
            user_us: 1_500_000,
            system_us: 700_000,
            shared_process: false,
        };
        let earlier = CpuUsage {
            user_us: 500_000,
            system_us: 200_000,
            shared_process: false,
        };
        let d = later.since(&earlier);
        assert_eq!((d.user_us, d.system_us), (1_000_000, 500_000));
        assert_eq!(d.seconds_per_gib(1 << 29), Some(3.0));
        assert_eq!(d.seconds_per_gib(0), None);
        assert_eq!(earlier.since(&later).user_us, 0);
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        let mut j = JitterEstimator::new();
        assert_eq!(j.jitter_us(), None);
        // Constant transit (any clock offset, even across the 2^32 wrap): no jitter.
        for k in 0..10u32 {
            j.record(
                (u32::MAX - 5).wrapping_add(k * 10),
                1_000_000 + u64::from(k) * 10,
            );
        }
        assert_eq!(j.jitter_us(), Some(0.0));
        // One datagram 160 µs late: J = 160/16 = 10; then back on time: |D| = 160 again.
        j.record(94, 1_000_260);
        assert_eq!(j.jitter_us(), Some(10.0));
        j.record(104, 1_000_110);
        assert_eq!(j.jitter_us(), Some(10.0 + (160.0 - 10.0) / 16.0));
    }
}
