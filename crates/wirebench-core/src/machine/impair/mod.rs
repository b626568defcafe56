//! Network impairments as pure, seeded decisions: owns the per-direction settings (loss, optionally
//! Gilbert–Elliott bursts, delay, jitter, reordering, duplication, a token-bucket rate with a queue
//! limit), their parser, and the [`Impairer`] machine that decides when each packet leaves; must not
//! read clocks or touch sockets — time comes in as `now`, randomness from a seeded PRNG.
//!
//! Model of one direction, per packet, in this order: loss (the packet vanishes "on the wire"),
//! then the rate limiter (a FIFO bottleneck that serialises `len × 8 / rate`; a packet that would
//! find more than the queue limit waiting is dropped), then delay plus jitter. Jitter never
//! reorders (a packet never leaves before the one offered before it, as with netem's `rate`), so
//! the only reordering is the one asked for with `reorder`: such a packet is held back and leaves
//! right after the next packet, which makes every reordering exact and countable.

mod bottleneck;
mod machine;
mod parse;

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::vocab::units::{BitRate, ByteSize};

pub use bottleneck::Bottleneck;
pub use machine::Impairer;
pub use parse::{parse_loss, parse_percent};

/// How packets are lost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Loss {
    /// No loss.
    #[default]
    None,
    /// Each packet independently with this probability (0..=1).
    Random(f64),
    /// Gilbert–Elliott: a two-state chain; `p` = P(good → bad), `r` = P(bad → good) per
    /// packet; packets are lost with `loss_bad` in the bad state and `loss_good` in the good one.
    GilbertElliott {
        /// Probability of moving from the good to the bad state, per packet.
        p: f64,
        /// Probability of moving from the bad to the good state, per packet.
        r: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
        /// Loss probability in the good state.
        loss_good: f64,
    },
}

/// What one direction does to its packets. The default does nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairment {
    /// Packet loss.
    pub loss: Loss,
    /// Fixed one-way delay added to every packet.
    pub delay: Duration,
    /// Each packet's delay varies uniformly within ±jitter around `delay` (never below zero,
    /// never reordering).
    pub jitter: Duration,
    /// Probability that a packet is held back and leaves after the next one.
    pub reorder: f64,
    /// Probability that a packet is sent twice.
    pub duplicate: f64,
    /// Bottleneck rate (a token bucket one packet deep: no burst above the rate); `None` is
    /// unlimited.
    pub rate: Option<BitRate>,
    /// Bytes the bottleneck queue holds before it drops (only with `rate`).
    pub queue_limit: ByteSize,
}

/// Queue limit when none is given: 256 KiB, about 21 ms at 100 Mbit/s.
pub const DEFAULT_QUEUE_LIMIT: ByteSize = ByteSize(256 * 1024);

/// The longest a packet picked for reordering waits for a next packet to overtake it; after
/// that it leaves anyway and is not counted as reordered.
pub const REORDER_MAX_HOLD: Duration = Duration::from_millis(50);

/// Packets waiting in one direction's delay line at most; more are dropped as queue drops
/// (bounds the relay's memory whatever the delay).
pub const MAX_PENDING: usize = 1 << 16;

impl Impairment {
    /// Whether this direction changes anything at all.
    pub fn is_active(&self) -> bool {
        self.loss != Loss::None
            || !self.delay.is_zero()
            || !self.jitter.is_zero()
            || self.reorder > 0.0
            || self.duplicate > 0.0
            || self.rate.is_some()
    }

    /// Whether it uses an impairment that only makes sense per packet (loss, reorder,
    /// duplicate), which a TCP byte stream cannot take.
    pub fn has_packet_only(&self) -> bool {
        self.loss != Loss::None || self.reorder > 0.0 || self.duplicate > 0.0
    }
}

impl std::fmt::Display for Impairment {
    /// `loss 5%, delay 10ms, rate 100 Mbit/s (queue 262144 B)`, or `none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        match self.loss {
            Loss::None => {}
            Loss::Random(p) => parts.push(format!("loss {}%", p * 100.0)),
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => parts.push(format!(
                "loss ge:{}%/{}%/{}%/{}%",
                p * 100.0,
                r * 100.0,
                loss_bad * 100.0,
                loss_good * 100.0
            )),
        }
        if !self.delay.is_zero() {
            parts.push(format!("delay {:?}", self.delay));
        }
        if !self.jitter.is_zero() {
            parts.push(format!("jitter {:?}", self.jitter));
        }
        if self.reorder > 0.0 {
            parts.push(format!("reorder {}%", self.reorder * 100.0));
        }
        if self.duplicate > 0.0 {
            parts.push(format!("duplicate {}%", self.duplicate * 100.0));
        }
        if let Some(rate) = self.rate {
            let q = match self.queue_limit.0 {
                0 => DEFAULT_QUEUE_LIMIT.0,
                q => q,
            };
            parts.push(format!("rate {rate} (queue {q} B)"));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

impl std::fmt::Display for Impairments {
    /// `up: …; down: …`, or one description when both directions are the same.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.up == self.down {
            write!(f, "{} each way", self.up)
        } else {
            write!(f, "up: {}; down: {}", self.up, self.down)
        }
    }
}

/// Both directions: `up` is client → server, `down` server → client.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairments {
    /// Client → server.
    pub up: Impairment,
    /// Server → client.
    pub down: Impairment,
}

/// An impairment setting that cannot be parsed; the message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ImpairError(pub String);

/// The keys [`Impairments::set`] knows.
pub const KEYS: &str = "loss, delay, jitter, reorder, duplicate, rate, queue";

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
