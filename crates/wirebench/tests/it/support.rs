//! Test support: the bound every test runs within ([`within`]), snapshots ([`assert_snapshot`]),
//! an in-process server on an ephemeral loopback port, a small lossy forwarder (TCP relayed as
//! is, UDP dropped with a seeded PRNG in each direction) that counts what it did, and temporary
//! paths removed when dropped.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use wirebench::flows::server::{MetricsHandle, Server, ServerEvent, ServerOptions, SessionSummary};
use wirebench::transport::tls::ServerIdentity;

/// Every test bounds its own time with this (through [`within`]).
pub const TEST_TIMEOUT: Duration = Duration::from_secs(90);

/// Runs a test's body within [`TEST_TIMEOUT`]: a body that overruns fails the test, saying
/// so, instead of hanging the suite. Every async test runs its body through this (or
/// [`within_for`]), so the suite's length is bounded by its tests' count.
pub async fn within<F: Future>(body: F) -> F::Output {
    within_for(TEST_TIMEOUT, "the test", body).await
}

/// Runs `body` within `limit`, failing with `what` and the limit when it overruns (a step
/// that must finish sooner than the whole test).
pub async fn within_for<F: Future>(limit: Duration, what: &str, body: F) -> F::Output {
    match tokio::time::timeout(limit, body).await {
        Ok(output) => output,
        Err(_) => panic!("{what} did not finish within {limit:?}"),
    }
}

/// What a `wirebench server` child (stderr piped) said first: the address in its
/// "wirebench server listening on ADDR (…)" line, read within 20 s, and the rest of its stderr
/// (kept open while the caller holds it).
pub async fn listening_address(
    server: &mut tokio::process::Child,
) -> (
    String,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut lines =
        BufReader::new(server.stderr.take().expect("the server's stderr is piped")).lines();
    let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the server starts in time")
        .expect("stderr readable")
        .expect("a listening line");
    let addr = line
        .split_whitespace()
        .nth(4)
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_string();
    (addr, lines)
}

/// Compares `actual` byte for byte with the snapshot `tests/snapshots/{name}`. With
/// `WIREBENCH_UPDATE_SNAPSHOTS=1` the snapshot is written first: run that after an intended
/// change, and review the snapshot's diff before committing it.
pub fn assert_snapshot(name: &str, actual: &[u8]) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("WIREBENCH_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "no snapshot {} ({e}): run with WIREBENCH_UPDATE_SNAPSHOTS=1 to write it",
            path.display()
        )
    });
    assert!(
        actual == expected.as_slice(),
        "differs from the snapshot {} (WIREBENCH_UPDATE_SNAPSHOTS=1 rewrites it after an \
         intended change):\n{}",
        path.display(),
        String::from_utf8_lossy(actual)
    );
}

/// A server started by the test on 127.0.0.1:0; aborted when dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    pub events: mpsc::UnboundedReceiver<ServerEvent>,
    /// The server's counters and its sessions running.
    pub metrics: MetricsHandle,
    task: JoinHandle<anyhow::Result<()>>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(ServerOptions::default()).await
    }

    /// A server with these options (limits, a pre-shared key).
    pub async fn start_with(options: ServerOptions) -> TestServer {
        TestServer::start_at("127.0.0.1:0".parse().unwrap(), options).await
    }

    /// A server bound to `bind` (a wildcard address: the test sends only to loopback).
    pub async fn start_at(bind: SocketAddr, options: ServerOptions) -> TestServer {
        let identity = ServerIdentity::self_signed().expect("self-signed certificate");
        let server = Server::bind(bind, identity, options)
            .await
            .expect("bind test server");
        let addr = server.local_addr();
        let metrics = server.metrics();
        let (tx, events) = mpsc::unbounded_channel();
        let task = tokio::spawn(server.run(tx));
        TestServer {
            addr,
            events,
            metrics,
            task,
        }
    }

    /// The next session summary (skipping notices), waiting at most 30 s.
    pub async fn next_session(&mut self) -> SessionSummary {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(30), self.events.recv())
                .await
                .expect("a session summary within 30 s")
                .expect("server still running");
            if let ServerEvent::Session(s) = ev {
                return *s;
            }
        }
    }

    /// Notices received so far (non-blocking).
    pub fn drain_notices(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(ev) = self.events.try_recv() {
            if let ServerEvent::Notice(n) = ev {
                out.push(n.message);
            }
        }
        out
    }

    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the forwarder did, per direction.
#[derive(Default, Debug)]
pub struct ForwarderCounts {
    pub c2s_forwarded: AtomicU64,
    pub c2s_dropped: AtomicU64,
    pub s2c_forwarded: AtomicU64,
    pub s2c_dropped: AtomicU64,
    /// Address-validation hellos (client → server) and their echoes (server → client), kind 5:
    /// dropped with the same probability as data but counted here, not above.
    pub hellos_forwarded: AtomicU64,
    pub hellos_dropped: AtomicU64,
    pub echoes_forwarded: AtomicU64,
    pub echoes_dropped: AtomicU64,
    /// TCP bytes relayed client → server.
    pub tcp_c2s_bytes: AtomicU64,
}

/// A TCP listener and a UDP socket on one loopback port, as a wirebench server has them. The
/// kernel picks the TCP port; another socket (another test's) may hold that port for UDP, so a
/// taken port is given back and another tried.
pub async fn tcp_and_udp_on_one_port() -> (TcpListener, UdpSocket) {
    let mut last = None;
    for _ in 0..50 {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a TCP port");
        let addr = listener.local_addr().expect("its address");
        match UdpSocket::bind(addr).await {
            Ok(udp) => return (listener, udp),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => panic!("UDP on the TCP port {addr}: {e}"),
        }
    }
    panic!("no loopback port free for both TCP and UDP in 50 tries: {last:?}")
}

/// A forwarder on one port (TCP and UDP) in front of `upstream`.
pub struct Forwarder {
    pub addr: SocketAddr,
    pub counts: Arc<ForwarderCounts>,
    /// Notified once `tcp_c2s_bytes` passes the threshold given at start.
    pub tcp_threshold_reached: Arc<Notify>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// xorshift64*: a tiny seeded PRNG so drops are repeatable.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Forwarder {
    /// Drops UDP datagrams with probability `loss` in each direction (one client at a time).
    pub async fn start(
        upstream: SocketAddr,
        loss: f64,
        seed: u64,
        tcp_threshold: u64,
    ) -> Forwarder {
        let (listener, front) = tcp_and_udp_on_one_port().await;
        let addr = listener.local_addr().expect("its address");
        let front = Arc::new(front);
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        back.connect(upstream).await.unwrap();
        let counts = Arc::new(ForwarderCounts::default());
        let notify = Arc::new(Notify::new());
        let client_addr: Arc<tokio::sync::Mutex<Option<SocketAddr>>> = Default::default();
        let mut tasks = Vec::new();

        // TCP: relay each connection to the upstream, counting client → server bytes.
        {
            let counts = counts.clone();
            let notify = notify.clone();
            tasks.push(tokio::spawn(async move {
                while let Ok((down, _)) = listener.accept().await {
                    let counts = counts.clone();
                    let notify = notify.clone();
                    tokio::spawn(async move {
                        let Ok(up) = TcpStream::connect(upstream).await else {
                            return;
                        };
                        relay_tcp(down, up, counts, notify, tcp_threshold).await;
                    });
                }
            }));
        }
        // UDP client → server.
        {
            let (front, back, counts, client_addr) = (
                front.clone(),
                back.clone(),
                counts.clone(),
                client_addr.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(seed | 1);
                let mut buf = vec![0u8; 70_000];
                while let Ok((n, from)) = front.recv_from(&mut buf).await {
                    *client_addr.lock().await = Some(from);
                    let hello = buf[0] == 5;
                    if rng.next_f64() < loss {
                        match hello {
                            true => &counts.hellos_dropped,
                            false => &counts.c2s_dropped,
                        }
                        .fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    match hello {
                        true => &counts.hellos_forwarded,
                        false => &counts.c2s_forwarded,
                    }
                    .fetch_add(1, Ordering::SeqCst);
                    let _ = back.send(&buf[..n]).await;
                }
            }));
        }
        // UDP server → client.
        {
            let counts = counts.clone();
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(seed.rotate_left(17) | 1);
                let mut buf = vec![0u8; 70_000];
                while let Ok(n) = back.recv(&mut buf).await {
                    let Some(to) = *client_addr.lock().await else {
                        continue;
                    };
                    let echo = buf[0] == 5;
                    if rng.next_f64() < loss {
                        match echo {
                            true => &counts.echoes_dropped,
                            false => &counts.s2c_dropped,
                        }
                        .fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    match echo {
                        true => &counts.echoes_forwarded,
                        false => &counts.s2c_forwarded,
                    }
                    .fetch_add(1, Ordering::SeqCst);
                    let _ = front.send_to(&buf[..n], to).await;
                }
            }));
        }
        Forwarder {
            addr,
            counts,
            tcp_threshold_reached: notify,
            tasks,
        }
    }
}

async fn relay_tcp(
    down: TcpStream,
    up: TcpStream,
    counts: Arc<ForwarderCounts>,
    notify: Arc<Notify>,
    threshold: u64,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut dr, mut dw) = down.into_split();
    let (mut ur, mut uw) = up.into_split();
    let c2s = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match dr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let before = counts.tcp_c2s_bytes.fetch_add(n as u64, Ordering::SeqCst);
            if before < threshold && before + n as u64 >= threshold {
                notify.notify_one();
            }
            if uw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = uw.shutdown().await;
    };
    let s2c = async move {
        let _ = tokio::io::copy(&mut ur, &mut dw).await;
        let _ = dw.shutdown().await;
    };
    tokio::join!(c2s, s2c);
}

/// A path under the system temp directory with a unique name, removed (with SQLite's side
/// files, or as a directory) when dropped.
pub struct TempPath(pub std::path::PathBuf);

impl TempPath {
    /// A fresh, unused path ending in `suffix`.
    pub fn new(suffix: &str) -> TempPath {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        TempPath(std::env::temp_dir().join(format!(
            "wirebench-test-{}-{}-{nanos}{suffix}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )))
    }

    /// The path as a string, for command lines.
    pub fn arg(&self) -> &str {
        self.0.to_str().expect("temp paths are UTF-8")
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        if self.0.is_dir() {
            let _ = std::fs::remove_dir_all(&self.0);
        } else {
            let _ = std::fs::remove_file(&self.0);
            for side in ["-journal", "-wal", "-shm"] {
                let mut p = self.0.clone().into_os_string();
                p.push(side);
                let _ = std::fs::remove_file(p);
            }
        }
    }
}
