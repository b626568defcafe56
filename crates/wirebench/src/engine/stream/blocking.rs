//! Runs the generic stream loops of `engine::stream` on a blocking socket, in a thread of its
//! own. The TCP data path uses it: a blocking `write`/`read` sleeps in the kernel until the
//! socket is ready, which costs fewer system calls and wake-ups than readiness polling through
//! the async runtime (measured: about +25% at 128 KiB writes on loopback), and the same loop
//! code still counts both transports.
//!
//! [`Blocking`] adapts `std::io::{Read, Write}` to tokio's traits by doing the blocking call
//! inside `poll_*`; [`block_on`] drives such a future, which never waits on a waker. In
//! busy-poll mode the socket stays non-blocking and the adapter spins until it is ready, so the
//! thread never sleeps: on a VM, waking an idle vCPU costs more than the loopback round trip.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};

use std::net::TcpStream;
use std::sync::atomic::AtomicU64;

use hdrhistogram::Histogram;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::proto::SessionParams;

use crate::engine::stream::low_water::LowWater;
use crate::engine::stream::{self, ByteSource, ReadSource, ReadTally, ReceiveError, WriteSink};
use crate::engine::SendTally;
use crate::transport::syscall;

/// A blocking (or spinning) reader or writer seen through tokio's async traits.
#[derive(Debug)]
pub struct Blocking<T> {
    io: T,
    spin: bool,
}

impl<T> Blocking<T> {
    /// Wraps `io`; with `spin`, `io` must be non-blocking and calls spin until it is ready.
    pub fn new(io: T, spin: bool) -> Self {
        Blocking { io, spin }
    }
}

/// Retries `op` while it would block, if spinning; the first other outcome is returned.
fn retry<R>(spin: bool, mut op: impl FnMut() -> io::Result<R>) -> io::Result<R> {
    loop {
        match op() {
            Err(e) if spin && e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            other => return other,
        }
    }
}

// Reads and writes are plain `recv` and `send` system calls (`transport::syscall`: glibc's
// wrappers spend two atomic operations a call on thread cancellation, inside every round trip).
impl<T: AsFd + Unpin> AsyncRead for Blocking<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let fd = this.io.as_fd().as_raw_fd();
        let n = retry(this.spin, || {
            syscall::recv(&fd, buf.initialize_unfilled(), 0)
        })?;
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<T: AsFd + Unpin> AsyncWrite for Blocking<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let fd = self.io.as_fd().as_raw_fd();
        Poll::Ready(retry(self.spin, || {
            syscall::send(&fd, buf, libc::MSG_NOSIGNAL)
        }))
    }

    /// A socket holds nothing back to flush.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A [`ByteSource`] over a TCP socket read through [`Blocking`], whose reads wait for a batch
/// once the stream is fast ([`LowWater`]).
#[derive(Debug)]
pub struct TcpSource<'s> {
    socket: &'s TcpStream,
    reader: Blocking<&'s TcpStream>,
    buf: Vec<u8>,
    low_water: LowWater,
}

impl<'s> TcpSource<'s> {
    /// Reads `socket` (made blocking, or non-blocking for `spin`) `buf_len` bytes at most at a
    /// time; batches its wake-ups ([`LowWater`]) when `batch` and not `spin` (a spinning read
    /// never sleeps).
    pub fn new(socket: &'s TcpStream, spin: bool, buf_len: usize, batch: bool) -> Self {
        TcpSource {
            socket,
            reader: Blocking::new(socket, spin),
            buf: vec![0u8; buf_len],
            low_water: LowWater::new(batch && !spin),
        }
    }

    /// The source for a session's receiving role: streaming reads are batched.
    pub fn for_session(socket: &'s TcpStream, p: &SessionParams) -> Self {
        TcpSource::new(
            socket,
            p.options.busy_poll,
            stream::receive_buffer_len(p.mechanism, p.msg_size),
            p.mechanism == Mechanism::Stream,
        )
    }
}

impl ByteSource for TcpSource<'_> {
    async fn read_some(&mut self, max: usize) -> io::Result<usize> {
        // `max` is at most what is left of the stream (the receive loops never read past it).
        self.low_water.before_read(self.socket, max);
        let n = max.min(self.buf.len());
        let got = self.reader.read(&mut self.buf[..n]).await?;
        self.low_water.after_read(self.socket, got);
        Ok(got)
    }
}

/// Drives a future whose I/O is all [`Blocking`] to completion on this thread.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // Only reachable if something non-blocking slipped in: give the CPU away, then retry.
        std::thread::yield_now();
    }
}

/// Drives `fut` on this thread, asleep while it waits on something that wakes it (a tokio
/// timer: a session's meter pausing its writes), for work whose I/O blocks but which may also
/// wait like that; [`block_on`] would spin through such a wait.
pub fn block_on_parked<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // A wake-up before this parks makes it return at once.
        std::thread::park();
    }
}

/// Turns a tokio TCP stream into a std stream for a data-path thread: blocking, or left
/// non-blocking for a spinning [`Blocking`].
pub fn into_blocking(stream: tokio::net::TcpStream, spin: bool) -> io::Result<std::net::TcpStream> {
    let s = stream.into_std()?;
    s.set_nonblocking(spin)?;
    Ok(s)
}

/// The sending role of session `p` on this thread (`engine::stream::send_role`): messages
/// written to `writer`, stop-and-wait acknowledgements read from `acks`, both of whose calls
/// block (or spin) until they are done rather than wait on a waker: [`Blocking`] on a TCP
/// socket, `engine::quic::inline::InlineStream` on a QUIC connection driven inline.
pub fn play_send<R, W>(
    acks: &mut R,
    writer: &mut W,
    p: &SessionParams,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> io::Result<SendTally>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send,
{
    let payload = vec![0u8; p.msg_size as usize];
    let mut sink = WriteSink {
        writer,
        payload: &payload,
    };
    block_on(stream::send_role(acks, &mut sink, p, rtt_ns, progress))
}

/// The receiving role of session `p` on this thread (`engine::stream::receive_role`): read
/// from `reader` and, stop-and-wait, acknowledged on `acks`, as in [`play_send`].
pub fn play_receive<R, W>(
    reader: &mut R,
    acks: &mut W,
    p: &SessionParams,
    tally: &mut ReadTally,
    progress: &AtomicU64,
) -> Result<(), ReceiveError>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin,
{
    let mut source = ReadSource {
        reader,
        buf: vec![0u8; stream::receive_buffer_len(p.mechanism, p.msg_size)],
    };
    block_on(stream::receive_role(&mut source, acks, p, tally, progress))
}

/// What [`play`] played: the sending role's tally, or the receiving role's.
#[derive(Debug)]
pub enum Played {
    /// The session's sender: what it sent.
    Sent(SendTally),
    /// The session's receiver (`--reverse` on a client): what it read.
    Received(ReadTally),
}

/// The role of session `p` on this thread, whichever it is: with `--reverse` the receiving
/// role ([`play_receive`], reading `reader`, acknowledging on `writer`), else the sending one
/// ([`play_send`]).
pub fn play<R, W>(
    reader: &mut R,
    writer: &mut W,
    p: &SessionParams,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> anyhow::Result<Played>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send,
{
    if p.reverse {
        let mut tally = ReadTally::default();
        play_receive(reader, writer, p, &mut tally, progress)?;
        Ok(Played::Received(tally))
    } else {
        Ok(Played::Sent(play_send(
            reader, writer, p, rtt_ns, progress,
        )?))
    }
}

/// The sending role of session `p` on the TCP socket `data`, on this thread: the socket made
/// blocking (spinning with busy-poll), then [`play_send`] through [`Blocking`].
pub fn send_role(
    data: &TcpStream,
    p: &SessionParams,
    rtt_ns: &mut Histogram<u64>,
    progress: &AtomicU64,
) -> io::Result<SendTally> {
    let spin = p.options.busy_poll;
    data.set_nonblocking(spin)?;
    play_send(
        &mut Blocking::new(data, spin),
        &mut Blocking::new(data, spin),
        p,
        rtt_ns,
        progress,
    )
}

/// The receiving role of session `p` on the TCP socket `data`, on this thread: the socket
/// made blocking (spinning with busy-poll), then read through a [`TcpSource`].
pub fn receive_role(
    data: &TcpStream,
    p: &SessionParams,
    tally: &mut ReadTally,
    progress: &AtomicU64,
) -> Result<(), ReceiveError> {
    let spin = p.options.busy_poll;
    data.set_nonblocking(spin)?;
    let mut source = TcpSource::for_session(data, p);
    block_on(stream::receive_role(
        &mut source,
        &mut Blocking::new(data, spin),
        p,
        tally,
        progress,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    use wirebench_core::vocab::plan::Messages;

    /// A batching reader still reads the last bytes of a stream that stays open after them (the
    /// sender waits for the receiver's report). Here a read copies the first 64 KiB and would
    /// sleep for a batch more, of which only 64 KiB and a little are to come: the kernel would
    /// never wake it, so batching must end before that read.
    #[test]
    fn a_batching_receiver_reads_a_tail_shorter_than_a_batch() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (receiver, _) = listener.accept().unwrap();
        let stopper = sender.try_clone().unwrap();
        let unread = receiver.try_clone().unwrap();
        const HEAD: usize = 64 * 1024;
        const TAIL: usize = 64 * 1024 + 1000;
        let plan = Messages {
            total_bytes: (HEAD + TAIL) as u64,
            msg_size: 1024,
        };
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let writer = std::thread::spawn(move || {
            let block = vec![7u8; TAIL];
            sender.write_all(&block[..HEAD]).unwrap();
            // The tail goes out once the receiver took the head (its read may still be under
            // way). A receiver stuck in a read is woken by the shutdown after the watchdog's
            // time, and fails.
            let give_up = Instant::now() + Duration::from_secs(20);
            while crate::transport::net::bytes_queued(&unread) != Some(0) {
                if Instant::now() > give_up {
                    let _ = stopper.shutdown(std::net::Shutdown::Both);
                    return;
                }
                std::thread::yield_now();
            }
            sender.write_all(&block).unwrap();
            // Keep the stream open, as a sender awaiting the report does.
            if done_rx.recv_timeout(Duration::from_secs(20)).is_err() {
                let _ = stopper.shutdown(std::net::Shutdown::Both);
            }
        });
        let mut source = TcpSource::new(&receiver, false, stream::RECV_BUFFER, true);
        source.low_water = LowWater::batching_now(&receiver);
        let mut tally = ReadTally::default();
        let progress = AtomicU64::new(0);
        let read = block_on(stream::receive_stream(
            &mut source,
            plan,
            false,
            &mut tally,
            &progress,
        ));
        let _ = done_tx.send(());
        writer.join().unwrap();
        read.unwrap();
        assert_eq!(tally.bytes, plan.total_bytes);
        assert_eq!(tally.messages, plan.count());
        assert_eq!(source.low_water, LowWater::Off);
    }
}
