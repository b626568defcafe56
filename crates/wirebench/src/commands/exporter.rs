//! `wirebench exporter`: serves `/probe` and `/metrics` (see the `exporter` module) until
//! SIGINT, SIGTERM or SIGHUP (its counts logged on the way out), with the pages rendered by
//! `output::prometheus`; refused and failed probes are
//! logged on stderr, one line each. With `--store`/`--db`, one thread owns the results store
//! and commits every finished probe as its command would.

use std::io::Write;
use std::sync::mpsc;

use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use wirebench_core::record::lifecycle::{CampaignDocument, Lifecycle, Positioned, StoredRun};
use wirebench_core::record::Status;

use crate::config::exporter::ExporterConfig;
use crate::exporter::{Exporter, Pages, Sink, StoredProbe};
use crate::output::prometheus;
use crate::store::kind::Kind;
use crate::store::{self, spool, Location, Store};
use crate::transport::http;
use crate::transport::signals::Stops;

/// The renderers and log of the exporter's pages.
pub const PAGES: Pages = Pages {
    probe: prometheus::probe_page,
    own: prometheus::exporter_page,
    content_type: prometheus::CONTENT_TYPE,
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
            let store = match Store::open(&path) {
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
                if let Err(e) = store_probe(&store, &probe) {
                    log_line(&format!("warning: {e:#}"));
                }
            }
        })
        .context("cannot start the exporter's store thread")?;
    opened_rx
        .recv()
        .map_err(|_| anyhow!("the exporter's store thread ended before opening the store"))??;
    Ok(tx)
}

/// Stores one probe as its command would (a one-run campaign, an rr sweep or a DNS campaign
/// of one result, marked complete), whole in one transaction; a probe the store does not take
/// (busy past its wait, a full disk) is kept in a spool file that the next open brings in. An
/// error only when neither took it.
fn store_probe(store: &Store, probe: &StoredProbe) -> Result<()> {
    let now = crate::commands::recorder::unix_now();
    match probe {
        StoredProbe::Run {
            campaign,
            point,
            run,
        } => {
            let run = StoredRun::Finished {
                point: *point,
                run: run.clone(),
            };
            store_whole::<store::run::Run>(store, (**campaign).clone(), run, now)
        }
        StoredProbe::Rr { campaign, result } => {
            store_whole::<store::rr::Rr>(store, campaign.clone(), (**result).clone(), now)
        }
        StoredProbe::Dns { campaign, result } => {
            store_whole::<store::dns::Dns>(store, campaign.clone(), (**result).clone(), now)
        }
    }
}

/// Stores a finished campaign of `plan` with its one `result` through [`Store::merge`], or
/// into the spool when the store does not take it.
fn store_whole<K: Kind>(store: &Store, plan: K::Plan, result: K::Result, now: i64) -> Result<()> {
    let life = Lifecycle {
        id: 0,
        uid: Some(store::kind::new_uid()),
        started_at_unix_s: K::started_at(&plan),
        finished_at_unix_s: Some(now),
        status: Status::Complete,
        error: None,
        origin: "run".into(),
        planned: K::planned(&plan),
        stored: 1,
        aborted: 0,
    };
    let results = vec![Positioned {
        position: 1,
        result,
    }];
    let doc = CampaignDocument::new(env!("CARGO_PKG_VERSION"), K::KIND, life, plan, results);
    let Err(e) = store.merge::<K>(&doc, None, false) else {
        return Ok(());
    };
    let path = spool::write(store.path(), &doc).with_context(|| {
        format!(
            "cannot store a probe in {} ({e:#}), nor keep it",
            store.path().display()
        )
    })?;
    log_line(&format!(
        "warning: cannot store a probe in {}: {e:#}; kept in {} until the next wirebench \
         command that opens the store brings it in",
        store.path().display(),
        path.display()
    ));
    Ok(())
}
