//! `wirebench exporter`: serves `/probe` and `/metrics` (see the `exporter` module) until
//! SIGINT/SIGTERM, with the pages rendered by `output::metrics`; refused and failed probes are
//! logged on stderr, one line each.

use std::io::Write;

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, SignalKind};

use crate::config::exporter::ExporterConfig;
use crate::exporter::{Exporter, Pages};
use crate::http;
use crate::output::metrics;

/// The renderers and log of the exporter's pages.
pub const PAGES: Pages = Pages {
    probe: metrics::probe_page,
    own: metrics::exporter_page,
    content_type: metrics::CONTENT_TYPE,
    log: log_line,
};

/// Runs the exporter command.
pub async fn execute(cfg: ExporterConfig) -> Result<()> {
    let listener = http::bind(cfg.listen).await?;
    let local = listener
        .local_addr()
        .context("while reading the exporter's address")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch for SIGINT")?;
    let mut terminate = signal(SignalKind::terminate()).context("cannot watch for SIGTERM")?;
    log_line(&format!(
        "wirebench exporter listening on http://{local} (/probe, /metrics)"
    ));
    let exporter = Exporter::new(cfg, PAGES);
    tokio::select! {
        () = exporter.serve(listener) => {}
        _ = interrupt.recv() => log_line("wirebench exporter: interrupted, stopping"),
        _ = terminate.recv() => log_line("wirebench exporter: terminated, stopping"),
    }
    Ok(())
}

/// Writes one line to stderr; never panics when stderr is gone.
pub fn log_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
