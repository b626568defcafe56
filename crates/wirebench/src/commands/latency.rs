//! `wirebench latency`: starts the embedded server when none is given, runs latency under load
//! by direction (idle, upload, download, both), prints the result as text or one JSON document
//! and stores it as a latency campaign (with every probe; kept in a spool file when the store
//! cannot take it). SIGINT, SIGTERM or SIGHUP stops it at once; the campaign is then stored as
//! aborted, with no test.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::record::load_phases::{LoadPhasesResult, NewLatencyCampaign};

use crate::commands::embedded;
use crate::commands::recorder::{self, unix_now, Recorder};
use crate::config::latency::LatencyConfig;
use crate::config::StoreTarget;
use crate::flows::load_phases::{run_load_phases, LoadPhasesSpec};
use crate::store::latency::Latency;
use crate::store::recording::Ending;
use crate::transport::signals::{Ended, Stops};

/// Runs the experiment: [`Ended::Ran`]`(false)` when no probe was answered in some phase, a
/// load failed or the result is not in the store (exit status 1); [`Ended::Stopped`] when a
/// signal ended it (nothing was measured to the end: the campaign is stored as aborted).
pub async fn execute(cfg: LatencyConfig, store: StoreTarget) -> Result<Ended> {
    let mut stops = Stops::watch();
    // Open the store first: a database that cannot be opened stops us before any traffic.
    let db = match &store {
        StoreTarget::File(path) => Some(recorder::open(path)?),
        StoreTarget::Off => None,
    };
    let link = embedded::server_for(&cfg.target, cfg.psk.clone(), None).await?;
    let recorder = match db {
        Some(db) => Some(Recorder::<Latency>::begin(
            db,
            new_campaign(&cfg, &link.name),
        )?),
        None => None,
    };
    let spec = LoadPhasesSpec {
        phases: cfg.phases.clone(),
        plan: cfg.plan.clone(),
        psk: cfg.psk.as_deref().cloned(),
    };
    let outcome = tokio::select! {
        r = run_load_phases(link.addr, &spec) => Ok(r),
        signal = stops.next() => Err(signal),
    };
    let result = match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => {
            if let Some(r) = recorder {
                let ending = Ending::Ran {
                    failed: true,
                    why: Some(format!("{e:#}")),
                };
                r.finish(ending, true, |f, _| {
                    format!("latency campaign {} is stored as failed", f.id)
                });
            }
            return Err(e);
        }
        Err(signal) => {
            eprintln!("{}", signal.reason());
            if let Some(r) = recorder {
                r.finish(Ending::Stopped(signal.reason()), true, |f, _| {
                    format!("latency campaign {} is stored as aborted", f.id)
                });
            }
            return Ok(Ended::Stopped(signal));
        }
    };
    print_result(&cfg, &result, &link.name)?;
    let whole = result
        .phases
        .iter()
        .all(|p| p.probes.answered > 0 && p.load_error.is_none());
    let mut stored = true;
    if let Some(mut r) = recorder {
        r.record(1, result);
        let ending = if whole {
            Ending::complete()
        } else {
            Ending::Ran {
                failed: true,
                why: Some("a phase had no answered probe or its load failed".to_string()),
            }
        };
        stored = r.finish(ending, cfg.json, |f, db| {
            format!(
                "stored as latency campaign {} in {} (each direction over time: wirebench report --latency {} --format html -o latency.html)",
                f.id,
                db.display(),
                f.id
            )
        });
    }
    Ok(Ended::Ran(whole && stored))
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

/// What is known of a latency campaign when it starts.
fn new_campaign(cfg: &LatencyConfig, server: &str) -> NewLatencyCampaign {
    NewLatencyCampaign {
        started_at_unix_s: unix_now(),
        server: server.to_string(),
        phases: cfg
            .phases
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(","),
        plan: cfg.plan.clone(),
        planned_results: 1,
        host_name: crate::transport::environment::detect().host_name,
        wirebench_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}
