//! The client's watch on the server while data flows: the control connection is silent from
//! the session's start until the server's report, so anything on it before the transfer ends —
//! the connection closing or failing (the server process is gone), or an early report (the
//! server ended the session) — means the transfer must stop. Owns that watch and the words for
//! it; must not touch the data sockets itself (the caller says how to stop its transfer).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use wirebench_core::machine::ratesearch::ReceivedSoFar;
use wirebench_core::wire::proto::ControlMessage;

use crate::transport::control;

/// How long a transfer may still take to end once the server has spoken on the control
/// connection (its report can overtake the transfer's own end by a moment).
const REPORT_GRACE: Duration = Duration::from_millis(300);

/// How long a stopped transfer may take to hand back what it did before it is left behind.
const STOP_LIMIT: Duration = Duration::from_secs(1);

/// How a watched transfer ended.
#[derive(Debug)]
pub enum Watched<T> {
    /// The transfer ended first (well or not); the control connection is untouched.
    Done(T),
    /// The server went away or ended the session first; the transfer was stopped. Holds why,
    /// and the transfer's own output when it ended within a moment of being stopped.
    Gone {
        /// Why, in words for the user: `the server is gone: ...`.
        reason: String,
        /// What the stopped transfer returned, if it did.
        output: Option<T>,
    },
}

/// Runs the async `transfer` while watching `ctrl`. If the control connection closes, fails
/// or carries a message before the transfer ends (and the transfer does not end within a
/// moment of it), the transfer is dropped at once — it sends nothing more — and the reason is
/// returned. Peeking leaves a message in place when the transfer ends first.
pub async fn watch<T, F: Future<Output = T>>(ctrl: &mut TcpStream, transfer: F) -> Watched<T> {
    watch_inner(ctrl, transfer, None::<fn()>).await
}

/// Like [`watch`], for a transfer that runs elsewhere (a data-path thread) and only ends when
/// told: `stop` tells it (shuts its socket down, raises its flag), then its output is awaited
/// for at most a second. A watch dropped before the transfer ended (the run abandoned: a
/// signal, an exporter probe's time limit) tells it too, so no thread sends on for nobody.
pub async fn watch_stoppable<T, F: Future<Output = T>>(
    ctrl: &mut TcpStream,
    transfer: F,
    stop: impl FnOnce(),
) -> Watched<T> {
    watch_inner(ctrl, transfer, Some(stop)).await
}

/// Calls its stop when dropped armed: a transfer left running elsewhere is told to end.
struct StopOnDrop<S: FnOnce()>(Option<S>);

impl<S: FnOnce()> StopOnDrop<S> {
    /// The stop, taken: nobody calls it on drop any more.
    fn take(&mut self) -> Option<S> {
        self.0.take()
    }
}

impl<S: FnOnce()> Drop for StopOnDrop<S> {
    fn drop(&mut self) {
        if let Some(stop) = self.0.take() {
            stop();
        }
    }
}

async fn watch_inner<T, F: Future<Output = T>>(
    ctrl: &mut TcpStream,
    transfer: F,
    stop: Option<impl FnOnce()>,
) -> Watched<T> {
    let mut stop = StopOnDrop(stop);
    let mut transfer = std::pin::pin!(transfer);
    let mut byte = [0u8; 1];
    let peeked = tokio::select! {
        // The transfer first: when both are ready, a finished run is a finished run.
        biased;
        output = &mut transfer => {
            stop.take();
            return Watched::Done(output);
        }
        peeked = ctrl.peek(&mut byte) => peeked,
    };
    let reason = match peeked {
        Ok(0) => CLOSED.to_string(),
        Err(e) => format!("the server is gone: its control connection failed ({e})"),
        Ok(_) => {
            // A message: most likely the report of a transfer about to end on its own.
            if let Ok(output) = tokio::time::timeout(REPORT_GRACE, &mut transfer).await {
                stop.take();
                return Watched::Done(output);
            }
            early_message(ctrl).await
        }
    };
    let output = match stop.take() {
        Some(stop) => {
            stop();
            tokio::time::timeout(STOP_LIMIT, transfer).await.ok()
        }
        None => None,
    };
    Watched::Gone { reason, output }
}

/// After a transfer failed on its own (a reset data connection, a closed port): whether the
/// control connection says the server is gone, looking for at most `within`. A control
/// connection that is still open and silent says nothing.
pub async fn server_gone(ctrl: &mut TcpStream, within: Duration) -> Option<String> {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(within, ctrl.peek(&mut byte)).await {
        Err(_) => None,
        Ok(Ok(0)) => Some(CLOSED.to_string()),
        Ok(Err(e)) => Some(format!(
            "the server is gone: its control connection failed ({e})"
        )),
        Ok(Ok(_)) => Some(early_message(ctrl).await),
    }
}

const CLOSED: &str = "the server is gone: it closed the control connection mid-transfer";

/// How a transfer watched with [`watch_receipts`] ended.
#[derive(Debug)]
pub enum Judged<T> {
    /// The transfer ended first (well or not).
    Done(T),
    /// The judge decided on a receipt; the transfer was dropped (it sends nothing more, and
    /// what it sent is in its progress counter).
    Stopped,
    /// The server went away or ended the session first; why, in words for the user.
    Gone(String),
}

/// What decides a watched trial: called with each of the server's receipts, the payload bytes
/// sent so far and the time since the transfer started; `true` stops the transfer.
pub type Judge<'a> = &'a mut (dyn FnMut(ReceivedSoFar, u64, Duration) -> bool + Send);

/// Like [`watch`], for a session whose server sends receipts ([`ControlMessage::Receipt`])
/// while data flows (`run --rate max` trials): each one goes to `judge` with `sent` (the
/// transfer's progress counter) and the time since `started`, and the transfer is dropped as
/// soon as the judge says so. Anything else on the control connection means the server is gone
/// or ended the session.
pub async fn watch_receipts<T, F: Future<Output = T>>(
    ctrl: &mut TcpStream,
    transfer: F,
    (started, sent): (Instant, &AtomicU64),
    judge: Judge<'_>,
) -> Judged<T> {
    let mut transfer = std::pin::pin!(transfer);
    let mut byte = [0u8; 1];
    loop {
        // Peeking is cancel-safe: a frame is read whole below, never half in a select.
        let peeked = tokio::select! {
            biased;
            output = &mut transfer => return Judged::Done(output),
            peeked = ctrl.peek(&mut byte) => peeked,
        };
        match peeked {
            Ok(0) => return Judged::Gone(CLOSED.to_string()),
            Err(e) => {
                return Judged::Gone(format!(
                    "the server is gone: its control connection failed ({e})"
                ))
            }
            Ok(_) => {}
        }
        match tokio::time::timeout(control::SETUP_TIMEOUT, control::recv(ctrl)).await {
            Ok(Ok(Some(ControlMessage::Receipt {
                messages, next_seq, ..
            }))) => {
                let so_far = ReceivedSoFar { messages, next_seq };
                if judge(so_far, sent.load(Ordering::Relaxed), started.elapsed()) {
                    return Judged::Stopped;
                }
            }
            other => return Judged::Gone(explain(other)),
        }
    }
}

/// Reads the message the server sent before the transfer ended and says what it means.
async fn early_message(ctrl: &mut TcpStream) -> String {
    explain(tokio::time::timeout(control::SETUP_TIMEOUT, control::recv(ctrl)).await)
}

/// What a message read mid-transfer (within a time limit) means.
fn explain(
    read: Result<anyhow::Result<Option<ControlMessage>>, tokio::time::error::Elapsed>,
) -> String {
    match read {
        Err(_) => "the server sent part of a control message and stopped".to_string(),
        Ok(Err(e)) => format!("the server is gone: {e:#}"),
        Ok(Ok(None)) => CLOSED.to_string(),
        Ok(Ok(Some(ControlMessage::Report(r)))) => format!(
            "the server ended the session: {}",
            r.abort_reason
                .as_deref()
                .unwrap_or("it reported before the transfer ended")
        ),
        Ok(Ok(Some(ControlMessage::Error { reason }))) => {
            format!("the server reported an error: {reason}")
        }
        Ok(Ok(Some(_))) => "the server sent an unexpected control message mid-transfer".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.unwrap(), accepted.unwrap().0)
    }

    #[tokio::test]
    async fn a_transfer_that_ends_first_is_done_and_a_closed_control_connection_stops_one() {
        let (mut ctrl, server) = pair().await;
        let done = watch_stoppable(&mut ctrl, async { 7 }, || panic!("not stopped")).await;
        assert!(matches!(done, Watched::Done(7)));
        // The server closes its end while the transfer runs: stopped, with the reason.
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        drop(server);
        let transfer = async move {
            let _ = stop_rx.await;
            "stopped"
        };
        let mut stop_tx = Some(stop_tx);
        let gone = watch_stoppable(&mut ctrl, transfer, || {
            if let Some(tx) = stop_tx.take() {
                let _ = tx.send(());
            }
        })
        .await;
        match gone {
            Watched::Gone { reason, output } => {
                assert!(reason.contains("closed the control connection"), "{reason}");
                assert_eq!(output, Some("stopped"), "the transfer ran to its stop");
            }
            Watched::Done(_) => panic!("the transfer never ends by itself"),
        }
    }

    #[tokio::test]
    async fn a_watch_dropped_mid_transfer_stops_the_transfer() {
        let (mut ctrl, _server) = pair().await;
        let stopped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let told = std::sync::Arc::clone(&stopped);
        let watching = watch_stoppable(&mut ctrl, std::future::pending::<()>(), move || {
            told.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        // Abandoned after one look, as a run is by a signal or a probe's time limit.
        assert!(tokio::time::timeout(Duration::from_millis(20), watching)
            .await
            .is_err());
        assert!(stopped.load(std::sync::atomic::Ordering::Relaxed));
    }

    #[tokio::test]
    async fn an_async_transfer_is_dropped_at_once_when_the_server_is_gone() {
        struct Dropped(std::sync::Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let (mut ctrl, server) = pair().await;
        drop(server);
        let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let guard = Dropped(std::sync::Arc::clone(&dropped));
        // A sender that would go on for ever.
        let transfer = async move {
            let _guard = guard;
            std::future::pending::<()>().await
        };
        let gone = watch(&mut ctrl, transfer).await;
        assert!(matches!(gone, Watched::Gone { output: None, .. }));
        assert!(
            dropped.load(std::sync::atomic::Ordering::SeqCst),
            "it sends no more"
        );
    }
}
