//! The client's socket options on the server's TCP data sockets, as an iperf3 server applies
//! them: `-w` (both buffers), `-C`, `-M`, `-N`, `-S`, and `--fq-rate` on the streams the server
//! sends on. Owns applying them and saying what did not take; must not move data.

use socket2::SockRef;
use std::net::TcpStream;
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::iperf3::TestPlan;
use wirebench_core::wire::proto::DataPathOptions;

use crate::transport::net;

/// Applies the plan's options to one TCP data socket; returns what could not be applied, one
/// line each (an iperf3 server warns and goes on, and so does this one).
pub(super) fn apply(socket: &TcpStream, plan: &TestPlan, sends: bool) -> Vec<String> {
    let mut refused = Vec::new();
    let s = SockRef::from(socket);
    // One option at a time, so one refusal does not hide the others.
    let single = [
        DataPathOptions {
            window: plan.window,
            ..DataPathOptions::default()
        },
        DataPathOptions {
            congestion: plan.congestion.clone(),
            ..DataPathOptions::default()
        },
        DataPathOptions {
            nodelay: plan.nodelay,
            ..DataPathOptions::default()
        },
    ];
    for (what, one) in ["-w", "-C", "-N"].into_iter().zip(single) {
        if one != DataPathOptions::default() {
            if let Err(e) = net::apply_tcp_options(socket, &one, Mechanism::Stream) {
                refused.push(format!("{what}: {e}"));
            }
        }
    }
    if let Some(mss) = plan.mss {
        if let Err(e) = s.set_mss(mss) {
            refused.push(format!("-M {mss}: {e}"));
        }
    }
    if let Some(tos) = plan.tos {
        let set = if socket.local_addr().is_ok_and(|a| a.is_ipv6()) {
            s.set_tclass_v6(u32::from(tos))
        } else {
            s.set_tos(u32::from(tos))
        };
        if let Err(e) = set {
            refused.push(format!("-S {tos}: {e}"));
        }
    }
    if sends && plan.fq_rate_bps > 0 {
        if let Err(e) = net::set_max_pacing_rate(socket, plan.fq_rate_bps) {
            refused.push(format!("--fq-rate {}: {e}", plan.fq_rate_bps));
        }
    }
    refused
}
