//! The relay as `run --impair` uses it: started in-process on loopback in front of the server,
//! with the counts of each run taken as the difference of two snapshots; must not print.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::{Context, Result};
use wirebench_core::machine::impair::Impairments;
use wirebench_core::record::RelayCounts;

use super::running::{Relay, RelayConfig};

/// A relay between `run`'s client and its server, and what it did per measured run.
#[derive(Debug)]
pub struct RunRelay {
    relay: Relay,
    description: String,
    last: RelayCounts,
    /// The counts of each measured run, in run order.
    pub per_run: Vec<RelayCounts>,
}

impl RunRelay {
    /// Starts a relay on the loopback address of `upstream`'s family.
    pub async fn start(impairments: Impairments, seed: u64, upstream: SocketAddr) -> Result<Self> {
        let ip = if upstream.is_ipv6() {
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        } else {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        };
        let relay = Relay::start(RelayConfig {
            listen: SocketAddr::new(ip, 0),
            upstream,
            impairments,
            seed,
            tcp: true,
            udp: true,
            max_held: super::hold::MAX_HELD_BYTES,
        })
        .await
        .context("while starting the impairment relay")?;
        let description = format!(
            "via impairment relay {} ({impairments}, seed {seed})",
            relay.local_addr()
        );
        Ok(RunRelay {
            relay,
            description,
            last: RelayCounts::default(),
            per_run: Vec::new(),
        })
    }

    /// Where the client sends everything.
    pub fn addr(&self) -> SocketAddr {
        self.relay.local_addr()
    }

    /// `via impairment relay ADDR (settings, seed S)`.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Forgets what happened so far (warm-up runs are not attributed to the next run).
    pub fn skip(&mut self) {
        self.last = self.relay.counts();
    }

    /// The counts since the previous run ended; recorded for this run.
    pub fn finish_run(&mut self) -> RelayCounts {
        let now = self.relay.counts();
        let delta = now.since(&self.last);
        self.last = now;
        self.per_run.push(delta);
        delta
    }

    /// Adds each run's counts as `relay` to the runs of a `run --json` document.
    pub fn annotate(&self, doc: &mut serde_json::Value) {
        if let Some(runs) = doc.get_mut("runs").and_then(|r| r.as_array_mut()) {
            for (run, counts) in runs.iter_mut().zip(&self.per_run) {
                if let (Some(obj), Ok(v)) = (run.as_object_mut(), serde_json::to_value(counts)) {
                    obj.insert("relay".to_string(), v);
                }
            }
        }
    }
}
