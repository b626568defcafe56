//! A QUIC data connection's life on the server: the session's work runs on the connection's
//! home thread while the session's task watches the control connection ([`on_home`]), and a
//! finished connection lingers there for its last acknowledgements ([`linger`]).

use std::future::Future;
use std::time::Duration;

use tokio::io::AsyncRead;
use tokio::sync::oneshot;

use super::control::watch_control;
use crate::engine::quic::inline_server::{ServeStop, Served};
use crate::flows::server::registry::QuicData;

/// How long the server keeps a finished QUIC connection open so its last acknowledgements
/// reach the client, unless the client closes it first.
pub(crate) const QUIC_LINGER: Duration = Duration::from_secs(5);

/// Tells a QUIC session's work on its connection's home ([`on_home`]) that the control
/// connection ended, and why.
pub(crate) struct ControlEnded {
    told: tokio::sync::oneshot::Receiver<String>,
    reason: Option<String>,
}

impl ControlEnded {
    /// Waits until the control connection has ended (or the session's task is gone); the
    /// reason, as [`watch_control`] gives it. May be awaited again after it answered.
    pub(crate) async fn reason(&mut self) -> String {
        if let Some(reason) = &self.reason {
            return reason.clone();
        }
        let reason = (&mut self.told)
            .await
            .unwrap_or_else(|_| "the session ended".to_string());
        self.reason = Some(reason.clone());
        reason
    }
}

/// Runs a QUIC session's data work on its connection's home thread (`engine::quic::home`),
/// where quinn drives the connection, while this task watches the control connection. If that
/// ends first the work is told why through its [`ControlEnded`], and its own ending is still
/// waited for, so what it counted reaches the report. Fails only if the work could not run
/// (its thread is gone, or it panicked).
pub(crate) async fn on_home<R, W, F>(
    quic: QuicData,
    rd: &mut R,
    work: W,
) -> Result<F::Output, String>
where
    R: AsyncRead + Unpin,
    W: FnOnce(QuicData, ControlEnded) -> F,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tell, told) = tokio::sync::oneshot::channel();
    let home = quic.home.clone();
    let mut job = home.spawn(work(quic, ControlEnded { told, reason: None }));
    let joined = tokio::select! {
        joined = &mut job => joined,
        reason = watch_control(rd) => {
            let _ = tell.send(reason);
            job.await
        }
    };
    joined.map_err(|e| format!("the session's work on its QUIC connection's thread failed: {e}"))
}

/// Keeps a finished QUIC data connection open on the current runtime (its home) so its last
/// acknowledgements drain, until the client closes it or [`QUIC_LINGER`] has passed. Its
/// streams end now: the receiving half stops the client's sending if it was not read to its
/// end, and a sending half not yet finished is finished.
pub(crate) fn linger(quic: QuicData) {
    let QuicData { connection, .. } = quic;
    tokio::spawn(async move {
        let _ = tokio::time::timeout(QUIC_LINGER, connection.closed()).await;
    });
}

/// Waits for a session's work on its inline QUIC connection (`Accepted::serve`) while this
/// task watches the control connection; if that ends first, the work is stopped and still
/// waited for, so what it counted reaches the report. Returns the work's outcome (None: its
/// thread is gone) and, if the control connection ended first, why.
pub(crate) async fn served_or_gone<R: AsyncRead + Unpin, T>(
    mut served: oneshot::Receiver<Served<T>>,
    stopper: ServeStop,
    rd: &mut R,
) -> (Option<Served<T>>, Option<String>) {
    tokio::select! {
        ended = &mut served => (ended.ok(), None),
        reason = watch_control(rd) => {
            stopper.stop();
            (served.await.ok(), Some(reason))
        }
    }
}

/// Why a session on an inline QUIC connection failed when its thread is gone.
pub(crate) const INLINE_THREAD_FAILED: &str = "the QUIC connection's thread failed";
