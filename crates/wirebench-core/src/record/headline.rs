//! The figures a run is judged by, derived once from both sides' counts: goodput (what the
//! receiver got over the run's transfer time), the sender's offered rate beside it, UDP
//! delivery (loss, duplicates, reordering as counts and shares) and the sender's
//! retransmission rate. Every view shows these; none derives its own.

use serde::{Deserialize, Serialize};

use super::run::{RttFigures, RunRecord};
use super::{bits_per_second, MIN_TIMED_NS};
use crate::plan::Protocol;

/// A run's headline figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// The run's transfer time, ns: the client's span (see `ClientRecord::seconds`), the one
    /// span both goodput and the offered rate are taken over.
    pub transfer_ns: u64,
    /// Messages the sender sent (each once).
    pub sent_messages: u64,
    /// Payload bytes the sender sent (each once).
    pub sent_bytes: u64,
    /// Unique messages the receiver got.
    pub received_messages: u64,
    /// Unique payload bytes the receiver got.
    pub received_bytes: u64,
    /// Goodput: `received_bytes` × 8 / transfer time, bit/s; null when the run was too short
    /// to time (under [`MIN_TIMED_NS`]).
    pub goodput_bps: Option<f64>,
    /// Offered rate: `sent_bytes` × 8 / transfer time, bit/s; null when too short to time.
    pub sent_bps: Option<f64>,
    /// UDP: what the receiver found missing, repeated and out of order; null otherwise.
    pub delivery: Option<Delivery>,
    /// Share of the sender's data packets sent again (TCP, QUIC, UDP stop-and-wait) or lost
    /// (UDP streaming); null when unknown.
    pub retrans_rate: Option<f64>,
    /// Stop-and-wait round trips; null for streaming.
    pub rtt: Option<RttFigures>,
}

/// What a UDP receiver counted, with each count's share of the messages sent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Messages sent that never arrived.
    pub lost: u64,
    /// `lost` / messages sent × 100.
    pub lost_pct: f64,
    /// Extra copies of messages already received.
    pub duplicates: u64,
    /// `duplicates` / messages sent × 100.
    pub duplicates_pct: f64,
    /// New messages that arrived after a later one.
    pub out_of_order: u64,
    /// `out_of_order` / messages sent × 100.
    pub out_of_order_pct: f64,
}

impl Headline {
    /// Whether the run lasted long enough for a rate to mean something.
    pub fn timed(&self) -> bool {
        self.goodput_bps.is_some()
    }

    /// The transfer time in seconds.
    pub fn transfer_seconds(&self) -> f64 {
        self.transfer_ns as f64 / 1e9
    }
}

/// `part` / `whole` × 100; 0 when `whole` is 0.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

impl RunRecord {
    /// The run's headline figures. Forward, the client sends and the server receives; with
    /// `-R` the other way round.
    pub fn headline(&self) -> Headline {
        let (c, s) = (&self.client, &self.server);
        let (sent_messages, sent_bytes, received_messages, received_bytes) = if self.reverse {
            (s.messages, s.bytes, c.messages, c.bytes)
        } else {
            (c.messages, c.bytes, s.messages, s.bytes)
        };
        let transfer_ns = c.elapsed_ns;
        let seconds = transfer_ns as f64 / 1e9;
        let timed = transfer_ns >= MIN_TIMED_NS;
        let delivery = (self.protocol == Protocol::Udp).then(|| {
            let (lost, duplicates, out_of_order) = match (&c.udp_received, self.reverse) {
                (Some(u), true) => (u.lost, u.duplicates, u.out_of_order),
                _ => (s.lost, s.duplicates, s.out_of_order),
            };
            Delivery {
                lost,
                lost_pct: percent(lost, sent_messages),
                duplicates,
                duplicates_pct: percent(duplicates, sent_messages),
                out_of_order,
                out_of_order_pct: percent(out_of_order, sent_messages),
            }
        });
        let sender = if self.reverse {
            &s.measured
        } else {
            &c.measured
        };
        Headline {
            transfer_ns,
            sent_messages,
            sent_bytes,
            received_messages,
            received_bytes,
            goodput_bps: timed.then(|| bits_per_second(received_bytes, seconds)),
            sent_bps: timed.then(|| bits_per_second(sent_bytes, seconds)),
            delivery,
            retrans_rate: sender.retrans_rate,
            rtt: c.rtt,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::Mechanism;
    use crate::proto::ServerReport;
    use crate::record::run::{ClientRecord, EndMetrics, ServerRecord, UdpReceipt};

    /// A run whose client sent `sent` 1000-byte messages in `ns` and whose server read `read`,
    /// losing the rest.
    pub(crate) fn run(protocol: Protocol, sent: u64, read: u64, ns: u64) -> RunRecord {
        let server = ServerReport {
            protocol,
            mechanism: Mechanism::Stream,
            messages: read,
            bytes: read * 1000,
            read_calls: read,
            elapsed_ns: ns / 2,
            idle_after_last_ns: 0,
            lost: sent.saturating_sub(read),
            duplicates: 0,
            out_of_order: 0,
            jitter_us: None,
            acks_sent: 0,
            aborted: false,
            abort_reason: None,
            data_path: Default::default(),
            transport: None,
            cpu: None,
            intervals: Vec::new(),
        };
        RunRecord {
            protocol,
            mechanism: Mechanism::Stream,
            repeat_index: 0,
            session: 7,
            client: ClientRecord {
                messages: sent,
                bytes: sent * 1000,
                seconds: ns as f64 / 1e9,
                elapsed_ns: ns,
                rate_bps: 0.0,
                send_calls: sent,
                datagrams: sent,
                retransmissions: 0,
                timeouts: 0,
                send_errors: 0,
                rtt: None,
                data_path: Default::default(),
                measured: EndMetrics::default(),
                udp_received: None,
            },
            server: ServerRecord::of(&server),
            relay: None,
            flows: Vec::new(),
            reverse: false,
            ended_by: Default::default(),
            rate_search: None,
        }
    }

    #[test]
    fn goodput_is_what_arrived_over_the_transfer_time() {
        // 1000 messages of 1000 B sent in 0.5 s, 400 read: goodput 400 000 B × 8 / 0.5 s
        // = 6.4 Mbit/s, sent 16 Mbit/s, 600 lost = 60 % of those sent.
        let h = run(Protocol::Udp, 1000, 400, 500_000_000).headline();
        assert_eq!(h.goodput_bps, Some(6_400_000.0));
        assert_eq!(h.sent_bps, Some(16_000_000.0));
        let d = h.delivery.unwrap();
        assert_eq!((d.lost, d.lost_pct), (600, 60.0));
        assert_eq!((h.sent_bytes, h.received_bytes), (1_000_000, 400_000));
        // The server's own span is half the client's: its rate is not the headline.
        assert!(ServerRecord::of(&ServerReport::default()).rate_bps == 0.0);
    }

    #[test]
    fn tcp_has_no_delivery_figures_and_reversed_runs_swap_the_roles() {
        let h = run(Protocol::Tcp, 10, 10, 2_000_000).headline();
        assert!(h.delivery.is_none());
        assert_eq!(h.goodput_bps, Some(10_000.0 * 8.0 / 0.002));
        // -R: the server sent 10 messages, the client received 6 and counted 4 lost.
        let mut r = run(Protocol::Udp, 6, 10, 2_000_000);
        r.reverse = true;
        r.client.udp_received = Some(UdpReceipt {
            lost: 4,
            ..UdpReceipt::default()
        });
        let h = r.headline();
        assert_eq!((h.sent_messages, h.received_messages), (10, 6));
        assert_eq!(h.delivery.unwrap().lost_pct, 40.0);
        assert_eq!(h.goodput_bps, Some(6000.0 * 8.0 / 0.002));
    }

    #[test]
    fn a_run_under_a_millisecond_is_too_short_to_time() {
        let h = run(Protocol::Tcp, 1, 1, MIN_TIMED_NS - 1).headline();
        assert!(!h.timed());
        assert_eq!((h.goodput_bps, h.sent_bps), (None, None));
        assert!(run(Protocol::Tcp, 1, 1, MIN_TIMED_NS).headline().timed());
    }
}
