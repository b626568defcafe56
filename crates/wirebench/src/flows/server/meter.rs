//! What one session has moved, as the gate sees it: the bytes the server read and sent, taken
//! from the counters its data path already keeps (sampled a few times a second, never per
//! message) or counted here per write batch where the gate itself sits on the path (rr
//! responses, perf streams). Owns `--max-bytes` over both directions, `--max-rate` pacing of
//! what the gate sends, and the check of what a client sends against the rate it declared.
//! It decides no session's end: it only says why one must stop.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::AsyncWrite;
use wirebench_core::machine::pacing::pause_for;

/// Payload bytes one session has moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moved {
    /// Read from the client.
    pub read: u64,
    /// Sent to the client.
    pub sent: u64,
}

impl Moved {
    /// Both directions together: what `--max-bytes` bounds.
    pub fn total(&self) -> u64 {
        self.read.saturating_add(self.sent)
    }
}

/// Reads the counters a session's data path keeps.
type Source = Box<dyn Fn() -> Moved + Send + Sync>;

/// A session's meter: counts of its own, plus the data path's counters once the session says
/// where they are.
pub struct Meter {
    read: AtomicU64,
    sent: AtomicU64,
    source: OnceLock<Source>,
    /// `--max-bytes`.
    max_bytes: u64,
    /// `--max-rate`: what the gate's writers pace to.
    max_rate_bps: Option<u64>,
    /// When the gate's writers sent their first byte (their pacing counts from it).
    first_sent: OnceLock<Instant>,
    /// When the gate's readers read their first byte.
    first_read: OnceLock<Instant>,
    /// Why a writer of the gate's refused to go on (the first reason wins), and the wake-up
    /// of whoever waits for it.
    tripped: OnceLock<String>,
    trip: tokio::sync::Notify,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("moved", &self.moved())
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl Meter {
    /// A meter under `max_bytes` (both ways) and `max_rate_bps` (what the gate sends).
    pub fn new(max_bytes: u64, max_rate_bps: Option<u64>) -> Meter {
        Meter {
            read: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            source: OnceLock::new(),
            max_bytes,
            max_rate_bps,
            first_sent: OnceLock::new(),
            first_read: OnceLock::new(),
            tripped: OnceLock::new(),
            trip: tokio::sync::Notify::new(),
        }
    }

    /// From now on the meter also reads `source`, the counters the session's data path keeps
    /// (the first call wins: a session has one data path).
    pub fn watch(&self, source: impl Fn() -> Moved + Send + Sync + 'static) {
        let _ = self.source.set(Box::new(source));
    }

    /// `--max-rate`, bit/s (None: unlimited).
    pub fn max_rate_bps(&self) -> Option<u64> {
        self.max_rate_bps
    }

    /// What the session has moved so far.
    pub fn moved(&self) -> Moved {
        let own = Moved {
            read: self.read.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
        };
        match self.source.get() {
            Some(source) => {
                let path = source();
                Moved {
                    read: own.read.saturating_add(path.read),
                    sent: own.sent.saturating_add(path.sent),
                }
            }
            None => own,
        }
    }

    /// Counts `n` bytes read by the gate's own readers.
    pub fn count_read(&self, n: u64) {
        self.first_read.get_or_init(Instant::now);
        self.read.fetch_add(n, Ordering::Relaxed);
    }

    /// How long the gate's readers wait before reading more, so a sender the server cannot
    /// slow otherwise is held to `--max-rate` by flow control; zero without a rate.
    pub fn read_pause(&self) -> Duration {
        let (Some(rate), Some(first)) = (self.max_rate_bps, self.first_read.get()) else {
            return Duration::ZERO;
        };
        pause_for(rate, self.read.load(Ordering::Relaxed), first.elapsed())
    }

    /// Whether `n` more bytes may be sent by the gate's own writers; the reason when they would
    /// take the session past `--max-bytes`.
    pub fn may_send(&self, n: u64) -> Result<(), String> {
        let after = self.moved().total().saturating_add(n);
        if after > self.max_bytes {
            let reason = format!(
                "the session would move {after} bytes (read and sent), more than this server allows: at most {} bytes (--max-bytes)",
                self.max_bytes
            );
            self.trip(&reason);
            return Err(reason);
        }
        Ok(())
    }

    /// How many of `want` bytes the gate's readers may take now: what `--max-bytes` leaves of
    /// both directions, so a reader never takes the session past it. With nothing left the
    /// meter trips with the reason and the reader stops.
    pub fn read_room(&self, want: usize) -> Result<usize, String> {
        let moved = self.moved().total();
        let left = self.max_bytes.saturating_sub(moved);
        if left == 0 {
            let reason = self.over_bytes(moved.max(self.max_bytes.saturating_add(1)));
            self.trip(&reason);
            return Err(reason);
        }
        Ok(want.min(usize::try_from(left).unwrap_or(usize::MAX)))
    }

    /// Charges an answer of `n` bytes that must leave now or not at all (a UDP rr response,
    /// sent from the shared socket's thread, which cannot wait): within `--max-bytes`, and
    /// within `--max-rate` as the gate's watch holds a sender to it (twice the rate on average
    /// since the first answer, plus one burst). Past either the meter trips and the answer is
    /// not sent, so no limit is passed by more than one burst (answers at 50 Gbit/s under a
    /// 10 Mbit/s limit were sent for 100 ms before the watch's next look).
    pub fn charge_answer(&self, n: u64) -> Result<(), String> {
        self.may_send(n)?;
        if let Some(rate) = self.max_rate_bps {
            let first = *self.first_sent.get_or_init(Instant::now);
            let secs = first.elapsed().as_secs_f64();
            let allowed = 2.0 * rate as f64 / 8.0 * secs + burst_bytes(rate) as f64;
            let after = self.sent.load(Ordering::Relaxed).saturating_add(n);
            if after as f64 > allowed {
                let reason = format!(
                    "the client's requests called for answers faster than this server's limit of {rate} bit/s (--max-rate): {after} bytes in {secs:.3} s"
                );
                self.trip(&reason);
                return Err(reason);
            }
        }
        Ok(())
    }

    /// Records why the session must stop (a limit one of its data paths ran into) and wakes
    /// the gate's watch; the first reason is the one the session ends with.
    pub fn trip(&self, reason: &str) {
        if self.tripped.set(reason.to_string()).is_ok() {
            self.trip.notify_waiters();
            self.trip.notify_one();
        }
    }

    /// Why the session must stop, once a data path ran into a limit.
    pub fn tripped(&self) -> Option<&str> {
        self.tripped.get().map(String::as_str)
    }

    /// Resolves with the reason once [`Meter::trip`] has been called.
    pub async fn tripped_wait(&self) -> String {
        loop {
            let notified = self.trip.notified();
            if let Some(reason) = self.tripped() {
                return reason.to_string();
            }
            notified.await;
        }
    }

    /// Counts `n` bytes sent by the gate's own writers.
    pub fn count_sent(&self, n: u64) {
        self.first_sent.get_or_init(Instant::now);
        self.sent.fetch_add(n, Ordering::Relaxed);
    }

    /// How long the gate's writers wait before sending more, to hold `--max-rate` on average
    /// since their first byte; zero without a rate.
    pub fn send_pause(&self) -> Duration {
        let (Some(rate), Some(first)) = (self.max_rate_bps, self.first_sent.get()) else {
            return Duration::ZERO;
        };
        pause_for(rate, self.sent.load(Ordering::Relaxed), first.elapsed())
    }

    /// Why the session must stop when it has moved more than `--max-bytes`.
    pub fn over_limit(&self) -> Option<String> {
        let moved = self.moved().total();
        (moved > self.max_bytes).then(|| self.over_bytes(moved))
    }

    fn over_bytes(&self, moved: u64) -> String {
        format!(
            "the session moved {moved} bytes (read and sent), more than this server allows: at most {} bytes (--max-bytes)",
            self.max_bytes
        )
    }
}

/// The check of what a client sends against the rate it declared (or the server's
/// `--max-rate`): twice the rate on average since its first byte, plus a burst, is allowed;
/// more means it paces to something else and the session is stopped. Fed one sample per tick.
#[derive(Debug)]
pub struct RateCheck {
    rate_bps: u64,
    /// Where the average counts from: the first tick that saw a byte read, and the bytes then.
    start: Option<(Instant, u64)>,
}

/// Bytes a paced sender may run ahead of its rate: a burst of 1 MiB or 100 ms at the rate.
fn burst_bytes(rate_bps: u64) -> u64 {
    (rate_bps / 80).max(1 << 20)
}

impl RateCheck {
    /// A check against `rate_bps`.
    pub fn new(rate_bps: u64) -> RateCheck {
        RateCheck {
            rate_bps,
            start: None,
        }
    }

    /// The rate this check holds to, bit/s.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Takes the bytes moved by `now`; returns the average rate (bit/s) since the first byte
    /// when it is far above the rate, None while within it.
    pub fn sample(&mut self, now: Instant, bytes: u64) -> Option<f64> {
        let (t0, b0) = match self.start {
            Some(start) => start,
            None if bytes > 0 => {
                self.start = Some((now, bytes));
                return None;
            }
            None => return None,
        };
        let secs = now.saturating_duration_since(t0).as_secs_f64();
        let allowed = 2.0 * self.rate_bps as f64 / 8.0 * secs + burst_bytes(self.rate_bps) as f64;
        let got = bytes.saturating_sub(b0);
        (got as f64 > allowed && secs > 0.0).then(|| got as f64 * 8.0 / secs)
    }
}

/// A writer on the gate's side of a session (rr responses): each write is taken from the
/// session's `--max-bytes` and paced to `--max-rate`. Past the limit a write fails with the
/// reason, so the data path stops; the gate's watch stops the session with the same reason.
pub struct MeteredWrite<'m, W> {
    inner: W,
    meter: &'m Meter,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<'m, W> MeteredWrite<'m, W> {
    /// Wraps `inner`, counting into `meter`.
    pub fn new(inner: W, meter: &'m Meter) -> Self {
        MeteredWrite {
            inner,
            meter,
            pause: None,
        }
    }

    /// The writer it wraps.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for MeteredWrite<'_, W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        if let Some(pause) = &mut this.pause {
            if pause.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.pause = None;
        }
        // At most 64 KiB per write, so a pause follows every batch.
        let buf = &buf[..buf.len().min(64 * 1024)];
        if let Err(reason) = this.meter.may_send(buf.len() as u64) {
            return Poll::Ready(Err(std::io::Error::other(reason)));
        }
        let n = match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => n,
            other => return other,
        };
        this.meter.count_sent(n as u64);
        let wait = this.meter.send_pause();
        if !wait.is_zero() {
            this.pause = Some(Box::pin(tokio::time::sleep(wait)));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

use std::future::Future as _;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_count_against_max_bytes() {
        let m = Meter::new(1000, None);
        m.count_read(400);
        assert_eq!(m.may_send(600), Ok(()));
        m.count_sent(600);
        assert!(m.over_limit().is_none());
        let why = m.may_send(1).unwrap_err();
        assert!(
            why.contains("would move 1001 bytes (read and sent)"),
            "{why}"
        );
        assert!(why.contains("at most 1000 bytes (--max-bytes)"), "{why}");
        m.watch(|| Moved { read: 10, sent: 0 });
        assert_eq!(
            m.moved(),
            Moved {
                read: 410,
                sent: 600
            }
        );
        assert!(m.over_limit().unwrap().contains("1010 bytes"));
    }

    #[test]
    fn a_sender_far_above_its_rate_is_caught_and_one_within_it_is_not() {
        let t0 = Instant::now();
        let mut check = RateCheck::new(1_000_000);
        assert_eq!(check.sample(t0, 0), None);
        assert_eq!(check.sample(t0, 1000), None);
        // 1 Mbit/s for 10 s is 1.25 MB: twice that plus the burst is allowed.
        let at = t0 + Duration::from_secs(10);
        assert_eq!(check.sample(at, 1000 + 2_500_000), None);
        let rate = check.sample(at, 1000 + 4_000_000).unwrap();
        assert!((rate - 3_200_000.0).abs() < 1.0, "{rate}");
        // 3 Gbit/s for 100 ms against 1 Mbit/s: caught at once.
        let mut fast = RateCheck::new(1_000_000);
        fast.sample(t0, 1);
        assert!(fast
            .sample(t0 + Duration::from_millis(100), 37_500_000)
            .is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn metered_writes_are_paced_and_stop_at_the_limit() {
        use tokio::io::AsyncWriteExt;
        let m = Meter::new(300_000, Some(8_000_000));
        let started = tokio::time::Instant::now();
        let mut w = MeteredWrite::new(tokio::io::sink(), &m);
        w.write_all(&[0u8; 200_000]).await.unwrap();
        // 200 kB at 1 MB/s: the last batch waits until 0.2 s minus a batch.
        w.write_all(&[0u8; 1]).await.unwrap();
        assert!(
            started.elapsed() >= Duration::from_millis(190),
            "{:?}",
            started.elapsed()
        );
        let err = w.write_all(&[0u8; 200_000]).await.unwrap_err();
        assert!(err.to_string().contains("(--max-bytes)"), "{err}");
        assert!(m.moved().sent <= 300_000);
    }
}
