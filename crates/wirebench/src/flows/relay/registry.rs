//! The relay's book of flows: every running UDP flow's and TCP connection's counts, the sum of
//! those that ended, the byte budget they share, and the troubles the relay must tell; it holds
//! the limits on flows and connections, and a flow past them gets no place.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use wirebench_core::machine::impair::Counts;
use wirebench_core::record::RelayCounts;

use super::hold;

/// Most UDP flows (client addresses) relayed at once; datagrams from further addresses are
/// dropped until one ends.
pub const MAX_UDP_FLOWS: usize = 1024;

/// Most TCP connections relayed at once; a further client is closed at once until one ends.
/// Each holds two sockets and two read buffers of up to 64 KiB (at most 128 MiB in all), and
/// two relays pointed at each other stop there instead of connecting to each other until the
/// file descriptors run out.
pub const MAX_TCP_CONNECTIONS: usize = 1024;

/// Counts of one flow or connection, both directions; its task updates them after each event.
pub(crate) type FlowCounts = Arc<Mutex<[Counts; 2]>>;

/// The flows of one protocol: those running, and the sum of those that ended.
#[derive(Debug, Default)]
struct Flows {
    running: Vec<FlowCounts>,
    ended: [Counts; 2],
    ended_count: u64,
}

/// All flows' counts, for snapshots; the byte budget they share; what the relay must tell.
#[derive(Debug)]
pub(crate) struct Registry {
    udp: Mutex<Flows>,
    tcp: Mutex<Flows>,
    /// What all flows hold, in bytes.
    pub(crate) hold: hold::Hold,
    /// Troubles so far, by kind (for notices at the first, second, fourth, … of each).
    troubles: [AtomicU64; Trouble::COUNT],
    notices: mpsc::UnboundedSender<String>,
}

/// A running flow's place in the registry: its counts, folded into the totals when it ends.
#[derive(Debug)]
pub(crate) struct FlowSlot {
    registry: Arc<Registry>,
    udp: bool,
    /// The flow's counts; its task updates them after each event.
    pub(crate) counts: FlowCounts,
}

impl Drop for FlowSlot {
    fn drop(&mut self) {
        let list = if self.udp {
            &self.registry.udp
        } else {
            &self.registry.tcp
        };
        let Ok(mut flows) = list.lock() else {
            return;
        };
        flows.running.retain(|c| !Arc::ptr_eq(c, &self.counts));
        if let Ok(c) = self.counts.lock() {
            flows.ended[0].add(&c[0]);
            flows.ended[1].add(&c[1]);
        }
        flows.ended_count += 1;
    }
}

/// What the relay tells its owner about.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Trouble {
    /// The system refused a socket towards the server or an accept (file descriptors).
    Sockets = 0,
    /// A new UDP client beyond [`MAX_UDP_FLOWS`].
    Flows = 1,
    /// A datagram dropped for want of room in the relay's byte budget.
    Memory = 2,
    /// A new TCP connection beyond [`MAX_TCP_CONNECTIONS`], closed at once.
    Connections = 3,
}

impl Trouble {
    const COUNT: usize = 4;
}

impl Registry {
    pub(super) fn new(notices: mpsc::UnboundedSender<String>, max_held: u64) -> Registry {
        Registry {
            udp: Mutex::default(),
            tcp: Mutex::default(),
            hold: hold::Hold::new(max_held),
            troubles: Default::default(),
            notices,
        }
    }

    /// Counts one `trouble`; the first, second, fourth, eighth… of each kind make a notice
    /// (so a flood shows without flooding the log), saying how many so far.
    pub(crate) fn trouble(&self, trouble: Trouble, what: impl FnOnce() -> String) {
        let n = self.troubles[trouble as usize].fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_power_of_two() {
            let _ = self.notices.send(format!("{} ({n} so far)", what()));
        }
    }

    /// A new UDP flow's place, or None when [`MAX_UDP_FLOWS`] run already.
    pub(crate) fn udp_flow(self: &Arc<Self>) -> Option<FlowSlot> {
        let counts = FlowCounts::default();
        let mut flows = self.udp.lock().ok()?;
        if flows.running.len() >= MAX_UDP_FLOWS {
            return None;
        }
        flows.running.push(Arc::clone(&counts));
        Some(FlowSlot {
            registry: Arc::clone(self),
            udp: true,
            counts,
        })
    }

    /// A new TCP connection's place, or None when [`MAX_TCP_CONNECTIONS`] run already.
    pub(crate) fn tcp_connection(self: &Arc<Self>) -> Option<FlowSlot> {
        let counts = FlowCounts::default();
        let mut flows = self.tcp.lock().ok()?;
        if flows.running.len() >= MAX_TCP_CONNECTIONS {
            return None;
        }
        flows.running.push(Arc::clone(&counts));
        Some(FlowSlot {
            registry: Arc::clone(self),
            udp: false,
            counts,
        })
    }

    pub(super) fn snapshot(&self) -> RelayCounts {
        let mut out = RelayCounts::default();
        let sum = |list: &Mutex<Flows>, up: &mut Counts, down: &mut Counts| -> u64 {
            let Ok(flows) = list.lock() else { return 0 };
            up.add(&flows.ended[0]);
            down.add(&flows.ended[1]);
            for flow in &flows.running {
                if let Ok(c) = flow.lock() {
                    up.add(&c[0]);
                    down.add(&c[1]);
                }
            }
            flows.ended_count + flows.running.len() as u64
        };
        out.udp_flows = sum(&self.udp, &mut out.udp_up, &mut out.udp_down);
        out.tcp_connections = sum(&self.tcp, &mut out.tcp_up, &mut out.tcp_down);
        out
    }
}
