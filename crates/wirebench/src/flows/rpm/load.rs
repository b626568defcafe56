//! Load-generating flows of `wirebench rpm`: owns one TCP streaming session after another on one
//! flow (download: the server sends; upload: the client sends), each admitted by the server like
//! any session (so `--max-sessions`, `--max-rate`, `--max-bytes` and the PSK apply), counting
//! the payload bytes moved; must not measure latency or print anything.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::wire::proto::{ControlMessage, Preamble, SessionParams};

use crate::transport::{control, counters};

/// Payload of one load session; the flow opens the next when it is done (a flow outlives any
/// one session, and no session asks for more than a server's `--max-bytes` is likely to allow).
pub const SESSION_BYTES: u64 = 256 << 20;

/// How often an upload flow reads how much the server has acknowledged.
const ACK_POLL: Duration = Duration::from_millis(20);

/// Write size of an upload flow and read size of a download flow.
const IO_CHUNK: usize = 128 * 1024;

/// Bytes moved by all load flows, per direction.
#[derive(Debug, Default)]
pub struct LoadBytes {
    /// Payload bytes the client read (server → client).
    pub download: AtomicU64,
    /// Payload bytes the client wrote (client → server).
    pub upload: AtomicU64,
    /// Sessions that ended in an error after they were admitted.
    pub failures: AtomicU64,
}

/// A running load flow; [`stop_all`] ends it cleanly, dropping it cuts it.
#[derive(Debug)]
pub struct LoadFlow {
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
}

impl Drop for LoadFlow {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long a stopped flow waits for the server to close its session (so the server's session
/// slot is free when the test returns).
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Stops every flow: closes its data connection, then waits (at most [`STOP_WAIT`]) until the
/// server has ended the session on the control connection.
pub async fn stop_all(flows: Vec<LoadFlow>) {
    for f in &flows {
        let _ = f.stop.send(true);
    }
    let _ = tokio::time::timeout(STOP_WAIT + Duration::from_millis(500), async {
        for mut f in flows {
            let _ = (&mut f.task).await;
        }
    })
    .await;
}

impl LoadFlow {
    /// Opens the flow's first session (an error when the server refuses it) and keeps the flow
    /// going, session after session, until stopped.
    pub async fn start(
        server: SocketAddr,
        download: bool,
        psk: Option<Arc<Psk>>,
        bytes: Arc<LoadBytes>,
    ) -> Result<LoadFlow> {
        let first = open_session(server, download, psk.as_deref()).await?;
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut next = Some(first);
            loop {
                let mut session = match next.take() {
                    Some(s) => s,
                    None => match open_session(server, download, psk.as_deref()).await {
                        Ok(s) => s,
                        Err(_) => {
                            bytes.failures.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    },
                };
                let outcome = tokio::select! {
                    r = pump(&mut session, download, &bytes) => Some(r),
                    _ = stopped.changed() => None,
                };
                match outcome {
                    Some(Ok(())) => {}
                    Some(Err(_)) => {
                        bytes.failures.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    None => {
                        // Cut the data, then let the server end the session: it answers on
                        // the control connection (a report or an error) or closes it.
                        let Session { mut ctrl, data } = session;
                        drop(data);
                        let _ = tokio::time::timeout(STOP_WAIT, control::recv(&mut ctrl)).await;
                        return;
                    }
                }
            }
        });
        Ok(LoadFlow { task, stop })
    }
}

/// The data socket's descriptor, for reading TCP_INFO while the socket is being written.
struct RawSocket(RawFd);

impl AsRawFd for RawSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// An admitted session: its control connection and its data connection.
struct Session {
    ctrl: TcpStream,
    data: TcpStream,
}

async fn open_session(server: SocketAddr, download: bool, psk: Option<&Psk>) -> Result<Session> {
    let params = SessionParams {
        duration_us: None,
        omit_us: None,
        protocol: Protocol::Tcp,
        mechanism: Mechanism::Stream,
        msg_size: IO_CHUNK as u32,
        total_bytes: SESSION_BYTES,
        rto_us: None,
        rate_bps: None,
        grace_us: 0,
        options: Default::default(),
        interval_us: None,
        reverse: download,
    };
    let (ctrl, granted) =
        control::request_session_auth(server, &ControlMessage::SessionRequest(params), psk).await?;
    let mut data = TcpStream::connect(server)
        .await
        .with_context(|| format!("cannot open a load connection to {server}"))?;
    control::write_preamble(&mut data, &Preamble::data(granted.session, granted.token)).await?;
    Ok(Session { ctrl, data })
}

/// Moves one session's bytes, then waits for the server's report.
async fn pump(s: &mut Session, download: bool, bytes: &LoadBytes) -> Result<()> {
    let mut buf = vec![0u8; IO_CHUNK];
    if download {
        let mut moved = 0u64;
        while moved < SESSION_BYTES {
            let n = s
                .data
                .read(&mut buf)
                .await
                .context("while reading load data")?;
            if n == 0 {
                break;
            }
            moved += n as u64;
            bytes.download.fetch_add(n as u64, Ordering::Relaxed);
        }
    } else {
        // Upload goodput is what the receiver acknowledged, read every few milliseconds (the
        // writer wakes only when a large part of the send buffer is free, so counting at each
        // write would be lumpy, and counting writes would take a new flow's send buffer for
        // goodput); without TCP_INFO, what we wrote.
        let fd = RawSocket(s.data.as_raw_fd());
        let counted = AtomicU64::new(0);
        let data = &mut s.data;
        let writing = async {
            let mut moved = 0u64;
            while moved < SESSION_BYTES {
                let n = IO_CHUNK.min(usize::try_from(SESSION_BYTES - moved).unwrap_or(IO_CHUNK));
                data.write_all(&buf[..n])
                    .await
                    .context("while writing load data")?;
                moved += n as u64;
                if counters::tcp_bytes_acked(&fd).is_none() {
                    bytes.upload.fetch_add(n as u64, Ordering::Relaxed);
                    counted.store(moved, Ordering::Relaxed);
                }
            }
            anyhow::Ok(moved)
        };
        let watching = async {
            loop {
                tokio::time::sleep(ACK_POLL).await;
                if let Some(acked) = counters::tcp_bytes_acked(&fd) {
                    let acked = acked.min(SESSION_BYTES);
                    let before = counted.load(Ordering::Relaxed);
                    if acked > before {
                        bytes.upload.fetch_add(acked - before, Ordering::Relaxed);
                        counted.store(acked, Ordering::Relaxed);
                    }
                }
            }
        };
        let moved = tokio::select! {
            moved = writing => moved?,
            () = watching => anyhow::bail!("the acknowledgement watcher stopped"),
        };
        let _ = s.data.shutdown().await;
        // The rest is acknowledged by the time the server reports.
        control::read_report(&mut s.ctrl).await?;
        bytes.upload.fetch_add(
            moved.saturating_sub(counted.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        return Ok(());
    }
    control::read_report(&mut s.ctrl).await?;
    Ok(())
}
