//! `wirebench ping` and `wirebench rr`: start the embedded server when no --server is given,
//! run every protocol × concurrency in order, print each run as it finishes (text) or one JSON
//! document at the end. Results are not stored in the results database.

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::sync::mpsc;
use wirebench_core::metrics::TransportStats;
use wirebench_core::plan::Protocol;
use wirebench_core::proto::RrParams;
use wirebench_core::record::rr::{RrDocument, RrResult, ServerRr, SCHEMA_VERSION};
use wirebench_core::record::{count_of, TransportRecord};

use crate::config::rr::{ExchangeKind, RrConfig};
use crate::output::rr as out;
use crate::rr_client::{run_rr_auth, RrOutcome, RrSpec};
use crate::runner::Target;
use crate::server::{Server, ServerOptions};
use crate::tls::ServerIdentity;

/// Runs ping or rr; `Ok(false)` means a run failed (exit status 1), after printing the others.
pub async fn execute(cfg: RrConfig) -> Result<bool> {
    let (server_addr, _embedded) = match &cfg.target {
        Target::Remote { addr, .. } => (*addr, None),
        Target::Embedded(ip) => {
            let server = Server::bind(
                SocketAddr::new(*ip, 0),
                ServerIdentity::self_signed()?,
                ServerOptions::default().with_psk(cfg.psk.clone()),
            )
            .await
            .context("while starting the embedded server")?;
            let addr = server.local_addr();
            // The embedded server's session lines are not printed: the client shows its report.
            let (tx, rx) = mpsc::unbounded_channel();
            let task = tokio::spawn(async move {
                let _keep = rx;
                server.run(tx).await
            });
            (addr, Some(AbortOnDrop(task)))
        }
    };
    let server_name = match &cfg.target {
        Target::Remote { name, addr } if *name == addr.to_string() => name.clone(),
        Target::Remote { name, addr } => format!("{name} ({addr})"),
        Target::Embedded(_) => format!("embedded {server_addr}"),
    };
    let mut results = Vec::new();
    let mut ok = true;
    for &protocol in &cfg.protocols {
        if !cfg.json {
            println!("{}", heading(&cfg, protocol, &server_name));
        }
        for &k in &cfg.concurrency {
            let spec = spec(&cfg, protocol, k);
            match run_rr_auth(server_addr, &spec, cfg.psk.as_deref()).await {
                Ok(outcome) => {
                    let result = rr_result(&cfg, protocol, k, &outcome);
                    if !cfg.json {
                        let text = match cfg.kind {
                            ExchangeKind::Ping => out::ping_block(&result),
                            ExchangeKind::Rr => out::rr_block(&result, cfg.concurrency.len() == 1),
                        };
                        let mut stdout = std::io::stdout().lock();
                        let _ = write!(stdout, "{text}");
                        let _ = stdout.flush();
                    }
                    results.push(result);
                }
                Err(e) => {
                    eprintln!("error: {protocol} with concurrency {k}: {e:#}");
                    ok = false;
                }
            }
        }
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
    Ok(ok)
}

/// The result record of one run of `cfg` over `protocol` with `concurrency`.
fn rr_result(cfg: &RrConfig, protocol: Protocol, concurrency: u32, out: &RrOutcome) -> RrResult {
    let c = &out.counts;
    let elapsed_ns = u64::try_from(out.elapsed.as_nanos()).unwrap_or(u64::MAX);
    let secs = out.elapsed.as_secs_f64();
    RrResult {
        protocol,
        request_bytes: cfg.request,
        response_bytes: cfg.response,
        flows: cfg.flows,
        concurrency,
        new_connection: cfg.new_connection,
        count_per_flow: cfg.count,
        duration_ns: cfg
            .duration
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        timeout_ns: u64::try_from(cfg.timeout.as_nanos()).unwrap_or(u64::MAX),
        retries_allowed: cfg.retries,
        sent: c.sent,
        answered: c.answered,
        lost: c.lost,
        late: c.late,
        retries: c.retries,
        duplicates: c.duplicates,
        send_errors: out.send_errors,
        loss_ratio: if c.sent == 0 {
            0.0
        } else {
            c.lost as f64 / c.sent as f64
        },
        elapsed_ns,
        requests_per_second: if secs > 0.0 {
            c.answered as f64 / secs
        } else {
            0.0
        },
        response: out.response,
        connect: out.connect,
        resumed: out.resumed,
        setup_requests: out.setup_requests,
        retrans_rate: out
            .transport
            .as_ref()
            .and_then(TransportStats::retrans_rate),
        transport: out.transport.as_ref().map(TransportRecord::of),
        server: ServerRr {
            answered: out.server.messages,
            request_bytes: out.server.bytes,
            read_calls: out.server.read_calls,
            retransmitted_requests: out.server.duplicates,
            aborted: out.server.aborted,
            abort_reason: out.server.abort_reason.clone(),
        },
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
            count_of(cfg.flows as usize, "flow", "flows"),
            if cfg.new_connection {
                ", a new connection per request"
            } else {
                ""
            }
        ),
    }
}

/// The session and stop rule of one protocol × concurrency run.
fn spec(cfg: &RrConfig, protocol: Protocol, concurrency: u32) -> RrSpec {
    RrSpec {
        params: RrParams {
            protocol,
            request: cfg.request,
            response: cfg.response,
            flows: cfg.flows,
            concurrency,
            new_connection: cfg.new_connection,
        },
        count: cfg.count,
        duration: cfg.duration,
        interval: cfg.interval,
        timeout: cfg.timeout,
        retries: cfg.retries,
        resumption_probe: cfg.kind == ExchangeKind::Ping && protocol == Protocol::Quic,
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<Result<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
