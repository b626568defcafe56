//! What impairments are asked for: one direction's settings (loss, optionally Gilbert–Elliott
//! bursts, delay, jitter, reordering, duplication, a rate with its queue limit), both
//! directions together, and how they read in one line.

use std::time::Duration;

use crate::vocab::units::{BitRate, ByteSize};

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
