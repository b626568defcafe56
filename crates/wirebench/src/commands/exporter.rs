//! `wirebench exporter`: serves `/probe` and `/metrics` (see the `exporter` module) until
//! SIGINT, SIGTERM or SIGHUP (its counts logged on the way out), with the pages rendered by
//! `output::metrics`; refused and failed probes are
//! logged on stderr, one line each. With `--store`/`--db`, one thread owns the results store
//! and commits every finished probe as its command would.

use std::io::Write;
use std::sync::mpsc;

use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use wirebench_core::record::Status;

use crate::config::exporter::ExporterConfig;
use crate::exporter::{Exporter, Pages, Sink, StoredProbe};
use crate::output::metrics;
use crate::store::{Location, Store};
use crate::transport::http;
use crate::transport::signals::Stops;

/// The renderers and log of the exporter's pages.
pub const PAGES: Pages = Pages {
    probe: metrics::probe_page,
    own: metrics::exporter_page,
    content_type: metrics::CONTENT_TYPE,
    log: log_line,
};

/// Finished probes waiting for the store; more are dropped (and logged) rather than queued.
const STORE_QUEUE: usize = 64;

/// Runs the exporter command.
pub async fn execute(cfg: ExporterConfig) -> Result<()> {
    // Open the store first: a database that cannot be opened stops us before we serve.
    let sink = match &cfg.store {
        Some(path) => Some(start_store(path)?),
        None => None,
    };
    let listener = http::bind(cfg.listen).await?;
    let local = listener
        .local_addr()
        .context("while reading the exporter's address")?;
    let mut stops = Stops::watch();
    log_line(&format!(
        "wirebench exporter listening on http://{local} (/probe, /metrics)"
    ));
    if let Some(path) = &cfg.store {
        log_line(&format!(
            "wirebench exporter: storing every finished probe in {}",
            path.display()
        ));
    }
    let exporter = Exporter::storing(cfg, PAGES, sink);
    tokio::select! {
        () = Arc::clone(&exporter).serve(listener) => {}
        stop = stops.next() => {
            let c = exporter.counts();
            log_line(&format!(
                "wirebench exporter: {}, stopping after {} probes ({} failed, {} refused, {} in flight)",
                stop.name(),
                c.probes_run,
                c.probes_failed,
                c.probes_refused.iter().map(|(_, n)| n).sum::<u64>(),
                c.probes_in_flight
            ));
        }
    }
    Ok(())
}

/// Writes one line to stderr; never panics when stderr is gone.
pub fn log_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Opens the store at `path` on a thread of its own, which commits every probe sent to the
/// returned sink until the sink is dropped; fails when the database cannot be opened.
pub fn start_store(path: &Location) -> Result<Sink> {
    let (tx, rx) = mpsc::sync_channel::<StoredProbe>(STORE_QUEUE);
    let (opened_tx, opened_rx) = mpsc::channel();
    let path = path.clone();
    std::thread::Builder::new()
        .name("exporter-store".into())
        .spawn(move || {
            let mut store = match Store::open(&path) {
                Ok(store) => {
                    let _ = opened_tx.send(Ok(()));
                    store
                }
                Err(e) => {
                    let _ = opened_tx.send(Err(e));
                    return;
                }
            };
            for probe in rx {
                if let Err(e) = store_probe(&mut store, &probe) {
                    log_line(&format!(
                        "warning: cannot store a probe in {}: {e:#}",
                        path.display()
                    ));
                }
            }
        })
        .context("cannot start the exporter's store thread")?;
    opened_rx
        .recv()
        .map_err(|_| anyhow!("the exporter's store thread ended before opening the store"))??;
    Ok(tx)
}

/// Commits one probe as its command would: a one-run campaign, an rr sweep or a DNS campaign
/// of one result, marked complete.
fn store_probe(store: &mut Store, probe: &StoredProbe) -> Result<i64> {
    let now = crate::commands::run::unix_now();
    match probe {
        StoredProbe::Run {
            campaign,
            point,
            run,
        } => {
            let id = store.begin_campaign(campaign)?;
            store.add_run(id, 1, *point, run)?;
            store.finish_campaign(id, Status::Complete, now, None)?;
            Ok(id)
        }
        StoredProbe::Rr { campaign, result } => {
            let id = store.begin_rr_campaign(campaign)?;
            store.add_rr_result(id, 1, result)?;
            store.finish_rr_campaign(id, Status::Complete, now)?;
            Ok(id)
        }
        StoredProbe::Dns { campaign, result } => {
            let id = store.begin_dns_campaign(campaign)?;
            store.add_dns_result(id, 1, result)?;
            store.finish_dns_campaign(id, Status::Complete, now)?;
            Ok(id)
        }
    }
}
