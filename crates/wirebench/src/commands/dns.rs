//! `wirebench dns`: runs every transport × concurrency against the resolver in order, prints
//! each run as it finishes (text) or one JSON document at the end, then the sweep table.

use std::io::Write;

use anyhow::{Context, Result};
use wirebench_core::dns::DnsTransport;

use crate::config::dns::DnsConfig;
use crate::dns::{run_dns, DnsSpec, DotTls};
use crate::output::dns::{self as out, DnsDocument, DnsResult};

/// Runs the probe; `Ok(false)` means a run failed (exit status 1), after running the others.
pub async fn execute(cfg: DnsConfig) -> Result<bool> {
    let results = run_all(&cfg).await?;
    let ok = results.1;
    if cfg.json {
        let doc = document(&cfg, results.0);
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &doc).context("while writing the JSON")?;
        let _ = writeln!(stdout);
    } else if cfg.concurrency.len() > 1 || cfg.transports.len() > 1 {
        let mut stdout = std::io::stdout().lock();
        let _ = write!(stdout, "{}", out::sweep_table(&results.0));
    }
    Ok(ok)
}

/// The JSON document of a finished command.
pub fn document(cfg: &DnsConfig, results: Vec<DnsResult>) -> DnsDocument {
    DnsDocument {
        schema_version: out::SCHEMA_VERSION,
        command: "dns".into(),
        resolver: cfg.resolver_name.clone(),
        name: cfg.question.name(),
        record_type: cfg.question.rtype(),
        results,
    }
}

/// Every run, in order; the flag is false when one failed (its error is printed).
async fn run_all(cfg: &DnsConfig) -> Result<(Vec<DnsResult>, bool)> {
    let tls = match (&cfg.dot_trust, cfg.transports.contains(&DnsTransport::Dot)) {
        (Some(trust), true) => Some(DotTls::new(trust, &cfg.dot_name)?),
        _ => None,
    };
    let mut results = Vec::new();
    let mut ok = true;
    for &transport in &cfg.transports {
        if !cfg.json {
            println!("{}", out::heading(cfg, transport));
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
                    let result = DnsResult::new(cfg, transport, k, &outcome);
                    if !cfg.json {
                        let mut stdout = std::io::stdout().lock();
                        let _ = write!(stdout, "{}", out::block(&result));
                        let _ = stdout.flush();
                    }
                    results.push(result);
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
