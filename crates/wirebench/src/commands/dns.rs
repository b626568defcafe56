//! `wirebench dns`: runs every transport × concurrency against the resolver in order, prints
//! each run as it finishes (text) or one JSON document at the end, then the sweep table; each
//! finished result is committed to the results store before the next starts (kept in a spool
//! file when the store cannot take it); SIGINT (Ctrl-C), SIGTERM or SIGHUP marks the campaign
//! aborted; a store that breaks (a full disk) ends it as failed.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::wire::dns::DnsTransport;

use crate::commands::recorder::{self, unix_now, Recorder};
use crate::config::dns::{dns_result, DnsConfig};
use crate::config::StoreTarget;
use crate::flows::dns::{run_dns, DnsSpec, DotTls};
use crate::output::dns as out;
use crate::report;
use crate::store::dns::Dns;
use crate::store::recording::Ending;
use crate::transport::signals::{Ended, Stops};
use wirebench_core::record::count_of;
use wirebench_core::record::dns::{DnsDocument, DnsResult, NewDnsCampaign, SCHEMA_VERSION};

/// Runs the probe: [`Ended::Ran`]`(false)` when a run failed (exit status 1), after running
/// the others; [`Ended::Stopped`] when a signal stopped it.
pub async fn execute(cfg: DnsConfig, store: StoreTarget) -> Result<Ended> {
    let mut stops = Stops::watch();
    let mut recorder = match &store {
        StoreTarget::Off => None,
        StoreTarget::File(path) => Some(Recorder::<Dns>::begin(
            recorder::open(path)?,
            new_campaign(&cfg),
        )?),
    };
    let finished = tokio::select! {
        r = run_all(&cfg, &mut recorder) => Ok(r?),
        signal = stops.next() => Err(signal),
    };
    let (results, ok) = match finished {
        Ok(done) => done,
        Err(signal) => {
            stops.second_ends_process();
            // Every finished result is already stored; the campaign says it was cut short.
            let reason = signal.reason();
            match recorder {
                Some(r) => {
                    r.finish(Ending::Stopped(reason.clone()), true, |f, _| {
                        format!(
                            "{reason}: DNS campaign {} is stored as aborted, with the results that finished",
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
    if let Some(r) = recorder {
        let ending = Ending::Ran {
            failed: !ok,
            why: None,
        };
        all_stored = r.finish(ending, true, |f, db| {
            format!(
                "stored as DNS campaign {} in {} (chart: wirebench report --dns {} --format html -o dns.html)",
                f.id,
                db.display(),
                f.id
            )
        });
    }
    let mut stdout = std::io::stdout().lock();
    if cfg.json {
        let doc = document(&cfg, results);
        serde_json::to_writer_pretty(&mut stdout, &doc).context("while writing the JSON")?;
        let _ = writeln!(stdout);
    } else if cfg.concurrency.len() > 1 || cfg.transports.len() > 1 {
        let _ = write!(stdout, "{}", report::dns::sweep_table(&results));
    }
    if let Some(why) = broken {
        eprintln!("error: {why}");
    }
    Ok(Ended::Ran(ok && all_stored))
}

/// The heading printed before the runs of one transport.
fn heading(cfg: &DnsConfig, transport: DnsTransport) -> String {
    let addr = cfg.addr_for(transport).to_string();
    let to = if addr == cfg.resolver_name {
        addr
    } else {
        format!("{} ({addr})", cfg.resolver_name)
    };
    format!(
        "dns {transport} to {to}: {} {}, {} queries per flow, {}{}",
        cfg.question.name(),
        cfg.question.rtype(),
        cfg.count,
        count_of(cfg.flows as usize, "flow", "flows"),
        if cfg.new_connection && transport != DnsTransport::Udp {
            ", a new connection per query"
        } else {
            ""
        }
    )
}

/// The JSON document of a finished command.
pub fn document(cfg: &DnsConfig, results: Vec<DnsResult>) -> DnsDocument {
    DnsDocument {
        schema_version: SCHEMA_VERSION,
        command: "dns".into(),
        resolver: cfg.resolver_name.clone(),
        name: cfg.question.name(),
        record_type: cfg.question.rtype(),
        results,
    }
}

fn new_campaign(cfg: &DnsConfig) -> NewDnsCampaign {
    let list = |items: Vec<String>| items.join(",");
    NewDnsCampaign {
        started_at_unix_s: unix_now(),
        resolver: cfg.resolver_name.clone(),
        name: cfg.question.name(),
        record_type: cfg.question.rtype(),
        transports: list(
            cfg.transports
                .iter()
                .map(|t| t.name().to_string())
                .collect(),
        ),
        concurrency: list(cfg.concurrency.iter().map(u32::to_string).collect()),
        planned_results: (cfg.transports.len() * cfg.concurrency.len()) as u64,
        host_name: crate::transport::environment::detect().host_name,
        wirebench_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Every run, in order, each recorded as it finishes; the flag is false when one failed (its
/// error is printed) or the store broke (which ends the campaign there).
async fn run_all(
    cfg: &DnsConfig,
    recorder: &mut Option<Recorder<Dns>>,
) -> Result<(Vec<DnsResult>, bool)> {
    let tls = match (&cfg.dot_trust, cfg.transports.contains(&DnsTransport::Dot)) {
        (Some(trust), true) => Some(DotTls::new(trust, &cfg.dot_name)?),
        _ => None,
    };
    let mut results = Vec::new();
    let mut ok = true;
    for &transport in &cfg.transports {
        if !cfg.json {
            println!("{}", heading(cfg, transport));
        }
        for &k in &cfg.concurrency {
            let spec = DnsSpec {
                resolver: cfg.addr_for(transport),
                transport,
                question: cfg.question.clone(),
                count: cfg.count,
                flows: cfg.flows,
                concurrency: k,
                new_connection: cfg.new_connection,
                timeout: cfg.timeout,
                retries: cfg.retries,
                tls: (transport == DnsTransport::Dot)
                    .then(|| tls.clone())
                    .flatten(),
                tcp_fallback: cfg.resolver,
            };
            match run_dns(&spec).await {
                Ok(outcome) => {
                    let result = dns_result(cfg, transport, k, &outcome);
                    if !cfg.json {
                        let mut stdout = std::io::stdout().lock();
                        let _ = write!(stdout, "{}", out::block(&result));
                        let _ = stdout.flush();
                    }
                    if let Some(r) = recorder.as_mut() {
                        r.record(results.len() as u64 + 1, result.clone());
                    }
                    results.push(result);
                    if recorder.as_ref().is_some_and(|r| r.broken().is_some()) {
                        return Ok((results, false));
                    }
                }
                Err(e) => {
                    eprintln!("error: dns over {transport} with concurrency {k}: {e:#}");
                    ok = false;
                }
            }
        }
    }
    Ok((results, ok))
}
