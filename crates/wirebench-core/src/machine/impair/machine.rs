//! The impairment machine of one direction: decides, with a seeded PRNG and time passed in,
//! whether each packet is lost, duplicated, held back, and when it leaves; must not read clocks
//! or touch sockets.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::counts::Counts;
use super::spec::{Impairment, Loss, DEFAULT_QUEUE_LIMIT};

/// The longest a packet picked for reordering waits for a next packet to overtake it; after
/// that it leaves anyway and is not counted as reordered.
pub const REORDER_MAX_HOLD: Duration = Duration::from_millis(50);

/// Packets waiting in one direction's delay line at most; more are dropped as queue drops
/// (bounds the relay's memory whatever the delay).
pub const MAX_PENDING: usize = 1 << 16;

/// A packet waiting in the delay line.
#[derive(Debug)]
struct Pending<P> {
    release: Instant,
    len: usize,
    delayed: bool,
    packet: P,
}

/// One direction's impairment machine: packets go in with [`Impairer::handle_packet`] and come
/// out of [`Impairer::poll_release`] when their time has come; [`Impairer::poll_timeout`] says
/// when to poll next. Same seed, same packets, same times: same decisions.
#[derive(Debug)]
pub struct Impairer<P> {
    spec: Impairment,
    rng: ChaCha8Rng,
    /// Gilbert–Elliott state: true when in the bad state.
    bad_state: bool,
    /// When the rate limiter's link is next free.
    link_free_at: Option<Instant>,
    /// The latest release time handed out (jitter never reorders).
    last_release: Option<Instant>,
    line: VecDeque<Pending<P>>,
    /// A packet picked for reordering, with the time it gives up waiting.
    held: Option<(Pending<P>, Instant, Option<P>)>,
    counts: Counts,
    /// Bytes of the packets waiting (delay line, held, copies): what the caller holds for us.
    pending_bytes: u64,
}

impl<P: Clone> Impairer<P> {
    /// A machine for `spec`; `seed` and `stream` (e.g. 0 for up, 1 for down) pick the random
    /// sequence.
    pub fn new(spec: Impairment, seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Impairer {
            spec,
            rng,
            bad_state: false,
            link_free_at: None,
            last_release: None,
            line: VecDeque::new(),
            held: None,
            counts: Counts::default(),
            pending_bytes: 0,
        }
    }

    /// What it did so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Packets not yet released (held for reordering included).
    pub fn pending(&self) -> usize {
        self.line.len() + usize::from(self.held.is_some())
    }

    /// Bytes of the packets not yet released (copies and held packets included): what a
    /// relay holds in memory for this direction.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    /// Counts a packet the caller could not take (no room in its memory bound) as a queue
    /// drop, as a full router queue would.
    pub fn refuse_packet(&mut self) {
        self.counts.received += 1;
        self.counts.dropped += 1;
        self.counts.queue_drops += 1;
    }

    /// Offers a packet of `len` bytes arriving at `now`.
    pub fn handle_packet(&mut self, now: Instant, len: usize, packet: P) {
        self.counts.received += 1;
        if self.lose() {
            self.counts.dropped += 1;
            return;
        }
        if self.line.len() >= MAX_PENDING {
            self.counts.dropped += 1;
            self.counts.queue_drops += 1;
            return;
        }
        let Some(departure) = self.bottleneck(now, len, true) else {
            self.counts.dropped += 1;
            self.counts.queue_drops += 1;
            return;
        };
        let release = self.propagate(departure);
        let entry = Pending {
            release,
            len,
            delayed: release > now,
            packet,
        };
        let copy = (self.spec.duplicate > 0.0 && self.rng.gen_bool(self.spec.duplicate))
            .then(|| entry.packet.clone());
        if copy.is_some() {
            // The copy travels right behind its original (also when that one is held back).
            self.counts.duplicated += 1;
        }
        self.pending_bytes += len as u64 * (1 + u64::from(copy.is_some()));
        if self.held.is_none() && self.spec.reorder > 0.0 && self.rng.gen_bool(self.spec.reorder) {
            // Held back: it leaves right after the next packet (or alone after the longest hold).
            self.held = Some((entry, release + REORDER_MAX_HOLD, copy));
            return;
        }
        self.line.push_back(entry);
        if let Some(packet) = copy {
            self.push_copy(release, len, packet);
        }
        if let Some((mut held, _, held_copy)) = self.held.take() {
            held.release = release;
            let held_len = held.len;
            self.counts.reordered += 1;
            self.line.push_back(held);
            if let Some(packet) = held_copy {
                self.push_copy(release, held_len, packet);
            }
        }
    }

    /// Queues a duplicate right behind its original.
    fn push_copy(&mut self, release: Instant, len: usize, packet: P) {
        self.line.push_back(Pending {
            release,
            len,
            delayed: false,
            packet,
        });
    }

    /// The next packet whose time has come, if any.
    pub fn poll_release(&mut self, now: Instant) -> Option<P> {
        if self
            .held
            .as_ref()
            .is_some_and(|(_, deadline, _)| *deadline <= now)
        {
            if let Some((mut held, deadline, copy)) = self.held.take() {
                held.release = deadline;
                let len = held.len;
                self.line.push_back(held);
                if let Some(packet) = copy {
                    self.push_copy(deadline, len, packet);
                }
            }
        }
        if self.line.front().is_some_and(|p| p.release <= now) {
            let p = self.line.pop_front()?;
            self.pending_bytes = self.pending_bytes.saturating_sub(p.len as u64);
            self.counts.forwarded += 1;
            self.counts.bytes_forwarded += p.len as u64;
            if p.delayed {
                self.counts.delayed += 1;
            }
            return Some(p.packet);
        }
        None
    }

    /// When [`Impairer::poll_release`] next has something to give.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let front = self.line.front().map(|p| p.release);
        let held = self.held.as_ref().map(|(_, d, _)| *d);
        match (front, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// For a byte stream (TCP): when `len` bytes read at `now` may be written on, after the
    /// rate limiter and the delay. Never drops: the caller applies back-pressure with
    /// [`Impairer::stream_backlog`] instead of a queue limit.
    pub fn schedule_bytes(&mut self, now: Instant, len: usize) -> Instant {
        self.schedule_bytes_after(now, now, len)
    }

    /// Like [`Impairer::schedule_bytes`] for bytes that arrived at `arrived` and left a link
    /// shared with other connections (a [`super::Bottleneck`]) at `departure`: this machine's
    /// own rate (if any), then delay; counted as delayed when they leave after `arrived`.
    pub fn schedule_bytes_after(
        &mut self,
        arrived: Instant,
        departure: Instant,
        len: usize,
    ) -> Instant {
        let now = arrived;
        self.counts.received += 1;
        let departure = self.bottleneck(departure, len, false).unwrap_or(departure);
        let release = self.propagate(departure);
        self.counts.forwarded += 1;
        self.counts.bytes_forwarded += len as u64;
        if release > now {
            self.counts.delayed += 1;
        }
        release
    }

    /// How long the rate limiter's queue takes to drain from `now` (zero without a rate).
    pub fn stream_backlog(&self, now: Instant) -> Duration {
        self.link_free_at
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now))
    }

    /// Draws whether this packet is lost.
    fn lose(&mut self) -> bool {
        match self.spec.loss {
            Loss::None => false,
            Loss::Random(p) => self.rng.gen_bool(p.clamp(0.0, 1.0)),
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                let switch = if self.bad_state { r } else { p };
                if self.rng.gen_bool(switch.clamp(0.0, 1.0)) {
                    self.bad_state = !self.bad_state;
                }
                let loss = if self.bad_state { loss_bad } else { loss_good };
                self.rng.gen_bool(loss.clamp(0.0, 1.0))
            }
        }
    }

    /// The rate limiter: when the packet has been serialised, or `None` when the queue is full.
    fn bottleneck(&mut self, now: Instant, len: usize, may_drop: bool) -> Option<Instant> {
        let Some(rate) = self.spec.rate else {
            return Some(now);
        };
        let start = self.link_free_at.map_or(now, |t| t.max(now));
        let waiting = start.saturating_duration_since(now);
        // Bytes still queued ahead of this packet.
        let backlog = waiting.as_nanos() * u128::from(rate.0) / 8 / 1_000_000_000;
        let limit = match self.spec.queue_limit.0 {
            0 => DEFAULT_QUEUE_LIMIT.0,
            q => q,
        };
        if may_drop && backlog + len as u128 > u128::from(limit) {
            return None;
        }
        let tx_nanos = (len as u128 * 8 * 1_000_000_000).div_ceil(u128::from(rate.0.max(1)));
        let done = start + Duration::from_nanos(u64::try_from(tx_nanos).unwrap_or(u64::MAX));
        self.link_free_at = Some(done);
        Some(done)
    }

    /// Adds delay and jitter; never earlier than the previous release (order is kept).
    fn propagate(&mut self, departure: Instant) -> Instant {
        let mut delay = self.spec.delay;
        if !self.spec.jitter.is_zero() {
            let j = self.spec.jitter.as_nanos() as i128;
            let offset = self.rng.gen_range(-j..=j);
            let nanos = (delay.as_nanos() as i128 + offset).max(0);
            delay = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        }
        let release = departure + delay;
        let release = self.last_release.map_or(release, |l| l.max(release));
        self.last_release = Some(release);
        release
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::units::{BitRate, ByteSize};

    /// Drives `n` packets of `len` bytes, one every `gap`, through a machine and returns the
    /// order they left in with their release times.
    fn drive(
        spec: Impairment,
        seed: u64,
        n: u64,
        len: usize,
        gap: Duration,
    ) -> (Vec<(u64, Duration)>, Counts) {
        let t0 = Instant::now();
        let mut m = Impairer::new(spec, seed, 0);
        let mut out = Vec::new();
        let mut now = t0;
        for i in 0..n {
            now = t0 + gap * u32::try_from(i).unwrap();
            while let Some(p) = m.poll_release(now) {
                out.push((p, now - t0));
            }
            m.handle_packet(now, len, i);
            while let Some(p) = m.poll_release(now) {
                out.push((p, now - t0));
            }
        }
        // Drain on the virtual clock.
        while let Some(t) = m.poll_timeout() {
            now = now.max(t);
            while let Some(p) = m.poll_release(now) {
                out.push((p, now - t0));
            }
        }
        (out, m.counts())
    }

    #[test]
    fn nothing_configured_passes_everything_at_once_in_order() {
        let (out, c) = drive(
            Impairment::default(),
            1,
            100,
            1000,
            Duration::from_millis(1),
        );
        assert_eq!(out.len(), 100);
        assert!(out.iter().enumerate().all(|(i, (p, _))| *p == i as u64));
        assert_eq!(c.forwarded, 100);
        assert_eq!(
            (c.dropped, c.delayed, c.reordered, c.duplicated),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn random_loss_is_seeded_and_counted_exactly() {
        let spec = Impairment {
            loss: Loss::Random(0.05),
            ..Default::default()
        };
        let (a, ca) = drive(spec, 7, 10_000, 100, Duration::from_micros(10));
        let (b, cb) = drive(spec, 7, 10_000, 100, Duration::from_micros(10));
        assert_eq!(a, b, "same seed, same decisions");
        assert_eq!(ca.received - ca.dropped, a.len() as u64);
        assert_eq!(ca.forwarded, a.len() as u64);
        assert_eq!(ca, cb);
        // 5% of 10,000 with a binomial sd of ~22: far inside 400..600.
        assert!((400..600).contains(&ca.dropped), "{ca:?}");
        let (_, other) = drive(spec, 8, 10_000, 100, Duration::from_micros(10));
        assert_ne!(other.dropped, 0);
        assert_ne!(drive(spec, 8, 10_000, 100, Duration::from_micros(10)).0, a);
    }

    #[test]
    fn gilbert_elliott_loss_comes_in_bursts() {
        // p = 1%, r = 25%: mean burst 4 packets, stationary bad share 1/26 ≈ 3.8%.
        let spec = Impairment {
            loss: Loss::GilbertElliott {
                p: 0.01,
                r: 0.25,
                loss_bad: 1.0,
                loss_good: 0.0,
            },
            ..Default::default()
        };
        let (out, c) = drive(spec, 3, 100_000, 100, Duration::from_micros(10));
        let delivered: std::collections::HashSet<u64> = out.iter().map(|(p, _)| *p).collect();
        let mut bursts = 0u64;
        let mut in_burst = false;
        for i in 0..100_000u64 {
            let lost = !delivered.contains(&i);
            if lost && !in_burst {
                bursts += 1;
            }
            in_burst = lost;
        }
        let mean_burst = c.dropped as f64 / bursts as f64;
        assert!(
            (3.0..5.0).contains(&mean_burst),
            "mean burst {mean_burst}, {c:?}"
        );
        let share = c.dropped as f64 / 100_000.0;
        assert!((0.025..0.055).contains(&share), "loss share {share}");
    }

    #[test]
    fn delay_holds_every_packet_exactly_that_long() {
        let spec = Impairment {
            delay: Duration::from_millis(10),
            ..Default::default()
        };
        let (out, c) = drive(spec, 1, 50, 100, Duration::from_millis(1));
        for (i, (p, t)) in out.iter().enumerate() {
            assert_eq!(*p, i as u64);
            assert_eq!(*t, Duration::from_millis(10 + i as u64));
        }
        assert_eq!(c.delayed, 50);
    }

    #[test]
    fn jitter_spreads_delay_but_never_reorders() {
        let spec = Impairment {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(5),
            ..Default::default()
        };
        let (out, c) = drive(spec, 9, 1000, 100, Duration::from_micros(100));
        assert!(out.iter().enumerate().all(|(i, (p, _))| *p == i as u64));
        for (p, t) in &out {
            let sent = Duration::from_micros(100 * p);
            assert!(*t >= sent + Duration::from_millis(5), "{p} at {t:?}");
        }
        assert_eq!(c.reordered, 0);
    }

    #[test]
    fn reordered_packets_leave_right_after_the_next_one() {
        let spec = Impairment {
            reorder: 0.1,
            ..Default::default()
        };
        let (out, c) = drive(spec, 5, 1000, 100, Duration::from_micros(100));
        assert_eq!(out.len(), 1000, "reordering loses nothing");
        // Count packets that left after a higher-numbered one.
        let mut inversions = 0;
        let mut max_seen = None;
        for (p, _) in &out {
            if max_seen.is_some_and(|m| m > *p) {
                inversions += 1;
            }
            max_seen = max_seen.max(Some(*p));
        }
        assert_eq!(c.reordered, inversions);
        assert!((60..140).contains(&c.reordered), "{c:?}");
    }

    #[test]
    fn a_held_packet_with_no_follower_leaves_after_the_longest_hold() {
        let spec = Impairment {
            reorder: 1.0,
            ..Default::default()
        };
        let (out, c) = drive(spec, 1, 1, 100, Duration::from_millis(1));
        assert_eq!(out, [(0, REORDER_MAX_HOLD)]);
        assert_eq!(c.reordered, 0);
    }

    #[test]
    fn a_duplicated_reordered_packet_travels_with_its_copy() {
        let spec = Impairment {
            reorder: 0.2,
            duplicate: 0.2,
            ..Default::default()
        };
        let (out, c) = drive(spec, 13, 2000, 100, Duration::from_micros(100));
        assert_eq!(out.len() as u64, 2000 + c.duplicated);
        // Receiver's view: first copies that arrive after a higher seq are out of order;
        // later copies are duplicates. Those must be the machine's own counts.
        let (mut seen, mut highest) = (std::collections::HashSet::new(), None);
        let (mut dups, mut ooo) = (0, 0);
        for (p, _) in &out {
            if !seen.insert(*p) {
                dups += 1;
            } else if highest.is_some_and(|h| h > *p) {
                ooo += 1;
            } else {
                highest = Some(*p);
            }
        }
        assert_eq!((dups, ooo), (c.duplicated, c.reordered));
        assert!(c.duplicated > 0 && c.reordered > 0);
    }

    #[test]
    fn duplicates_are_extra_copies() {
        let spec = Impairment {
            duplicate: 0.2,
            ..Default::default()
        };
        let (out, c) = drive(spec, 2, 1000, 100, Duration::from_micros(100));
        assert_eq!(out.len() as u64, 1000 + c.duplicated);
        assert_eq!(c.forwarded, c.received - c.dropped + c.duplicated);
        assert!((150..250).contains(&c.duplicated), "{c:?}");
    }

    #[test]
    fn pending_bytes_follow_every_packet_held_and_refusals_count_as_queue_drops() {
        let spec = Impairment {
            delay: Duration::from_millis(10),
            duplicate: 0.5,
            reorder: 0.3,
            ..Default::default()
        };
        let t0 = Instant::now();
        let mut m: Impairer<u64> = Impairer::new(spec, 7, 0);
        for i in 0..200u64 {
            m.handle_packet(t0 + Duration::from_micros(i), 100, i);
        }
        let held = m.counts().received - m.counts().dropped + m.counts().duplicated;
        assert_eq!(m.pending_bytes(), 100 * held);
        let mut now = t0;
        while let Some(t) = m.poll_timeout() {
            now = now.max(t);
            while m.poll_release(now).is_some() {}
        }
        assert_eq!(m.pending(), 0);
        assert_eq!(m.pending_bytes(), 0, "every byte held was released");
        m.refuse_packet();
        let c = m.counts();
        assert_eq!((c.received, c.queue_drops), (201, 1));
    }

    #[test]
    fn rate_serialises_and_a_full_queue_drops() {
        // 8 Mbit/s: a 1000-byte packet takes exactly 1 ms. Offered every 0.5 ms (twice the
        // rate) into a 4000-byte queue: the queue fills, then every other packet is dropped.
        let spec = Impairment {
            rate: Some(BitRate(8_000_000)),
            queue_limit: ByteSize(4000),
            ..Default::default()
        };
        let (out, c) = drive(spec, 1, 1000, 1000, Duration::from_micros(500));
        // Departures are exactly 1 ms apart.
        for w in out.windows(2) {
            assert!(w[1].1 - w[0].1 >= Duration::from_millis(1) || w[1].1 == w[0].1);
        }
        let last = out.last().unwrap().1;
        assert_eq!(last, Duration::from_millis(out.len() as u64));
        assert_eq!(c.dropped, c.queue_drops);
        assert_eq!(c.forwarded + c.dropped, 1000);
        // Over 500 ms the link carries ~500 packets plus the queue's 4.
        assert!((500..=506).contains(&c.forwarded), "{c:?}");
    }

    #[test]
    fn byte_streams_are_paced_not_dropped() {
        let t0 = Instant::now();
        let spec = Impairment {
            rate: Some(BitRate(8_000_000)),
            delay: Duration::from_millis(5),
            ..Default::default()
        };
        let mut m: Impairer<()> = Impairer::new(spec, 1, 0);
        let a = m.schedule_bytes(t0, 10_000);
        let b = m.schedule_bytes(t0, 10_000);
        assert_eq!(a - t0, Duration::from_millis(15));
        assert_eq!(b - t0, Duration::from_millis(25));
        assert_eq!(m.stream_backlog(t0), Duration::from_millis(20));
    }

    #[test]
    fn stream_bytes_after_a_shared_link_keep_its_departure_and_count_as_delayed() {
        let t0 = Instant::now();
        // No own rate, no delay: bytes leave when the shared link let them go, 5 ms late.
        let mut m: Impairer<()> = Impairer::new(Impairment::default(), 1, 0);
        let release = m.schedule_bytes_after(t0, t0 + Duration::from_millis(5), 100);
        assert_eq!(release - t0, Duration::from_millis(5));
        assert_eq!(m.counts().delayed, 1);
        // Straight through: not delayed.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(m.schedule_bytes_after(later, later, 100), later);
        assert_eq!(m.counts().delayed, 1);
        // With 10 ms of delay on top: 5 + 10 ms.
        let spec = Impairment {
            delay: Duration::from_millis(10),
            ..Impairment::default()
        };
        let mut m: Impairer<()> = Impairer::new(spec, 1, 0);
        let release = m.schedule_bytes_after(t0, t0 + Duration::from_millis(5), 100);
        assert_eq!(release - t0, Duration::from_millis(15));
    }
}
