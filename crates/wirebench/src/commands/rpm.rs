//! `wirebench rpm`: starts the embedded server when no --server is given (and the relay with
//! --impair), runs the responsiveness test and prints its result as text or one JSON document.
//! Results are not stored in the results database (yet).

use std::io::Write;

use anyhow::{Context, Result};

use crate::commands::embedded;
use crate::config::rpm::RpmConfig;
use crate::relay::RunRelay;
use crate::rpm::{render, run_rpm};

/// Runs the test; `Ok(false)` when no RPM could be computed (exit status 1).
pub async fn execute(cfg: RpmConfig) -> Result<bool> {
    // The embedded server's session lines are not printed: the client shows its figures.
    let (server_addr, _embedded) = embedded::server_for(&cfg.target, cfg.psk.clone(), None).await?;
    let mut server_name = embedded::server_name(&cfg.target, server_addr);
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
