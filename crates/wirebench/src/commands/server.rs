//! `wirebench server`: runs a server until Ctrl-C and prints one line per session (text or
//! JSON) on stdout; notices about refused connections go to stderr.

use std::io::Write;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::config::ServerConfig;
use crate::output::{json, text};
use crate::server::{Server, ServerEvent};
use crate::tls::ServerIdentity;

/// Runs the server command.
pub async fn execute(cfg: ServerConfig) -> Result<()> {
    let identity = match &cfg.cert_and_key {
        Some((cert, key)) => ServerIdentity::from_pem_files(cert, key)?,
        None => ServerIdentity::self_signed()?,
    };
    let server = Server::bind(cfg.listen, identity, cfg.options.clone()).await?;
    eprintln!(
        "wirebench server listening on {} (TCP and UDP, one port)",
        server.local_addr()
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _iperf3 = match cfg.iperf3 {
        Some(addr) => {
            Some(crate::commands::interop::spawn_iperf3_listener(addr, tx.clone()).await?)
        }
        None => None,
    };
    let mut serving = tokio::spawn(server.run(tx));
    let mut terminate = terminate_signal()?;
    loop {
        tokio::select! {
            event = rx.recv() => match event {
                Some(event) => {
                    if !print_event(&event, cfg.json) {
                        // stdout is gone (a closed pipe): nobody is listening any more.
                        return Ok(());
                    }
                }
                None => return Ok(()),
            },
            result = &mut serving => {
                return result.context("the server task failed")?;
            }
            _ = tokio::signal::ctrl_c() => {
                eprintln!("wirebench server: interrupted, stopping");
                return Ok(());
            }
            _ = terminate.recv() => {
                eprintln!("wirebench server: terminated, stopping");
                return Ok(());
            }
        }
    }
}

/// SIGTERM (how service managers stop a server) as a stream of events.
#[cfg(unix)]
fn terminate_signal() -> Result<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch for SIGTERM")
}

/// Prints one server event; returns false when stdout is closed.
pub fn print_event(event: &ServerEvent, as_json: bool) -> bool {
    match event {
        ServerEvent::Session(s) => {
            let line = if as_json {
                serde_json::to_string(&json::session_line(s)).unwrap_or_default()
            } else {
                text::session_line(s.session, &s.peer.to_string(), &s.params, &s.report)
            };
            let mut out = std::io::stdout().lock();
            writeln!(out, "{line}").and_then(|_| out.flush()).is_ok()
        }
        ServerEvent::Notice(n) => {
            eprintln!("notice: {}: {}", n.peer, n.message);
            true
        }
    }
}
