//! Stop-and-wait over an unreliable datagram path: owns the sender machine (one message in
//! flight, retransmission on timeout, Karn's rule) and the receiver machine (deliver once,
//! acknowledge every copy); must not read clocks or touch sockets — time comes in as `now`.

use std::time::{Duration, Instant};

use crate::machine::rto::RtoEstimator;
use crate::vocab::plan::{message_count, message_len};

/// How the retransmission timeout is chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum RtoPolicy {
    /// Always this timeout (what users ask for with `--rto 1s`).
    Fixed(Duration),
    /// RFC 6298-style estimate from the measured round trips.
    Adaptive(RtoEstimator),
}

impl RtoPolicy {
    fn rto(&self) -> Duration {
        match self {
            RtoPolicy::Fixed(d) => *d,
            RtoPolicy::Adaptive(e) => e.rto(),
        }
    }
}

/// A datagram the sender wants on the wire now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Message index.
    pub seq: u64,
    /// Payload length.
    pub len: u32,
    /// Whether this is a copy sent again after a timeout.
    pub retransmit: bool,
}

/// What an acknowledgement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    /// The outstanding message is acknowledged; `rtt` is `None` if it was retransmitted (Karn).
    Acked {
        /// Round trip of the first and only transmission.
        rtt: Option<Duration>,
    },
    /// An acknowledgement of a message already acknowledged or not yet sent: ignored.
    Stale,
}

#[derive(Debug, Clone, Copy)]
struct Outstanding {
    seq: u64,
    len: u32,
    sent_at: Instant,
    deadline: Instant,
    retransmitted: bool,
    /// Set by a timeout; the next `poll_transmit` sends it again.
    due: bool,
}

/// The sending side of stop-and-wait.
#[derive(Debug, Clone)]
pub struct StopAndWaitSender {
    total_bytes: u64,
    msg_size: u32,
    count: u64,
    next_seq: u64,
    outstanding: Option<Outstanding>,
    rto: RtoPolicy,
    messages_acked: u64,
    bytes_acked: u64,
    transmissions: u64,
    retransmissions: u64,
    timeouts: u64,
    stale_acks: u64,
}

impl StopAndWaitSender {
    /// A sender of `total_bytes` in messages of `msg_size` (the last carries the remainder).
    pub fn new(total_bytes: u64, msg_size: u32, rto: RtoPolicy) -> Self {
        let msg_size = msg_size.max(1);
        StopAndWaitSender {
            total_bytes,
            msg_size,
            count: message_count(total_bytes, msg_size),
            next_seq: 0,
            outstanding: None,
            rto,
            messages_acked: 0,
            bytes_acked: 0,
            transmissions: 0,
            retransmissions: 0,
            timeouts: 0,
            stale_acks: 0,
        }
    }

    /// The datagram to send now, if any: the next message when nothing is outstanding, or the
    /// outstanding one again after [`Self::handle_timeout`]. Records `now` as its send time.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let rto = self.rto.rto();
        match &mut self.outstanding {
            Some(o) if o.due => {
                o.due = false;
                o.retransmitted = true;
                o.sent_at = now;
                o.deadline = now + rto;
                self.transmissions += 1;
                self.retransmissions += 1;
                Some(Transmit {
                    seq: o.seq,
                    len: o.len,
                    retransmit: true,
                })
            }
            Some(_) => None,
            None if self.next_seq < self.count => {
                let seq = self.next_seq;
                let len = message_len(seq, self.total_bytes, self.msg_size);
                self.next_seq += 1;
                self.outstanding = Some(Outstanding {
                    seq,
                    len,
                    sent_at: now,
                    deadline: now + rto,
                    retransmitted: false,
                    due: false,
                });
                self.transmissions += 1;
                Some(Transmit {
                    seq,
                    len,
                    retransmit: false,
                })
            }
            None => None,
        }
    }

    /// When the outstanding message times out (`None` when nothing is waiting for a timer).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.outstanding.filter(|o| !o.due).map(|o| o.deadline)
    }

    /// Call when `now >= poll_timeout()`: marks a retransmission due and backs off.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(o) = &mut self.outstanding else {
            return;
        };
        if o.due || now < o.deadline {
            return;
        }
        o.due = true;
        self.timeouts += 1;
        if let RtoPolicy::Adaptive(e) = &mut self.rto {
            e.on_timeout();
        }
    }

    /// An acknowledgement for `seq` arrived at `now`.
    pub fn handle_ack(&mut self, seq: u64, now: Instant) -> AckOutcome {
        match self.outstanding {
            Some(o) if o.seq == seq => {
                self.outstanding = None;
                self.messages_acked += 1;
                self.bytes_acked += u64::from(o.len);
                // Karn: an ack of a retransmitted message may answer either copy.
                let rtt = (!o.retransmitted).then(|| now.saturating_duration_since(o.sent_at));
                if let (Some(rtt), RtoPolicy::Adaptive(e)) = (rtt, &mut self.rto) {
                    e.on_sample(rtt);
                }
                AckOutcome::Acked { rtt }
            }
            _ => {
                self.stale_acks += 1;
                AckOutcome::Stale
            }
        }
    }

    /// Whether every message has been acknowledged.
    pub fn is_done(&self) -> bool {
        self.messages_acked == self.count
    }

    /// Messages acknowledged.
    pub fn messages_acked(&self) -> u64 {
        self.messages_acked
    }

    /// Payload bytes acknowledged.
    pub fn bytes_acked(&self) -> u64 {
        self.bytes_acked
    }

    /// Datagrams sent, retransmissions included.
    pub fn transmissions(&self) -> u64 {
        self.transmissions
    }

    /// Datagrams sent again after a timeout.
    pub fn retransmissions(&self) -> u64 {
        self.retransmissions
    }

    /// Timer expiries.
    pub fn timeouts(&self) -> u64 {
        self.timeouts
    }

    /// Acknowledgements that matched nothing outstanding.
    pub fn stale_acks(&self) -> u64 {
        self.stale_acks
    }

    /// The timeout the next transmission gets.
    pub fn current_rto(&self) -> Duration {
        self.rto.rto()
    }
}

/// What the receiver does with an arriving data datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// First copy: deliver it, count it, acknowledge it.
    New,
    /// A copy of an already delivered message (its ack was lost or late): acknowledge again,
    /// count once as a duplicate.
    Duplicate,
    /// A message beyond the next expected one: a protocol violation for stop-and-wait; not acked.
    Unexpected,
}

/// The receiving side of stop-and-wait.
#[derive(Debug, Clone, Default)]
pub struct StopAndWaitReceiver {
    next_expected: u64,
    delivered: u64,
    duplicates: u64,
    unexpected: u64,
}

impl StopAndWaitReceiver {
    /// A receiver expecting message 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Classifies an arriving data datagram.
    pub fn handle_data(&mut self, seq: u64) -> Delivery {
        if seq == self.next_expected {
            self.next_expected += 1;
            self.delivered += 1;
            Delivery::New
        } else if seq < self.next_expected {
            self.duplicates += 1;
            Delivery::Duplicate
        } else {
            self.unexpected += 1;
            Delivery::Unexpected
        }
    }

    /// Messages delivered (each once).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Copies of delivered messages received.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Datagrams ahead of the expected message.
    pub fn unexpected(&self) -> u64 {
        self.unexpected
    }
}

#[cfg(test)]
mod tests;
