//! DNS over TCP and over TLS (RFC 7766, RFC 7858): connection set-up timed apart from queries,
//! one connection per flow with K queries pipelined (a writer task, answers matched by ID in any
//! order), a fresh connection per query (--new-connection), and the one-shot TCP query a UDP
//! flow makes for an answer that came back truncated.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use wirebench_core::wire::dns::{answer_lines, response_id, IdMap, Question, Verdict};

use super::spec::{DnsSpec, FlowResult};
use super::trust::DotTls;
use crate::flows::rr_client::sum_transport;
use crate::transport::counters;
use wirebench_core::vocab::units::duration_ns;

/// Longest a TCP connect plus TLS handshake may take (a loaded resolver's listen queue may drop
/// a SYN, which Linux sends again after 1 s, then 3 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A TCP or TLS stream, whichever the transport uses.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One flow: a connection with K queries pipelined; a connection that breaks or stays silent
/// for --timeout loses its outstanding queries (counted as timeouts) and is replaced.
pub(super) async fn flow(spec: Arc<DnsSpec>) -> Result<FlowResult> {
    let mut out = FlowResult::new()?;
    let ids = IdMap::new(rand::random());
    let mut issued = 0u64;
    let mut begun = None;
    while issued < spec.count {
        let (io, fd) = connect(spec.resolver, spec.tls.as_ref(), &mut out).await?;
        begun.get_or_insert_with(Instant::now);
        pipelined(&spec, io, fd, ids, &mut issued, &mut out).await;
    }
    let end = Instant::now();
    out.span = Some((begun.unwrap_or(end), end));
    Ok(out)
}

/// A worker of a run with a fresh connection per query: claims queries until `total` are taken.
pub(super) async fn new_connection_worker(
    spec: Arc<DnsSpec>,
    claims: Arc<AtomicU64>,
    total: u64,
) -> Result<FlowResult> {
    let mut out = FlowResult::new()?;
    let begun = Instant::now();
    while claims.fetch_add(1, Ordering::Relaxed) < total {
        out.counts.sent += 1;
        let tls = spec.tls.as_ref();
        if let Err(e) = one_query(&spec, spec.resolver, tls, rand::random(), None, &mut out).await {
            if out.counts.connections == 0 {
                return Err(e);
            }
        }
    }
    out.span = Some((begun, Instant::now()));
    Ok(out)
}

/// One query on a connection of its own: connect (timed), send, read the answer, close. The
/// response time runs from `first_sent` (a truncated UDP answer's first copy) or from the
/// write. The caller counts the query as sent; a failed connect counts it as failed and is
/// returned.
pub(super) async fn one_query(
    spec: &DnsSpec,
    addr: SocketAddr,
    tls: Option<&DotTls>,
    id: u16,
    first_sent: Option<Instant>,
    out: &mut FlowResult,
) -> Result<()> {
    let (mut io, fd) = match connect(addr, tls, out).await {
        Ok(c) => c,
        Err(e) => {
            out.counts.failed += 1;
            return Err(e);
        }
    };
    let mut frame = Vec::new();
    spec.question.encode_framed_into(id, &mut frame);
    let mut buf = Vec::new();
    let sent_at = Instant::now();
    let got = tokio::time::timeout(spec.timeout, async {
        io.write_all(&frame).await?;
        io.flush().await?;
        read_frame(&mut io, &mut buf).await
    })
    .await;
    let now = Instant::now();
    match got {
        Ok(Ok(())) if response_id(&buf) == Some(id) => {
            judge(
                &spec.question,
                &buf,
                first_sent.unwrap_or(sent_at),
                now,
                out,
            );
        }
        Ok(Ok(())) => {
            out.counts.wrong += 1;
            out.counts.failed += 1;
        }
        Ok(Err(_)) | Err(_) => out.counts.timeouts += 1,
    }
    out.transport = sum_transport(out.transport.take(), counters::tcp_stats(&fd));
    let _ = io.shutdown().await;
    Ok(())
}

/// Opens a TCP connection (and a TLS session over it), timing each step.
async fn connect(
    addr: SocketAddr,
    tls: Option<&DotTls>,
    out: &mut FlowResult,
) -> Result<(Box<dyn Io>, RawFd)> {
    let at = Instant::now();
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "no TCP connection to the resolver at {addr} within {CONNECT_TIMEOUT:?}"
            )
        })?
        .with_context(|| format!("cannot open a TCP connection to the resolver at {addr}"))?;
    out.connect.saturating_record(duration_ns(at.elapsed()));
    out.counts.connections += 1;
    tcp.set_nodelay(true)
        .context("while setting TCP_NODELAY on the resolver connection")?;
    let fd = tcp.as_raw_fd();
    let Some(tls) = tls else {
        return Ok((Box::new(tcp), fd));
    };
    let at = Instant::now();
    let stream = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tls.connector.connect(tls.server_name.clone(), tcp),
    )
    .await
    .map_err(|_| {
        anyhow::anyhow!("no TLS handshake with the resolver at {addr} within {CONNECT_TIMEOUT:?}")
    })?
    .with_context(|| format!("TLS handshake with the resolver at {addr} failed"))?;
    out.tls.saturating_record(duration_ns(at.elapsed()));
    Ok((Box::new(stream), fd))
}

/// Runs queries on one connection until the flow has issued all of its queries and every one
/// is settled, or the connection breaks or stays silent for the timeout.
async fn pipelined(
    spec: &DnsSpec,
    io: Box<dyn Io>,
    fd: RawFd,
    ids: IdMap,
    issued: &mut u64,
    out: &mut FlowResult,
) {
    let (mut rd, wr) = tokio::io::split(io);
    let (tx, rx) = mpsc::unbounded_channel::<u16>();
    // Writes go through a task of their own, so a window of K queries never waits for the
    // resolver to read while we are not reading its answers.
    let writer = tokio::spawn(write_loop(wr, rx, spec.question.clone()));
    let k = spec.concurrency.max(1) as usize;
    let mut outstanding: HashMap<u16, Instant> = HashMap::with_capacity(k);
    let mut buf = Vec::new();
    loop {
        while outstanding.len() < k && *issued < spec.count {
            let id = ids.id_of(*issued);
            *issued += 1;
            out.counts.sent += 1;
            outstanding.insert(id, Instant::now());
            let _ = tx.send(id);
        }
        if outstanding.is_empty() {
            break;
        }
        match tokio::time::timeout(spec.timeout, read_frame(&mut rd, &mut buf)).await {
            Ok(Ok(())) => {
                let now = Instant::now();
                match response_id(&buf).and_then(|id| outstanding.remove(&id)) {
                    Some(sent_at) => judge(&spec.question, &buf, sent_at, now, out),
                    None => out.counts.wrong += 1,
                }
            }
            // Silent for the timeout, closed, or broken: what is outstanding is not answered.
            Ok(Err(_)) | Err(_) => {
                out.counts.timeouts += outstanding.len() as u64;
                break;
            }
        }
    }
    drop(tx);
    out.transport = sum_transport(out.transport.take(), counters::tcp_stats(&fd));
    if let Ok(wr) = writer.await {
        let _ = rd.unsplit(wr).shutdown().await;
    }
}

/// Sends the framed query of every ID it is given, batching what is waiting into one write.
async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::UnboundedReceiver<u16>,
    question: Arc<Question>,
) -> W {
    let mut frame = Vec::new();
    let mut batch = Vec::new();
    while let Some(id) = rx.recv().await {
        batch.clear();
        question.encode_framed_into(id, &mut frame);
        batch.extend_from_slice(&frame);
        while let Ok(id) = rx.try_recv() {
            question.encode_framed_into(id, &mut frame);
            batch.extend_from_slice(&frame);
        }
        if wr.write_all(&batch).await.is_err() || wr.flush().await.is_err() {
            break;
        }
    }
    wr
}

/// Reads one length-prefixed DNS message into `buf`.
async fn read_frame<R: AsyncRead + Unpin>(rd: &mut R, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let len = rd.read_u16().await?;
    buf.resize(usize::from(len), 0);
    rd.read_exact(buf).await?;
    Ok(())
}

/// Counts a response whose ID matched a query sent at `sent_at`.
fn judge(question: &Question, bytes: &[u8], sent_at: Instant, now: Instant, out: &mut FlowResult) {
    match question.check(bytes) {
        Verdict::Answer { rcode, .. } => {
            out.counts.answered += 1;
            out.counts.count_rcode(rcode);
            out.hist
                .saturating_record(duration_ns(now.saturating_duration_since(sent_at)));
            if out.answer.is_none() {
                out.answer = Some(answer_lines(bytes));
            }
        }
        // TC=1 over a stream, or not an answer to the question: not trusted.
        Verdict::Truncated | Verdict::Wrong(_) => {
            out.counts.wrong += 1;
            out.counts.failed += 1;
        }
    }
}
