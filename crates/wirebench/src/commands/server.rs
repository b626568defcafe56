//! `wirebench server`: runs a server until SIGINT, SIGTERM or SIGHUP and prints one line per
//! session (text or JSON) on stdout; notices about refused connections go to stderr. The first
//! signal drains (running sessions finish within the grace period, the rest are reported
//! aborted), a second aborts at once; either way the server exits 0 after every session's line.
//! With `-1` the first session's end drains it as a signal does.

use std::io::Write;

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch};

use crate::config::ServerConfig;
use wirebench_core::record::{ServerRecord, SessionLine};

use crate::flows::server::{Server, ServerEvent, StopRequest};
use crate::output::session;
use crate::transport::signals::{StopSignal, Stops};
use crate::transport::tls::ServerIdentity;

/// Writes one line to stderr. Unlike `eprintln!`, it never panics: a server whose stderr was
/// closed (a terminal gone, a pipe nobody reads) keeps serving.
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Runs the server command.
pub async fn execute(cfg: ServerConfig) -> Result<()> {
    let identity = match &cfg.cert_and_key {
        Some((cert, key)) => ServerIdentity::from_pem_files(cert, key)?,
        None => ServerIdentity::self_signed()?,
    };
    let server = Server::bind(cfg.listen, identity, cfg.options.clone()).await?;
    let _metrics = match cfg.metrics {
        Some(addr) => Some(serve_metrics(addr, server.metrics()).await?),
        None => None,
    };
    // Watch the signals before saying we listen: a signal sent right after that line must
    // drain the server, not kill it.
    let mut stops = Stops::watch();
    say!(
        "wirebench server listening on {} (TCP and UDP, one port)",
        server.local_addr()
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _iperf3 = match cfg.iperf3 {
        Some(addr) => {
            Some(crate::commands::interop::spawn_iperf3_listener(addr, server.gate()).await?)
        }
        None => None,
    };
    let (stop_tx, stop_rx) = watch::channel(StopRequest::Serve);
    let mut serving = tokio::spawn(server.run_until(tx, stop_rx));
    let mut signals = 0;
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Some(event) => {
                    if !print_event(&event, cfg.json) {
                        // stdout is gone (a closed pipe): nobody is listening any more.
                        return Ok(());
                    }
                    if cfg.one_off && matches!(event, ServerEvent::Session(_)) && signals == 0 {
                        // -1: one session served; the rest goes as on SIGTERM.
                        say!("wirebench server: one session served (-1), stopping");
                        stop_tx.send_replace(StopRequest::Drain);
                        signals = 1;
                    }
                }
                None => return Ok(()),
            },
            result = &mut serving => {
                // Every session has reported: print what is still queued, then stop.
                while let Ok(event) = rx.try_recv() {
                    print_event(&event, cfg.json);
                }
                result.context("the server task failed")??;
                say!("wirebench server: stopped");
                return Ok(());
            }
            stop = stops.next() => signals = on_signal(signals, stop, &stop_tx),
        }
    }
}

/// Serves the server's counters at http://ADDR/metrics until the returned guard is dropped.
async fn serve_metrics(
    addr: std::net::SocketAddr,
    handle: crate::flows::server::MetricsHandle,
) -> Result<AbortOnDrop> {
    let listener = crate::transport::http::bind(addr).await?;
    let local = listener
        .local_addr()
        .context("while reading the metrics address")?;
    say!("wirebench server: metrics on http://{local}/metrics");
    Ok(AbortOnDrop(tokio::spawn(crate::transport::http::serve(
        listener,
        move |req| {
            let handle = handle.clone();
            async move { metrics_page(&req, &handle) }
        },
    ))))
}

/// The answer of the server's metrics endpoint.
pub fn metrics_page(
    req: &crate::transport::http::Request,
    handle: &crate::flows::server::MetricsHandle,
) -> crate::transport::http::Response {
    match req.path.as_str() {
        "/metrics" => crate::transport::http::Response {
            status: 200,
            content_type: crate::output::prometheus::CONTENT_TYPE,
            body: crate::output::prometheus::server_page(&handle.snapshot()),
        },
        other => {
            crate::transport::http::Response::text(404, format!("no page {other}: try /metrics"))
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// First signal: drain (finish running sessions within the grace period); second: abort them.
fn on_signal(before: u32, signal: StopSignal, stop: &watch::Sender<StopRequest>) -> u32 {
    let what = signal.name();
    if before == 0 {
        say!(
            "wirebench server: {what}, refusing new sessions and letting running ones finish (again to abort them)"
        );
        stop.send_replace(StopRequest::Drain);
    } else {
        say!("wirebench server: {what} again, aborting running sessions");
        stop.send_replace(StopRequest::Abort);
    }
    before + 1
}

/// Prints one server event; returns false when stdout is closed.
pub fn print_event(event: &ServerEvent, as_json: bool) -> bool {
    match event {
        ServerEvent::Session(s) => {
            let line = if as_json {
                serde_json::to_string(&SessionLine {
                    session: s.session,
                    peer: s.peer.to_string(),
                    msg_size: s.params.msg_size,
                    total_bytes: s.params.total_bytes,
                    server: ServerRecord::of(&s.report),
                })
                .unwrap_or_default()
            } else {
                session::session_line(s.session, &s.peer.to_string(), &s.params, &s.report)
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").and_then(|_| out.flush()).is_ok()
        }
        ServerEvent::Notice(n) => {
            say!("notice: {}: {}", n.peer, n.message);
            true
        }
    }
}
