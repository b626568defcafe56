//! Receiver-side sequence accounting for UDP: owns the unique / duplicate / out-of-order / too-late counts
//! and which missing datagrams the receiving host dropped; must not do I/O, read clocks, or fold
//! duplicates or reordering into loss.
//!
//! Memory is bounded by a ring bitmap of [`WINDOW`] bits covering `[base, base + WINDOW)`. A seq at or
//! above the window's top slides it forward; seqs that fall out are forgotten, and a copy of one that
//! arrives later is counted as too late (neither delivered nor duplicate), since we can no longer tell.
//!
//! **Dropped by the receiving host.** A socket's drop counter (Linux: `SO_RXQ_OVFL`, read with each
//! receive as a [`DropMark`]) counts whole queued buffers, and one buffer holds many datagrams
//! (segmentation offload, GRO: 64 on loopback), so it cannot say how many datagrams were lost. The
//! sequence numbers can: a gap in front of a receive whose socket's counter moved since the previous
//! receive was dropped by that socket, every datagram of it; a gap in front of a receive whose
//! counter stood still was lost before the socket (the path). A datagram of a host-dropped gap that
//! arrives after all (reordering) leaves the share. Exact wherever the path delivers in order, as
//! loopback does; where a path both reorders and loses next to a socket's drops, a gap may be
//! charged to the wrong side.

/// Number of sequence numbers the tracker remembers (128 KiB of bitmap).
pub const WINDOW: u64 = 1 << 20;

/// Bitmap words; WINDOW is a multiple of 64.
const WORDS: usize = (WINDOW / 64) as usize;

/// What one arriving data datagram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arrival {
    /// First copy: deliver it and count its bytes. `out_of_order` when a higher seq arrived before it.
    New {
        /// A higher seq had already arrived.
        out_of_order: bool,
    },
    /// A copy of a seq already seen: do not deliver again.
    Duplicate,
    /// Below the window: it may or may not have been seen, so it is neither delivered nor a duplicate.
    TooLate,
}

/// Where a receiving socket's drop counter stood when the datagrams of one receive were queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DropMark {
    /// Which socket: marks of different sockets are not compared.
    pub socket: u32,
    /// The socket's drop counter (queued buffers it dropped so far, wrapping).
    pub dropped: u32,
}

/// Counts arriving data datagrams by seq (0-based message index).
#[derive(Debug, Clone)]
pub struct SequenceTracker {
    /// Ring bitmap: seq `s` (with `base <= s < base + WINDOW`) is bit `s % WINDOW`.
    bits: Vec<u64>,
    /// The same ring: set where a missing seq was charged to the receiving host.
    host_bits: Vec<u64>,
    /// Lowest seq the bitmap covers.
    base: u64,
    highest: Option<u64>,
    unique: u64,
    duplicates: u64,
    out_of_order: u64,
    too_late: u64,
    /// The drop mark of the latest receive that had one (or the baseline).
    last_mark: Option<DropMark>,
    /// Whether the gap in front of the next datagram recorded was dropped by the receiving host.
    gap_is_host: bool,
    /// Whether any receive came with a drop mark: without, the host's share is unknown.
    marked: bool,
    /// Missing seqs charged to the receiving host that have not arrived since.
    host_missing: u64,
}

impl SequenceTracker {
    /// An empty tracker whose window starts at seq 0.
    pub fn new() -> Self {
        SequenceTracker {
            bits: vec![0; WORDS],
            host_bits: vec![0; WORDS],
            base: 0,
            highest: None,
            unique: 0,
            duplicates: 0,
            out_of_order: 0,
            too_late: 0,
            last_mark: None,
            gap_is_host: false,
            marked: false,
            host_missing: 0,
        }
    }

    /// Where the receiving socket's drop counter stood before any datagram of this flow could
    /// arrive (its first receive is compared with it).
    pub fn baseline(&mut self, mark: DropMark) {
        self.last_mark = Some(mark);
        self.marked = true;
    }

    /// Announces the datagrams of one receive, queued when the socket's drop counter stood at
    /// `mark` (None: the socket does not say). The gap in front of its first datagram is
    /// charged to the receiving host when the same socket's counter moved since the last
    /// receive; the datagrams recorded until the next call belong to this receive.
    pub fn receive(&mut self, mark: Option<DropMark>) {
        self.gap_is_host = match (self.last_mark, mark) {
            (Some(last), Some(now)) => last.socket == now.socket && last.dropped != now.dropped,
            _ => false,
        };
        if mark.is_some() {
            self.last_mark = mark;
            self.marked = true;
        }
    }

    /// Of the `messages_sent` messages, how many the receiving host dropped: the gaps charged
    /// to it that are still missing, and the tail after the highest seq received when the
    /// socket's counter stood at `end` after the sender was done and has moved since the last
    /// receive. None when no receive said where its socket's counter stood.
    pub fn host_dropped(&self, messages_sent: u64, end: Option<DropMark>) -> Option<u64> {
        if !self.marked {
            return None;
        }
        let received_up_to = self.highest.map_or(0, |h| h.saturating_add(1));
        let tail = messages_sent.saturating_sub(received_up_to);
        let tail_dropped = match (self.last_mark, end) {
            (Some(last), Some(end)) => last.socket == end.socket && last.dropped != end.dropped,
            _ => false,
        };
        let charged = self.host_missing + if tail_dropped { tail } else { 0 };
        Some(charged.min(self.lost(messages_sent)))
    }

    /// Record one arriving data datagram; returns whether it is new (deliver + count its bytes) or not.
    pub fn record(&mut self, seq: u64) -> Arrival {
        // Only the gap in front of a receive's first datagram can be the socket's doing.
        let gap_is_host = std::mem::take(&mut self.gap_is_host);
        if seq < self.base {
            self.too_late += 1;
            return Arrival::TooLate;
        }
        if seq - self.base >= WINDOW {
            self.slide_to(seq - (WINDOW - 1));
        }
        let (word, mask) = slot(seq);
        // Invariant: slot() yields word < WORDS == bits.len() == host_bits.len().
        if self.bits[word] & mask != 0 {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.bits[word] |= mask;
        self.unique += 1;
        let out_of_order = self.highest.is_some_and(|highest| seq < highest);
        if out_of_order {
            self.out_of_order += 1;
            if self.host_bits[word] & mask != 0 {
                // Charged to the host, yet here it is: it was late, not dropped.
                self.host_bits[word] &= !mask;
                self.host_missing -= 1;
            }
        } else {
            let gap_from = self.highest.map_or(0, |h| h + 1);
            if gap_is_host && seq > gap_from {
                self.host_missing += seq - gap_from;
                // Seqs below the window are forgotten: they can no longer arrive as new.
                self.set_host_positions(gap_from.max(self.base), seq);
            }
            self.highest = Some(seq);
        }
        Arrival::New { out_of_order }
    }

    /// Distinct seqs delivered.
    pub fn unique(&self) -> u64 {
        self.unique
    }

    /// Copies of seqs already delivered (while still in the window).
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// New seqs that arrived after a higher seq.
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// Datagrams below the window, neither delivered nor counted as duplicates.
    pub fn too_late(&self) -> u64 {
        self.too_late
    }

    /// Highest seq delivered so far.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Lost = messages_sent - unique (saturating): valid once the sender's count is known.
    pub fn lost(&self, messages_sent: u64) -> u64 {
        messages_sent.saturating_sub(self.unique)
    }

    /// Moves the window to start at `new_base` (> base), clearing the bits of the seqs that leave it.
    fn slide_to(&mut self, new_base: u64) {
        let leaving = new_base - self.base;
        if leaving >= WINDOW {
            self.bits.fill(0);
        } else {
            // Ring positions [start, start + leaving), wrapping once at most.
            let start = self.base % WINDOW;
            let first_end = (start + leaving).min(WINDOW);
            self.clear_positions(start, first_end);
            self.clear_positions(0, leaving - (first_end - start));
        }
        self.base = new_base;
    }

    /// Clears ring positions `[from, to)` (`to <= WINDOW`) a word at a time, so a slide costs O(words).
    fn clear_positions(&mut self, from: u64, to: u64) {
        for_each_word(from, to, |word, mask| {
            self.bits[word] &= !mask;
            self.host_bits[word] &= !mask;
        });
    }

    /// Marks seqs `[from, to)` (all inside the window) as missing by the host's doing.
    fn set_host_positions(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let (start, end) = (from % WINDOW, (to - 1) % WINDOW + 1);
        if start < end {
            for_each_word(start, end, |word, mask| self.host_bits[word] |= mask);
        } else {
            // The span wraps around the ring once.
            for_each_word(start, WINDOW, |word, mask| self.host_bits[word] |= mask);
            for_each_word(0, end, |word, mask| self.host_bits[word] |= mask);
        }
    }
}

/// Calls `f(word, mask)` for the ring positions `[from, to)` (`to <= WINDOW`), a word at a time.
fn for_each_word(from: u64, to: u64, mut f: impl FnMut(usize, u64)) {
    let mut pos = from;
    while pos < to {
        let bit = pos % 64;
        let span = (64 - bit).min(to - pos);
        let mask = if span == 64 {
            u64::MAX
        } else {
            ((1u64 << span) - 1) << bit
        };
        // pos < to <= WINDOW, so the word index is below WORDS.
        f((pos / 64) as usize, mask);
        pos += span;
    }
}

impl Default for SequenceTracker {
    fn default() -> Self {
        Self::new()
    }
}

/// Word index and bit mask of `seq` in the ring.
fn slot(seq: u64) -> (usize, u64) {
    let position = seq % WINDOW;
    // position < 2^20, so the word index fits usize on every target.
    ((position / 64) as usize, 1u64 << (position % 64))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEW: Arrival = Arrival::New {
        out_of_order: false,
    };
    const NEW_LATE: Arrival = Arrival::New { out_of_order: true };

    #[test]
    fn in_order() {
        let mut tracker = SequenceTracker::new();
        assert_eq!(tracker.highest(), None);
        for seq in 0..100 {
            assert_eq!(tracker.record(seq), NEW);
        }
        assert_eq!(tracker.unique(), 100);
        assert_eq!(tracker.duplicates(), 0);
        assert_eq!(tracker.out_of_order(), 0);
        assert_eq!(tracker.too_late(), 0);
        assert_eq!(tracker.highest(), Some(99));
        assert_eq!(tracker.lost(100), 0);
        assert_eq!(tracker.lost(103), 3);
        assert_eq!(tracker.lost(50), 0);
    }

    #[test]
    fn duplicates_are_counted_once_and_not_lost() {
        let mut tracker = SequenceTracker::new();
        assert_eq!(tracker.record(0), NEW);
        assert_eq!(tracker.record(0), Arrival::Duplicate);
        assert_eq!(tracker.record(1), NEW);
        assert_eq!(tracker.record(0), Arrival::Duplicate);
        assert_eq!(tracker.record(1), Arrival::Duplicate);
        assert_eq!(tracker.unique(), 2);
        assert_eq!(tracker.duplicates(), 3);
        assert_eq!(tracker.out_of_order(), 0);
        assert_eq!(tracker.lost(2), 0);
    }

    #[test]
    fn reordering_is_counted_once_and_not_lost() {
        let mut tracker = SequenceTracker::new();
        for (seq, expected) in [
            (0, NEW),
            (2, NEW),
            (1, NEW_LATE),
            (5, NEW),
            (3, NEW_LATE),
            (4, NEW_LATE),
        ] {
            assert_eq!(tracker.record(seq), expected, "seq {seq}");
        }
        assert_eq!(tracker.record(3), Arrival::Duplicate);
        assert_eq!(tracker.unique(), 6);
        assert_eq!(tracker.out_of_order(), 3);
        assert_eq!(tracker.duplicates(), 1);
        assert_eq!(tracker.highest(), Some(5));
        assert_eq!(tracker.lost(6), 0);
    }

    #[test]
    fn window_slide_forgets_only_what_leaves() {
        let mut tracker = SequenceTracker::new();
        for seq in [10, 20, 60, 63, 64, 69, 130] {
            assert_eq!(tracker.record(seq), NEW);
        }
        // Base becomes 65: seqs 0..65 leave the window, 65.. stay.
        assert_eq!(tracker.record(WINDOW + 64), NEW);
        for seq in [10, 20, 60, 63, 64] {
            assert_eq!(tracker.record(seq), Arrival::TooLate, "seq {seq}");
        }
        assert_eq!(tracker.record(69), Arrival::Duplicate);
        assert_eq!(tracker.record(130), Arrival::Duplicate);
        assert_eq!(tracker.record(65), NEW_LATE);
        assert_eq!(tracker.record(WINDOW + 64), Arrival::Duplicate);
        assert_eq!(tracker.unique(), 9);
        assert_eq!(tracker.too_late(), 5);
        assert_eq!(tracker.duplicates(), 3);
    }

    #[test]
    fn window_slide_wraps_around_the_ring() {
        let mut tracker = SequenceTracker::new();
        assert_eq!(tracker.record(WINDOW - 1), NEW);
        assert_eq!(tracker.record(WINDOW + 100), NEW);
        // Base is now 101; ring positions 0..101 were cleared, WINDOW - 1 kept.
        assert_eq!(tracker.record(WINDOW - 1), Arrival::Duplicate);
        assert_eq!(tracker.record(2 * WINDOW + 10), NEW);
        // Base is now WINDOW + 11: WINDOW - 1 left (position WINDOW - 1 cleared), WINDOW + 100 stays.
        assert_eq!(tracker.record(WINDOW - 1), Arrival::TooLate);
        assert_eq!(tracker.record(WINDOW + 100), Arrival::Duplicate);
        assert_eq!(tracker.record(2 * WINDOW - 1), NEW_LATE);
    }

    #[test]
    fn big_jump_clears_everything() {
        let mut tracker = SequenceTracker::new();
        assert_eq!(tracker.record(5), NEW);
        let far = 5 * WINDOW + 3;
        assert_eq!(tracker.record(far), NEW);
        let base = far - WINDOW + 1;
        assert_eq!(tracker.record(base), NEW_LATE);
        assert_eq!(tracker.record(base - 1), Arrival::TooLate);
        // Same ring position as seq 5, which must not read as seen.
        assert_eq!(tracker.record(5 * WINDOW + 5), NEW);
        assert_eq!(tracker.record(far), Arrival::Duplicate);
    }

    const fn mark(socket: u32, dropped: u32) -> Option<DropMark> {
        Some(DropMark { socket, dropped })
    }

    /// Records one receive (its drop mark, then its seqs).
    fn receive(tracker: &mut SequenceTracker, at: Option<DropMark>, seqs: std::ops::Range<u64>) {
        tracker.receive(at);
        for seq in seqs {
            tracker.record(seq);
        }
    }

    #[test]
    fn gaps_in_front_of_a_moved_counter_are_the_hosts_and_the_rest_the_paths() {
        let mut tracker = SequenceTracker::new();
        tracker.baseline(DropMark {
            socket: 1,
            dropped: 7,
        });
        // Batches of 10: 0..10 arrive, 10..30 dropped by the socket (two buffers), 30..40
        // arrive, 40..45 lost on the path (counter unmoved), 45..50 arrive.
        receive(&mut tracker, mark(1, 7), 0..10);
        receive(&mut tracker, mark(1, 9), 30..40);
        receive(&mut tracker, mark(1, 9), 45..50);
        assert_eq!(tracker.lost(50), 25);
        assert_eq!(tracker.host_dropped(50, mark(1, 9)), Some(20));
        // The tail: 50..60 never came; the counter moved after the last receive: the host's.
        assert_eq!(tracker.host_dropped(60, mark(1, 10)), Some(30));
        // ... or it did not: the path's.
        assert_eq!(tracker.host_dropped(60, mark(1, 9)), Some(20));
    }

    #[test]
    fn the_first_gap_is_judged_against_the_baseline() {
        let mut tracker = SequenceTracker::new();
        tracker.baseline(DropMark {
            socket: 3,
            dropped: 0,
        });
        receive(&mut tracker, mark(3, 1), 64..128);
        assert_eq!(tracker.host_dropped(128, mark(3, 1)), Some(64));
        // Without a baseline, the first gap cannot be judged.
        let mut unknown = SequenceTracker::new();
        receive(&mut unknown, mark(3, 1), 64..128);
        assert_eq!(unknown.host_dropped(128, mark(3, 1)), Some(0));
    }

    #[test]
    fn only_the_gap_in_front_of_a_receive_and_only_on_the_same_socket() {
        let mut tracker = SequenceTracker::new();
        tracker.baseline(DropMark {
            socket: 1,
            dropped: 0,
        });
        tracker.receive(mark(1, 0));
        for seq in [0, 1, 5, 6] {
            tracker.record(seq);
        }
        // A gap inside one receive (2..5) was not the socket's: it queued the buffer whole.
        assert_eq!(tracker.host_dropped(7, mark(1, 0)), Some(0));
        // Another socket's counter says nothing about this one's.
        receive(&mut tracker, mark(2, 40), 10..12);
        assert_eq!(tracker.host_dropped(12, mark(2, 40)), Some(0));
        // No mark: nothing is known of the gap in front.
        receive(&mut tracker, None, 20..22);
        assert_eq!(tracker.host_dropped(22, mark(2, 40)), Some(0));
        assert_eq!(SequenceTracker::new().host_dropped(22, None), None);
    }

    #[test]
    fn a_charged_datagram_that_arrives_late_leaves_the_hosts_share() {
        let mut tracker = SequenceTracker::new();
        tracker.baseline(DropMark {
            socket: 0,
            dropped: 0,
        });
        receive(&mut tracker, mark(0, 0), 0..4);
        receive(&mut tracker, mark(0, 1), 10..12);
        assert_eq!(tracker.host_dropped(12, mark(0, 1)), Some(6));
        receive(&mut tracker, mark(0, 1), 6..8);
        assert_eq!(tracker.host_dropped(12, mark(0, 1)), Some(4));
        assert_eq!(tracker.lost(12), 4);
        // A duplicate of a late one changes nothing.
        receive(&mut tracker, mark(0, 1), 6..7);
        assert_eq!(tracker.host_dropped(12, mark(0, 1)), Some(4));
    }

    #[test]
    fn host_drops_across_a_window_slide_and_the_ring_edge() {
        let mut tracker = SequenceTracker::new();
        tracker.baseline(DropMark {
            socket: 0,
            dropped: 0,
        });
        receive(&mut tracker, mark(0, 0), WINDOW - 10..WINDOW - 5);
        // A gap that wraps around the ring: WINDOW - 5 .. WINDOW + 5.
        receive(&mut tracker, mark(0, 1), WINDOW + 5..WINDOW + 6);
        // 0 .. WINDOW - 10 went missing before the baseline receive: not charged.
        let lost_below = WINDOW - 10;
        assert_eq!(tracker.host_dropped(WINDOW + 6, mark(0, 1)), Some(10));
        // Late arrivals on both sides of the ring's edge leave the share.
        receive(&mut tracker, mark(0, 1), WINDOW - 1..WINDOW + 1);
        assert_eq!(tracker.host_dropped(WINDOW + 6, mark(0, 1)), Some(8));
        // A jump past the window: the part that left it stays charged, none is counted twice.
        let far = 3 * WINDOW;
        receive(&mut tracker, mark(0, 2), far..far + 1);
        let gap = far - (WINDOW + 6);
        assert_eq!(tracker.host_dropped(far + 1, mark(0, 2)), Some(8 + gap));
        assert_eq!(tracker.lost(far + 1), lost_below + 8 + gap);
        // A seq of the gap still inside the window arrives late.
        receive(&mut tracker, mark(0, 2), far - 1..far);
        assert_eq!(tracker.host_dropped(far + 1, mark(0, 2)), Some(7 + gap));
    }

    #[test]
    fn the_hosts_share_never_exceeds_the_loss() {
        let mut tracker = SequenceTracker::new();
        tracker.baseline(DropMark {
            socket: 0,
            dropped: 0,
        });
        receive(&mut tracker, mark(0, 5), 100..101);
        // The sender says it sent fewer than the seqs seen (a lie, or a counting slip): at
        // most what it says is lost.
        assert_eq!(tracker.lost(50), 49);
        assert_eq!(tracker.host_dropped(50, mark(0, 5)), Some(49));
        assert_eq!(tracker.host_dropped(101, mark(0, 5)), Some(100));
    }

    #[test]
    fn top_of_the_seq_space() {
        let mut tracker = SequenceTracker::new();
        assert_eq!(tracker.record(u64::MAX), NEW);
        assert_eq!(tracker.record(u64::MAX), Arrival::Duplicate);
        assert_eq!(tracker.record(u64::MAX - (WINDOW - 1)), NEW_LATE);
        assert_eq!(tracker.record(u64::MAX - WINDOW), Arrival::TooLate);
        assert_eq!(tracker.highest(), Some(u64::MAX));
    }
}
