//! `wirebench relay`: runs the impairment relay until SIGINT (Ctrl-C), SIGTERM or SIGHUP,
//! printing its counts on SIGUSR1 and at exit (text, or one JSON object per line).

use std::io::Write;

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, SignalKind};

use crate::flows::relay::{Relay, RelayConfig};
use crate::output::relay::{counts_block, RelayLine, SCHEMA_VERSION};
use crate::transport::signals::Stops;

/// Runs the relay command.
pub async fn execute(cfg: RelayConfig, json: bool) -> Result<()> {
    let mut relay = Relay::start(cfg.clone())
        .await
        .context("while starting the relay")?;
    let mut notices = relay.notices();
    // Watch the signals before saying we listen: a signal sent right after that line must
    // stop the relay with its counts, not kill it.
    let mut usr1 = signal(SignalKind::user_defined1()).context("cannot watch for SIGUSR1")?;
    let mut stops = Stops::watch();
    eprintln!(
        "wirebench relay listening on {} ({}), forwarding to {} (seed {}); SIGUSR1 prints the counts",
        relay.local_addr(),
        match (cfg.tcp, cfg.udp) {
            (true, true) => "TCP and UDP",
            (true, false) => "TCP",
            _ => "UDP",
        },
        cfg.upstream,
        cfg.seed
    );
    if cfg.tcp && cfg.impairments.has_packet_only() {
        eprintln!(
            "note: loss, reorder and duplicate apply to UDP only; TCP is relayed as a byte stream \
             (delay, jitter and rate apply)"
        );
    }
    loop {
        tokio::select! {
            _ = usr1.recv() => print_counts(&relay, &cfg, "signal", json),
            Some(line) = next_notice(&mut notices) => eprintln!("{line}"),
            stop = stops.next() => {
                eprintln!("wirebench relay: {}, stopping", stop.name());
                break;
            }
        }
    }
    print_counts(&relay, &cfg, "exit", json);
    Ok(())
}

/// The relay's next notice (never, once they are taken or gone).
async fn next_notice(
    notices: &mut Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
) -> Option<String> {
    match notices {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Prints the counts on stdout.
fn print_counts(relay: &Relay, cfg: &RelayConfig, reason: &str, json: bool) {
    let counts = relay.counts();
    let text = if json {
        let line = RelayLine {
            schema_version: SCHEMA_VERSION,
            reason,
            listen: relay.local_addr().to_string(),
            upstream: cfg.upstream.to_string(),
            seed: cfg.seed,
            counts,
        };
        serde_json::to_string(&line).unwrap_or_default() + "\n"
    } else {
        format!(
            "relay counts ({reason}; up = client → server):\n{}",
            counts_block(&counts)
        )
    };
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
