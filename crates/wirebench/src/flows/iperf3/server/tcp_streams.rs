//! The TCP data streams of one iperf3 test on the server, each on a thread of its own with
//! blocking reads and writes, as iperf3 3.16+ runs its streams and as wirebench's own TCP
//! sessions run: on the runtime's one worker, every stream of a test shared one CPU (against
//! `iperf3 -s` 3.21 on 2 CPUs: `-P 4` 0.90×, `--bidir -P 2` 0.68×; how a blocking call looks at
//! the test's stop: `iperf3::blocking_io`). Owns moving and pacing TCP bytes; must not speak
//! the control dialogue.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::sync::watch;

use super::streams::{Budget, Sending, StreamCount};
use crate::engine::stream::low_water::LowWater;
use crate::flows::iperf3::blocking_io::{
    make_blocking, payload, sleep_unless_stopped, stopped, tcp_read_len, timed_out,
};
use crate::flows::server::meter::Meter;

/// After TEST_END, a receiving stream counts as drained once nothing arrived for this long.
const QUIET: Duration = Duration::from_millis(20);

/// Longest time spent draining after TEST_END.
const MAX_DRAIN: Duration = Duration::from_secs(2);

/// Longest a TCP sender goes on with the block it is writing after the test stopped: a client
/// that drains its reversed streams (3.12) takes the rest at once, a `--bidir` one reads no
/// more.
const FINISH_BLOCK: Duration = Duration::from_millis(50);

/// Reads a TCP stream of `len`-byte blocks until the test stops, then until it stays quiet
/// for [`QUIET`]: an iperf3 client sends TEST_END as soon as its last write returns, while
/// that data may still be queued on its side or in ours.
///
/// `sharing`: other streams of the test receive beside this one, so its batching goes on
/// when it falls behind ([`LowWater::by_turns`]).
pub(super) fn recv(
    (s, len, sharing): (Arc<TcpStream>, usize, bool),
    count: Arc<StreamCount>,
    meter: Arc<Meter>,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    make_blocking(&s).context("while setting up an iperf3 TCP stream")?;
    let mut buf = vec![0u8; tcp_read_len(len)];
    let mut low_water = if sharing {
        LowWater::by_turns()
    } else {
        LowWater::new(true)
    };
    // Set once the test stopped: until when the rest may be drained.
    let mut drain_until: Option<Instant> = None;
    loop {
        if drain_until.is_none() && stopped(&stop) {
            // What is left may be less than a batch: drain it as it comes.
            low_water.stop(&*s);
            drain_until = Some(Instant::now() + MAX_DRAIN);
            s.set_read_timeout(Some(QUIET))
                .context("while draining an iperf3 TCP stream")?;
        }
        let draining = drain_until.is_some();
        // What the client queued is read only while the reads are within --max-rate: past it
        // the rest stays unread (32 streams drained 200 MB from their receive buffers at
        // once).
        if drain_until.is_some_and(|limit| Instant::now() >= limit || !meter.read_pause().is_zero())
        {
            return Ok(());
        }
        // Each read takes at most what --max-bytes leaves, across all the test's streams: past
        // it the meter trips and the stream stops reading (32 streams read 211 MB under 50 MiB).
        let room = match meter.read_room(buf.len()) {
            Ok(room) => room,
            Err(_) if draining => return Ok(()),
            Err(e) => return Err(anyhow::Error::msg(e)),
        };
        if room < buf.len() {
            // --max-bytes is nearly spent: a batch would wait for bytes it may not take.
            low_water.stop(&*s);
        }
        match (&*s).read(&mut buf[..room]) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                low_water.after_read(&*s, n);
                count.add(n as u64);
                meter.count_read(n as u64);
            }
            // Quiet for QUIET after the stop: drained.
            Err(e) if timed_out(&e) && draining => return Ok(()),
            Err(e) if timed_out(&e) => {}
            Err(_) if draining => return Ok(()),
            Err(e) => return Err(e).context("while reading an iperf3 TCP stream"),
        }
        // --max-rate: reading no faster makes TCP slow the client down.
        if !draining {
            let wait = meter.read_pause();
            if !wait.is_zero() {
                sleep_unless_stopped(Instant::now() + wait, &stop);
            }
        }
    }
}

/// Sends whole blocks on a TCP stream at its pace until the budget is spent or the test stops.
/// A block under way when the test stops is finished if the client takes it (within
/// [`FINISH_BLOCK`]), as iperf3's own sender writes whole blocks: its 3.12 client drains a
/// reversed stream with blocking reads of whole blocks (the test shuts the stream down after,
/// so a block left short still ends that read).
pub(super) fn send(
    s: Arc<TcpStream>,
    how: Sending,
    budget: Arc<Budget>,
    count: Arc<StreamCount>,
    meter: Arc<Meter>,
    stop: watch::Receiver<bool>,
) -> Result<()> {
    make_blocking(&s).context("while setting up an iperf3 TCP stream")?;
    let buf = payload(how.len);
    let mut sent = 0u64;
    loop {
        if let Some(due) = how.due(sent) {
            if !sleep_unless_stopped(due, &stop) {
                return Ok(());
            }
        }
        // A block not begun when the test stopped is not begun.
        if stopped(&stop) {
            return Ok(());
        }
        let n = budget.claim(how.len as u64) as usize;
        if n == 0 {
            return Ok(());
        }
        meter.may_send(n as u64).map_err(anyhow::Error::msg)?;
        let mut off = 0;
        let mut finish_by: Option<Instant> = None;
        while off < n {
            if finish_by.is_none() && stopped(&stop) {
                finish_by = Some(Instant::now() + FINISH_BLOCK);
            }
            if finish_by.is_some_and(|limit| Instant::now() >= limit) {
                return Ok(());
            }
            match (&*s).write(&buf[off..n]) {
                Ok(w) => {
                    count.add(w as u64);
                    meter.count_sent(w as u64);
                    sent += w as u64;
                    off += w;
                }
                Err(e) if timed_out(&e) => {}
                Err(e) => return Err(e).context("while sending on an iperf3 TCP stream"),
            }
        }
        if finish_by.is_some() {
            return Ok(());
        }
    }
}
