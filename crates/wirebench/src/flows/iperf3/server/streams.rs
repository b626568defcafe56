//! What the data streams of one iperf3 test on the server share (each counts into its
//! [`StreamCount`] as it goes, so the test can mark the end of the omitted seconds and its end
//! by reading them; a byte budget; the pace), and the UDP writers (UDP readers are the hub's;
//! TCP streams are `tcp_streams`'). Owns moving and pacing UDP bytes; must not speak the
//! control dialogue.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use tokio::net::UdpSocket;
use tokio::sync::watch;
use wirebench_core::wire::iperf3::UdpHeader;

use crate::flows::iperf3::blocking_io::payload;
use crate::flows::server::meter::Meter;

/// How early a paced block may leave. The runtime's timers fire up to a millisecond late, and
/// an iperf3 client ends its test on its own clock: a datagram due exactly at the end (iperf3's
/// default 1 Mbit/s × 32 KiB datagrams are due every 250 ms, the last at `-t`) must not miss
/// it, on a busy machine either. A constant lead leaves the rate as asked.
const PACE_LEAD: Duration = Duration::from_millis(4);

/// How long a UDP sender that has sent its `-n`/`-k` waits for TEST_END before it sends more.
/// A 3.12 client ends the test as soon as `-n` arrived (a loopback TEST_END comes within a
/// millisecond), unless a datagram was lost; a 3.21 client looks at `-n` only on its
/// once-a-second tick, and iperf3's own server goes on sending until then, so the wait is
/// short enough to leave the rate as asked.
const TOP_UP_AFTER: Duration = Duration::from_millis(50);

/// How long a UDP sender whose budget is spent waits for TEST_END before it tops up: a client
/// with every byte says so one round trip later, so three of the control connection's round
/// trips, at least [`MIN_TOP_UP`] (a busy client) and at most [`MAX_TOP_UP`];
/// [`TOP_UP_AFTER`] when the round trip is not known. A fixed 50 ms doubled a 40 ms test on
/// loopback and was too short for a 100 ms path (the sender went on before TEST_END could come,
/// and a 3.12 client counted what it sent meanwhile as lost).
pub(super) fn top_up_wait(control_rtt: Option<Duration>) -> Duration {
    control_rtt.map_or(TOP_UP_AFTER, |rtt| (rtt * 3).clamp(MIN_TOP_UP, MAX_TOP_UP))
}

/// The shortest wait for TEST_END before a top-up.
const MIN_TOP_UP: Duration = Duration::from_millis(5);

/// The longest wait for TEST_END before a top-up.
const MAX_TOP_UP: Duration = Duration::from_secs(1);

/// What one data stream has moved so far: bytes and calls (reads, writes or datagrams),
/// written by its task and read by the test at its marks.
#[derive(Debug, Default)]
pub(super) struct StreamCount {
    bytes: AtomicU64,
    calls: AtomicU64,
}

impl StreamCount {
    pub(super) fn add(&self, bytes: u64) {
        // One relaxed add per call: no lock on the data path.
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes moved so far.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Calls (TCP) or datagrams (UDP) so far.
    pub(super) fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// Bytes the server's streams may still send over all of them (a `-n`/`-k` reverse test),
/// taken block by block or datagram by datagram.
#[derive(Debug)]
pub(super) struct Budget(AtomicU64);

impl Budget {
    /// A budget of `bytes` (u64::MAX: a timed test).
    pub(super) fn new(bytes: u64) -> Arc<Budget> {
        Arc::new(Budget(AtomicU64::new(bytes)))
    }

    /// Takes up to `want` bytes; 0 when spent.
    pub(super) fn claim(&self, want: u64) -> u64 {
        let mut got = 0;
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                got = left.min(want);
                Some(left - got)
            });
        got
    }
}

/// How a stream the server sends on behaves.
#[derive(Debug, Clone)]
pub(super) struct Sending {
    /// Bytes per write (TCP) or per datagram, header included (UDP).
    pub len: usize,
    /// Pace of this stream, bit/s (0: as fast as it goes): the client's `-b`, or the server's
    /// `--max-rate` shared by the sending streams when lower.
    pub rate_bps: u64,
    /// Where the pace and the datagrams' timestamps count from: the test's start.
    pub start: Instant,
    /// UDP: 64-bit datagram counters.
    pub counters_64bit: bool,
    /// UDP with a budget: how long to wait for TEST_END once it is spent ([`top_up_wait`]).
    pub top_up_after: Duration,
}

impl Sending {
    /// When a stream that has sent `bytes` may send the next block, to hold its pace.
    pub(super) fn due(&self, bytes: u64) -> Option<Instant> {
        self.due_from(self.start, bytes)
    }

    /// When a stream that has sent `bytes` since `origin` may send the next block.
    fn due_from(&self, origin: Instant, bytes: u64) -> Option<Instant> {
        (self.rate_bps > 0).then(|| {
            let secs = |b: f64| Duration::from_secs_f64(b * 8.0 / self.rate_bps as f64);
            // No more than one block early: a lead of several blocks leaves as one burst,
            // which overflows a client's receive buffer at 1 Gbit/s (the datagrams are lost).
            let lead = PACE_LEAD.min(secs(self.len as f64));
            origin + secs(bytes as f64).saturating_sub(lead)
        })
    }
}

/// Sends whole datagrams to `to` at the stream's pace until the budget (`-n`/`-k`) is spent,
/// so a client that ends at `-n` counts exactly what was sent and none lost (more sent before
/// its TEST_END arrives shows as lost on a 3.12 client). A client counting towards `-n` or `-k`
/// waits for the bytes of every datagram lost on the way, and a 3.21 one for its next second,
/// so when no TEST_END comes within [`Sending::top_up_after`] of the budget's end, the stream goes on
/// sending, as iperf3's own sender does, until it does.
pub(super) async fn send_udp(
    socket: Arc<UdpSocket>,
    to: SocketAddr,
    how: Sending,
    budget: Arc<Budget>,
    count: Arc<StreamCount>,
    meter: Arc<Meter>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let mut buf = payload(how.len);
    let mut datagrams = 0u64;
    // Topping up paces from when it began: the wait is not made up for with a burst.
    let (mut origin, mut paced) = (how.start, 0u64);
    let mut topping_up = false;
    loop {
        // Stop only ever turns true, sent after every stream's receiver was cloned: an
        // unchanged version (an atomic load, not the value's lock) means not stopped.
        if stop.has_changed().unwrap_or(true) && *stop.borrow() {
            return Ok(());
        }
        if let Some(due) = how.due_from(origin, paced) {
            tokio::select! {
                () = tokio::time::sleep_until(due.into()) => {}
                _ = stop.changed() => return Ok(()),
            }
        }
        if !topping_up && budget.claim(how.len as u64) < how.len as u64 {
            // Spent: the client ends the test now unless a datagram was lost.
            tokio::select! {
                () = tokio::time::sleep(how.top_up_after) => topping_up = true,
                _ = stop.changed() => return Ok(()),
            }
            (origin, paced) = (Instant::now(), 0);
            continue;
        }
        meter.may_send(how.len as u64).map_err(anyhow::Error::msg)?;
        let (sec, usec) = super::super::udp_timestamp(how.start);
        let header = UdpHeader {
            sec,
            usec,
            count: datagrams + 1,
        };
        header.encode(how.counters_64bit, &mut buf);
        // A full queue drops this datagram (it never counts as sent); the client would count
        // the gap as a loss, so the count is not advanced either. It still takes its place in
        // the pacing: a send that keeps failing is retried at the rate, not in a tight loop.
        paced += buf.len() as u64;
        if socket.send_to(&buf, to).await.is_ok() {
            datagrams += 1;
            count.add(buf.len() as u64);
            meter.count_sent(buf.len() as u64);
        }
    }
}
