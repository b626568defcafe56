//! The data streams of one iperf3 test on the server: TCP readers, TCP and UDP writers (UDP
//! readers are the hub's), each counting into its [`StreamCount`] as it goes, so the test can
//! mark the end of the omitted seconds and its end by reading them. Owns moving and pacing the
//! bytes; must not speak the control dialogue.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::watch;
use wirebench_core::wire::iperf3::UdpHeader;

use crate::flows::server::meter::Meter;

/// After TEST_END, a receiving stream counts as drained once nothing arrived for this long.
const QUIET: Duration = Duration::from_millis(20);

/// Longest time spent draining after TEST_END.
const MAX_DRAIN: Duration = Duration::from_secs(2);

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
    fn add(&self, bytes: u64) {
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
    fn claim(&self, want: u64) -> u64 {
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
    fn due(&self, bytes: u64) -> Option<Instant> {
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

/// Reads a TCP stream until the test stops, then until it stays quiet: an iperf3 client sends
/// TEST_END as soon as its last write returns, while that data may still be queued on its side
/// or in ours.
pub(super) async fn recv_tcp(
    s: Arc<TcpStream>,
    count: Arc<StreamCount>,
    meter: Arc<Meter>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let mut buf = vec![0u8; 128 * 1024];
    // Each read takes at most what --max-bytes leaves, across all the test's streams: past it
    // the meter trips and the stream stops reading (32 streams read 211 MB under 50 MiB).
    let take = |buf: &mut [u8]| match meter
        .read_room(buf.len())
        .map_err(std::io::Error::other)
        .and_then(|room| s.try_read(&mut buf[..room]))
    {
        Ok(0) => Some(Ok(0)),
        Ok(n) => {
            count.add(n as u64);
            meter.count_read(n as u64);
            Some(Ok(n))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) => Some(Err(e)),
    };
    loop {
        tokio::select! {
            ready = s.readable() => {
                ready.context("while reading an iperf3 TCP stream")?;
                // As the sender's: `readable()` and `try_read` never yield the worker.
                tokio::task::coop::consume_budget().await;
                match take(&mut buf) {
                    Some(Ok(0)) => return Ok(()),
                    Some(Ok(_)) | None => {}
                    Some(Err(e)) => {
                        return Err(anyhow::Error::from(e).context("while reading an iperf3 TCP stream"))
                    }
                }
            }
            _ = stop.changed() => break,
        }
        // --max-rate: reading no faster makes TCP slow the client down.
        let wait = meter.read_pause();
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => break,
            }
        }
    }
    let give_up = Instant::now() + MAX_DRAIN;
    // What the client queued is read only while the reads are within --max-rate: past it
    // the rest stays unread (32 streams drained 200 MB from their receive buffers at once).
    while Instant::now() < give_up && meter.read_pause().is_zero() {
        tokio::select! {
            ready = s.readable() => {
                if ready.is_err() {
                    break;
                }
                match take(&mut buf) {
                    Some(Ok(0)) | Some(Err(_)) => break,
                    Some(Ok(_)) | None => {}
                }
            }
            () = tokio::time::sleep(QUIET) => break,
        }
    }
    Ok(())
}

/// Longest a TCP sender goes on with the block it is writing after the test stopped: a client
/// that drains its reversed streams (3.12) takes the rest at once, a `--bidir` one reads no
/// more.
const FINISH_BLOCK: Duration = Duration::from_millis(50);

/// Sends whole blocks on a TCP stream at its pace until the budget is spent or the test stops.
/// A block under way when the test stops is finished if the client takes it (within
/// [`FINISH_BLOCK`]), as iperf3's own sender writes whole blocks: its 3.12 client drains a
/// reversed stream with blocking reads of whole blocks (the test shuts the stream down after,
/// so a block left short still ends that read).
pub(super) async fn send_tcp(
    s: Arc<TcpStream>,
    how: Sending,
    budget: Arc<Budget>,
    count: Arc<StreamCount>,
    meter: Arc<Meter>,
    mut stop: watch::Receiver<bool>,
) -> Result<()> {
    let buf = payload(how.len);
    let mut sent = 0u64;
    loop {
        if let Some(due) = how.due(sent) {
            tokio::select! {
                () = tokio::time::sleep_until(due.into()) => {}
                _ = stop.changed() => return Ok(()),
            }
        }
        let n = budget.claim(how.len as u64) as usize;
        if n == 0 {
            return Ok(());
        }
        meter.may_send(n as u64).map_err(anyhow::Error::msg)?;
        let mut off = 0;
        let mut finish_by: Option<Instant> = None;
        while off < n {
            let ready = match finish_by {
                None => tokio::select! {
                    ready = s.writable() => ready,
                    _ = stop.changed() => {
                        finish_by = Some(Instant::now() + FINISH_BLOCK);
                        continue;
                    }
                },
                Some(limit) => match tokio::time::timeout_at(limit.into(), s.writable()).await {
                    Ok(ready) => ready,
                    Err(_) => return Ok(()),
                },
            };
            ready.context("while sending on an iperf3 TCP stream")?;
            // `writable()` and `try_write` never count against tokio's cooperative budget, so
            // without this a stream that is always writable never yields its worker, and the
            // control task that reads TEST_END waits (0.3-1.5 s on a busy 2-CPU host).
            tokio::task::coop::consume_budget().await;
            match s.try_write(&buf[off..n]) {
                Ok(w) => {
                    count.add(w as u64);
                    meter.count_sent(w as u64);
                    sent += w as u64;
                    off += w;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    return Err(
                        anyhow::Error::from(e).context("while sending on an iperf3 TCP stream")
                    )
                }
            }
        }
        if finish_by.is_some() {
            return Ok(());
        }
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

/// A block of `len` bytes that is not all zeros, so compressing links do not flatter the
/// figures.
fn payload(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ 0x5a)
        .collect()
}
