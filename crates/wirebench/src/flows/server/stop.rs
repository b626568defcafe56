//! Stopping a running session from outside (the gate's stop: its duration limit, a byte or
//! rate limit, the server's shutdown). The session's control reader is wrapped so that, when
//! the stop comes, every read on it fails with a [`Stopped`] error; each session path already
//! aborts (and reports) when its control connection fails, so none of them needs to know why.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

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
    /// Wraps `inner`; it fails once `stop` resolves, with the reason `stop` gives (the gate's
    /// [`super::gate::Pass::stop`]: the session's deadline, a limit, the server's shutdown).
    pub(super) fn new(
        inner: R,
        stop: impl Future<Output = String> + Send + 'static,
    ) -> Interruptible<R> {
        Interruptible {
            inner,
            stop: Box::pin(stop),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    #[tokio::test(start_paused = true)]
    async fn a_stop_fails_reads_with_its_reason() {
        let (_client, server) = tokio::io::duplex(64);
        let stop = async {
            tokio::time::sleep(Duration::from_secs(90)).await;
            "the session ran into the server's limit of 90s (--max-duration)".to_string()
        };
        let mut r = Interruptible::new(server, stop);
        let mut buf = [0u8; 4];
        let err = r.read(&mut buf).await.unwrap_err();
        let err = anyhow::Error::new(err).context("while reading a control message");
        assert_eq!(
            stop_reason(&err).unwrap(),
            "the session ran into the server's limit of 90s (--max-duration)"
        );
    }

    #[tokio::test]
    async fn data_passes_until_the_stop() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (mut client, server) = tokio::io::duplex(64);
        let stop = async move {
            let _ = rx.await;
            "the server shut down before the session ended".to_string()
        };
        let mut r = Interruptible::new(server, stop);
        tokio::io::AsyncWriteExt::write_all(&mut client, b"ab")
            .await
            .unwrap();
        let mut buf = [0u8; 2];
        r.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ab");
        let _ = tx.send(());
        let err = anyhow::Error::new(r.read(&mut buf).await.unwrap_err());
        assert_eq!(
            stop_reason(&err).unwrap(),
            "the server shut down before the session ended"
        );
    }
}
