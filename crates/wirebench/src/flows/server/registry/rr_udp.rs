//! The registry's entry for a UDP request-response session: answers every request datagram
//! on the receiving thread (one lock per batch, no allocation) and counts what it answered.
//! Each answer is charged to the session's meter before it leaves (`--max-bytes`,
//! `--max-rate`): this thread cannot wait, so an answer past a limit is not sent.

use std::sync::{Arc, Mutex};

use wirebench_core::wire::datagram::{write_stamps, Header, Kind, HEADER_LEN};

use crate::engine::wall_clock::unix_now_ns;
use crate::flows::server::meter::Meter;

/// Counters of a UDP request-response session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RrUdpCounts {
    /// Request datagrams of this session received (well-formed or not).
    pub datagrams: u64,
    /// Requests answered: a response datagram the kernel took.
    pub answered: u64,
    /// Answered requests whose copy was marked as a retransmission.
    pub retransmissions: u64,
    /// Datagrams that did not fit the session (wrong kind or length).
    pub malformed: u64,
    /// Responses the kernel refused to send.
    pub reply_errors: u64,
    /// Requests left unanswered because the answer would pass a limit of the server's.
    pub withheld: u64,
}

#[derive(Debug)]
struct RrUdpState {
    counts: RrUdpCounts,
    /// One response datagram, rewritten in place for each answer.
    reply: Vec<u8>,
}

/// The server side of one UDP request-response session: answers every request datagram.
#[derive(Debug)]
pub struct RrUdpSession {
    id: u32,
    request: u32,
    response: u32,
    /// The client asked for the server's stamps in every answer (`RrParams::stamps`).
    stamps: bool,
    /// The session's meter: requests are counted in, answers charged to it before they leave.
    meter: Arc<Meter>,
    state: Mutex<RrUdpState>,
}

impl RrUdpSession {
    /// A session answering `request`-byte requests with `response`-byte responses (`stamps`:
    /// each starting with when its request arrived and when it left), under `meter`'s limits.
    pub fn new(id: u32, (request, response): (u32, u32), stamps: bool, meter: Arc<Meter>) -> Self {
        RrUdpSession {
            id,
            request,
            response,
            stamps,
            meter,
            state: Mutex::new(RrUdpState {
                counts: RrUdpCounts::default(),
                reply: vec![0u8; HEADER_LEN + response as usize],
            }),
        }
    }

    /// Answers the request datagrams of one receive (with GRO several, `stride` bytes apart):
    /// one lock per batch, no allocation.
    pub fn on_datagrams(&self, data: &[u8], stride: usize, reply: &mut dyn FnMut(&[u8]) -> bool) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        let state = &mut *state;
        // The batch was read just now: one arrival stamp for all of it.
        let arrived_ns = if self.stamps { unix_now_ns() } else { 0 };
        for datagram in data.chunks(stride.max(1)) {
            state.counts.datagrams += 1;
            let header = match Header::decode(datagram) {
                Ok(h)
                    if h.kind == Kind::Request
                        && h.session == self.id
                        && datagram.len() == HEADER_LEN + self.request as usize =>
                {
                    h
                }
                _ => {
                    state.counts.malformed += 1;
                    continue;
                }
            };
            let answer = Header {
                kind: Kind::Response,
                ..header
            };
            if answer.write_to(&mut state.reply).is_err() {
                state.counts.malformed += 1;
                continue;
            }
            self.meter.count_read(u64::from(self.request));
            if self.meter.charge_answer(u64::from(self.response)).is_err() {
                // The meter has tripped: the gate's watch ends the session with the reason.
                state.counts.withheld += 1;
                continue;
            }
            if self.stamps {
                write_stamps(&mut state.reply[HEADER_LEN..], arrived_ns, unix_now_ns());
            }
            if reply(&state.reply) {
                self.meter.count_sent(u64::from(self.response));
                state.counts.answered += 1;
                state.counts.retransmissions += u64::from(header.retransmit);
            } else {
                state.counts.reply_errors += 1;
            }
        }
    }

    /// A snapshot of the counters.
    pub fn counts(&self) -> RrUdpCounts {
        self.state.lock().map(|s| s.counts).unwrap_or_default()
    }
}
