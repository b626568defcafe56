//! TCP forwarding of the relay: owns the accept loop and, per connection, one upstream
//! connection and two pipes that delay and pace the byte stream through the core machine; must
//! not drop, duplicate or reorder bytes (a stream has no packets to lose).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use wirebench_core::impair::{Impairer, Impairment, Impairments, DEFAULT_QUEUE_LIMIT};

use super::{wait_until, FlowCounts, Registry};

/// Bytes read at most per chunk.
const CHUNK: usize = 64 * 1024;

/// Chunks in flight inside one pipe (bounds memory under a long delay).
const PIPE_CHUNKS: usize = 1024;

/// Accepts clients and relays each connection to `upstream`.
pub(super) async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    impairments: Impairments,
    seed: u64,
    registry: Arc<Registry>,
) {
    let mut next_index = 0u64;
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of file descriptors and the like: keep accepting, without spinning.
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        let index = next_index;
        next_index += 1;
        let counts = registry.tcp_connection();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else {
                return;
            };
            // Our writes are whole chunks as they arrived; do not hold small ones back.
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let up = Impairer::new(impairments.up, seed, 2 * index);
            let down = Impairer::new(impairments.down, seed, 2 * index + 1);
            tokio::join!(
                pipe(cr, sw, up, impairments.up, counts.clone(), 0),
                pipe(sr, cw, down, impairments.down, counts, 1)
            );
        });
    }
}

/// Copies `reader` to `writer`, each chunk leaving when the machine says; with a rate, reading
/// waits while the rate queue holds more than its limit (back-pressure instead of drops).
async fn pipe<R, W>(
    mut reader: R,
    mut writer: W,
    mut machine: Impairer<()>,
    spec: Impairment,
    counts: FlowCounts,
    direction: usize,
) where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let max_backlog = spec.rate.map(|rate| {
        let limit = match spec.queue_limit.0 {
            0 => DEFAULT_QUEUE_LIMIT.0,
            q => q,
        };
        Duration::from_nanos(
            u64::try_from(u128::from(limit) * 8 * 1_000_000_000 / u128::from(rate.0.max(1)))
                .unwrap_or(u64::MAX),
        )
    });
    let (tx, mut rx) = mpsc::channel::<(Instant, Bytes)>(PIPE_CHUNKS);
    let reading = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            if let Some(max) = max_backlog {
                let backlog = machine.stream_backlog(Instant::now());
                if backlog > max {
                    tokio::time::sleep(backlog - max).await;
                }
            }
            let n = match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let release = machine.schedule_bytes(Instant::now(), n);
            if let Ok(mut c) = counts.lock() {
                c[direction] = machine.counts();
            }
            if tx
                .send((release, Bytes::copy_from_slice(&buf[..n])))
                .await
                .is_err()
            {
                break;
            }
        }
        // Dropping `tx` ends the writer once it has written everything.
    };
    let writing = async move {
        while let Some((release, data)) = rx.recv().await {
            wait_until(release).await;
            if writer.write_all(&data).await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    };
    tokio::join!(reading, writing);
}
