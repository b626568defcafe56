//! `wirebench ping` and `wirebench rr`: start the embedded server when no --server is given,
//! run every protocol × concurrency in order, print each run as it finishes (text) or one JSON
//! document at the end. Both store their results as they go (a ping as an rr-like sweep that
//! `report --rr ID` renders): each result committed when it finishes, a stopped sweep marked
//! aborted with the results that finished, a store that breaks ending the sweep as failed.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::record::count_of;
use wirebench_core::record::rr::{NewRrCampaign, RrDocument, RrResult, SCHEMA_VERSION};
use wirebench_core::vocab::plan::Protocol;

use crate::commands::recorder::{self, unix_now, Recorder};
use crate::config::StoreTarget;
use crate::store::kind::Kind;
use crate::store::recording::Ending;
use crate::store::rr::{Ping, Rr};
use crate::transport::signals::{Ended, Stops};

use crate::commands::embedded;
use crate::config::rr::{rr_result, spec, ExchangeKind, RrConfig};
use crate::flows::rr_client::run_rr_auth;
use crate::output::rr as out;

/// Runs ping or rr: [`Ended::Ran`]`(false)` when a run failed (exit status 1), after printing
/// the others; [`Ended::Stopped`] when SIGINT, SIGTERM or SIGHUP stopped it. The sweep is
/// stored in `store` as it goes, with the sweep table at the end when it has more than one
/// result.
pub async fn execute(cfg: RrConfig, store: StoreTarget) -> Result<Ended> {
    match cfg.kind {
        ExchangeKind::Rr => execute_as::<Rr>(cfg, store).await,
        ExchangeKind::Ping => execute_as::<Ping>(cfg, store).await,
    }
}

/// [`execute`], stored as kind `K` (an rr or a ping sweep).
async fn execute_as<K>(cfg: RrConfig, store: StoreTarget) -> Result<Ended>
where
    K: Kind<Plan = NewRrCampaign, Result = RrResult>,
{
    let mut stops = Stops::watch();
    // Open the store first: a database that cannot be opened stops us before any traffic.
    let db = match &store {
        StoreTarget::File(path) => Some(recorder::open(path)?),
        StoreTarget::Off => None,
    };
    // The embedded server's session lines are not printed: the client shows its figures.
    let link = embedded::server_for(&cfg.target, cfg.psk.clone(), None).await?;
    let (server_addr, server_name, _embedded) = (link.addr, link.name, link.embedded);
    let mut recorder = match db {
        Some(db) => Some(Recorder::<K>::begin(db, new_campaign(&cfg, &server_name))?),
        None => None,
    };
    let finished = tokio::select! {
        done = run_all(&cfg, server_addr, &server_name, &mut recorder) => Ok(done),
        signal = stops.next() => Err(signal),
    };
    let noun = K::KIND.noun();
    let (results, ok) = match finished {
        Ok(done) => done,
        Err(signal) => {
            stops.second_ends_process();
            let reason = signal.reason();
            match recorder {
                Some(r) => {
                    r.finish(Ending::Stopped(reason.clone()), true, |f, _| {
                        format!(
                            "{reason}: {noun} {} is stored as aborted, with the results that finished",
                            f.id
                        )
                    });
                }
                None => eprintln!("{reason}"),
            }
            return Ok(Ended::Stopped(signal));
        }
    };
    let broken = recorder
        .as_ref()
        .and_then(|r| r.broken().map(str::to_string));
    let mut all_stored = true;
    if !cfg.json && cfg.kind == ExchangeKind::Rr && results.len() > 1 {
        print!("{}", crate::report::rr::sweep_table(&results));
    }
    if let Some(r) = recorder {
        let ending = Ending::Ran {
            failed: !ok,
            why: None,
        };
        all_stored = r.finish(ending, cfg.json, |f, db| {
            format!(
                "stored as {noun} {} in {} (table and chart: wirebench report --rr {} --format html -o rr.html)",
                f.id,
                db.display(),
                f.id
            )
        });
    }
    if cfg.json {
        let doc = RrDocument {
            schema_version: SCHEMA_VERSION,
            command: match cfg.kind {
                ExchangeKind::Ping => "ping",
                ExchangeKind::Rr => "rr",
            }
            .into(),
            server: server_name,
            results,
        };
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &doc).context("while writing the JSON")?;
        let _ = writeln!(stdout);
    }
    if let Some(why) = broken {
        eprintln!("error: {why}");
    }
    Ok(Ended::Ran(ok && all_stored))
}

/// Runs every protocol × flows × concurrency in order, printing each result as it finishes and
/// recording it when there is a store; returns the results and whether all ran. A store that
/// breaks (a full disk) ends the sweep there.
async fn run_all<K>(
    cfg: &RrConfig,
    server_addr: std::net::SocketAddr,
    server_name: &str,
    recorder: &mut Option<Recorder<K>>,
) -> (Vec<RrResult>, bool)
where
    K: Kind<Plan = NewRrCampaign, Result = RrResult>,
{
    let mut results = Vec::new();
    let mut ok = true;
    for &protocol in &cfg.protocols {
        if !cfg.json {
            println!("{}", heading(cfg, protocol, server_name));
        }
        for at in cfg.points() {
            let k = at.concurrency;
            let spec = spec(cfg, protocol, at);
            match run_rr_auth(server_addr, &spec, cfg.psk.as_deref()).await {
                Ok(outcome) => {
                    let result = rr_result(cfg, protocol, at, &outcome);
                    if !cfg.json {
                        let text = match cfg.kind {
                            ExchangeKind::Ping => out::ping_block(&result),
                            ExchangeKind::Rr => out::rr_block(
                                &result,
                                cfg.concurrency.len() == 1 && cfg.flows.len() == 1,
                                cfg.flows.len() > 1,
                            ),
                        };
                        let mut stdout = std::io::stdout().lock();
                        let _ = write!(stdout, "{text}");
                        let _ = stdout.flush();
                    }
                    if let Some(r) = recorder.as_mut() {
                        r.record(results.len() as u64 + 1, result.clone());
                    }
                    results.push(result);
                    // The server ended the session early (a limit, its shutdown): what was
                    // measured is kept and shown, and the run fails with the server's reason
                    // rather than passing its missing answers off as a lossy path.
                    if outcome.server.aborted {
                        eprintln!(
                            "error: {protocol} with {} and concurrency {k}: the server ended the session: {}",
                            count_of(at.flows as usize, "flow", "flows"),
                            outcome.server.abort_reason.as_deref().unwrap_or("no reason given")
                        );
                        ok = false;
                    }
                    if recorder.as_ref().is_some_and(|r| r.broken().is_some()) {
                        return (results, false);
                    }
                }
                Err(e) => {
                    eprintln!(
                        "error: {protocol} with {} and concurrency {k}: {e:#}",
                        count_of(at.flows as usize, "flow", "flows")
                    );
                    ok = false;
                }
            }
        }
    }
    (results, ok)
}

/// What is known of an rr sweep when it starts.
fn new_campaign(cfg: &RrConfig, server: &str) -> NewRrCampaign {
    let list = |items: Vec<String>| items.join(",");
    NewRrCampaign {
        started_at_unix_s: unix_now(),
        server: server.to_string(),
        protocols: list(cfg.protocols.iter().map(|p| p.to_string()).collect()),
        concurrency: list(cfg.concurrency.iter().map(|k| k.to_string()).collect()),
        request_bytes: cfg.request,
        response_bytes: cfg.response,
        // A --flows list keeps its largest here; each result holds its own.
        flows: cfg.most_flows(),
        planned_results: (cfg.protocols.len() * cfg.flows.len() * cfg.concurrency.len()) as u64,
        host_name: crate::transport::environment::detect().host_name,
        wirebench_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// The heading printed before the runs of one protocol.
fn heading(cfg: &RrConfig, protocol: Protocol, server: &str) -> String {
    let how_long = match (cfg.count, cfg.duration) {
        (Some(n), _) => format!("{n} per flow"),
        (None, Some(d)) => format!("for {d:?}"),
        (None, None) => String::new(),
    };
    match cfg.kind {
        ExchangeKind::Ping => format!(
            "ping {protocol} to {server}: {}-byte probes, {how_long}",
            cfg.request
        ),
        ExchangeKind::Rr => format!(
            "rr {protocol} to {server}: {} B requests, {} B responses, {}{}, {how_long}",
            cfg.request,
            cfg.response,
            match cfg.flows.as_slice() {
                [one] => count_of(*one as usize, "flow", "flows"),
                many => format!(
                    "flows {}",
                    many.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            },
            if cfg.new_connection {
                ", a new connection per request"
            } else {
                ""
            }
        ),
    }
}
