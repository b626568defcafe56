//! The data streams of one `run --iperf3` test: TCP and UDP senders (the budget shared over
//! the streams, UDP paced) and receivers, each keeping its [`StreamTally`], and what they share
//! with the test's coordinator. Owns moving the bytes; must not speak the control dialogue.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::io::{Read, Write};
use std::net::TcpStream;

use anyhow::{bail, Context, Result};
use tokio::net::UdpSocket;
use tokio::sync::watch;
use tokio::task::JoinSet;
use wirebench_core::wire::iperf3::{self as wire, UdpHeader, UdpReceiver};

use crate::engine::stream::low_water::LowWater;
use crate::flows::iperf3::blocking_io::{make_blocking, payload, stopped, tcp_read_len, timed_out};

/// Counters the data tasks share with the coordinator.
#[derive(Debug)]
pub(super) struct Shared {
    /// Bytes senders may still send over all streams (forward, byte-limited).
    pub budget: AtomicU64,
    /// Bytes moved over all streams so far.
    pub moved: AtomicU64,
    /// Receivers wake the coordinator when `moved` reaches this (reverse, byte-limited).
    pub target: u64,
    /// The wake-up when `target` is reached or a sender ran out of budget.
    pub reached: tokio::sync::Notify,
    /// Tasks that ran out of budget.
    pub finished: AtomicUsize,
}

impl Shared {
    /// A task ran out of budget; the last one wakes the coordinator, which sends TEST_END at
    /// once (a 10 ms tick made the iperf3 server's time up to 10 ms long).
    fn finish(&self) {
        self.finished.fetch_add(1, Ordering::Relaxed);
        self.reached.notify_one();
    }

    /// Takes up to `want` bytes from the budget; 0 when it is spent.
    fn claim(&self, want: u64) -> u64 {
        let mut got = 0;
        let _ = self
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                got = left.min(want);
                Some(left - got)
            });
        got
    }
}

/// What each data task gets.
pub(super) struct TaskCtx {
    /// The stream's iperf3 id.
    pub id: u32,
    /// Bytes per write or datagram.
    pub len: usize,
    /// UDP pace of the stream, bit/s (0: unpaced).
    pub rate_bps: u64,
    /// UDP: the datagrams' count is 64 bits (`--udp-counters-64bit`), else 32.
    pub counters_64bit: bool,
    /// The test's start: the pace and the datagrams' timestamps count from it.
    pub start: Instant,
    /// What the streams share with the coordinator.
    pub shared: Arc<Shared>,
    /// Turns true when the stream must stop.
    pub stop: watch::Receiver<bool>,
}

impl TaskCtx {
    fn tally(&self) -> StreamTally {
        StreamTally {
            id: self.id,
            ..StreamTally::default()
        }
    }

    fn now_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn moved(&self, tally: &mut StreamTally, n: usize) {
        if tally.bytes == 0 {
            tally.first_s = self.now_s();
        }
        tally.bytes += n as u64;
        tally.last_s = self.now_s();
        let before = self.shared.moved.fetch_add(n as u64, Ordering::Relaxed);
        if before < self.shared.target && before + n as u64 >= self.shared.target {
            // notify_one keeps the wake-up even if the coordinator is not waiting yet.
            self.shared.reached.notify_one();
        }
    }

    /// When the next datagram may leave to keep `rate_bps`.
    fn due(&self, bytes_sent: u64) -> Option<Instant> {
        if self.rate_bps == 0 {
            return None;
        }
        let secs = bytes_sent as f64 * 8.0 / self.rate_bps as f64;
        Some(self.start + Duration::from_secs_f64(secs))
    }
}

/// Waits for every data task and returns their tallies.
pub(super) async fn join(tasks: &mut JoinSet<Result<StreamTally>>) -> Result<Vec<StreamTally>> {
    let mut out = Vec::new();
    while let Some(done) = tasks.join_next().await {
        out.push(done.context("a data task failed")??);
    }
    Ok(out)
}

/// Sends whole blocks on a TCP stream, on a thread of its own with blocking writes (as
/// iperf3's client does since 3.16: on the runtime `-P 4` moved 0.90× of its figure), until the
/// budget is spent or the test stops; then waits for the acknowledgements and the [`settle`]. A block under way
/// when the test stops is finished if the server takes it within [`FINISH_BLOCK`].
pub(super) fn send_tcp(s: TcpStream, ctx: TaskCtx) -> Result<StreamTally> {
    make_blocking(&s).context("while setting up an iperf3 TCP stream")?;
    let buf = payload(ctx.len);
    let mut tally = ctx.tally();
    'blocks: loop {
        if stopped(&ctx.stop) {
            break;
        }
        let n = ctx.shared.claim(ctx.len as u64) as usize;
        if n == 0 {
            ctx.shared.finish();
            break;
        }
        let (mut off, mut finish_by) = (0, None);
        while off < n {
            if finish_by.is_none() && stopped(&ctx.stop) {
                finish_by = Some(Instant::now() + FINISH_BLOCK);
            }
            if finish_by.is_some_and(|limit| Instant::now() >= limit) {
                break 'blocks;
            }
            match (&s).write(&buf[off..n]) {
                Ok(w) => {
                    ctx.moved(&mut tally, w);
                    off += w;
                }
                Err(e) if timed_out(&e) => {}
                Err(e) => return Err(e).context("while sending on an iperf3 TCP stream"),
            }
        }
    }
    wait_acked(&s, &ctx.stop);
    tally.transport = crate::transport::counters::tcp_stats(&s);
    // Here, not in the coordinator: a hand-over between threads cost milliseconds on 2 CPUs.
    std::thread::sleep(settle(ctx.start.elapsed()));
    Ok(tally)
}

/// Longest a TCP sender goes on with the block it is writing after the test stopped.
const FINISH_BLOCK: Duration = Duration::from_millis(50);

/// Waits until the peer acknowledged everything written to `s` (at most [`ACK_WAIT`]), so
/// the server's kernel holds every byte before TEST_END. Waiting costs the server's figures
/// nothing: the time it adds is the time the bytes it adds took to arrive. The wait sleeps
/// between looks, taking no CPU the server needs.
fn wait_acked(s: &TcpStream, stop: &watch::Receiver<bool>) {
    let give_up = Instant::now() + ACK_WAIT;
    while unacked(s).is_some_and(|n| n > 0) && Instant::now() < give_up {
        // A test dropped (not ended) waits for nothing.
        if stop.has_changed().is_err() {
            return;
        }
        std::thread::sleep(ACK_POLL);
    }
}

/// The longest wait for the acknowledgements.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// How often the acknowledgements are looked at.
const ACK_POLL: Duration = Duration::from_micros(50);

/// Bytes written and not yet acknowledged by the peer (Linux `TIOCOUTQ`).
#[cfg(target_os = "linux")]
fn unacked(s: &TcpStream) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one c_int through the pointer, which points at a live c_int;
    // the descriptor stays open while `s` is borrowed.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    (rc == 0).then(|| u64::try_from(queued).unwrap_or(0))
}

/// Not measurable here: do not wait.
#[cfg(not(target_os = "linux"))]
fn unacked(_s: &TcpStream) -> Option<u64> {
    None
}

/// How long the iperf3 server gets to read what it holds before TEST_END: 1 % of the test's
/// time (its clock stops at TEST_END, so its time runs at most that much long), at least
/// [`SETTLE_MIN`], at most [`SETTLE_MAX`] (a server that keeps up reads the few MB its socket
/// holds in well under that). iperf3's own client sends TEST_END at once, and its server drops
/// what it had not read yet: a 1 MB test counted 195 kB once in four. A fixed 50 ms made a
/// 100 MB test's time 2.7 times too long.
pub(super) fn settle(test: Duration) -> Duration {
    (test / 100).clamp(SETTLE_MIN, SETTLE_MAX)
}

/// The shortest settle.
const SETTLE_MIN: Duration = Duration::from_micros(500);

/// The longest settle.
const SETTLE_MAX: Duration = Duration::from_millis(10);

/// Reads a reversed TCP stream, on a thread of its own with blocking reads, until the test
/// stops, then what the server wrote before it stopped: until the stream stays quiet (at least
/// [`QUIET`], four round trips on a longer path) or [`MAX_DRAIN`] has passed. Data still on its
/// way when TEST_END was answered was sent and counted by the server; taking only what had
/// arrived left the two views a block or so apart.
pub(super) fn recv_tcp(s: TcpStream, ctx: TaskCtx) -> Result<StreamTally> {
    make_blocking(&s).context("while setting up an iperf3 TCP stream")?;
    let mut buf = vec![0u8; tcp_read_len(ctx.len)];
    let mut tally = ctx.tally();
    let mut low_water = LowWater::new(true);
    let mut drain_until: Option<Instant> = None;
    loop {
        if drain_until.is_none() && stopped(&ctx.stop) {
            // What is left may be less than a batch: drain it as it comes.
            low_water.stop(&s);
            let rtt = crate::transport::counters::tcp_stats(&s)
                .and_then(|t| t.srtt_us)
                .map_or(Duration::ZERO, Duration::from_micros);
            let quiet = (4 * rtt).clamp(QUIET, Duration::from_millis(500));
            s.set_read_timeout(Some(quiet))
                .context("while draining an iperf3 TCP stream")?;
            drain_until = Some(Instant::now() + MAX_DRAIN);
        }
        if drain_until.is_some_and(|limit| Instant::now() >= limit) {
            return Ok(tally);
        }
        match (&s).read(&mut buf) {
            Ok(0) => return Ok(tally),
            Ok(n) => {
                low_water.after_read(&s, n);
                ctx.moved(&mut tally, n);
            }
            // Quiet for its time after the stop: drained.
            Err(e) if timed_out(&e) && drain_until.is_some() => return Ok(tally),
            Err(e) if timed_out(&e) => {}
            Err(_) if drain_until.is_some() => return Ok(tally),
            Err(e) => return Err(e).context("while reading an iperf3 TCP stream"),
        }
    }
}

/// After the test, a reversed stream counts as drained once nothing arrived for this long.
const QUIET: Duration = Duration::from_millis(20);

/// Longest time spent draining a reversed stream after the test.
const MAX_DRAIN: Duration = Duration::from_secs(2);

pub(super) async fn send_udp(s: UdpSocket, ctx: TaskCtx) -> Result<StreamTally> {
    let mut buf = payload(ctx.len);
    let mut tally = ctx.tally();
    let header_len = wire::udp_header_len(ctx.counters_64bit);
    loop {
        if *ctx.stop.borrow() {
            break;
        }
        if let Some(due) = ctx.due(tally.bytes) {
            tokio::time::sleep_until(due.into()).await;
        }
        let n = ctx.shared.claim(ctx.len as u64) as usize;
        if n == 0 {
            ctx.shared.finish();
            break;
        }
        // A datagram always carries the whole header, even when the budget's tail is shorter.
        let n = n.max(header_len);
        let (sec, usec) = super::super::udp_timestamp(ctx.start);
        let header = UdpHeader {
            sec,
            usec,
            count: tally.datagrams + 1,
        };
        header.encode(ctx.counters_64bit, &mut buf);
        match s.send(&buf[..n]).await {
            Ok(_) => {
                tally.datagrams += 1;
                ctx.moved(&mut tally, n);
            }
            // Failures that sending again cannot mend end this stream at once, and wake the
            // coordinator, which ends the test with the error.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                ctx.shared.finish();
                bail!("the iperf3 server's UDP port refused datagrams")
            }
            // Larger than the path MTU with --dont-fragment: iperf3's -l includes its header.
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                ctx.shared.finish();
                return Err(anyhow::Error::from(e)
                    .context(crate::transport::net::too_large_for_the_path(n as u32, 0)));
            }
            // A full queue (ENOBUFS) drops this datagram; the receiver counts it as lost.
            Err(_) => {}
        }
    }
    Ok(tally)
}

pub(super) async fn recv_udp(s: UdpSocket, mut ctx: TaskCtx) -> Result<StreamTally> {
    let mut buf = vec![0u8; 65_536];
    let mut tally = ctx.tally();
    let mut acct = UdpReceiver::default();
    loop {
        tokio::select! {
            r = s.recv(&mut buf) => match r {
                Ok(n) => account(&buf[..n], &mut acct, &mut tally, &ctx),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(anyhow::Error::from(e).context("while reading an iperf3 UDP stream")),
            },
            _ = ctx.stop.changed() => break,
        }
    }
    while let Ok(n) = s.try_recv(&mut buf) {
        account(&buf[..n], &mut acct, &mut tally, &ctx);
    }
    tally.udp = Some(acct);
    Ok(tally)
}

/// Counts one received datagram; ones too short for the header are ignored.
fn account(datagram: &[u8], acct: &mut UdpReceiver, tally: &mut StreamTally, ctx: &TaskCtx) {
    if let Ok(h) = UdpHeader::decode(datagram, ctx.counters_64bit) {
        acct.on_datagram(&h, datagram.len(), ctx.now_s());
        tally.datagrams += 1;
        ctx.moved(tally, datagram.len());
    }
}

/// One stream's figures on our side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamTally {
    /// iperf3 stream id.
    pub id: u32,
    /// Bytes sent (forward) or received (reverse).
    pub bytes: u64,
    /// UDP datagrams sent or received.
    pub datagrams: u64,
    /// UDP receiver accounting (reverse UDP only).
    pub udp: Option<UdpReceiver>,
    /// TCP sender: its TCP_INFO counters at the end (retransmissions, as iperf3's client
    /// reports them).
    pub transport: Option<wirebench_core::vocab::counters::TransportStats>,
    /// First byte moved, seconds after the test started.
    pub first_s: f64,
    /// Last byte moved, seconds after the test started.
    pub last_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settle_is_a_hundredth_of_the_test_within_its_bounds() {
        assert_eq!(settle(Duration::from_secs(3)), SETTLE_MAX);
        assert_eq!(settle(Duration::from_millis(400)), Duration::from_millis(4));
        assert_eq!(settle(Duration::from_millis(1)), SETTLE_MIN);
    }
}
