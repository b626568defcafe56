//! What one direction of an impairment did, in packets (or chunks, for a byte stream): the
//! counts a machine keeps, the difference between two snapshots and their sum over flows.

use serde::{Deserialize, Serialize};

/// What one direction did, in packets (or chunks, for a byte stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Packets offered to this direction.
    pub received: u64,
    /// Copies sent on (originals and duplicates); once drained,
    /// `forwarded = received − dropped + duplicated`.
    pub forwarded: u64,
    /// Bytes sent on (duplicates included).
    pub bytes_forwarded: u64,
    /// Packets dropped (by loss or by a full queue).
    pub dropped: u64,
    /// Of `dropped`, those the full rate queue (or delay line) dropped.
    pub queue_drops: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Packets that left after a packet offered after them.
    pub reordered: u64,
    /// Packets that left later than they arrived (delay, jitter or a rate queue).
    pub delayed: u64,
}

impl Counts {
    /// The counts since `earlier` (for one run of several through the same relay).
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            received: self.received.saturating_sub(earlier.received),
            forwarded: self.forwarded.saturating_sub(earlier.forwarded),
            bytes_forwarded: self.bytes_forwarded.saturating_sub(earlier.bytes_forwarded),
            dropped: self.dropped.saturating_sub(earlier.dropped),
            queue_drops: self.queue_drops.saturating_sub(earlier.queue_drops),
            duplicated: self.duplicated.saturating_sub(earlier.duplicated),
            reordered: self.reordered.saturating_sub(earlier.reordered),
            delayed: self.delayed.saturating_sub(earlier.delayed),
        }
    }

    /// Adds `other` into these counts.
    pub fn add(&mut self, other: &Counts) {
        self.received += other.received;
        self.forwarded += other.forwarded;
        self.bytes_forwarded += other.bytes_forwarded;
        self.dropped += other.dropped;
        self.queue_drops += other.queue_drops;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
        self.delayed += other.delayed;
    }
}
