//! `wirebench rpm`: starts the embedded server when no --server is given (and the relay with
//! --impair), runs the responsiveness test and prints its result as text or one JSON document.
//! Results are not stored in the results database (yet).

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use crate::config::rpm::RpmConfig;
use crate::relay::RunRelay;
use crate::rpm::{render, run_rpm};
use crate::runner::Target;
use crate::server::{Server, ServerOptions};
use crate::tls::ServerIdentity;

/// Runs the test; `Ok(false)` when no RPM could be computed (exit status 1).
pub async fn execute(cfg: RpmConfig) -> Result<bool> {
    let (server_addr, _embedded) = match &cfg.target {
        Target::Remote { addr, .. } => (*addr, None),
        Target::Embedded(ip) => {
            let server = Server::bind(
                SocketAddr::new(*ip, 0),
                ServerIdentity::self_signed()?,
                ServerOptions::default().with_psk(cfg.psk.clone()),
            )
            .await
            .context("while starting the embedded server")?;
            let addr = server.local_addr();
            // The embedded server's session lines are not printed: the load flows' sessions
            // end when the test stops them, which the server would report as aborted.
            let (tx, rx) = mpsc::unbounded_channel();
            let task = tokio::spawn(async move {
                let _keep = rx;
                server.run(tx).await
            });
            (addr, Some(AbortOnDrop(task)))
        }
    };
    let mut server_name = match &cfg.target {
        Target::Remote { name, addr } if *name == addr.to_string() => name.clone(),
        Target::Remote { name, addr } => format!("{name} ({addr})"),
        Target::Embedded(_) => format!("embedded {server_addr}"),
    };
    let relay = match cfg.impair {
        None => None,
        Some((impairments, seed)) => Some(RunRelay::start(impairments, seed, server_addr).await?),
    };
    let target = match &relay {
        Some(r) => {
            server_name = format!("{server_name} {}", r.description());
            r.addr()
        }
        None => server_addr,
    };
    let result = run_rpm(target, &server_name, &cfg.settings, cfg.psk.clone()).await?;
    let mut stdout = std::io::stdout().lock();
    let written = if cfg.json {
        serde_json::to_writer_pretty(&mut stdout, &result)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(stdout))
    } else {
        render::write_text(&result, &mut stdout)
    };
    match written {
        // A closed stdout (a pipe to `head`) is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.context("while writing the result")?,
    }
    let _ = stdout.flush();
    Ok(result.rpm.is_some())
}

/// Aborts the embedded server's task when the command ends.
struct AbortOnDrop(tokio::task::JoinHandle<Result<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
