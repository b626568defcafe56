//! One QUIC stream as the stream engine's sink and source: messages handed to quinn as writes
//! of their own (no copy), with the connection's send window sized by message and grown to the
//! path; quinn's receive buffers read in place.

use std::io;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use bytes::Bytes;
use hdrhistogram::Histogram;
use quinn::{Connection, RecvStream, SendStream};
use wirebench_core::machine::send_window::SendWindow;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::proto::SessionParams;

use super::STREAM_WINDOW;
use crate::engine::stream::{self, ByteSource, MessageSink};
use crate::engine::throttle::{Pause, Throttled};
use crate::engine::SendTally;

/// The sending role of session `p` over one QUIC stream: its messages on `send` through a
/// [`QuicSink`], paced to `--rate` by the application (quinn's own pacer follows its
/// congestion window), stop-and-wait acknowledgements read from `acks`. Returns the tally and
/// the send window the connection ended with (streaming; see [`QuicSink::send_window`]).
pub async fn send_role(
    send: &mut SendStream,
    acks: &mut RecvStream,
    connection: &Connection,
    p: &SessionParams,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> io::Result<(SendTally, Option<u64>)> {
    let sink = QuicSink::new(send, connection, p);
    let mut sink = Throttled::new(sink, p.rate_bps, Pause::Timer);
    let tally = stream::send_role(acks, &mut sink, p, rtt_ns, progress).await?;
    Ok((tally, sink.get_ref().send_window()))
}

/// A [`MessageSink`] over a QUIC send stream: each message is a slice of one shared payload
/// buffer handed to quinn as a write of its own, without copying or allocating.
///
/// quinn keeps each write as a segment and walks the unacknowledged ones for every STREAM frame
/// it builds, so what a message costs grows with the messages in flight. A streaming sink
/// therefore sizes the connection's send window by messages and lets it grow only as far as
/// the path needs ([`SendWindow`]).
#[derive(Debug)]
pub struct QuicSink<'a> {
    stream: &'a mut SendStream,
    /// At least `msg_size` bytes of payload.
    payload: Bytes,
    /// Streaming: the send window as it is tuned.
    window: Option<WindowTuning<'a>>,
}

impl<'a> QuicSink<'a> {
    /// A sink for the messages of session `p` on `stream`, a stream of `connection`.
    pub fn new(stream: &'a mut SendStream, connection: &'a Connection, p: &SessionParams) -> Self {
        let window = (p.mechanism == Mechanism::Stream).then(|| {
            let window = SendWindow::for_messages(p.msg_size, u64::from(STREAM_WINDOW));
            connection.set_send_window(window.bytes());
            // About 64 KiB of messages between two looks at the clock.
            let stride = (64 * 1024 / p.msg_size.max(1)).max(1);
            WindowTuning {
                connection,
                window,
                stride,
                countdown: 1,
                written: 0,
                due: None,
            }
        });
        QuicSink {
            stream,
            payload: Bytes::from(vec![0u8; p.msg_size as usize]),
            window,
        }
    }

    /// The send window at the end of a streaming session (`None` for stop-and-wait).
    pub fn send_window(&self) -> Option<u64> {
        self.window.as_ref().map(|w| w.window.bytes())
    }
}

impl MessageSink for QuicSink<'_> {
    async fn send_message(&mut self, len: usize) -> io::Result<u64> {
        self.stream
            .write_chunk(self.payload.slice(..len))
            .await
            .map_err(io::Error::from)?;
        if let Some(window) = &mut self.window {
            window.wrote(len);
        }
        Ok(1)
    }

    async fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A streaming sink's send window and when to look at it again.
#[derive(Debug)]
struct WindowTuning<'a> {
    connection: &'a Connection,
    window: SendWindow,
    /// Messages between two looks at the clock.
    stride: u32,
    /// Messages until the next look.
    countdown: u32,
    /// Bytes written to the stream so far.
    written: u64,
    /// When the next sample is due (`None`: at the next look).
    due: Option<Instant>,
}

impl WindowTuning<'_> {
    /// Counts a write of `len` bytes; now and then samples the path and grows the window.
    fn wrote(&mut self, len: usize) {
        self.written += len as u64;
        self.countdown -= 1;
        if self.countdown > 0 {
            return;
        }
        self.countdown = self.stride;
        let now = Instant::now();
        if self.due.is_some_and(|due| now < due) {
            return;
        }
        let path = self.connection.stats().path;
        if let Some(grown) = self.window.on_sample(now, self.written, path.min_rtt) {
            self.connection.set_send_window(grown);
        }
        self.due = Some(now + SendWindow::sample_interval(path.rtt));
    }
}

/// Chunks taken from quinn per read: one lock of the connection and one wake-up hand over this
/// many received packets' worth of stream data (as quinn's perf tool reads).
const READ_CHUNKS: usize = 32;

/// A [`ByteSource`] over a QUIC receive stream: reads quinn's buffers in place (no copy),
/// up to [`READ_CHUNKS`] at a time.
#[derive(Debug)]
pub struct QuicSource<'a> {
    /// The stream.
    stream: &'a mut RecvStream,
    /// Bytes taken from quinn but not yet handed to the reader (more than its `max`).
    pending: usize,
}

impl<'a> QuicSource<'a> {
    /// Reads from `stream`.
    pub fn new(stream: &'a mut RecvStream) -> Self {
        QuicSource { stream, pending: 0 }
    }
}

impl ByteSource for QuicSource<'_> {
    async fn read_some(&mut self, max: usize) -> io::Result<usize> {
        if self.pending == 0 {
            let mut bufs: [Bytes; READ_CHUNKS] = Default::default();
            self.pending = match self.stream.read_chunks(&mut bufs).await {
                Ok(Some(n)) => bufs[..n].iter().map(Bytes::len).sum(),
                Ok(None) => return Ok(0),
                Err(e) => return Err(io::Error::from(e)),
            };
        }
        // What the reader did not ask for yet is counted by its next calls, as if unread.
        let n = self.pending.min(max);
        self.pending -= n;
        Ok(n)
    }
}
