//! The plan of a `run` campaign as a value, built once by `config`: every run in the order it
//! runs (message size × total points outer, then combinations, then repeats; a point's warm-ups
//! before its measured runs), each with its position, point, combination, repeat and the
//! session plan it asks of the server. The runner iterates it; what reports on a run finds it by
//! its position.

use std::sync::Arc;

use wirebench_core::record::AbortedRun;
use wirebench_core::vocab::plan::Combination;
use wirebench_core::vocab::sweep::Point;
use wirebench_core::wire::proto::SessionParams;

/// Every run of a campaign, in the order it runs.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The runs, warm-ups included.
    runs: Vec<PlannedRun>,
    /// The index in `runs` of each measured run, in position order.
    measured: Vec<usize>,
}

/// One run of the plan.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// 1-based position among the plan's measured runs (0 for a warm-up, which has none).
    pub position: usize,
    /// An unmeasured warm-up run (never stored, no probes beside it).
    pub warmup: bool,
    /// Which message size × total point of the plan (0-based).
    pub point_index: usize,
    /// Its message size and total.
    pub point: Point,
    /// Its protocol and mechanism.
    pub combination: Combination,
    /// 0-based repeat index within its combination (among the warm-ups, for a warm-up).
    pub repeat_index: u32,
    /// How many repeats its combination has at this point (warm-ups or measured runs).
    pub repeats: u32,
    /// What it asks of the server, shared by every repeat of its combination and point.
    pub session: Arc<SessionPlan>,
}

/// What every run of one combination at one point asks of the server: the run's session
/// parameters, and each flow's (the total split across `-P` flows by whole messages, so they
/// add up exactly; `--bidir`'s server → client flows reversed).
#[derive(Debug, Clone)]
pub struct SessionPlan {
    /// The run's parameters (every flow together).
    pub params: SessionParams,
    /// Each flow's, in the run's direction.
    pub flows: Vec<SessionParams>,
    /// `--bidir`: each server → client flow's; empty otherwise.
    pub back: Vec<SessionParams>,
    /// The messages of its total (every flow together, one direction): the round trips of a
    /// stop-and-wait run; an upper bound for a timed (`-t`) one.
    pub messages: u64,
}

impl Plan {
    /// The plan of `runs`, in the order they run.
    pub fn new(runs: Vec<PlannedRun>) -> Plan {
        let measured = runs
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.warmup)
            .map(|(i, _)| i)
            .collect();
        Plan { runs, measured }
    }

    /// Every run, warm-ups included, in the order they run.
    pub fn runs(&self) -> &[PlannedRun] {
        &self.runs
    }

    /// How many measured runs the plan holds.
    pub fn measured(&self) -> usize {
        self.measured.len()
    }

    /// The measured run at 1-based `position`; `None` past the end of the plan.
    pub fn at(&self, position: usize) -> Option<&PlannedRun> {
        let index = *self.measured.get(position.checked_sub(1)?)?;
        self.runs.get(index)
    }
}

impl PlannedRun {
    /// The run as the client knows it before any figure (the run in flight when a run is cut
    /// short).
    pub fn aborted(&self) -> AbortedRun {
        AbortedRun {
            position: self.position as u64,
            repeat_index: self.repeat_index,
            params: self.session.params.clone(),
        }
    }
}
