//! The ramp of a responsiveness test: one more load flow per interval until goodput and then
//! responsiveness are stable (the draft's decisions, time handed in).

use super::aggregation::{is_stable, moving_average_goodput_bps, trimmed_mean};
use super::figures::{rpm, Components, Confidence, RpmFigures};
use super::parameters::Parameters;

/// The probes that completed in one interval, milliseconds each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalProbes {
    /// tcp_f samples.
    pub foreign_tcp_ms: Vec<f64>,
    /// tls_f samples (empty without TLS).
    pub foreign_tls_ms: Vec<f64>,
    /// http_f samples.
    pub foreign_request_ms: Vec<f64>,
    /// http_l samples.
    pub self_request_ms: Vec<f64>,
}

/// What the test should do after an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Open one more load-generating flow.
    pub add_flow: bool,
    /// Goodput was declared saturated at this interval.
    pub goodput_saturated_now: bool,
    /// Responsiveness is stable: the test is done.
    pub done: bool,
}

/// The test's decisions over intervals: one more flow per interval up to MNP, the goodput
/// stability test, then the responsiveness stability test; time enters as interval ends.
#[derive(Debug, Clone)]
pub struct RampMachine {
    params: Parameters,
    flows: u32,
    bytes: Vec<u64>,
    goodput_ma: Vec<f64>,
    goodput_saturated_at: Option<usize>,
    probes: Vec<IntervalProbes>,
    responsiveness: Vec<f64>,
    /// Responsiveness values computed since goodput saturation (the stage's intervals).
    responsiveness_stage: Vec<f64>,
    stable: bool,
}

impl RampMachine {
    /// A test starting with INP = 1 flow.
    pub fn new(params: Parameters) -> RampMachine {
        RampMachine {
            params,
            flows: 1,
            bytes: Vec::new(),
            goodput_ma: Vec::new(),
            goodput_saturated_at: None,
            probes: Vec::new(),
            responsiveness: Vec::new(),
            responsiveness_stage: Vec::new(),
            stable: false,
        }
    }

    /// Flows the test has asked for so far.
    pub fn flows(&self) -> u32 {
        self.flows
    }

    /// Records that a flow asked for could not be opened (the server refused it): the ramp
    /// stays at `open` flows and stops growing.
    pub fn flows_capped(&mut self, open: u32) {
        self.flows = open.max(1);
        self.params.max_flows = self.flows;
    }

    /// One interval has ended: `bytes` of goodput moved in it (all flows, both directions),
    /// and these probes completed in it.
    pub fn handle_interval(&mut self, bytes: u64, probes: IntervalProbes) -> Step {
        let mad = self.params.moving_average_distance as usize;
        self.bytes.push(bytes);
        self.probes.push(probes);
        let mut step = Step {
            add_flow: false,
            goodput_saturated_now: false,
            done: false,
        };
        if let Some(ma) = moving_average_goodput_bps(&self.bytes, mad, self.params.interval_ns) {
            self.goodput_ma.push(ma);
        }
        let current = self.current_figures().map(|f| f.rpm);
        self.responsiveness.push(current.unwrap_or(f64::NAN));
        if self.goodput_saturated_at.is_none() {
            if is_stable(&self.goodput_ma, mad, self.params.stddev_tolerance_percent) {
                self.goodput_saturated_at = Some(self.bytes.len() - 1);
                step.goodput_saturated_now = true;
            }
        } else if !self.stable {
            self.responsiveness_stage.push(current.unwrap_or(f64::NAN));
            let values = &self.responsiveness_stage;
            if is_stable(values, mad, self.params.stddev_tolerance_percent) {
                self.stable = true;
                step.done = true;
            }
        }
        if !step.done && self.flows < self.params.max_flows {
            self.flows += 1;
            step.add_flow = true;
        }
        step
    }

    /// The trimmed-mean components over the probes of the last MAD intervals.
    pub fn current_components(&self) -> Option<Components> {
        let mad = self.params.moving_average_distance as usize;
        let window = &self.probes[self.probes.len().saturating_sub(mad)..];
        let gather = |f: fn(&IntervalProbes) -> &Vec<f64>| -> Vec<f64> {
            window.iter().flat_map(|p| f(p).iter().copied()).collect()
        };
        let tmp = self.params.trimmed_mean_percent;
        let tls = gather(|p| &p.foreign_tls_ms);
        Some(Components {
            foreign_tcp_ms: trimmed_mean(&gather(|p| &p.foreign_tcp_ms), tmp)?,
            foreign_tls_ms: trimmed_mean(&tls, tmp),
            foreign_request_ms: trimmed_mean(&gather(|p| &p.foreign_request_ms), tmp)?,
            self_request_ms: trimmed_mean(&gather(|p| &p.self_request_ms), tmp)?,
        })
    }

    /// RPM over the probes of the last MAD intervals.
    pub fn current_figures(&self) -> Option<RpmFigures> {
        rpm(&self.current_components()?)
    }

    /// The moving-average goodput after each interval (from the MAD-th on), bit/s.
    pub fn goodput_moving_averages_bps(&self) -> &[f64] {
        &self.goodput_ma
    }

    /// RPM after each interval (NaN where probes were missing).
    pub fn responsiveness_series(&self) -> &[f64] {
        &self.responsiveness
    }

    /// Whether goodput was declared saturated.
    pub fn goodput_saturated(&self) -> bool {
        self.goodput_saturated_at.is_some()
    }

    /// Whether responsiveness became stable.
    pub fn responsiveness_stable(&self) -> bool {
        self.stable
    }

    /// Confidence in the goodput figure: how many moving averages the goodput stage computed.
    pub fn goodput_confidence(&self) -> Confidence {
        let mad = self.params.moving_average_distance as usize;
        let stage = match self.goodput_saturated_at {
            Some(at) => at + 1,
            None => self.bytes.len(),
        };
        // A moving average needs MAD intervals; the stage's count is of its moving averages.
        Confidence::of(
            stage.saturating_sub(mad.saturating_sub(1)),
            mad,
            self.goodput_saturated(),
        )
    }

    /// Confidence in the RPM figure: how many intervals the responsiveness stage ran.
    pub fn responsiveness_confidence(&self) -> Confidence {
        let mad = self.params.moving_average_distance as usize;
        Confidence::of(self.responsiveness_stage.len(), mad, self.stable)
    }
}
