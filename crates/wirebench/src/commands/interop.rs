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
    let now = super::recording::unix_now();
    let (campaign, point, run) = crate::flows::iperf3::record::records(&cfg, &outcome, now);
    let text = if cfg.json {
        let doc = if output.iperf3_shape {
            // iperf3's own -J document, rendered from the record this test is stored as; it
            // carries the title itself.
            let ctx = crate::output::iperf3_json::Context {
                params: &campaign.parameters,
                version: env!("CARGO_PKG_VERSION"),
                started_unix_s: now,
                title: output.title.as_deref(),
                interval_s: 0.0,
                tos: cfg.options.tos.unwrap_or(0),
            };
            crate::output::iperf3_json::document(&ctx, &run)
        } else {
            let mut doc =
                serde_json::to_value(crate::flows::iperf3::report::document(&cfg, &outcome))
                    .context("while writing JSON")?;
            if let (Some(title), serde_json::Value::Object(m)) = (&output.title, &mut doc) {
                m.insert("title".into(), title.clone().into());
            }
            doc
        };
        serde_json::to_string_pretty(&doc).context("while writing JSON")? + "\n"
    } else {
        crate::flows::iperf3::report::text(&cfg, &outcome)
    };
    print(&text)?;
    if let StoreTarget::File(path) = store {
        let stored = store_iperf3(&path, cfg.json, campaign, point, run)
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

/// Stores one iperf3 test (its `campaign`, `point` and `run`) as a one-run campaign, through
/// the same recording as `run` (a busy store waited for, a run it cannot take kept in a spool
/// file); whether it is in the store. With `json`, the stored line goes to stderr.
fn store_iperf3(
    path: &crate::store::Location,
    json: bool,
    campaign: wirebench_core::record::NewCampaign,
    point: wirebench_core::vocab::sweep::Point,
    run: wirebench_core::record::RunRecord,
) -> Result<bool> {
    use wirebench_core::record::lifecycle::StoredRun;
    let store = super::recording::open(path)?;
    let mut recorder =
        super::recording::Recorder::<crate::store::run::Run>::begin(store, campaign)?;
    let run = StoredRun::Finished {
        point,
        run: Box::new(run),
    };
    recorder.record(1, run);
    Ok(recorder.finish(
        crate::store::recording::Ending::complete(),
        json,
        |f, db| {
            format!(
                "stored as campaign {} (1 run, {}) in {}",
                f.id,
                f.status.as_str(),
                db.display()
            )
        },
    ))
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
