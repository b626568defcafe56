//! `wirebench run`: starts the embedded server when no --server is given, runs the plan, and
//! prints each run as it finishes, then the summary tables (text) or one JSON document.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::config::{RunConfig, Target};
use crate::output::{json, text};
use crate::runner::{self, Campaign};
use crate::server::{Server, ServerEvent};
use crate::tls::ServerIdentity;

/// Runs the run command; `Ok(false)` means a run failed (exit status 1).
pub async fn execute(cfg: RunConfig) -> Result<bool> {
    let (server_addr, mut events, _embedded) = match &cfg.target {
        Target::Remote { addr, .. } => (*addr, None, None),
        Target::Embedded(ip) => {
            let server = Server::bind(SocketAddr::new(*ip, 0), ServerIdentity::self_signed()?)
                .await
                .context("while starting the embedded server")?;
            let addr = server.local_addr();
            let (tx, rx) = mpsc::unbounded_channel();
            let task = tokio::spawn(server.run(tx));
            (addr, Some(rx), Some(AbortOnDrop(task)))
        }
    };
    let server_name = match &cfg.target {
        Target::Remote { name, addr } if *name == addr.to_string() => name.clone(),
        Target::Remote { name, addr } => format!("{name} ({addr})"),
        Target::Embedded(_) => format!("embedded {server_addr}"),
    };
    if !cfg.json {
        println!(
            "{} against {server_name}",
            text::plan_heading(
                runner::planned_runs(&cfg),
                cfg.combinations.len(),
                cfg.repeat,
                cfg.msg_size,
                cfg.total_bytes
            )
        );
    }
    let campaign: Campaign = runner::run_campaign(&cfg, server_addr, |position, of, record| {
        let server_line = events
            .as_mut()
            .and_then(|rx| embedded_line(rx, record.outcome.session));
        if !cfg.json {
            let mut out = std::io::stdout().lock();
            let _ = write!(
                out,
                "{}",
                text::run_block(position, of, record, server_line.as_deref())
            );
            let _ = out.flush();
        }
    })
    .await;
    if cfg.json {
        let doc = json::run_document(&cfg, &server_name, &campaign);
        let body = serde_json::to_string_pretty(&doc).context("while encoding the JSON output")?;
        println!("{body}");
    } else if cfg.repeat > 1 && !campaign.runs.is_empty() {
        print!(
            "\n{}",
            text::summary_tables(&cfg.combinations, &campaign.runs, cfg.total_bytes)
        );
    }
    if let Some(failure) = &campaign.failure {
        eprintln!("error: {failure}");
        return Ok(false);
    }
    Ok(true)
}

/// The embedded server's own summary line for `session` (it is sent before the client gets
/// its report, so it is already queued). Notices on the way go to stderr.
fn embedded_line(rx: &mut mpsc::UnboundedReceiver<ServerEvent>, session: u32) -> Option<String> {
    while let Ok(event) = rx.try_recv() {
        match event {
            ServerEvent::Session(s) if s.session == session => {
                return Some(text::session_line(
                    s.session,
                    &s.peer.to_string(),
                    &s.params,
                    &s.report,
                ));
            }
            ServerEvent::Session(_) => {}
            ServerEvent::Notice(n) => eprintln!("server notice: {}: {}", n.peer, n.message),
        }
    }
    None
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
