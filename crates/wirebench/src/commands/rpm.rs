//! `wirebench rpm`: starts the embedded server when no --server is given (and the relay with
//! --impair), runs the responsiveness test, prints its result as text or one JSON document and
//! stores it in the results database as an rpm campaign (with every interval's goodput and
//! probe round trips). SIGINT, SIGTERM or SIGHUP ends the load phase early: the intervals that
//! finished are stored and the campaign is marked aborted.

use std::io::Write;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use wirebench_core::machine::responsiveness::RpmResult;
use wirebench_core::record::rpm::NewRpmCampaign;
use wirebench_core::record::Status;

use crate::commands::embedded;
use crate::commands::run::unix_now;
use crate::config::rpm::RpmConfig;
use crate::config::StoreTarget;
use crate::flows::relay::RunRelay;
use crate::flows::rpm::{render, run_rpm_until};
use crate::store::Store;
use crate::transport::signals::{Ended, StopSignal, Stops};
use wirebench_core::vocab::units::duration_ns;

/// Runs the test: [`Ended::Ran`]`(false)` when no RPM could be computed (exit status 1);
/// [`Ended::Stopped`] when a signal ended it early (the partial result is printed and stored).
pub async fn execute(cfg: RpmConfig, store: StoreTarget) -> Result<Ended> {
    let mut stops = Stops::watch();
    // Open the store first: a database that cannot be opened stops us before any traffic.
    let mut db = match &store {
        StoreTarget::File(path) => Some(Store::open(path)?),
        StoreTarget::Off => None,
    };
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
    let campaign = match db.as_mut() {
        Some(db) => Some(db.begin_rpm_campaign(&new_campaign(&cfg, &server_name))?),
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
            if let (Some(db), Some(id)) = (db.as_mut(), campaign) {
                // The error is what the user needs; a store that also fails only warns.
                if let Err(store_error) = db.finish_rpm_campaign(id, Status::Failed, unix_now()) {
                    eprintln!("warning: cannot mark rpm campaign {id} failed: {store_error:#}");
                }
            }
            return Err(e);
        }
    };
    let signal = caught.get().copied();
    print_result(&cfg, &result)?;
    if let (Some(db), Some(id)) = (db.as_mut(), campaign) {
        let stored = db.add_rpm_result(id, 1, &result);
        if let Err(e) = &stored {
            eprintln!("warning: cannot store the rpm result: {e:#}");
        }
        let status = match (signal, result.rpm) {
            (Some(_), _) => Status::Aborted,
            (None, Some(_)) if stored.is_ok() => Status::Complete,
            _ => Status::Failed,
        };
        db.finish_rpm_campaign(id, status, unix_now())?;
        let note = match signal {
            Some(s) => format!(
                "{}: rpm campaign {id} is stored as aborted in {}, with the intervals that finished",
                s.reason(),
                db.path().display()
            ),
            None => format!(
                "stored as rpm campaign {id} in {} (latency and goodput over time: wirebench report --rpm {id} --format html -o rpm.html)",
                db.path().display()
            ),
        };
        if cfg.json || signal.is_some() {
            eprintln!("{note}");
        } else {
            println!("{note}");
        }
    } else if let Some(s) = signal {
        eprintln!("{}", s.reason());
    }
    Ok(match signal {
        Some(s) => Ended::Stopped(s),
        None => Ended::Ran(result.rpm.is_some()),
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
        render::write_text(result, &mut stdout)
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
