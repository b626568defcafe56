//! Latency under load by direction (`wirebench latency`): probes through an idle phase, then
//! an upload, a download and both at once (as crusader's test), each phase's round trips and —
//! from one clock fit over every phase's stamped probes — each direction's delay, beside the
//! goodput each direction's load moved. The bufferbloat of each direction, separately. Owns the
//! record and its arithmetic; must not measure (the flow does) or render.

use serde::{Deserialize, Serialize};

use crate::record::lifecycle::{CampaignKind, SweepInfo, SweepPlan};
use crate::record::loaded_latency::{PhaseSamples, ProbePhase, ProbeSample};
use crate::record::one_way::{ClockFigures, ClockFit, OneWayDelay};
use crate::vocab::clock_offset::{ClockClaim, Exchange};
use crate::vocab::plan::Protocol;

/// A phase of the experiment: what loads the path while the probes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadPhase {
    /// No load: the path's own delays.
    Idle,
    /// The client sends.
    Upload,
    /// The server sends.
    Download,
    /// Both at once.
    Both,
}

impl LoadPhase {
    /// Every phase, in the order the experiment runs them.
    pub const ALL: [LoadPhase; 4] = [
        LoadPhase::Idle,
        LoadPhase::Upload,
        LoadPhase::Download,
        LoadPhase::Both,
    ];

    /// The name on the command line and in documents.
    pub fn name(self) -> &'static str {
        match self {
            LoadPhase::Idle => "idle",
            LoadPhase::Upload => "upload",
            LoadPhase::Download => "download",
            LoadPhase::Both => "both",
        }
    }

    /// The phase named `s` (`up` and `down` too).
    pub fn from_name(s: &str) -> Option<LoadPhase> {
        match s {
            "idle" => Some(LoadPhase::Idle),
            "upload" | "up" => Some(LoadPhase::Upload),
            "download" | "down" => Some(LoadPhase::Download),
            "both" => Some(LoadPhase::Both),
            _ => None,
        }
    }

    /// Whether the client sends in this phase.
    pub fn uploads(self) -> bool {
        matches!(self, LoadPhase::Upload | LoadPhase::Both)
    }

    /// Whether the server sends in this phase.
    pub fn downloads(self) -> bool {
        matches!(self, LoadPhase::Download | LoadPhase::Both)
    }
}

/// How the experiment was run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadPhasesPlan {
    /// The probes' transport (UDP: stamped, for one-way delays).
    pub probe: Protocol,
    /// The load's transport.
    pub load: Protocol,
    /// Load flows per loaded direction.
    pub streams: u32,
    /// Bytes per write of the load.
    pub msg_size: u32,
    /// How long each phase lasts (ns).
    pub phase_ns: u64,
    /// Spacing of the probes (ns).
    pub interval_ns: u64,
    /// A probe unanswered this long is lost (ns).
    pub timeout_ns: u64,
}

/// What is known about a stored `wirebench latency` campaign when it starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewLatencyCampaign {
    /// Start time, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// The server as named (or `embedded ADDR`).
    pub server: String,
    /// The phases, comma separated, in order (`idle,upload,download,both`).
    pub phases: String,
    /// How each test runs.
    pub plan: LoadPhasesPlan,
    /// Tests planned.
    pub planned_results: u64,
    /// The host it ran on.
    pub host_name: Option<String>,
    /// The wirebench that ran it.
    pub wirebench_version: String,
}

impl SweepPlan for NewLatencyCampaign {
    const KIND: CampaignKind = CampaignKind::Latency;
}

/// A stored latency campaign as one JSON document (`wirebench report --latency --format
/// json`): the campaign and each test as `wirebench latency --json` printed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyCampaignDocument {
    /// Version of this document's shape (1).
    pub schema_version: u32,
    /// The campaign.
    pub campaign: SweepInfo<NewLatencyCampaign>,
    /// Its tests, in run order.
    pub results: Vec<LoadPhasesResult>,
}

impl LatencyCampaignDocument {
    /// The document of `campaign` and its `results`.
    pub fn new(campaign: SweepInfo<NewLatencyCampaign>, results: Vec<LoadPhasesResult>) -> Self {
        LatencyCampaignDocument {
            schema_version: 1,
            campaign,
            results,
        }
    }
}

/// What one phase measured, as the flow hands it over.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseMeasured {
    /// The probes of the phase (their `t_ns` since the experiment began).
    pub probes: PhaseSamples,
    /// Goodput of the load client → server (bit/s); None without one.
    pub upload_bps: Option<f64>,
    /// Goodput of the load server → client (bit/s); None without one.
    pub download_bps: Option<f64>,
    /// Why the phase's load failed, if it did (the probes still count).
    pub load_error: Option<String>,
}

/// The experiment's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadPhasesResult {
    /// How it was run.
    pub plan: LoadPhasesPlan,
    /// The clock offset every one-way figure uses; absent without stamped probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockFigures>,
    /// Each phase, in the order run.
    pub phases: Vec<LoadPhaseRecord>,
}

/// One phase's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadPhaseRecord {
    /// Which phase.
    pub phase: LoadPhase,
    /// The probes' counts and round trips.
    pub probes: ProbePhase,
    /// Each direction's delay (stamped probes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<OneWayDelay>,
    /// Goodput of the upload load (bit/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_bps: Option<f64>,
    /// Goodput of the download load (bit/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_bps: Option<f64>,
    /// Why the phase's load failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
    /// Every answered probe, `t_ns` since the experiment began, with its one-way split.
    pub series: Vec<ProbeSample>,
}

impl LoadPhasesResult {
    /// The result from each phase's measurements; `clock` is what both hosts claim of their
    /// clocks when the probes were stamped (None: no one-way delays).
    pub fn of(
        plan: LoadPhasesPlan,
        phases: &[(LoadPhase, PhaseMeasured)],
        clock: Option<ClockClaim>,
    ) -> LoadPhasesResult {
        let timed = |p: &PhaseMeasured| -> Vec<Exchange> {
            p.probes.exchanges.iter().flatten().copied().collect()
        };
        let all: Vec<Exchange> = phases.iter().flat_map(|(_, p)| timed(p)).collect();
        let fit = clock.map(|claim| ClockFit::of(&all, claim));
        let records = phases
            .iter()
            .map(|(phase, m)| {
                let mut series = m.probes.answered.clone();
                if let Some(fit) = &fit {
                    for (sample, e) in series.iter_mut().zip(&m.probes.exchanges) {
                        if let Some((up, down, _)) = e.as_ref().and_then(|e| fit.split(e)) {
                            (sample.up_ns, sample.down_ns) = (Some(up), Some(down));
                        }
                    }
                }
                LoadPhaseRecord {
                    phase: *phase,
                    probes: ProbePhase::of(&m.probes),
                    one_way: fit.as_ref().map(|f| OneWayDelay::within(f, &timed(m))),
                    upload_bps: m.upload_bps,
                    download_bps: m.download_bps,
                    load_error: m.load_error.clone(),
                    series,
                }
            })
            .collect();
        LoadPhasesResult {
            plan,
            clock: fit
                .as_ref()
                .and_then(|f| OneWayDelay::within(f, &all).clock),
            phases: records,
        }
    }

    /// The phase's record, if it ran.
    pub fn phase(&self, phase: LoadPhase) -> Option<&LoadPhaseRecord> {
        self.phases.iter().find(|p| p.phase == phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` stamped probes 20 ms apart from `start_ns` on one clock, `up` and `down` ns each way.
    fn probes(start_ns: i64, n: i64, up: i64, down: i64) -> PhaseSamples {
        let mut p = PhaseSamples::default();
        for i in 0..n {
            let t = start_ns + i * 20_000_000;
            let sent = 1_800_000_000_000_000_000 + t;
            p.answered.push(ProbeSample {
                t_ns: t as u64,
                rtt_ns: (up + down) as u64,
                up_ns: None,
                down_ns: None,
            });
            p.exchanges.push(Some(Exchange {
                client_sent: sent,
                server_received: sent + up,
                server_sent: sent + up,
                client_received: sent + up + down,
            }));
        }
        p
    }

    fn plan() -> LoadPhasesPlan {
        LoadPhasesPlan {
            probe: Protocol::Udp,
            load: Protocol::Tcp,
            streams: 1,
            msg_size: 131_072,
            phase_ns: 1_000_000_000,
            interval_ns: 20_000_000,
            timeout_ns: 2_000_000_000,
        }
    }

    #[test]
    fn each_phase_shows_the_queue_of_the_direction_it_loads() {
        let ms = 1_000_000;
        let measured = |start, up, down, bps: (Option<f64>, Option<f64>)| PhaseMeasured {
            probes: probes(start, 50, up, down),
            upload_bps: bps.0,
            download_bps: bps.1,
            load_error: None,
        };
        let phases = [
            (LoadPhase::Idle, measured(0, ms, ms, (None, None))),
            (
                LoadPhase::Upload,
                measured(1_000 * ms, 40 * ms, ms, (Some(2e7), None)),
            ),
            (
                LoadPhase::Download,
                measured(2_000 * ms, ms, 60 * ms, (None, Some(5e7))),
            ),
            (
                LoadPhase::Both,
                measured(3_000 * ms, 40 * ms, 60 * ms, (Some(2e7), Some(5e7))),
            ),
        ];
        let r = LoadPhasesResult::of(
            plan(),
            &phases,
            Some(ClockClaim::SameClock { error_ns: 50 }),
        );
        let p50 = |phase, up: bool| {
            let w = r.phase(phase).unwrap().one_way.as_ref().unwrap();
            let d = if up { w.up } else { w.down };
            d.unwrap().p50_ns
        };
        let near = |a: i64, b: i64| (a - b).abs() <= 50;
        assert!(near(p50(LoadPhase::Idle, true), ms) && near(p50(LoadPhase::Idle, false), ms));
        assert!(near(p50(LoadPhase::Upload, true), 40 * ms));
        assert!(near(p50(LoadPhase::Upload, false), ms));
        assert!(near(p50(LoadPhase::Download, false), 60 * ms));
        assert!(near(p50(LoadPhase::Both, true), 40 * ms));
        assert_eq!(r.clock.as_ref().unwrap().offset_ns, 0);
        let upload = r.phase(LoadPhase::Upload).unwrap();
        assert_eq!(upload.upload_bps, Some(2e7));
        assert_eq!(upload.probes.answered, 50);
        assert!(upload
            .series
            .iter()
            .all(|s| s.up_ns.is_some_and(|u| near(u, 40 * ms))));
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<LoadPhasesResult>(&json).unwrap(), r);
    }

    #[test]
    fn phase_names_and_directions() {
        for p in LoadPhase::ALL {
            assert_eq!(LoadPhase::from_name(p.name()), Some(p));
        }
        assert_eq!(LoadPhase::from_name("up"), Some(LoadPhase::Upload));
        assert_eq!(LoadPhase::from_name("sideways"), None);
        assert!(LoadPhase::Both.uploads() && LoadPhase::Both.downloads());
        assert!(!LoadPhase::Idle.uploads() && !LoadPhase::Idle.downloads());
    }

    #[test]
    fn without_stamps_there_are_round_trips_only() {
        let phases = [(
            LoadPhase::Idle,
            PhaseMeasured {
                probes: probes(0, 5, 1_000, 1_000),
                ..PhaseMeasured::default()
            },
        )];
        let r = LoadPhasesResult::of(plan(), &phases, None);
        assert!(r.clock.is_none() && r.phases[0].one_way.is_none());
        assert_eq!(r.phases[0].probes.rtt.unwrap().p50_ns, 2_000);
    }
}
