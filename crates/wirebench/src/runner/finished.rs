//! One finished run as the flows measured it, and the result record it makes.

use wirebench_core::record::ratesearch::RateSearchRecord;
use wirebench_core::record::{DirectionRecord, EndedBy, FlowRecord, RunRecord, ServerRecord};
use wirebench_core::vocab::plan::Combination;
use wirebench_core::vocab::sweep::Point;
use wirebench_core::wire::proto::SessionParams;

use crate::flows::client::SessionOutcome;

/// One finished run, as the flows measured it; [`FinishedRun::record`] makes the result record.
#[derive(Debug, Clone)]
pub struct FinishedRun {
    /// Which combination it was.
    pub combination: Combination,
    /// 0-based repeat index within the combination.
    pub repeat_index: u32,
    /// What was asked of the server.
    pub params: SessionParams,
    /// Both sides' figures (with -P, summed over the flows).
    pub outcome: SessionOutcome,
    /// With -P N > 1, each flow's figures in flow order; empty for a single flow.
    pub flows: Vec<SessionOutcome>,
    /// `--latency-probe`: the probes' round trips before and during this run.
    pub latency: Option<wirebench_core::record::LoadedLatency>,
    /// `--bidir`: the server → client direction (summed, and its flows as `flows`); `outcome`
    /// and `flows` above are then the client → server one.
    pub back: Option<(SessionOutcome, Vec<SessionOutcome>)>,
    /// `--rate max`: the search that found the rate it ran at.
    pub rate_search: Option<RateSearchRecord>,
}

impl FinishedRun {
    /// The result record of this run.
    pub fn record(&self) -> RunRecord {
        let o = &self.outcome;
        RunRecord {
            protocol: self.combination.protocol,
            mechanism: self.combination.mechanism,
            repeat_index: self.repeat_index,
            session: o.session,
            client: o.client.record(),
            server: ServerRecord::of(&o.server),
            relay: None,
            flows: self
                .flows
                .iter()
                .map(|f| (f, false))
                .chain(
                    self.back
                        .iter()
                        .flat_map(|(_, flows)| flows.iter().map(|f| (f, true))),
                )
                .map(|(f, reverse)| FlowRecord {
                    session: f.session,
                    client: f.client.record(),
                    server: ServerRecord::of(&f.server),
                    reverse,
                })
                .collect(),
            server_to_client: self.back.as_ref().map(|(o, _)| {
                Box::new(DirectionRecord {
                    session: o.session,
                    client: o.client.record(),
                    server: ServerRecord::of(&o.server),
                })
            }),
            reverse: self.params.reverse,
            ended_by: if self.params.timed() {
                EndedBy::Time
            } else {
                EndedBy::Bytes
            },
            loaded_latency: self.latency.clone(),
            rate_search: self.rate_search.clone(),
        }
    }

    /// The message size and total this run measured.
    pub fn point(&self) -> Point {
        Point {
            msg_size: self.params.msg_size,
            total_bytes: self.params.total_bytes,
        }
    }
}
