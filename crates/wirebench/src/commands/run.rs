//! `wirebench run`: starts the embedded server when no --server is given, runs the plan, and
//! prints each run as it finishes, then the summary tables (text) or one JSON document. Each
//! finished run is committed to the results store before the next starts; Ctrl-C marks the
//! campaign aborted.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use wirebench_core::sweep::Point;

use crate::config::{RunConfig, StoreTarget, Target};
use crate::environment::Environment;
use crate::output::progress::Progress;
use crate::output::{json, text};
use crate::runner::{self, Campaign, RunRecord};
use crate::server::{Server, ServerEvent};
use crate::store::{NewCampaign, Status, Store};
use crate::tls::ServerIdentity;

/// Runs the run command; `Ok(false)` means a run failed (exit status 1).
pub async fn execute(cfg: RunConfig, store_target: StoreTarget, quiet: bool) -> Result<bool> {
    // Open the store first: a database that cannot be opened stops us before any traffic.
    let store = match &store_target {
        StoreTarget::Off => None,
        StoreTarget::File(path) => Some(Store::open(path)?),
    };
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
    let mut recorder = match store {
        None => None,
        Some(store) => Some(Recorder::begin(store, &cfg, &server_name)?),
    };
    let progress = Progress::new(&cfg.combinations, cfg.repeat, quiet);
    let running = runner::run_campaign(&cfg, server_addr, |position, of, record| {
        // Stored before it is printed: a run on the screen is a run in the database.
        if let Some(r) = recorder.as_mut() {
            r.record(position, record);
        }
        let server_line = events
            .as_mut()
            .and_then(|rx| embedded_line(rx, record.outcome.session));
        progress.finished(position, || {
            if !cfg.json {
                let mut out = std::io::stdout().lock();
                let _ = write!(
                    out,
                    "{}",
                    text::run_block(position, of, record, server_line.as_deref())
                );
                let _ = out.flush();
            }
        });
    });
    let interrupted = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No signal handling here: never report an interrupt.
            std::future::pending::<()>().await;
        }
    };
    let campaign: Campaign = tokio::select! {
        campaign = running => campaign,
        () = interrupted => {
            progress.finish();
            let stored = recorder.as_ref().map_or(0, |r| r.stored);
            if let Some(r) = recorder.take() {
                r.finish(Status::Aborted, Some("interrupted (Ctrl-C)"), cfg.json);
            }
            eprintln!("interrupted: {stored} finished run(s) stored, the run in flight is lost");
            return Ok(false);
        }
    };
    progress.finish();
    let store_failed = recorder.as_ref().is_some_and(|r| r.error.is_some());
    if let Some(r) = recorder.take() {
        let status = if campaign.failure.is_some() {
            Status::Failed
        } else {
            Status::Complete
        };
        r.finish(status, campaign.failure.as_deref(), cfg.json);
    }
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
    Ok(!store_failed)
}

/// Seconds since the Unix epoch, for the store's timestamps (0 if the clock is before 1970).
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Writes a campaign into the store as it runs. A store failure is reported once and ends
/// storing (the measurements go on and are still printed); the exit status is then 1.
struct Recorder {
    store: Store,
    campaign: i64,
    stored: u64,
    error: Option<String>,
}

impl Recorder {
    fn begin(mut store: Store, cfg: &RunConfig, server_name: &str) -> Result<Recorder> {
        let campaign = store
            .begin_campaign(&NewCampaign {
                started_at_unix_s: unix_now(),
                parameters: json::parameters(cfg, server_name),
                planned_runs: runner::planned_runs(cfg) as u64,
                msg_sizes: vec![cfg.msg_size],
                totals: vec![cfg.total_bytes],
                environment: Environment::detect(),
            })
            .with_context(|| format!("cannot store in {}", store.path().display()))?;
        Ok(Recorder {
            store,
            campaign,
            stored: 0,
            error: None,
        })
    }

    fn record(&mut self, position: usize, record: &RunRecord) {
        if self.error.is_some() {
            return;
        }
        match self.store.add_run(
            self.campaign,
            position as u64,
            Point {
                msg_size: record.params.msg_size,
                total_bytes: record.params.total_bytes,
            },
            &json::run_json(record),
        ) {
            Ok(()) => self.stored += 1,
            Err(e) => {
                let msg = format!(
                    "cannot store run {position} in {}: {e:#}; later runs are not stored",
                    self.store.path().display()
                );
                eprintln!("warning: {msg}");
                self.error = Some(msg);
            }
        }
    }

    fn finish(mut self, status: Status, error: Option<&str>, json_output: bool) {
        let error = error.or(self.error.as_deref());
        match self
            .store
            .finish_campaign(self.campaign, status, unix_now(), error)
        {
            Ok(()) => {
                let note = format!(
                    "stored as campaign {} ({} run(s), {}) in {}",
                    self.campaign,
                    self.stored,
                    status.as_str(),
                    self.store.path().display()
                );
                if json_output {
                    eprintln!("{note}");
                } else {
                    println!("{note}");
                }
            }
            Err(e) => eprintln!(
                "warning: cannot mark campaign {} as {}: {e:#}",
                self.campaign,
                status.as_str()
            ),
        }
    }
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
