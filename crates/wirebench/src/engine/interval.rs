//! Interval series (`-i`): drives a session's work while reading its cumulative counters every
//! period, on the same task, so the data path itself never reads a clock or takes a lock for
//! it (engines only store their running byte count in an atomic). Never prints: each interval
//! goes to a callback.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wirebench_core::vocab::counters::{Cumulative, IntervalSample, IntervalSeries};

use crate::transport::counters;
use wirebench_core::vocab::units::duration_ns;

/// Runs `work` to its end; with a `period`, calls `read` every period and once at the end and
/// turns the readings into intervals, each passed to `on_sample` as it closes. Returns the
/// work's output and the series (empty without a period).
pub async fn sampled<F: Future>(
    work: F,
    period: Option<Duration>,
    mut read: impl FnMut() -> Cumulative,
    mut on_sample: impl FnMut(&IntervalSample),
) -> (F::Output, Vec<IntervalSample>) {
    let Some(period) = period else {
        return (work.await, Vec::new());
    };
    let started = Instant::now();
    let mut series = IntervalSeries::new();
    let mut ticker = tokio::time::interval_at((started + period).into(), period);
    // A late tick is taken late, not bunched: intervals stay one period long where possible.
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut work = std::pin::pin!(work);
    let output = loop {
        tokio::select! {
            output = &mut work => break output,
            _ = ticker.tick() => {
                on_sample(&series.push(ns_since(started), read()));
            }
        }
    };
    // The last, partial interval, unless the work ended right on a tick.
    let at = ns_since(started);
    if at > series.end_ns() {
        on_sample(&series.push(at, read()));
    }
    (output, series.into_samples())
}

/// Where an end's omit mark (`run -O`) fell: when, and what it had moved by then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// When the mark was taken (the work's end, when that came first).
    pub at: Instant,
    /// Payload bytes moved by then.
    pub bytes: u64,
}

impl Mark {
    /// The time of the mark after `start` (the end's first byte), in nanoseconds.
    pub fn ns_after(&self, start: Instant) -> u64 {
        duration_ns(self.at.saturating_duration_since(start))
    }
}

/// Runs `work` to its end; with an `omit` span, reads the bytes moved `omit` after the start
/// (or at the end, if the work ends first) as the omit mark. Like [`sampled`], the reading is
/// taken on this task, so the data path does nothing for it.
pub async fn marked<F: Future>(
    work: F,
    omit: Option<Duration>,
    read: impl Fn() -> u64,
) -> (F::Output, Option<Mark>) {
    let Some(omit) = omit else {
        return (work.await, None);
    };
    let mut work = std::pin::pin!(work);
    // A span past the clock's range (a peer may ask for anything) is never reached.
    let Some(mark_at) = tokio::time::Instant::now().checked_add(omit) else {
        let output = work.await;
        let mark = Mark {
            at: Instant::now(),
            bytes: read(),
        };
        return (output, Some(mark));
    };
    tokio::select! {
        output = &mut work => {
            let mark = Mark { at: Instant::now(), bytes: read() };
            (output, Some(mark))
        }
        () = tokio::time::sleep_until(mark_at) => {
            let mark = Mark { at: Instant::now(), bytes: read() };
            (work.await, Some(mark))
        }
    }
}

/// What one end of a session has moved so far, shared between its data path (which stores
/// its running byte count in `bytes`) and [`sampled`] on another task.
#[derive(Debug, Default)]
pub struct Progress {
    /// Payload bytes sent (stop-and-wait: acknowledged) or read so far.
    pub bytes: AtomicU64,
    /// A second handle on a TCP sender's data socket, so each interval can read its
    /// retransmissions from TCP_INFO without the data path doing anything.
    tcp_sender: Mutex<Option<std::net::TcpStream>>,
    /// A UDP receiver's datagrams missing so far ([`Progress::set_receipt`]).
    lost: AtomicU64,
    /// Whether this end counts losses (a UDP receiver does; the series says none otherwise).
    counts_lost: std::sync::atomic::AtomicBool,
    /// A UDP receiver's jitter estimate, nanoseconds ([`NO_JITTER`] before it has one).
    jitter_ns: AtomicU64,
}

/// [`Progress`]'s jitter before a UDP receiver has an estimate (two datagrams).
const NO_JITTER: u64 = u64::MAX;

impl Progress {
    /// Nothing moved yet.
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress::default())
    }

    /// Reads TCP_INFO of `socket` (a TCP sender's data socket) at every interval from now on.
    pub fn watch_tcp_sender(&self, socket: &std::net::TcpStream) {
        if let (Ok(handle), Ok(mut slot)) = (socket.try_clone(), self.tcp_sender.lock()) {
            *slot = Some(handle);
        }
    }

    /// A UDP receiver's datagrams missing so far (below the highest sequence number seen) and
    /// its jitter estimate now, for the interval series from now on.
    pub fn set_receipt(&self, lost: u64, jitter_ns: Option<u64>) {
        self.lost.store(lost, Ordering::Relaxed);
        self.jitter_ns
            .store(jitter_ns.unwrap_or(NO_JITTER), Ordering::Relaxed);
        self.counts_lost.store(true, Ordering::Relaxed);
    }

    /// The cumulative reading now: bytes, a UDP receiver's losses, and a watched TCP
    /// sender's retransmissions, window and round trip.
    pub fn read(&self) -> Cumulative {
        let tcp = self
            .tcp_sender
            .lock()
            .ok()
            .and_then(|slot| slot.as_ref().and_then(counters::tcp_sender_reading));
        Cumulative {
            bytes: self.bytes.load(Ordering::Relaxed),
            lost: self
                .counts_lost
                .load(Ordering::Relaxed)
                .then(|| self.lost.load(Ordering::Relaxed)),
            retransmitted: tcp.as_ref().map(|(t, _)| t.packets_retransmitted),
            tcp: tcp.map(|(_, snapshot)| snapshot),
            jitter_ns: Some(self.jitter_ns.load(Ordering::Relaxed))
                .filter(|j| *j != NO_JITTER && self.counts_lost.load(Ordering::Relaxed)),
        }
    }
}

fn ns_since(t: Instant) -> u64 {
    duration_ns(t.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn samples_every_period_and_the_tail() {
        let moved = Progress::new();
        let writer = Arc::clone(&moved);
        // Work that moves 1000 bytes every 100 ms for 1.05 s, on the paused (virtual) clock.
        let work = async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                writer.bytes.fetch_add(1000, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            7
        };
        let mut seen = 0;
        let (out, samples) = sampled(
            work,
            Some(Duration::from_millis(250)),
            || moved.read(),
            |_| seen += 1,
        )
        .await;
        assert_eq!(out, 7);
        assert_eq!(seen, samples.len());
        // Ticks at 250, 500, 750, 1000 ms, then the tail to 1050 ms.
        assert_eq!(samples.len(), 5, "{samples:?}");
        assert_eq!(samples.iter().map(|s| s.bytes).sum::<u64>(), 10_000);
        assert_eq!(samples[4].start_ns, samples[3].end_ns);
        assert!(samples.windows(2).all(|w| w[0].end_ns == w[1].start_ns));
    }

    #[tokio::test(start_paused = true)]
    async fn the_mark_reads_what_moved_by_then_or_everything() {
        let moved = Progress::new();
        let writer = Arc::clone(&moved);
        let work = async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                writer.bytes.fetch_add(1000, Ordering::Relaxed);
            }
        };
        let read = || moved.bytes.load(Ordering::Relaxed);
        let ((), mark) = marked(work, Some(Duration::from_millis(450)), read).await;
        assert_eq!(mark.map(|m| m.bytes), Some(4000));
        // Work that ends before the mark: everything is in the omitted span.
        let ((), mark) = marked(async {}, Some(Duration::from_secs(5)), || 7).await;
        assert_eq!(mark.map(|m| m.bytes), Some(7));
        let ((), mark) = marked(async {}, Some(Duration::MAX), || 7).await;
        assert_eq!(mark.map(|m| m.bytes), Some(7));
        let ((), mark) = marked(async {}, None, || 7).await;
        assert_eq!(mark, None);
    }

    #[tokio::test]
    async fn no_period_no_series() {
        let (out, samples) = sampled(async { 1 }, None, Cumulative::default, |_| {}).await;
        assert_eq!((out, samples.len()), (1, 0));
    }
}
