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
