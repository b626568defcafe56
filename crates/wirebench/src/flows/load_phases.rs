//! `wirebench latency`'s flow: one stamped probe flow (UDP by default) through an idle phase,
//! an upload, a download and both at once, each loaded phase made of `streams` timed sessions
//! per direction against the server. Owns the phases' loads and the hand-over of their
//! measurements; the probes are `latency_probe`'s, the arithmetic core's `load_phases`.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Result;
use tokio::task::JoinSet;
use wirebench_core::record::load_phases::{
    LoadPhase, LoadPhasesPlan, LoadPhasesResult, PhaseMeasured,
};
use wirebench_core::record::session_headline;
use wirebench_core::record::ServerRecord;
use wirebench_core::security::auth::Psk;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::proto::{DataPathOptions, SessionParams, UNBOUNDED_TOTAL};

use crate::flows::client::SessionRequest;
use crate::flows::latency_probe::{ProbeFlows, ProbeKind, ProbePlan};

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadPhasesSpec {
    /// The phases, in order.
    pub phases: Vec<LoadPhase>,
    /// Probes, load and timing.
    pub plan: LoadPhasesPlan,
    /// Prove to the server that we hold this key.
    pub psk: Option<Psk>,
}

/// What one phase's load did: each direction's goodput, or why it failed.
#[derive(Debug, Default)]
struct PhaseLoad {
    upload_bps: Option<f64>,
    download_bps: Option<f64>,
    error: Option<String>,
}

/// Runs the experiment against `server`.
pub async fn run_load_phases(
    server: SocketAddr,
    spec: &LoadPhasesSpec,
) -> Result<LoadPhasesResult> {
    let plan = &spec.plan;
    let probe_plan = ProbePlan {
        kinds: vec![ProbeKind::Proto(plan.probe)],
        interval: Duration::from_nanos(plan.interval_ns),
        idle_probes: 0,
        timeout: Duration::from_nanos(plan.timeout_ns),
    };
    let probes = ProbeFlows::open(server, &probe_plan, plan.load, spec.psk.as_ref()).await?;
    let loads: Vec<Pin<Box<dyn Future<Output = PhaseLoad> + Send>>> = spec
        .phases
        .iter()
        .map(|&phase| {
            Box::pin(phase_load(server, phase, spec.clone()))
                as Pin<Box<dyn Future<Output = PhaseLoad> + Send>>
        })
        .collect();
    let phased = probes.through(loads).await;
    let claim = phased.flows.first().and_then(|(_, claim)| *claim);
    let measured: Vec<(LoadPhase, PhaseMeasured)> = spec
        .phases
        .iter()
        .zip(phased.phases)
        .map(|(&phase, (load, start, mut samples))| {
            let mut probes = samples.drain(..).next().unwrap_or_default();
            // The series runs on the experiment's clock, not the phase's.
            for s in &mut probes.answered {
                s.t_ns = s.t_ns.saturating_add(duration_ns(start));
            }
            let measured = PhaseMeasured {
                probes,
                upload_bps: load.upload_bps,
                download_bps: load.download_bps,
                load_error: load.error,
            };
            (phase, measured)
        })
        .collect();
    Ok(LoadPhasesResult::of(plan.clone(), &measured, claim))
}

/// One phase's load: nothing for the phase's time when idle; else `streams` timed sessions per
/// loaded direction at once, their goodputs summed per direction.
async fn phase_load(server: SocketAddr, phase: LoadPhase, spec: LoadPhasesSpec) -> PhaseLoad {
    let plan = &spec.plan;
    let phase_time = Duration::from_nanos(plan.phase_ns);
    if phase == LoadPhase::Idle {
        tokio::time::sleep(phase_time).await;
        return PhaseLoad::default();
    }
    let mut sessions = JoinSet::new();
    let directions = [(phase.uploads(), false), (phase.downloads(), true)];
    for (_, reverse) in directions.into_iter().filter(|(on, _)| *on) {
        let params = SessionParams {
            protocol: plan.load,
            mechanism: Mechanism::Stream,
            msg_size: plan.msg_size,
            total_bytes: UNBOUNDED_TOTAL,
            rto_us: None,
            rate_bps: None,
            grace_us: 0,
            options: DataPathOptions::default(),
            interval_us: None,
            reverse,
            duration_us: Some(plan.phase_ns / 1_000),
            omit_us: None,
        };
        for _ in 0..plan.streams.max(1) {
            let mut request = SessionRequest::new(server, &params).psk(spec.psk.as_ref());
            request.sole = false;
            sessions.spawn(async move { (reverse, request.run().await) });
        }
    }
    let mut load = PhaseLoad::default();
    while let Some(joined) = sessions.join_next().await {
        match joined {
            Ok((reverse, Ok(outcome))) => {
                let headline = session_headline(
                    (plan.load, Mechanism::Stream),
                    reverse,
                    &outcome.client.record(),
                    &ServerRecord::of(&outcome.server),
                );
                let slot = if reverse {
                    &mut load.download_bps
                } else {
                    &mut load.upload_bps
                };
                *slot = Some(slot.unwrap_or(0.0) + headline.goodput_bps.unwrap_or(0.0));
            }
            Ok((_, Err(e))) => {
                load.error.get_or_insert(format!("{e:#}"));
            }
            Err(e) => {
                load.error
                    .get_or_insert(format!("a load session failed: {e}"));
            }
        }
    }
    load
}
