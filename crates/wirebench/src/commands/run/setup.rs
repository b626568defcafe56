//! `run`'s first phase: everything a campaign needs before its first run — the store (opened
//! first, so one that cannot be opened stops us before any traffic), the server (embedded when
//! no --server is given), the --impair relay in front of it, the plan's heading, the campaign
//! begun in the store, and the progress bar.

use anyhow::Result;
use tokio::sync::mpsc;
use wirebench_core::record::{count_of, NewCampaign, Parameters};

use crate::commands::clock::unix_now;
use crate::commands::embedded::{self, AbortOnDrop};
use crate::commands::recorder::{self, Recorder};
use crate::config::{RunOutput, StoreTarget};
use crate::flows::relay::RunRelay;
use crate::flows::server::ServerEvent;
use crate::output::progress::Progress;
use crate::output::run_block;
use crate::runner::{RunConfig, Target};
use crate::store::run::Run;

use super::lines::Streamer;
use super::plan_text;

/// Where the runs go and who listens.
pub(super) struct Link {
    /// The address the client talks to (the relay's with --impair).
    pub server_addr: std::net::SocketAddr,
    /// The embedded server, ended when this is dropped.
    _embedded: Option<AbortOnDrop>,
    /// The embedded server's session lines, printed with each run.
    pub events: Option<mpsc::UnboundedReceiver<ServerEvent>>,
    /// --impair: the in-process relay in front of the server.
    pub relay: Option<RunRelay>,
    /// Runs in the whole plan.
    pub total_runs: usize,
    /// The plan's parameters record against this server (named as printed and stored), made
    /// once.
    pub parameters: Parameters,
}

/// What the campaign runs with, made once before its first run.
pub(super) struct Setup {
    /// The server side.
    pub link: Link,
    /// The campaign in the store (`None` with --no-store).
    pub recorder: Option<Recorder<Run>>,
    /// The progress bar.
    pub progress: Progress,
    /// What iperf3's output flags add (`--json-stream`, `--iperf3-shape`, `-T`, `-V`).
    pub lines: Streamer,
}

impl Setup {
    /// Opens the store, starts the server and the relay, prints the plan's heading and
    /// begins the campaign in the store.
    pub async fn start(
        cfg: &RunConfig,
        store_target: &StoreTarget,
        quiet: bool,
        output: RunOutput,
    ) -> Result<Setup> {
        let store = match store_target {
            StoreTarget::Off => None,
            StoreTarget::File(path) => Some(recorder::open(path)?),
        };
        // The embedded server's session lines are printed with each run.
        let (tx, rx) = mpsc::unbounded_channel();
        let server = embedded::server_for(&cfg.target, cfg.psk.clone(), Some(tx)).await?;
        let (server_addr, mut server_name, embedded) = (server.addr, server.name, server.embedded);
        let events = matches!(cfg.target, Target::Embedded(_)).then_some(rx);
        // --impair: the client talks to an in-process relay in front of the server.
        let relay = match cfg.impair {
            None => None,
            Some((impairments, seed)) => {
                Some(RunRelay::start(impairments, seed, server_addr).await?)
            }
        };
        if let Some(r) = &relay {
            server_name = format!("{server_name} {}", r.description());
        }
        let server_addr = relay.as_ref().map_or(server_addr, RunRelay::addr);
        let total_runs = cfg.plan.measured();
        let parameters = cfg.parameters(&server_name);
        let recorder = match store {
            None => None,
            Some(store) => Some(Recorder::<Run>::begin(
                store,
                NewCampaign {
                    started_at_unix_s: unix_now(),
                    parameters: parameters.clone(),
                    planned_runs: total_runs as u64,
                    msg_sizes: plan_text::distinct(cfg.points.iter().map(|p| p.msg_size)),
                    totals: plan_text::distinct(cfg.points.iter().map(|p| p.total_bytes)),
                    environment: crate::transport::environment::detect(),
                },
            )?),
        };
        if !cfg.json {
            print_heading(cfg, &server_name, total_runs);
        }
        let lines = Streamer::new(cfg, total_runs, parameters.clone(), output);
        Ok(Setup {
            lines,
            link: Link {
                server_addr,
                _embedded: embedded,
                events,
                relay,
                total_runs,
                parameters,
            },
            recorder,
            progress: Progress::new(plan_text::run_labels(cfg), quiet),
        })
    }
}

/// The plan's heading (and a note on a long stop-and-wait plan and on warm-ups), printed once
/// the campaign is begun in the store.
fn print_heading(cfg: &RunConfig, server_name: &str, total_runs: usize) {
    if cfg.points.len() == 1 {
        println!(
            "{} against {server_name}",
            run_block::plan_heading(
                total_runs,
                cfg.combinations.len(),
                cfg.repeat,
                cfg.msg_size,
                (
                    cfg.total_bytes,
                    cfg.time
                        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
                )
            )
        );
    } else {
        println!(
            "{} against {server_name}",
            plan_text::sweep_heading(cfg, total_runs)
        );
    }
    if let Some(note) = plan_text::long_stop_and_wait_note(cfg) {
        eprintln!("{note}");
    }
    if cfg.warmup > 0 {
        println!(
            "  plus {} of every combination before each message size × total",
            count_of(
                cfg.warmup as usize,
                "unmeasured warm-up run",
                "unmeasured warm-up runs"
            )
        );
    }
}
