//! Stopping a running session from outside: its duration limit or the server's shutdown. The
//! session's control reader is wrapped so that, when either comes, every read on it fails with
//! a [`Stopped`] error; each session path already aborts (and reports) when its control
//! connection fails, so none of them needs to know why.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::watch;
use tokio::time::Instant;

/// Why a session was stopped from outside; carried inside the control reader's I/O error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub(super) struct Stopped(pub String);

/// The reason a session was stopped, if `err` came from a [`Stopped`] control reader.
pub(super) fn stop_reason(err: &anyhow::Error) -> Option<String> {
    err.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .filter_map(|io| io.get_ref())
        .find_map(|inner| inner.downcast_ref::<Stopped>())
        .map(|s| s.0.clone())
}

/// A control reader that fails once the session's deadline passes or the server aborts the
/// sessions still running at the end of its shutdown.
pub(super) struct Interruptible<R> {
    inner: R,
    stop: Pin<Box<dyn Future<Output = String> + Send>>,
    stopped: Option<String>,
}

impl<R> Interruptible<R> {
    /// Wraps `inner`; it fails `max_duration` from now, or when `abort` turns true.
    pub(super) fn new(
        inner: R,
        max_duration: Duration,
        mut abort: watch::Receiver<bool>,
    ) -> Interruptible<R> {
        let deadline = Instant::now() + max_duration;
        let stop = Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => format!(
                    "the session ran into the server's limit of {} (--max-duration)",
                    humantime_secs(max_duration)
                ),
                _ = abort.wait_for(|a| *a) => "the server shut down before the session ended".to_string(),
            }
        });
        Interruptible {
            inner,
            stop,
            stopped: None,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Interruptible<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.stopped.is_none() {
            if let Poll::Ready(reason) = this.stop.as_mut().poll(cx) {
                this.stopped = Some(reason);
            }
        }
        if let Some(reason) = &this.stopped {
            return Poll::Ready(Err(io::Error::other(Stopped(reason.clone()))));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

/// `90s`, `10m`, `1h30m`: a duration as the flags take it.
fn humantime_secs(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) if d.subsec_millis() > 0 || sec == 0 => format!("{}ms", d.as_millis()),
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (h, 0, 0) => format!("{h}h"),
        _ => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test(start_paused = true)]
    async fn deadline_fails_reads_with_the_reason() {
        let (_tx, abort) = watch::channel(false);
        let (_client, server) = tokio::io::duplex(64);
        let mut r = Interruptible::new(server, Duration::from_secs(90), abort);
        let mut buf = [0u8; 4];
        let err = r.read(&mut buf).await.unwrap_err();
        let err = anyhow::Error::new(err).context("while reading a control message");
        assert_eq!(
            stop_reason(&err).unwrap(),
            "the session ran into the server's limit of 90s (--max-duration)"
        );
    }

    #[tokio::test]
    async fn abort_fails_reads_and_data_passes_before() {
        let (tx, abort) = watch::channel(false);
        let (mut client, server) = tokio::io::duplex(64);
        let mut r = Interruptible::new(server, Duration::from_secs(3600), abort);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"ab")
            .await
            .unwrap();
        let mut buf = [0u8; 2];
        r.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ab");
        tx.send_replace(true);
        let err = anyhow::Error::new(r.read(&mut buf).await.unwrap_err());
        assert_eq!(
            stop_reason(&err).unwrap(),
            "the server shut down before the session ended"
        );
    }

    #[test]
    fn durations_read_like_flags() {
        assert_eq!(humantime_secs(Duration::from_secs(600)), "10m");
        assert_eq!(humantime_secs(Duration::from_secs(90)), "90s");
        assert_eq!(humantime_secs(Duration::from_secs(7200)), "2h");
        assert_eq!(humantime_secs(Duration::from_millis(1500)), "1500ms");
    }
}
