//! `wirebench rpm`: starts the embedded server when no --server is given (and the relay with
//! --impair), runs the responsiveness test, prints its result as text or one JSON document and
//! stores it in the results database as an rpm campaign (with every interval's goodput and
//! probe round trips; kept in a spool file when the store cannot take it). SIGINT, SIGTERM or
//! SIGHUP ends the load phase early: the intervals that finished are stored and the campaign
//! is marked aborted.

use std::io::Write;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use wirebench_core::machine::responsiveness::RpmResult;
use wirebench_core::record::rpm::NewRpmCampaign;

use crate::commands::embedded;
use crate::commands::recorder::{self, unix_now, Recorder};
use crate::config::rpm::RpmConfig;
use crate::config::StoreTarget;
use crate::flows::relay::RunRelay;
use crate::flows::rpm::run_rpm_until;
use crate::store::recording::Ending;
use crate::store::rpm::Rpm;
use crate::transport::signals::{Ended, StopSignal, Stops};
use wirebench_core::vocab::units::duration_ns;

/// Runs the test: [`Ended::Ran`]`(false)` when no RPM could be computed or the result is not
/// in the store (exit status 1); [`Ended::Stopped`] when a signal ended it early (the partial
/// result is printed and stored).
pub async fn execute(cfg: RpmConfig, store: StoreTarget) -> Result<Ended> {
    let mut stops = Stops::watch();
    // Open the store first: a database that cannot be opened stops us before any traffic.
    let db = match &store {
        StoreTarget::File(path) => Some(recorder::open(path)?),
        StoreTarget::Off => None,
    };
    // The embedded server's session lines are not printed: the client shows its figures.
    let link = embedded::server_for(&cfg.target, cfg.psk.clone(), None).await?;
    let (server_addr, mut server_name, _embedded) = (link.addr, link.name, link.embedded);
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
    let mut recorder = match db {
        Some(db) => Some(Recorder::<Rpm>::begin(
            db,
            new_campaign(&cfg, &server_name),
        )?),
        None => None,
    };
    // The first signal ends the load phase (the result keeps what finished); from then on a
    // second one ends the process at once.
    // A OnceLock, not a Cell: the command's future runs on the runtime's workers, so it is Send.
    let caught: OnceLock<StopSignal> = OnceLock::new();
    let caught_ref = &caught;
    let stop = async move {
        let signal = stops.next().await;
        let _ = caught_ref.set(signal);
        stops.second_ends_process();
    };
    let outcome = run_rpm_until(target, &server_name, &cfg.settings, cfg.psk.clone(), stop).await;
    let result = match outcome {
        Ok((result, _)) => result,
        Err(e) => {
            if let Some(r) = recorder {
                // The error is what the user needs; the campaign says it failed, and why.
                let ending = Ending::Ran {
                    failed: true,
                    why: Some(format!("{e:#}")),
                };
                r.finish(ending, true, |f, _| {
                    format!("rpm campaign {} is stored as failed", f.id)
                });
            }
            return Err(e);
        }
    };
    let signal = caught.get().copied();
    print_result(&cfg, &result)?;
    let mut all_stored = true;
    if let Some(r) = recorder.as_mut() {
        r.record(1, result.clone());
    }
    if let Some(r) = recorder {
        let ending = match (signal, result.rpm) {
            (Some(s), _) => Ending::Stopped(s.reason()),
            (None, Some(_)) => Ending::complete(),
            (None, None) => Ending::Ran {
                failed: true,
                why: Some("no RPM could be computed".to_string()),
            },
        };
        let quiet = cfg.json || signal.is_some();
        all_stored = r.finish(ending, quiet, |f, db| match signal {
            Some(s) => format!(
                "{}: rpm campaign {} is stored as aborted in {}, with the intervals that finished",
                s.reason(),
                f.id,
                db.display()
            ),
            None => format!(
                "stored as rpm campaign {} in {} (latency and goodput over time: wirebench report --rpm {} --format html -o rpm.html)",
                f.id,
                db.display(),
                f.id
            ),
        });
    } else if let Some(s) = signal {
        eprintln!("{}", s.reason());
    }
    Ok(match signal {
        Some(s) => Ended::Stopped(s),
        None => Ended::Ran(result.rpm.is_some() && all_stored),
    })
}

/// Prints the result as text or one JSON document; a closed stdout (`| head`) is no error.
fn print_result(cfg: &RpmConfig, result: &RpmResult) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    let written = if cfg.json {
        serde_json::to_writer_pretty(&mut stdout, result)
            .map_err(std::io::Error::from)
            .and_then(|()| writeln!(stdout))
    } else {
        crate::output::rpm::write_text(result, &mut stdout)
    };
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.context("while writing the result")?,
    }
    let _ = stdout.flush();
    Ok(())
}

/// What is known of an rpm campaign when it starts.
fn new_campaign(cfg: &RpmConfig, server: &str) -> NewRpmCampaign {
    let s = &cfg.settings;
    NewRpmCampaign {
        started_at_unix_s: unix_now(),
        server: server.to_string(),
        direction: s.direction,
        protocol: "tcp".to_string(),
        max_flows: s.params.max_flows,
        interval_ns: s.params.interval_ns,
        max_load_ns: duration_ns(s.max_duration),
        planned_results: 1,
        host_name: crate::transport::environment::detect().host_name,
        wirebench_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}
