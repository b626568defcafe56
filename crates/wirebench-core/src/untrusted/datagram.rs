//! Harnesses for the UDP data path: owns feeding arbitrary datagrams to the header decoder and
//! the receiver's accounting (the steps of `wirebench::engine::udp::receiver`, with its session
//! check [`datagram::is_session_data`] shared), and arbitrary sequence numbers to the
//! [`SequenceTracker`], checked against a reference model; must not do I/O.

use std::collections::BTreeSet;

use super::cursor::Cursor;
use super::one_line::assert_one_line;
use crate::machine::saw::{Delivery, StopAndWaitReceiver};
use crate::machine::seq::{Arrival, DropMark, SequenceTracker, WINDOW};
use crate::vocab::counters::JitterEstimator;
use crate::vocab::plan::{message_count, message_len};
use crate::wire::datagram::{self, Header, Kind, FLAG_RETRANSMIT, HEADER_LEN, MAX_UDP_PAYLOAD_V6};

/// What a session's datagrams did to its receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DatagramSummary {
    /// Datagrams that fit the session (data, in range, the right length).
    pub accepted: u64,
    /// Datagrams refused (not a header, another session, wrong kind or length).
    pub malformed: u64,
    /// Unique messages delivered.
    pub delivered: u64,
}

/// `data` is one UDP session: a parameter block (`flags u8 | session u32 | total_bytes u64 |
/// msg_size u16`; flags bit 0 = stop-and-wait), then datagrams, each introduced by an op byte:
/// even = raw (`len u8`, then that many bytes), odd = a well-formed header with `seq u64` and a
/// payload of the right length for that seq (op bit 1: another session; bit 2: retransmit flag).
///
/// Each datagram goes through what the app's receiver does: [`Header::decode`], the session's
/// checks ([`datagram::is_session_data`]), then the [`SequenceTracker`] (streaming) or the
/// [`StopAndWaitReceiver`], and the jitter estimate. Checks: a decoded header re-encodes to its
/// bytes (unused flags and reserved bits aside); the counts add up; delivered messages and bytes
/// never exceed what the session holds.
pub fn data_datagrams(data: &[u8]) -> DatagramSummary {
    let mut input = Cursor::new(data);
    let stop_and_wait = input.u8() & 1 == 1;
    let session = input.u32();
    let total_bytes = input.u64();
    let msg_size = u32::from(input.u16());
    let count = message_count(total_bytes, msg_size);

    let mut tracker = SequenceTracker::new();
    let mut model = TrackerModel::default();
    let mut saw = StopAndWaitReceiver::new();
    let mut jitter = JitterEstimator::new();
    let mut summary = DatagramSummary::default();
    let mut bytes_delivered = 0u64;
    let mut arrived_us = 0u64;
    let mut buf = vec![0u8; MAX_UDP_PAYLOAD_V6];

    while !input.is_empty() {
        let op = input.u8();
        let datagram: &[u8] = if op & 1 == 0 {
            let len = usize::from(input.u8());
            input.bytes(len)
        } else {
            let seq = input.u64();
            let header = Header {
                kind: Kind::Data,
                retransmit: op & 4 != 0,
                session: if op & 2 != 0 { session ^ 1 } else { session },
                seq,
            };
            let payload = (message_len(seq, total_bytes, msg_size) as usize)
                .min(MAX_UDP_PAYLOAD_V6 - HEADER_LEN);
            let len = HEADER_LEN + payload;
            // len is at most the buffer's size (the payload was capped above).
            let out = &mut buf[..len];
            out[HEADER_LEN..].fill(input.u8());
            let _ = header.write_to(out);
            out
        };
        arrived_us += u64::from(input.u16());

        let header = match Header::decode(datagram) {
            Ok(header) => header,
            Err(e) => {
                assert_one_line(&e.to_string());
                summary.malformed += 1;
                continue;
            }
        };
        let mut reencoded = [0u8; HEADER_LEN];
        header.encode(&mut reencoded);
        let mut expected = [0u8; HEADER_LEN];
        expected.copy_from_slice(&datagram[..HEADER_LEN]);
        expected[1] &= FLAG_RETRANSMIT;
        expected[2..4].fill(0);
        assert_eq!(reencoded, expected, "header re-encodes differently");

        // The session's checks, as in the app's receiver.
        let len = datagram.len();
        if !datagram::is_session_data(&header, len, session, total_bytes, msg_size) {
            summary.malformed += 1;
            continue;
        }
        summary.accepted += 1;
        if let Some(sent_us) = datagram::read_timestamp(&datagram[HEADER_LEN..]) {
            jitter.record(sent_us, arrived_us);
        }
        let new = if stop_and_wait {
            saw.handle_data(header.seq) == Delivery::New
        } else {
            let arrival = tracker.record(header.seq);
            assert_eq!(arrival, model.record(header.seq), "seq {}", header.seq);
            matches!(arrival, Arrival::New { .. })
        };
        if new {
            summary.delivered += 1;
            bytes_delivered += (len - HEADER_LEN) as u64;
        }
    }

    assert!(
        summary.delivered <= count,
        "delivered more messages than the session has"
    );
    assert!(
        bytes_delivered <= total_bytes,
        "delivered more bytes than the session has"
    );
    if stop_and_wait {
        assert_eq!(saw.delivered(), summary.delivered);
        assert_eq!(
            saw.delivered() + saw.duplicates() + saw.unexpected(),
            summary.accepted
        );
    } else {
        assert_eq!(tracker.unique(), summary.delivered);
        assert_eq!(
            tracker.unique() + tracker.duplicates() + tracker.too_late(),
            summary.accepted
        );
    }
    if let Some(j) = jitter.jitter_us() {
        assert!(j.is_finite() && j >= 0.0, "jitter {j}");
    }
    summary
}

/// `data` is a series of sequence numbers for one [`SequenceTracker`], each an op byte and
/// operands: 0 = absolute `u64`, 1 = highest + `u16`, 2 = highest − `u16`, 3 = highest + the
/// window ± `u16`, 4 = the previous seq again, 5 = highest − the window ± `u16`; and 6 = a
/// receive announced with a drop mark (`u8`: bit 7 = no mark, bit 6 = the socket, bits 0–5 =
/// its drop counter), which records nothing.
///
/// Checks every answer and count against a reference model (a set of the seqs seen in the window),
/// so huge jumps, wrap-around at the top of the seq space and slides are all verified; the
/// tracker's own memory is its fixed bitmap whatever the jumps. The host's share of the loss is
/// checked after every receive and at the end: known once a receive had a mark, and never more
/// than the loss.
pub fn seq_tracker(data: &[u8]) -> u64 {
    let mut input = Cursor::new(data);
    let mut tracker = SequenceTracker::new();
    let mut model = TrackerModel::default();
    let mut previous = 0u64;
    let mut records = 0u64;
    let mut marked = false;
    let mut last_mark = None;
    while !input.is_empty() {
        let op = input.u8() % 7;
        if op == 6 {
            let m = input.u8();
            let mark = (m & 0x80 == 0).then_some(DropMark {
                socket: u32::from((m >> 6) & 1),
                dropped: u32::from(m & 0x3f),
            });
            tracker.receive(mark);
            marked |= mark.is_some();
            last_mark = mark.or(last_mark);
            check_host_share(&tracker, marked, last_mark);
            continue;
        }
        let highest = tracker.highest().unwrap_or(0);
        let seq = match op {
            0 => input.u64(),
            1 => highest.saturating_add(u64::from(input.u16())),
            2 => highest.saturating_sub(u64::from(input.u16())),
            3 => (highest.saturating_add(WINDOW - 1))
                .saturating_add(u64::from(input.u8()))
                .saturating_sub(128),
            4 => previous,
            _ => (highest.saturating_sub(WINDOW) + u64::from(input.u8())).saturating_sub(128),
        };
        previous = seq;
        records += 1;
        assert_eq!(tracker.record(seq), model.record(seq), "seq {seq}");
        assert_eq!(tracker.highest(), model.highest);
        assert_eq!(tracker.unique(), model.unique);
        assert_eq!(tracker.duplicates(), model.duplicates);
        assert_eq!(tracker.out_of_order(), model.out_of_order);
        assert_eq!(tracker.too_late(), model.too_late);
    }
    assert_eq!(
        tracker.unique() + tracker.duplicates() + tracker.too_late(),
        records
    );
    check_host_share(&tracker, marked, last_mark);
    records
}

/// [`SequenceTracker::host_dropped`] for a few sender counts and end marks (`last`: the latest
/// mark given, as the counter standing still; and moved): None until a receive had a mark
/// (`marked`), then at most [`SequenceTracker::lost`].
fn check_host_share(tracker: &SequenceTracker, marked: bool, last: Option<DropMark>) {
    let received_up_to = tracker.highest().map_or(0, |h| h.saturating_add(1));
    let moved = last.map(|m| DropMark {
        dropped: m.dropped.wrapping_add(1),
        ..m
    });
    for sent in [
        tracker.unique(),
        received_up_to,
        received_up_to.saturating_add(WINDOW),
        u64::MAX,
    ] {
        for end in [None, last, moved] {
            let host = tracker.host_dropped(sent, end);
            assert_eq!(host.is_some(), marked, "host share known only with a mark");
            if let Some(host) = host {
                let lost = tracker.lost(sent);
                assert!(
                    host <= lost,
                    "host dropped {host} of {lost} lost ({sent} sent)"
                );
            }
        }
    }
}

/// What [`SequenceTracker`] should answer, from its documented behaviour: it remembers the seqs in
/// `[base, base + WINDOW)`, where the window's top follows the highest seq recorded.
#[derive(Debug, Default)]
struct TrackerModel {
    seen: BTreeSet<u64>,
    highest: Option<u64>,
    max_seq: Option<u64>,
    unique: u64,
    duplicates: u64,
    out_of_order: u64,
    too_late: u64,
}

impl TrackerModel {
    fn base(&self) -> u64 {
        self.max_seq.map_or(0, |m| m.saturating_sub(WINDOW - 1))
    }

    fn record(&mut self, seq: u64) -> Arrival {
        if seq < self.base() {
            self.too_late += 1;
            return Arrival::TooLate;
        }
        self.max_seq = Some(self.max_seq.map_or(seq, |m| m.max(seq)));
        let base = self.base();
        // Forget what left the window, so the model stays as small as the input.
        self.seen = self.seen.split_off(&base);
        if !self.seen.insert(seq) {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.unique += 1;
        let out_of_order = self.highest.is_some_and(|h| seq < h);
        if out_of_order {
            self.out_of_order += 1;
        } else {
            self.highest = Some(seq);
        }
        Arrival::New { out_of_order }
    }
}
