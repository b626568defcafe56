//! Receiver-side sequence accounting for UDP: owns the unique / duplicate / out-of-order / too-late counts;
//! must not do I/O, read clocks, or fold duplicates or reordering into loss.
//!
//! Memory is bounded by a ring bitmap of [`WINDOW`] bits covering `[base, base + WINDOW)`. A seq at or
//! above the window's top slides it forward; seqs that fall out are forgotten, and a copy of one that
//! arrives later is counted as too late (neither delivered nor duplicate), since we can no longer tell.

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

/// Counts arriving data datagrams by seq (0-based message index).
#[derive(Debug, Clone)]
pub struct SequenceTracker {
    /// Ring bitmap: seq `s` (with `base <= s < base + WINDOW`) is bit `s % WINDOW`.
    bits: Vec<u64>,
    /// Lowest seq the bitmap covers.
    base: u64,
    highest: Option<u64>,
    unique: u64,
    duplicates: u64,
    out_of_order: u64,
    too_late: u64,
}

impl SequenceTracker {
    /// An empty tracker whose window starts at seq 0.
    pub fn new() -> Self {
        SequenceTracker {
            bits: vec![0; WORDS],
            base: 0,
            highest: None,
            unique: 0,
            duplicates: 0,
            out_of_order: 0,
            too_late: 0,
        }
    }

    /// Record one arriving data datagram; returns whether it is new (deliver + count its bytes) or not.
    pub fn record(&mut self, seq: u64) -> Arrival {
        if seq < self.base {
            self.too_late += 1;
            return Arrival::TooLate;
        }
        if seq - self.base >= WINDOW {
            self.slide_to(seq - (WINDOW - 1));
        }
        let (word, mask) = slot(seq);
        // Invariant: slot() yields word < WORDS == bits.len().
        if self.bits[word] & mask != 0 {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        self.bits[word] |= mask;
        self.unique += 1;
        let out_of_order = self.highest.is_some_and(|highest| seq < highest);
        if out_of_order {
            self.out_of_order += 1;
        } else {
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
            self.bits[(pos / 64) as usize] &= !mask;
            pos += span;
        }
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
