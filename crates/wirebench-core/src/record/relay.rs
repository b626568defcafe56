//! What the impairment relay did: counts per transport and direction, the record `relay`
//! prints and `run --impair` stores with each run.

use serde::{Deserialize, Serialize};

use crate::machine::impair::Counts;

/// Everything the relay did so far, per transport and direction (`up` = client → server).
/// TCP counts are in read chunks and bytes (a stream has no packets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RelayCounts {
    /// UDP datagrams client → server.
    pub udp_up: Counts,
    /// UDP datagrams server → client.
    pub udp_down: Counts,
    /// TCP chunks client → server.
    pub tcp_up: Counts,
    /// TCP chunks server → client.
    pub tcp_down: Counts,
    /// UDP client addresses seen (one upstream socket each).
    pub udp_flows: u64,
    /// TCP connections accepted.
    pub tcp_connections: u64,
}

impl RelayCounts {
    /// The counts since `earlier`.
    pub fn since(&self, earlier: &RelayCounts) -> RelayCounts {
        RelayCounts {
            udp_up: self.udp_up.since(&earlier.udp_up),
            udp_down: self.udp_down.since(&earlier.udp_down),
            tcp_up: self.tcp_up.since(&earlier.tcp_up),
            tcp_down: self.tcp_down.since(&earlier.tcp_down),
            udp_flows: self.udp_flows.saturating_sub(earlier.udp_flows),
            tcp_connections: self.tcp_connections.saturating_sub(earlier.tcp_connections),
        }
    }
}
