//! Sender and receiver loops over a reliable byte stream (a TCP connection or one QUIC stream),
//! for both mechanisms. Generic over [`MessageSink`] and [`ByteSource`], so TCP and QUIC share
//! one implementation and one set of counting rules while each moves bytes its cheapest way.
//!
//! Stop-and-wait over a stream: the sender writes one message, the receiver reads until the whole
//! message has arrived and answers with a one-byte acknowledgement, the sender waits for it.
//!
//! [`blocking`] runs these loops on a socket in a thread of its own, with no runtime under it;
//! [`low_water`] batches the wake-ups of its fast TCP receivers.

pub mod blocking;
pub mod low_water;

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use wirebench_core::vocab::plan::{Mechanism, Messages};
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::SessionParams;

use super::SendTally;

/// Size of the receiver's read buffer: large reads whatever the message size, so the receiver
/// is never the bottleneck of a streaming run.
pub const RECV_BUFFER: usize = 1 << 20;

/// The read of a streaming receiver whose messages are [`LARGE_MESSAGE`] or more: one full
/// segment (loopback's and GRO's 64 KiB), so the buffer stays in the CPU's cache. Measured on
/// loopback against 1 MiB reads (alternating runs, `-t 3`): +5–10% at 128 and 256 KiB writes
/// and at `-P 4`, +3% at 64 KiB; but 8 KiB writes lost 18% with it, so smaller messages keep
/// [`RECV_BUFFER`], whose fewer reads (and window updates) the busier sender gains from.
pub const SEGMENT_READ: usize = 64 * 1024;

/// Message size from which a streaming receiver reads [`SEGMENT_READ`] at a time.
pub const LARGE_MESSAGE: u32 = 64 * 1024;

/// What a stream receiver read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadTally {
    /// Payload bytes read.
    pub bytes: u64,
    /// Complete application messages read (a message counts when its last byte arrives).
    pub messages: u64,
    /// Read calls that returned data.
    pub read_calls: u64,
    /// Acknowledgements written (stop-and-wait).
    pub acks_sent: u64,
    /// When the first byte arrived.
    pub first_at: Option<Instant>,
    /// When the last byte arrived (or the stream ended).
    pub last_at: Option<Instant>,
}

/// Why a receiver stopped before the requested total.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// The peer closed the stream early.
    #[error("data stream closed after {got} of {want} bytes")]
    Truncated {
        /// Bytes read.
        got: u64,
        /// Bytes expected.
        want: u64,
    },
    /// The transport failed.
    #[error("data stream failed: {0}")]
    Io(#[from] io::Error),
}

/// Where a sender puts its messages.
pub trait MessageSink {
    /// Sends the first `len` bytes of the payload as one message; returns the send calls it took.
    fn send_message(&mut self, len: usize) -> impl Future<Output = io::Result<u64>> + Send;
    /// Pushes out anything buffered.
    fn flush(&mut self) -> impl Future<Output = io::Result<()>> + Send;
}

/// Where a receiver reads from.
pub trait ByteSource {
    /// Reads at most `max` bytes (≥ 1) and discards them; returns how many, 0 at end of stream.
    fn read_some(&mut self, max: usize) -> impl Future<Output = io::Result<usize>> + Send;
}

/// A [`MessageSink`] over any `AsyncWrite` (TCP): one write call per message, more only when
/// the kernel takes part of it.
#[derive(Debug)]
pub struct WriteSink<'a, W> {
    /// The stream.
    pub writer: &'a mut W,
    /// At least `msg_size` bytes of payload.
    pub payload: &'a [u8],
}

impl<W: AsyncWrite + Unpin + Send> MessageSink for WriteSink<'_, W> {
    async fn send_message(&mut self, len: usize) -> io::Result<u64> {
        write_message(self.writer, &self.payload[..len]).await
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.writer.flush().await
    }
}

/// A [`ByteSource`] over any `AsyncRead` (TCP), reading into a buffer it owns.
#[derive(Debug)]
pub struct ReadSource<'a, R> {
    /// The stream.
    pub reader: &'a mut R,
    /// Scratch space; its length bounds one read.
    pub buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin + Send> ByteSource for ReadSource<'_, R> {
    async fn read_some(&mut self, max: usize) -> io::Result<usize> {
        let n = max.min(self.buf.len());
        self.reader.read(&mut self.buf[..n]).await
    }
}

/// Streaming sender: sends every message once, the last one carrying the remainder; stores
/// its running byte count in `progress` (for interval reports). With a `deadline` (a timed
/// session) it stops before the first message that would start after it, reading the clock
/// once per [`deadline_stride`] messages, not per message.
pub async fn send_stream<S: MessageSink>(
    sink: &mut S,
    plan: Messages,
    deadline: Option<Instant>,
    progress: &AtomicU64,
) -> io::Result<SendTally> {
    let mut tally = SendTally::default();
    let stride = deadline_stride(plan.msg_size);
    for (index, len) in plan.iter() {
        if let Some(deadline) = deadline {
            if index % stride == 0 && Instant::now() >= deadline {
                break;
            }
        }
        tally.send_calls += sink.send_message(len as usize).await?;
        tally.messages += 1;
        tally.bytes += u64::from(len);
        // A plain store, no read-modify-write: only this loop writes it.
        progress.store(tally.bytes, Ordering::Relaxed);
    }
    sink.flush().await?;
    Ok(tally)
}

/// Stop-and-wait sender: one message in flight; records each round trip (ns) in `rtt_ns`.
/// With a `deadline` (a timed session) it sends no message after it (the clock is read per
/// message anyway, for the round trip).
pub async fn send_stop_and_wait<R, S>(
    acks: &mut R,
    sink: &mut S,
    plan: Messages,
    deadline: Option<Instant>,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> io::Result<SendTally>
where
    R: AsyncRead + Unpin,
    S: MessageSink,
{
    let mut tally = SendTally::default();
    let mut ack = [0u8; 1];
    for (index, len) in plan.iter() {
        let sent_at = Instant::now();
        if deadline.is_some_and(|d| sent_at >= d) {
            break;
        }
        tally.send_calls += sink.send_message(len as usize).await?;
        sink.flush().await?;
        acks.read_exact(&mut ack).await?;
        if ack[0] != ack_byte(index) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("acknowledgement for message {index} carries the wrong sequence byte"),
            ));
        }
        rtt_ns.saturating_record(elapsed_ns(sent_at));
        tally.messages += 1;
        tally.bytes += u64::from(len);
        progress.store(tally.bytes, Ordering::Relaxed);
    }
    Ok(tally)
}

/// Streaming receiver: reads until `total_bytes` have arrived, in large reads. A `timed`
/// session may also end earlier, by the sender closing the stream after a whole message.
pub async fn receive_stream<S: ByteSource>(
    source: &mut S,
    plan: Messages,
    timed: bool,
    tally: &mut ReadTally,
    progress: &AtomicU64,
) -> Result<(), ReceiveError> {
    let Messages {
        total_bytes,
        msg_size,
    } = plan;
    while tally.bytes < total_bytes {
        // Never read past the requested total: what follows is not ours to count.
        let want = (total_bytes - tally.bytes).min(RECV_BUFFER as u64) as usize;
        if let Err(e) = read_counted(source, want, total_bytes, tally, progress).await {
            // Only complete messages count when the stream ends early.
            tally.messages = tally.bytes / u64::from(msg_size);
            let at_boundary = tally.bytes % u64::from(msg_size.max(1)) == 0;
            if timed && at_boundary && matches!(e, ReceiveError::Truncated { .. }) {
                return Ok(());
            }
            return Err(e);
        }
    }
    tally.last_at = Some(Instant::now());
    tally.messages = plan.count();
    Ok(())
}

/// Stop-and-wait receiver: reads each whole message, then acknowledges it. A `timed`
/// session may also end earlier, by the sender closing the stream between messages.
pub async fn receive_stop_and_wait<S, W>(
    source: &mut S,
    acks: &mut W,
    plan: Messages,
    timed: bool,
    tally: &mut ReadTally,
    progress: &AtomicU64,
) -> Result<(), ReceiveError>
where
    S: ByteSource,
    W: AsyncWrite + Unpin,
{
    let total_bytes = plan.total_bytes;
    for (index, len) in plan.iter() {
        let len = u64::from(len);
        let mut got = 0u64;
        while got < len {
            let want = (len - got).min(RECV_BUFFER as u64) as usize;
            match read_counted(source, want, total_bytes, tally, progress).await {
                Ok(n) => got += n as u64,
                Err(ReceiveError::Truncated { .. }) if timed && got == 0 => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        tally.messages += 1;
        acks.write_all(&[ack_byte(index)]).await?;
        acks.flush().await?;
        tally.acks_sent += 1;
    }
    tally.last_at = Some(Instant::now());
    Ok(())
}

/// One read of at most `want` bytes, counted in `tally`; the end of the stream before
/// `total_bytes` is an error. The clock is read only for the first byte and at the end.
async fn read_counted<S: ByteSource>(
    source: &mut S,
    want: usize,
    total_bytes: u64,
    tally: &mut ReadTally,
    progress: &AtomicU64,
) -> Result<usize, ReceiveError> {
    let n = source.read_some(want).await?;
    if n == 0 {
        tally.last_at = Some(Instant::now());
        return Err(ReceiveError::Truncated {
            got: tally.bytes,
            want: total_bytes,
        });
    }
    if tally.first_at.is_none() {
        tally.first_at = Some(Instant::now());
    }
    tally.read_calls += 1;
    tally.bytes += n as u64;
    progress.store(tally.bytes, Ordering::Relaxed);
    Ok(n)
}

/// The sending role of a session, whichever end plays it (the client; the server with
/// `--reverse`): streams, or sends stop-and-wait reading acknowledgements from `acks`.
pub async fn send_role<R, S>(
    acks: &mut R,
    sink: &mut S,
    p: &SessionParams,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> io::Result<SendTally>
where
    R: AsyncRead + Unpin,
    S: MessageSink,
{
    let deadline = p.deadline(Instant::now());
    match p.mechanism {
        Mechanism::Stream => send_stream(sink, p.messages(), deadline, progress).await,
        Mechanism::StopAndWait => {
            send_stop_and_wait(acks, sink, p.messages(), deadline, rtt_ns, progress).await
        }
    }
}

/// The receiving role of a session, whichever end plays it (the server; the client with
/// `--reverse`): reads the stream, acknowledging each message on `acks` for stop-and-wait.
pub async fn receive_role<S, W>(
    source: &mut S,
    acks: &mut W,
    p: &SessionParams,
    tally: &mut ReadTally,
    progress: &AtomicU64,
) -> Result<(), ReceiveError>
where
    S: ByteSource,
    W: AsyncWrite + Unpin,
{
    let (plan, timed) = (p.messages(), p.timed());
    match p.mechanism {
        Mechanism::Stream => receive_stream(source, plan, timed, tally, progress).await,
        Mechanism::StopAndWait => {
            receive_stop_and_wait(source, acks, plan, timed, tally, progress).await
        }
    }
}

/// How many messages a timed stream sender sends between two looks at the clock: about
/// 64 KiB of them, at least 1 and at most 1024 (so one-byte messages do not pay a clock read
/// each, and large ones overshoot the deadline by one message at most).
pub fn deadline_stride(msg_size: u32) -> u64 {
    (64 * 1024 / u64::from(msg_size.max(1))).clamp(1, 1024)
}

/// Largest read of a receiver: when streaming, [`SEGMENT_READ`] for large messages and
/// [`RECV_BUFFER`] for others; one message for stop-and-wait (whose sender never has more than
/// one in flight).
pub fn receive_buffer_len(mechanism: Mechanism, msg_size: u32) -> usize {
    match mechanism {
        Mechanism::Stream if msg_size >= LARGE_MESSAGE => SEGMENT_READ,
        Mechanism::Stream => RECV_BUFFER,
        Mechanism::StopAndWait => (msg_size as usize).min(RECV_BUFFER),
    }
}

/// A new histogram for round-trip times in nanoseconds (1 ns to 100 s, 3 significant digits).
pub fn rtt_histogram() -> io::Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3)
        .map_err(|e| io::Error::other(format!("cannot create the RTT histogram: {e}")))
}

/// Nanoseconds since `t`, saturating.
pub fn elapsed_ns(t: Instant) -> u64 {
    duration_ns(t.elapsed())
}

/// The acknowledgement byte for message `index`: its low byte, so an ack that belongs to another
/// message is detected.
fn ack_byte(index: u64) -> u8 {
    (index & 0xff) as u8
}

/// Writes one message, counting the write calls it took.
async fn write_message<W: AsyncWrite + Unpin>(writer: &mut W, msg: &[u8]) -> io::Result<u64> {
    let mut off = 0;
    let mut calls = 0;
    while off < msg.len() {
        let n = writer.write(&msg[off..]).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        off += n;
        calls += 1;
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Receives `data` (an in-memory stream that then ends) as a streaming or stop-and-wait
    /// receiver of 100-byte messages.
    async fn receive(
        data: &[u8],
        mechanism: Mechanism,
        timed: bool,
    ) -> (Result<(), ReceiveError>, ReadTally) {
        let mut reader = data;
        let mut source = ReadSource {
            reader: &mut reader,
            buf: vec![0u8; 4096],
        };
        let mut acks = Vec::new();
        let mut tally = ReadTally::default();
        let progress = AtomicU64::new(0);
        let plan = Messages {
            total_bytes: wirebench_core::wire::proto::UNBOUNDED_TOTAL,
            msg_size: 100,
        };
        let result = match mechanism {
            Mechanism::Stream => {
                receive_stream(&mut source, plan, timed, &mut tally, &progress).await
            }
            Mechanism::StopAndWait => {
                receive_stop_and_wait(&mut source, &mut acks, plan, timed, &mut tally, &progress)
                    .await
            }
        };
        (result, tally)
    }

    #[tokio::test]
    async fn a_timed_receiver_ends_at_a_message_boundary_and_only_there() {
        for mechanism in [Mechanism::Stream, Mechanism::StopAndWait] {
            let (result, tally) = receive(&[0u8; 300], mechanism, true).await;
            assert!(result.is_ok(), "{mechanism}: {result:?}");
            assert_eq!((tally.messages, tally.bytes), (3, 300), "{mechanism}");
            let (result, tally) = receive(&[0u8; 250], mechanism, true).await;
            assert!(
                matches!(result, Err(ReceiveError::Truncated { .. })),
                "{mechanism}"
            );
            assert_eq!(tally.messages, 2, "{mechanism}: whole messages only");
            // Untimed, the end of the stream before the total is a truncation.
            let (result, _) = receive(&[0u8; 300], mechanism, false).await;
            assert!(
                matches!(result, Err(ReceiveError::Truncated { .. })),
                "{mechanism}"
            );
        }
    }

    #[test]
    fn large_messages_are_read_a_segment_at_a_time() {
        let len = |m, size| receive_buffer_len(m, size);
        assert_eq!(len(Mechanism::Stream, 1024), RECV_BUFFER);
        assert_eq!(len(Mechanism::Stream, LARGE_MESSAGE - 1), RECV_BUFFER);
        assert_eq!(len(Mechanism::Stream, LARGE_MESSAGE), SEGMENT_READ);
        assert_eq!(len(Mechanism::Stream, 131_072), SEGMENT_READ);
        // Stop-and-wait reads at most the one message in flight.
        assert_eq!(len(Mechanism::StopAndWait, 1024), 1024);
        assert_eq!(len(Mechanism::StopAndWait, 131_072), 131_072);
    }

    #[test]
    fn the_deadline_is_checked_about_every_64_kib() {
        assert_eq!(deadline_stride(1), 1024);
        assert_eq!(deadline_stride(1024), 64);
        assert_eq!(deadline_stride(1 << 20), 1);
    }

    #[tokio::test]
    async fn a_timed_sender_stops_at_its_deadline() {
        let mut out = Vec::new();
        let payload = [0u8; 100];
        let mut sink = WriteSink {
            writer: &mut out,
            payload: &payload,
        };
        let progress = AtomicU64::new(0);
        let past = Some(Instant::now());
        let plan = Messages {
            total_bytes: 1_000,
            msg_size: 100,
        };
        let tally = send_stream(&mut sink, plan, past, &progress)
            .await
            .expect("sends");
        assert_eq!(tally.messages, 0, "a deadline already passed sends nothing");
        let tally = send_stream(&mut sink, plan, None, &progress)
            .await
            .expect("sends");
        assert_eq!(tally.messages, 10);
    }
}
