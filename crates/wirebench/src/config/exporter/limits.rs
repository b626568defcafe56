//! What one exporter probe may do, and to whom: its largest total, its longest time, and the
//! allow-list of targets.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;

/// What one probe may do, and to whom.
#[derive(Debug, Clone)]
pub struct ProbeLimits {
    /// Largest total one probe may transfer.
    pub max_total: u64,
    /// Longest a probe may run.
    pub max_time: Duration,
    /// Targets probes may test.
    pub allow: Vec<Allowed>,
}

/// One allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// Any port of the addresses in a block (a bare address is a /32 or /128).
    Net(IpNet),
    /// One address and port.
    Addr(SocketAddr),
}

impl Allowed {
    pub(super) fn admits(&self, addr: SocketAddr) -> bool {
        let ip = canonical(addr.ip());
        match self {
            Allowed::Net(net) => net.contains(&ip),
            Allowed::Addr(a) => canonical(a.ip()) == ip && a.port() == addr.port(),
        }
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}
