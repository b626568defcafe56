//! `wirebench dns`: runs every transport × concurrency against the resolver in order, prints
//! each run as it finishes (text) or one JSON document at the end, then the sweep table; each
//! finished result is committed to the results store before the next starts; SIGINT (Ctrl-C),
//! SIGTERM or SIGHUP marks the campaign aborted.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::wire::dns::DnsTransport;

use crate::commands::run::unix_now;
use crate::config::dns::{dns_result, DnsConfig};
use crate::config::StoreTarget;
use crate::flows::dns::{run_dns, DnsSpec, DotTls};
use crate::output::dns as out;
use crate::report;
use crate::store::Store;
use crate::transport::signals::{Ended, Stops};
use wirebench_core::record::dns::{DnsDocument, DnsResult, NewDnsCampaign, SCHEMA_VERSION};
use wirebench_core::record::{count_of, Status};

/// Runs the probe: [`Ended::Ran`]`(false)` when a run failed (exit status 1), after running
/// the others; [`Ended::Stopped`] when a signal stopped it.
pub async fn execute(cfg: DnsConfig, store: StoreTarget) -> Result<Ended> {
    let mut stops = Stops::watch();
    let mut stored = match &store {
        StoreTarget::Off => None,
        StoreTarget::File(path) => {
            let mut db = Store::open(path)?;
            let id = db.begin_dns_campaign(&new_campaign(&cfg))?;
            Some((db, id))
        }
    };
    let finished = tokio::select! {
        r = run_all(&cfg, &mut stored) => Ok(r?),
        signal = stops.next() => Err(signal),
    };
    let (results, ok) = match finished {
        Ok(done) => done,
        Err(signal) => {
            stops.second_ends_process();
            // Every finished result is already stored; the campaign says it was cut short.
            let reason = signal.reason();
            match &mut stored {
                Some((db, id)) => {
                    db.finish_dns_campaign(*id, Status::Aborted, unix_now())?;
                    eprintln!(
                        "{reason}: DNS campaign {id} is stored as aborted, with the results that finished"
                    );
                }
                None => eprintln!("{reason}"),
            }
            return Ok(Ended::Stopped(signal));
        }
    };
    if let Some((db, id)) = &mut stored {
        let status = if ok { Status::Complete } else { Status::Failed };
        db.finish_dns_campaign(*id, status, unix_now())?;
        eprintln!(
            "stored as DNS campaign {id} in {} (chart: wirebench report --dns {id} --format html -o dns.html)",
            db.path().display()
        );
    }
    let mut stdout = std::io::stdout().lock();
    if cfg.json {
        let doc = document(&cfg, results);
        serde_json::to_writer_pretty(&mut stdout, &doc).context("while writing the JSON")?;
        let _ = writeln!(stdout);
    } else if cfg.concurrency.len() > 1 || cfg.transports.len() > 1 {
        let _ = write!(stdout, "{}", report::dns::sweep_table(&results));
    }
    Ok(Ended::Ran(ok))
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

/// Every run, in order, each stored as it finishes; the flag is false when one failed (its
/// error is printed).
async fn run_all(
    cfg: &DnsConfig,
    stored: &mut Option<(Store, i64)>,
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
                    results.push(result);
                    if let (Some((db, id)), Some(last)) = (stored.as_mut(), results.last()) {
                        db.add_dns_result(*id, results.len() as u64, last)?;
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
