//! `wirebench latency`: starts the embedded server when none is given, runs latency under load
//! by direction (idle, upload, download, both), and prints the result as text or one JSON
//! document. SIGINT, SIGTERM or SIGHUP stops it at once.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::record::load_phases::LoadPhasesResult;

use crate::commands::embedded;
use crate::config::latency::LatencyConfig;
use crate::flows::load_phases::{run_load_phases, LoadPhasesSpec};
use crate::transport::signals::{Ended, Stops};

/// Runs the experiment: [`Ended::Ran`]`(false)` when no probe was answered in some phase or a
/// load failed (exit status 1); [`Ended::Stopped`] when a signal ended it.
pub async fn execute(cfg: LatencyConfig) -> Result<Ended> {
    let mut stops = Stops::watch();
    let link = embedded::server_for(&cfg.target, cfg.psk.clone(), None).await?;
    let spec = LoadPhasesSpec {
        phases: cfg.phases.clone(),
        plan: cfg.plan.clone(),
        psk: cfg.psk.as_deref().cloned(),
    };
    let result = tokio::select! {
        r = run_load_phases(link.addr, &spec) => r?,
        signal = stops.next() => {
            eprintln!("{}", signal.reason());
            return Ok(Ended::Stopped(signal));
        }
    };
    print_result(&cfg, &result, &link.name)?;
    let whole = result
        .phases
        .iter()
        .all(|p| p.probes.answered > 0 && p.load_error.is_none());
    Ok(Ended::Ran(whole))
}

/// Prints the result as text or one JSON document; a closed stdout (`| head`) is no error.
fn print_result(cfg: &LatencyConfig, result: &LoadPhasesResult, server: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    let written = if cfg.json {
        serde_json::to_writer_pretty(&mut stdout, result)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(stdout))
    } else {
        stdout.write_all(crate::output::load_phases::text(result, server).as_bytes())
    };
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.context("while writing the result")?,
    }
    let _ = stdout.flush();
    Ok(())
}
