//! The interoperability commands: `run --iperf3` and `run --perf-server` (one test each, printed
//! as text or JSON), and starting the iperf3 listener of `server --iperf3`. Owns printing those
//! results; must not speak the protocols itself (`iperf3`, `perf` do).

use std::io::Write;
use std::net::SocketAddr;

use anyhow::{Context, Result};

use crate::config::StoreTarget;
use crate::flows::iperf3::client::ClientConfig;
use crate::flows::iperf3::server::Iperf3Server;
use crate::flows::perf::client::PerfConfig;
use crate::store::recording::Ending;
use wirebench_core::record::campaign::SoFar;
use wirebench_core::record::lifecycle::StoredRun;
use wirebench_core::record::plausibility::check_iperf3_results;
use wirebench_core::record::{AbortedRun, NewCampaign};
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::sweep::Point;
use wirebench_core::wire::proto::SessionParams;

/// Runs one test against an iperf3 server, prints both views and stores the run.
pub async fn run_iperf3(
    cfg: ClientConfig,
    store: StoreTarget,
    output: crate::config::RunOutput,
) -> Result<()> {
    for note in &cfg.notes {
        eprintln!("note: {note}");
    }
    let outcome = crate::flows::iperf3::client::run(&cfg)
        .await
        .with_context(|| format!("iperf3 test with {} failed", cfg.name))?;
    // The records this test is stored as, read from one clock: the -J --iperf3-shape document
    // is rendered from them, so its start is the stored campaign's.
    let now = super::recorder::unix_now();
    let (campaign, point, run) = crate::flows::iperf3::record::records(&cfg, &outcome, now);
    // The server's figures are believed only where they can be true: otherwise the test is
    // stored as a failed campaign with its one run aborted and the reason, nothing of the
    // server's is printed as a result, and the command fails.
    if let Err(issue) =
        check_iperf3_results(&outcome.our_results, &outcome.server, !cfg.reverse, cfg.udp)
    {
        let reason = format!("iperf3 server {}: {issue}", cfg.name);
        if let StoreTarget::File(path) = &store {
            let aborted = aborted_iperf3_run(&cfg, &outcome, point, &campaign, &reason);
            let failed = Ending::Ran {
                failed: true,
                why: Some(reason.clone()),
            };
            store_iperf3(path, cfg.json, campaign, aborted, failed)
                .with_context(|| format!("cannot store the iperf3 test in {}", path.display()))?;
        }
        anyhow::bail!("{reason}");
    }
    let text = if cfg.json {
        let doc = if output.iperf3_shape {
            // iperf3's own -J document, rendered from the record this test is stored as; it
            // carries the title itself.
            let ctx = crate::output::iperf3_json::Context {
                params: &campaign.parameters,
                version: env!("CARGO_PKG_VERSION"),
                started_unix_ms: now.saturating_mul(1000),
                title: output.title.as_deref(),
                interval_s: cfg.interval.map_or(0.0, |d| d.as_secs_f64()),
                tos: cfg.options.tos.unwrap_or(0),
            };
            crate::output::iperf3_json::document(&ctx, &run)
        } else {
            let mut doc =
                serde_json::to_value(crate::flows::iperf3::record::test_record(&cfg, &outcome))
                    .context("while writing JSON")?;
            if let (Some(title), serde_json::Value::Object(m)) = (&output.title, &mut doc) {
                m.insert("title".into(), title.clone().into());
            }
            doc
        };
        serde_json::to_string_pretty(&doc).context("while writing JSON")? + "\n"
    } else {
        crate::output::iperf3_test::text(&crate::flows::iperf3::record::test_record(&cfg, &outcome))
    };
    print(&text)?;
    if let StoreTarget::File(path) = store {
        let finished = StoredRun::Finished {
            point,
            run: Box::new(run),
        };
        let stored = store_iperf3(&path, cfg.json, campaign, finished, Ending::complete())
            .with_context(|| format!("cannot store the iperf3 test in {}", path.display()))?;
        if !stored {
            anyhow::bail!(
                "the iperf3 test is not in {} (it is kept, as said above)",
                path.display()
            );
        }
    }
    Ok(())
}

/// Stores one iperf3 test (its `campaign` and its one `run`, finished or aborted) as a
/// one-run campaign that ended as `ending` says, through the same recording
/// as `run` (a busy store waited for, a run it cannot take kept in a spool file); whether it
/// is in the store. With `json`, the stored line goes to stderr.
fn store_iperf3(
    path: &crate::store::Location,
    json: bool,
    campaign: NewCampaign,
    run: StoredRun,
    ending: Ending,
) -> Result<bool> {
    let store = super::recorder::open(path)?;
    let mut recorder = super::recorder::Recorder::<crate::store::run::Run>::begin(store, campaign)?;
    recorder.record(1, run);
    Ok(recorder.finish(ending, json, |f, db| {
        format!(
            "stored as campaign {} (1 run, {}) in {}",
            f.id,
            f.status.as_str(),
            db.display()
        )
    }))
}

/// The one run of a test whose server's results were not believed: aborted with `reason`, with
/// what this client itself counted so far (sent, or read with `-R`).
fn aborted_iperf3_run(
    cfg: &ClientConfig,
    outcome: &crate::flows::iperf3::client::ClientOutcome,
    point: Point,
    campaign: &NewCampaign,
    reason: &str,
) -> StoredRun {
    let p = &campaign.parameters;
    let params = SessionParams {
        duration_us: p.duration_us,
        omit_us: None,
        protocol: p.protocols.first().copied().unwrap_or(Protocol::Tcp),
        mechanism: Mechanism::Stream,
        msg_size: point.msg_size,
        total_bytes: point.total_bytes,
        rto_us: None,
        rate_bps: p.rate_bps,
        grace_us: 0,
        options: Default::default(),
        interval_us: None,
        reverse: cfg.reverse,
    };
    let bytes = outcome.our_bytes();
    let messages = params.whole_messages(bytes);
    StoredRun::Aborted {
        run: Box::new(AbortedRun {
            position: 1,
            repeat_index: 0,
            params,
        }),
        reason: Some(reason.to_string()),
        so_far: Some(SoFar {
            bytes,
            messages,
            elapsed: std::time::Duration::from_secs_f64(outcome.our_seconds().max(0.0)),
        }),
    }
}

/// Runs the QUIC perf transfers and prints them.
pub async fn run_perf(cfg: PerfConfig) -> Result<()> {
    let doc = crate::flows::perf::client::run(&cfg)
        .await
        .with_context(|| format!("QUIC perf test with {} failed", cfg.name))?;
    let text = if cfg.json {
        serde_json::to_string_pretty(&doc).context("while writing JSON")? + "\n"
    } else {
        crate::flows::perf::client::text(&doc)
    };
    print(&text)
}

/// Binds the iperf3 listener and serves it in the background, every test through `gate` (the
/// server's), until the handle is dropped.
pub async fn spawn_iperf3_listener(
    addr: SocketAddr,
    gate: std::sync::Arc<crate::flows::server::gate::Gate>,
) -> Result<AbortOnDrop> {
    let server = Iperf3Server::bind(addr).await?;
    eprintln!(
        "wirebench server: iperf3 listener on {} (TCP and UDP, one port)",
        server.local_addr()
    );
    Ok(AbortOnDrop(tokio::spawn(async move {
        let _ = server.run(gate).await;
    })))
}

/// Stops a background task when dropped.
#[derive(Debug)]
pub struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Writes to stdout; a closed stdout (a pipe to `head`) is not an error.
fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::from(e).context("while writing to stdout"))
        }
        _ => Ok(()),
    }
}
