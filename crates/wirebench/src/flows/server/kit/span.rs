//! A session's time figures for its report: `-O`'s omit mark and the span from first to last
//! byte. Pure arithmetic on instants the kinds took.

use std::time::{Duration, Instant};

use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{Omitted, SessionParams};

use crate::engine::interval;

/// `-O`: how long after its transfer began an end takes its omit mark.
pub(crate) fn omit_span(p: &SessionParams) -> Option<Duration> {
    p.omit_us.map(Duration::from_micros)
}

/// The record of an omit mark, its time counted from `first` (the first byte moved; the mark
/// itself when none moved).
pub(crate) fn omitted(
    mark: Option<interval::Mark>,
    first: Option<Instant>,
    p: &SessionParams,
) -> Option<Omitted> {
    mark.map(|m| Omitted {
        bytes: m.bytes,
        messages: p.whole_messages(m.bytes),
        elapsed_ns: m.ns_after(first.unwrap_or(m.at)),
    })
}

/// First to last, in nanoseconds (0 when either is missing).
pub(crate) fn span_ns(first: Option<Instant>, last: Option<Instant>) -> u64 {
    match (first, last) {
        (Some(f), Some(l)) => duration_ns(l.saturating_duration_since(f)),
        _ => 0,
    }
}
