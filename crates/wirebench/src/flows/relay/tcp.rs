//! TCP forwarding of the relay: owns the accept loop and, per connection, one upstream
//! connection and two pipes that delay and pace the byte stream through the core machines; must
//! not drop, duplicate or reorder bytes (a stream has no packets to lose).
//!
//! With a rate, all connections of one direction share one [`Bottleneck`] (one link, one
//! queue of `--queue` bytes), as on a real path: a new connection's bytes wait behind every
//! connection's queued bytes, so a full queue adds queue / rate of delay to all of them. A pipe
//! stops reading while its chunk does not fit (back-pressure instead of a drop), and while the
//! relay's byte budget has no room for it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use wirebench_core::machine::impair::{
    Bottleneck, Impairer, Impairment, Impairments, DEFAULT_QUEUE_LIMIT,
};

use super::clock::wait_until;
use super::registry::{FlowSlot, Registry, Trouble, MAX_TCP_CONNECTIONS};

/// Bytes read at most per chunk.
const CHUNK: usize = 64 * 1024;

/// Bytes read at most per chunk through a rate-limited link (at most 1/16 of its queue): small
/// chunks keep a full queue full to within a chunk, so its delay stays near queue / rate.
const LINK_CHUNK: usize = 16 * 1024;

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
    let up_link = shared_link(&impairments.up);
    let down_link = shared_link(&impairments.down);
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(e) => {
                // Out of file descriptors and the like: say so, keep accepting, without
                // spinning.
                registry.trouble(Trouble::Sockets, || {
                    format!("relay: cannot accept a TCP connection: {e} (out of file descriptors? raise `ulimit -n`)")
                });
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let Some(slot) = registry.tcp_connection() else {
            registry.trouble(Trouble::Connections, || {
                format!(
                    "relay: TCP connection closed: the relay relays its most ({} TCP connections) already",
                    MAX_TCP_CONNECTIONS
                )
            });
            drop(client);
            continue;
        };
        let index = next_index;
        next_index += 1;
        let registry = Arc::clone(&registry);
        let (up_link, down_link) = (up_link.clone(), down_link.clone());
        tokio::spawn(async move {
            let server = match TcpStream::connect(upstream).await {
                Ok(server) => server,
                Err(e) => {
                    registry.trouble(Trouble::Sockets, || {
                        format!("relay: cannot connect to {upstream} for a TCP client: {e}")
                    });
                    return;
                }
            };
            // Our writes are whole chunks as they arrived; do not hold small ones back.
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            // The rate is the shared link's; each connection's machine adds delay and jitter.
            let up_spec = Impairment {
                rate: None,
                ..impairments.up
            };
            let down_spec = Impairment {
                rate: None,
                ..impairments.down
            };
            let up = Impairer::new(up_spec, seed, 2 * index);
            let down = Impairer::new(down_spec, seed, 2 * index + 1);
            let ends = Ends {
                registry: &registry,
                slot: &slot,
            };
            tokio::join!(
                pipe(cr, sw, up, up_link, &ends, 0),
                pipe(sr, cw, down, down_link, &ends, 1)
            );
            drop(slot);
        });
    }
}

/// What both pipes of a connection share: the relay (its byte budget) and the connection's
/// counts.
struct Ends<'a> {
    registry: &'a Registry,
    slot: &'a FlowSlot,
}

/// One direction's link shared by all connections, when it has a rate.
type SharedLink = Option<Arc<Mutex<Bottleneck>>>;

fn shared_link(spec: &Impairment) -> SharedLink {
    let rate = spec.rate?;
    let limit = match spec.queue_limit.0 {
        0 => DEFAULT_QUEUE_LIMIT,
        _ => spec.queue_limit,
    };
    Some(Arc::new(Mutex::new(Bottleneck::new(rate, limit))))
}

/// Copies `reader` to `writer`, each chunk leaving when the shared link and the machine say;
/// with a rate, a chunk read waits until the link's queue has room for it (back-pressure
/// instead of drops: the pipe reads no more meanwhile), so the queue never holds more than its
/// size but for chunks admitted at the same instant on other connections.
async fn pipe<R, W>(
    mut reader: R,
    mut writer: W,
    mut machine: Impairer<()>,
    link: SharedLink,
    ends: &Ends<'_>,
    direction: usize,
) where
    R: AsyncReadExt + Unpin,
    W: AsyncWriteExt + Unpin,
{
    let chunk = match &link {
        Some(l) => l
            .lock()
            .map(|b| usize::try_from(b.limit().0 / 16).unwrap_or(LINK_CHUNK))
            .unwrap_or(LINK_CHUNK)
            .clamp(1500, LINK_CHUNK),
        None => CHUNK,
    };
    let (tx, mut rx) = mpsc::channel::<(Instant, Bytes)>(PIPE_CHUNKS);
    let reading = async move {
        let mut buf = vec![0u8; chunk];
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // Held from here until written: wait for room in the relay's budget.
            ends.registry.hold.take(n as u64).await;
            // What was read has arrived at the bottleneck: it waits there until the queue has
            // room for it (a router would drop it; a byte stream cannot), then joins the queue.
            if let Some(link) = &link {
                loop {
                    let wait = match link.lock() {
                        Ok(b) => b.room_in(Instant::now(), n),
                        Err(_) => Duration::ZERO,
                    };
                    if wait.is_zero() {
                        break;
                    }
                    tokio::time::sleep(wait).await;
                }
            }
            let now = Instant::now();
            // Through the shared link first (rate and queue), then this connection's delay.
            let departure = match &link {
                Some(l) => l.lock().map_or(now, |mut b| b.push(now, n)),
                None => now,
            };
            let release = machine.schedule_bytes_after(now, departure, n);
            if let Ok(mut c) = ends.slot.counts.lock() {
                c[direction] = machine.counts();
            }
            if tx
                .send((release, Bytes::copy_from_slice(&buf[..n])))
                .await
                .is_err()
            {
                ends.registry.hold.give_back(n as u64);
                break;
            }
        }
        // Dropping `tx` ends the writer once it has written everything.
    };
    let hold = &ends.registry.hold;
    let writing = async move {
        while let Some((release, data)) = rx.recv().await {
            wait_until(release).await;
            let written = writer.write_all(&data).await;
            hold.give_back(data.len() as u64);
            if written.is_err() {
                // What is still queued is never written: its bytes go back too.
                rx.close();
                while let Ok((_, data)) = rx.try_recv() {
                    hold.give_back(data.len() as u64);
                }
                return;
            }
        }
        let _ = writer.shutdown().await;
    };
    tokio::join!(reading, writing);
}
