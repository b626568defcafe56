//! Request-response loops (`wirebench ping` and `rr`): the server's answering loop on a stream,
//! and the client's flows — pipelined requests on a stream, or one datagram per request driven
//! by the core `RequestTracker` for UDP. They send, receive, time and count; they never print
//! or decide what a run is.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::wall_clock::{unix_now_ns, ExchangeLog};
use crate::transport::syscall;
use hdrhistogram::Histogram;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UdpSocket;
use wirebench_core::machine::rr::{Answer, Expiry, RequestTracker, RrCounts};
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::datagram::{write_stamps, Header, Kind, HEADER_LEN};

/// What the server's answering loops counted, shared by every connection of a session.
#[derive(Debug, Default)]
pub struct AnswerCounters {
    /// Whole requests read (each is answered: counted just before its response is written).
    pub answered: AtomicU64,
    /// Request bytes read.
    pub request_bytes: AtomicU64,
    /// Read calls that returned data.
    pub read_calls: AtomicU64,
}

/// How long a TCP or QUIC client waits for any one response before it gives up on the server.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);

/// Most bytes of responses written by one call when several requests arrived together.
const RESPONSE_BATCH_BYTES: usize = 64 * 1024;

/// Server: reads requests of `request` bytes until the peer closes the stream, and answers each
/// with `response` zero bytes — with `stamps`, each answer starting with when the read that
/// completed its request returned and when the answer was written (`datagram::write_stamps`).
/// A close in the middle of a request is an error.
pub async fn answer_stream<R, W>(
    rd: &mut R,
    wr: &mut W,
    (request, response): (usize, usize),
    stamps: bool,
    counters: &AnswerCounters,
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let request = request.max(1);
    let mut buf = vec![0u8; request.clamp(4096, 1 << 20)];
    // Up to this many responses leave in one write when requests were pipelined.
    let per_write = (RESPONSE_BATCH_BYTES / response.max(1)).max(1);
    let mut zeros = vec![0u8; response * per_write];
    let mut partial = 0usize;
    loop {
        let n = rd.read(&mut buf).await?;
        if n == 0 {
            if partial == 0 {
                return Ok(());
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("peer closed inside a request ({partial} of {request} bytes)"),
            ));
        }
        let arrived_ns = if stamps { unix_now_ns() } else { 0 };
        counters.read_calls.fetch_add(1, Ordering::Relaxed);
        counters
            .request_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
        let total = partial + n;
        let mut complete = total / request;
        partial = total % request;
        while complete > 0 {
            let now = complete.min(per_write);
            counters.answered.fetch_add(now as u64, Ordering::Relaxed);
            if stamps {
                let sent_ns = unix_now_ns();
                for answer in zeros[..now * response].chunks_mut(response.max(1)) {
                    write_stamps(answer, arrived_ns, sent_ns);
                }
            }
            wr.write_all(&zeros[..now * response]).await?;
            complete -= now;
        }
        wr.flush().await?;
    }
}

/// When a client flow stops issuing requests.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// At most this many requests (per flow).
    pub count: Option<u64>,
    /// No new request at or after this moment.
    pub until: Option<Instant>,
    /// Pause this long after issuing each request.
    pub interval: Option<Duration>,
    /// Set when the session is over on the server's side (it ended it early): no new
    /// request, and a UDP flow stops waiting for the answers still outstanding.
    pub stop: Option<Arc<AtomicBool>>,
}

impl Plan {
    /// Whether request number `sent` (0-based) may still be issued at `now`.
    pub fn more(&self, sent: u64, now: Instant) -> bool {
        !self.stopped() && self.count.is_none_or(|n| sent < n) && self.until.is_none_or(|u| now < u)
    }

    /// Whether the session was stopped from outside.
    pub fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

/// The shape of a client flow's exchanges.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Request size, bytes (UDP: after the header).
    pub request: usize,
    /// Response size, bytes (UDP: after the header).
    pub response: usize,
    /// Requests outstanding at most.
    pub concurrency: usize,
}

/// What one client flow did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowTally {
    /// Requests sent, answered, lost, late, retries (UDP), as the core tracker counts them.
    pub counts: RrCounts,
    /// Sends the operating system refused (UDP; counted, then left to the timeout).
    pub send_errors: u64,
}

/// Client, TCP or QUIC: keeps up to `concurrency` requests outstanding on one stream (pipelined;
/// responses come back in order) and records each response time (ns) in `hist`; with `log`,
/// each exchange with the server's stamps (one-way delays).
pub async fn stream_flow<R, W>(
    rd: &mut R,
    wr: &mut W,
    shape: Shape,
    plan: Plan,
    hist: &mut Histogram<u64>,
    mut log: Option<&mut ExchangeLog>,
) -> io::Result<FlowTally>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Shape {
        request,
        response,
        concurrency,
    } = shape;
    // At most `concurrency` requests outstanding: a request takes a permit when it is sent and
    // gives it back once its response is read. (A channel's capacity alone let one more out:
    // the one the reader had taken off the channel while it waited for its response.)
    let window = tokio::sync::Semaphore::new(concurrency.max(1));
    // The send time of every outstanding request, oldest first (the window bounds it).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let payload = vec![0u8; request];
    let writer = async {
        let mut sent = 0u64;
        while plan.more(sent, Instant::now()) {
            let Ok(permit) = window.acquire().await else {
                break;
            };
            permit.forget();
            if tx.send(Instant::now()).is_err() {
                break;
            }
            wr.write_all(&payload).await?;
            wr.flush().await?;
            sent += 1;
            if let Some(pause) = plan.interval {
                tokio::time::sleep(pause).await;
            }
        }
        drop(tx);
        Ok::<u64, io::Error>(sent)
    };
    let reader = async {
        let mut answered = 0u64;
        let mut buf = vec![0u8; response];
        while let Some(sent_at) = rx.recv().await {
            // A server that stops answering ends the flow with an error instead of a hang.
            tokio::time::timeout(STALL_LIMIT, rd.read_exact(&mut buf))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("no response within {STALL_LIMIT:?}"),
                    )
                })??;
            hist.saturating_record(elapsed_ns(sent_at));
            if let Some(log) = log.as_deref_mut() {
                log.note(sent_at, Instant::now(), &buf);
            }
            answered += 1;
            window.add_permits(1);
        }
        Ok::<u64, io::Error>(answered)
    };
    let (sent, answered) = tokio::try_join!(writer, reader)?;
    Ok(FlowTally {
        counts: RrCounts {
            sent,
            answered,
            ..RrCounts::default()
        },
        send_errors: 0,
    })
}

/// Client, TCP with one request outstanding (ping): the same exchange as [`stream_flow`] with
/// K = 1, on a blocking socket in the calling thread (see engine::stream::blocking for why: one
/// wake-up less per round trip than readiness polling through the runtime).
pub fn blocking_flow(
    stream: &std::net::TcpStream,
    shape: Shape,
    plan: Plan,
    hist: &mut Histogram<u64>,
    log: Option<&mut ExchangeLog>,
) -> io::Result<FlowTally> {
    stream.set_read_timeout(Some(STALL_LIMIT))?;
    // Plain system calls (`transport::syscall`), as the other round-trip paths make.
    let (mut reader, mut writer) = (syscall::Direct(stream), syscall::Direct(stream));
    let pause = |d| {
        std::thread::sleep(d);
        Ok(())
    };
    blocking_exchanges((&mut reader, &mut writer, pause), shape, plan, hist, log)
}

/// Client, one request outstanding, on a stream whose reads and writes block (a TCP socket,
/// or a QUIC stream driven inline, `engine::quic::inline`): write a request, read its
/// response, record the time, `pause` for `plan.interval` (a QUIC connection stops its alarm
/// first); as [`stream_flow`] with K = 1. A stalled server ends it through `reader`'s own limit
/// (a socket's timeout, a connection's idle one).
pub fn blocking_exchanges<R, W, P>(
    (reader, writer, mut pause): (&mut R, &mut W, P),
    shape: Shape,
    plan: Plan,
    hist: &mut Histogram<u64>,
    mut log: Option<&mut ExchangeLog>,
) -> io::Result<FlowTally>
where
    R: std::io::Read,
    W: std::io::Write,
    P: FnMut(Duration) -> io::Result<()>,
{
    let payload = vec![0u8; shape.request];
    let mut buf = vec![0u8; shape.response];
    let mut sent = 0u64;
    while plan.more(sent, Instant::now()) {
        let at = Instant::now();
        writer.write_all(&payload)?;
        writer.flush()?;
        reader.read_exact(&mut buf)?;
        hist.saturating_record(elapsed_ns(at));
        if let Some(log) = log.as_deref_mut() {
            log.note(at, Instant::now(), &buf);
        }
        sent += 1;
        if let Some(interval) = plan.interval {
            pause(interval)?;
        }
    }
    Ok(FlowTally {
        counts: RrCounts {
            sent,
            answered: sent,
            ..RrCounts::default()
        },
        send_errors: 0,
    })
}

/// Client, TCP or QUIC on a fresh connection: writes `first` (preamble and request in one
/// write), reads one response of `response` bytes; returns the time from the write to the last
/// response byte.
pub async fn single_exchange<R, W>(
    rd: &mut R,
    wr: &mut W,
    first: &[u8],
    response: &mut [u8],
) -> io::Result<Duration>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let at = Instant::now();
    wr.write_all(first).await?;
    wr.flush().await?;
    tokio::time::timeout(STALL_LIMIT, rd.read_exact(response))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no response within {STALL_LIMIT:?}"),
            )
        })??;
    Ok(at.elapsed())
}

/// Client, UDP: one datagram per request on a connected socket, up to `concurrency`
/// outstanding; timeouts, retries, loss and late answers are decided by `tracker`. With `log`,
/// each answer at the first try is noted with the server's stamps (one-way delays).
pub async fn udp_flow(
    socket: &UdpSocket,
    session: u32,
    shape: Shape,
    plan: Plan,
    tracker: &mut RequestTracker,
    hist: &mut Histogram<u64>,
    mut log: Option<&mut ExchangeLog>,
) -> io::Result<FlowTally> {
    let Shape {
        request,
        response,
        concurrency,
    } = shape;
    let mut out = vec![0u8; HEADER_LEN + request];
    let mut buf = vec![0u8; HEADER_LEN + response + 1];
    let mut send_errors = 0u64;
    let mut next_send_at: Option<Instant> = None;
    loop {
        if plan.stopped() {
            break;
        }
        let now = Instant::now();
        // Fill the window with new requests, as the plan and the interval allow.
        while tracker.outstanding() < concurrency.max(1)
            && plan.more(tracker.counts().sent, now)
            && next_send_at.is_none_or(|at| now >= at)
        {
            let seq = tracker.send_new(Instant::now());
            send_errors += u64::from(!send_request(socket, &mut out, session, seq, false).await);
            next_send_at = plan.interval.map(|pause| Instant::now() + pause);
        }
        let more = plan.more(tracker.counts().sent, Instant::now());
        if tracker.outstanding() == 0 && !more {
            break;
        }
        let timeout = tracker.poll_timeout();
        // Wake for the next request only when the window has room for it.
        let send_at = next_send_at
            .filter(|_| more && tracker.outstanding() < concurrency.max(1))
            .or(plan.until.filter(|_| more));
        let wake = match (timeout, send_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sleep = async {
            match wake {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = socket.recv(&mut buf) => {
                let n = match r {
                    Ok(n) => n,
                    // An ICMP error (port unreachable) from an earlier send: the request it
                    // belongs to will time out.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                    Err(e) => return Err(e),
                };
                match Header::decode(&buf[..n]) {
                    Ok(h) if h.kind == Kind::Response && h.session == session && n == HEADER_LEN + response => {
                        // Deadlines that passed before we got to this response come first, so
                        // no sample is ever longer than the timeout: such a response is late.
                        let now = Instant::now();
                        send_errors += expire(socket, &mut out, session, tracker, now).await;
                        if let Answer::Answered { response_time, retried } = tracker.on_response(h.seq, now) {
                            hist.saturating_record(duration_ns(response_time));
                            if let Some(log) = log.as_deref_mut().filter(|_| !retried) {
                                if let Some(sent) = now.checked_sub(response_time) {
                                    log.note(sent, now, &buf[HEADER_LEN..n]);
                                }
                            }
                        }
                    }
                    // Not ours, or malformed: ignored (the tracker's unknown count is for
                    // well-formed responses to requests never sent).
                    _ => {}
                }
            }
            _ = sleep => {
                send_errors += expire(socket, &mut out, session, tracker, Instant::now()).await;
            }
        }
    }
    Ok(FlowTally {
        counts: tracker.counts(),
        send_errors,
    })
}

/// Handles every deadline at or before `now`: sends the retries, lets the tracker declare the
/// rest lost. Returns the sends the OS refused.
async fn expire(
    socket: &UdpSocket,
    out: &mut [u8],
    session: u32,
    tracker: &mut RequestTracker,
    now: Instant,
) -> u64 {
    let mut refused = 0;
    while let Some(expiry) = tracker.handle_timeout(now) {
        if let Expiry::Retry { seq } = expiry {
            refused += u64::from(!send_request(socket, out, session, seq, true).await);
        }
    }
    refused
}

/// Sends request `seq`; false when the OS refused it (counted by the caller, never swallowed).
async fn send_request(
    socket: &UdpSocket,
    out: &mut [u8],
    session: u32,
    seq: u64,
    retransmit: bool,
) -> bool {
    write_request_header(out, session, seq, retransmit) && socket.send(out).await.is_ok()
}

/// Writes the header of request `seq` at the start of `out`; false if `out` is too short.
pub(crate) fn write_request_header(
    out: &mut [u8],
    session: u32,
    seq: u64,
    retransmit: bool,
) -> bool {
    let header = Header {
        kind: Kind::Request,
        retransmit,
        session,
        seq,
    };
    header.write_to(out).is_ok()
}

fn elapsed_ns(t: Instant) -> u64 {
    duration_ns(t.elapsed())
}
