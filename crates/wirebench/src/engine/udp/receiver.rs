//! The receiving side of one UDP session (the server; the client with `--reverse`): counts
//! arriving data datagrams (streaming: unique, duplicate, out-of-order through the core
//! `SequenceTracker`; stop-and-wait: the core receiver machine, acknowledging every copy),
//! estimates jitter, and says when everything the sender sent has arrived. Never sends data.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use wirebench_core::machine::saw::{Delivery, StopAndWaitReceiver};
use wirebench_core::machine::seq::{Arrival, DropMark, SequenceTracker};
use wirebench_core::vocab::counters::{Cumulative, JitterEstimator};
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::datagram::{self, Header, Kind, HEADER_LEN};

/// Counters of a UDP session, as of now.
#[derive(Debug, Clone, Copy, Default)]
pub struct UdpCounts {
    /// Unique messages delivered.
    pub messages: u64,
    /// Unique payload bytes delivered.
    pub bytes: u64,
    /// Data datagrams received, duplicates included.
    pub datagrams: u64,
    /// Copies of messages already delivered.
    pub duplicates: u64,
    /// New messages that arrived after a higher sequence number.
    pub out_of_order: u64,
    /// Datagrams that arrived too far behind the newest to be classified.
    pub too_late: u64,
    /// Datagrams that did not fit the session (wrong length, sequence out of range, wrong kind).
    pub malformed: u64,
    /// Acknowledgements sent (stop-and-wait).
    pub acks_sent: u64,
    /// Acknowledgements the kernel refused to send.
    pub ack_errors: u64,
    /// First data arrival.
    pub first_at: Option<Instant>,
    /// Last data arrival.
    pub last_at: Option<Instant>,
    /// Interarrival jitter (RFC 3550) of the data datagrams, microseconds; None before two
    /// datagrams with a timestamp arrived.
    pub jitter_us: Option<f64>,
}

#[derive(Debug)]
struct State {
    counts: UdpCounts,
    tracker: SequenceTracker,
    receiver: StopAndWaitReceiver,
    jitter: JitterEstimator,
    /// Messages the client says it sent; known once it is done.
    expected: Option<u64>,
}

/// One UDP session's receive side.
#[derive(Debug)]
pub struct UdpReceiver {
    id: u32,
    mechanism: Mechanism,
    total_bytes: u64,
    msg_size: u32,
    state: Mutex<State>,
    /// Signalled when every message the client sent has been delivered.
    complete: Notify,
    /// The origin of the arrival times the jitter estimate uses.
    created: Instant,
}

impl UdpReceiver {
    /// A session expecting `total_bytes` in messages of `msg_size`.
    pub fn new(id: u32, mechanism: Mechanism, total_bytes: u64, msg_size: u32) -> Self {
        UdpReceiver {
            id,
            mechanism,
            total_bytes,
            msg_size,
            state: Mutex::new(State {
                counts: UdpCounts::default(),
                tracker: SequenceTracker::new(),
                receiver: StopAndWaitReceiver::new(),
                jitter: JitterEstimator::new(),
                expected: None,
            }),
            created: Instant::now(),
            complete: Notify::new(),
        }
    }

    /// Where the receiving socket's drop counter stood before any datagram of the session
    /// could arrive: the first receive's gap is judged against it.
    pub fn baseline(&self, mark: DropMark) {
        if let Ok(mut state) = self.state.lock() {
            state.tracker.baseline(mark);
        }
    }

    /// Handles the data datagrams of one receive (with GRO, several of one flow, `stride` bytes
    /// apart), already routed to this session, queued when the receiving socket's drop counter
    /// stood at `mark`: one lock and one clock read per batch.
    pub fn on_datagrams(
        &self,
        data: &[u8],
        stride: usize,
        mark: Option<DropMark>,
        reply: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        let now = Instant::now();
        // One arrival time for the batch, on the jitter estimate's clock.
        let arrived_us =
            u64::try_from(now.duration_since(self.created).as_micros()).unwrap_or(u64::MAX);
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.tracker.receive(mark);
        for datagram in data.chunks(stride.max(1)) {
            match Header::decode(datagram) {
                Ok(header) if header.session == self.id => {
                    self.record(&mut state, &header, datagram, (now, arrived_us), reply);
                }
                _ => state.counts.malformed += 1,
            }
        }
        if state.expected == Some(state.counts.messages) {
            self.complete.notify_one();
        }
    }

    /// Counts one datagram (and acknowledges it, for stop-and-wait).
    fn record(
        &self,
        state: &mut State,
        header: &Header,
        datagram: &[u8],
        (now, arrived_us): (Instant, u64),
        reply: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        let len = datagram.len();
        if !datagram::is_session_data(header, len, self.id, self.total_bytes, self.msg_size) {
            state.counts.malformed += 1;
            return;
        }
        let payload = (len - HEADER_LEN) as u64;
        if let Some(sent_us) = datagram::read_timestamp(&datagram[HEADER_LEN..]) {
            state.jitter.record(sent_us, arrived_us);
        }
        let c = &mut state.counts;
        c.datagrams += 1;
        c.first_at.get_or_insert(now);
        c.last_at = Some(now);
        let ack = match self.mechanism {
            Mechanism::Stream => {
                match state.tracker.record(header.seq) {
                    Arrival::New { out_of_order } => {
                        state.counts.messages += 1;
                        state.counts.bytes += payload;
                        state.counts.out_of_order += u64::from(out_of_order);
                    }
                    Arrival::Duplicate => state.counts.duplicates += 1,
                    // Beyond the tracker's window: it cannot tell new from duplicate, so it is
                    // neither delivered nor a duplicate (and so shows up as lost).
                    Arrival::TooLate => state.counts.too_late += 1,
                }
                false
            }
            Mechanism::StopAndWait => match state.receiver.handle_data(header.seq) {
                Delivery::New => {
                    state.counts.messages += 1;
                    state.counts.bytes += payload;
                    true
                }
                // Its acknowledgement was lost or late: acknowledge again, count it once.
                Delivery::Duplicate => {
                    state.counts.duplicates += 1;
                    true
                }
                Delivery::Unexpected => {
                    state.counts.malformed += 1;
                    false
                }
            },
        };
        if ack {
            let mut out = [0u8; HEADER_LEN];
            Header {
                kind: Kind::Ack,
                retransmit: false,
                session: self.id,
                seq: header.seq,
            }
            .encode(&mut out);
            if reply(&out) {
                state.counts.acks_sent += 1;
            } else {
                state.counts.ack_errors += 1;
            }
        }
    }

    /// Records that the client has sent `messages_sent` messages in all.
    pub fn sender_done(&self, messages_sent: u64) {
        if let Ok(mut state) = self.state.lock() {
            state.expected = Some(messages_sent);
            if state.counts.messages >= messages_sent {
                self.complete.notify_one();
            }
        }
    }

    /// Whether every message the client reported sending has been delivered.
    pub fn is_complete(&self) -> bool {
        self.state
            .lock()
            .map(|s| s.expected.is_some_and(|e| s.counts.messages >= e))
            .unwrap_or(false)
    }

    /// Waits until [`Self::is_complete`] may have become true.
    pub async fn changed(&self) {
        self.complete.notified().await;
    }

    /// Returns when every message the sender sent has arrived, or after `grace` without any
    /// arrival (counted from the later of the last arrival and now).
    pub async fn wait_for_stragglers(&self, grace: Duration) {
        let done_at = Instant::now();
        loop {
            if self.is_complete() {
                return;
            }
            let quiet_since = self.counts().last_at.map_or(done_at, |t| t.max(done_at));
            let deadline = quiet_since + grace;
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = self.changed() => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }

    /// Of the `messages_sent` messages, how many the receiving host dropped (its socket buffer
    /// was full), judged from the drop marks of the receives and `end`, where the socket's drop
    /// counter stands now that the sender is done (`machine::seq`); None when the socket never
    /// said (or for stop-and-wait, which resends what is lost).
    pub fn dropped_by_host(&self, messages_sent: u64, end: Option<DropMark>) -> Option<u64> {
        if self.mechanism != Mechanism::Stream {
            return None;
        }
        self.state
            .lock()
            .ok()
            .and_then(|s| s.tracker.host_dropped(messages_sent, end))
    }

    /// A snapshot of the counters.
    pub fn counts(&self) -> UdpCounts {
        self.state
            .lock()
            .map(|s| UdpCounts {
                jitter_us: s.jitter.jitter_us(),
                ..s.counts
            })
            .unwrap_or_default()
    }

    /// Unique messages and payload bytes delivered so far, and one above the highest sequence
    /// number seen (0: none), for the receipts of a rate-search trial.
    pub fn receipt(&self) -> (u64, u64, u64) {
        self.state
            .lock()
            .map(|s| {
                (
                    s.counts.messages,
                    s.counts.bytes,
                    s.tracker.highest().map_or(0, |h| h + 1),
                )
            })
            .unwrap_or_default()
    }

    /// Bytes delivered so far, datagrams missing below the highest sequence number seen (they
    /// may still arrive late) and the jitter estimate now, for interval reports.
    pub fn progress(&self) -> Cumulative {
        self.state
            .lock()
            .map(|s| Cumulative {
                bytes: s.counts.bytes,
                lost: Some(
                    s.tracker
                        .highest()
                        .map_or(0, |h| (h + 1).saturating_sub(s.counts.messages)),
                ),
                retransmitted: None,
                tcp: None,
                jitter_ns: s.jitter.jitter_us().map(|us| (us * 1000.0).round() as u64),
            })
            .unwrap_or_default()
    }
}
