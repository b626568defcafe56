//! A server's `--max-rate` on a TCP or QUIC data stream: wraps a [`ByteSource`] or
//! [`MessageSink`] and pauses after each read or message until the bytes moved are within the
//! rate. A reader that pauses makes TCP's and QUIC's flow control slow the sender down, so the
//! cap holds whoever sends. Without a rate it only counts.

use std::io;
use std::time::{Duration, Instant};

use wirebench_core::machine::pacing::pause_for;

use super::stream::{ByteSource, MessageSink};

/// How a throttle waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// Sleep the thread: for data paths on a blocking thread of their own.
    Thread,
    /// Sleep on the runtime's timer: for async data paths.
    Timer,
}

/// A byte source or message sink held to a rate.
#[derive(Debug)]
pub struct Throttled<T> {
    inner: T,
    rate_bps: Option<u64>,
    pause: Pause,
    started: Option<Instant>,
    bytes: u64,
}

impl<T> Throttled<T> {
    /// Holds `inner` to `rate_bps` (None: no cap), waiting as `pause` says.
    pub fn new(inner: T, rate_bps: Option<u64>, pause: Pause) -> Throttled<T> {
        Throttled {
            inner,
            rate_bps,
            pause,
            started: None,
            bytes: 0,
        }
    }

    /// The wrapped source or sink.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Counts `n` bytes moved and waits until they are within the rate.
    async fn account(&mut self, n: usize) {
        let Some(rate) = self.rate_bps else {
            return;
        };
        // The clock starts at the first byte, so the wait for the peer does not earn credit.
        let started = *self.started.get_or_insert_with(Instant::now);
        self.bytes += n as u64;
        let wait = pause_for(rate, self.bytes, started.elapsed());
        if wait > Duration::ZERO {
            match self.pause {
                Pause::Thread => std::thread::sleep(wait),
                Pause::Timer => tokio::time::sleep(wait).await,
            }
        }
    }
}

impl<T: ByteSource + Send> ByteSource for Throttled<T> {
    async fn read_some(&mut self, max: usize) -> io::Result<usize> {
        // Read no more than about 10 ms at the rate, so each pause stays short and a session
        // stopped from outside (its socket shut down) ends promptly.
        let max = match self.rate_bps {
            Some(rate) => max.min(usize::try_from(rate / 800).unwrap_or(usize::MAX).max(1500)),
            None => max,
        };
        let n = self.inner.read_some(max).await?;
        self.account(n).await;
        Ok(n)
    }
}

impl<T: MessageSink + Send> MessageSink for Throttled<T> {
    async fn send_message(&mut self, len: usize) -> io::Result<u64> {
        let calls = self.inner.send_message(len).await?;
        self.account(len).await;
        Ok(calls)
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().await
    }
}
