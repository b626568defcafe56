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
mod counts;
mod machine;
mod parse;
mod spec;

pub use bottleneck::Bottleneck;
pub use counts::Counts;
pub use machine::{Impairer, MAX_PENDING, REORDER_MAX_HOLD};
pub use parse::{parse_loss, parse_percent, ImpairError, KEYS};
pub use spec::{Impairment, Impairments, Loss, DEFAULT_QUEUE_LIMIT};
