//! The impairment relay: owns the sockets and tasks that sit between a client and a server on
//! one port (TCP and UDP, like the server) and forward through `wirebench_core::machine::impair`; must not
//! make impairment decisions itself (they are the core machine's) nor print anything (what it
//! must tell, it hands over as [`Relay::notices`]).
//!
//! UDP (our datagrams and QUIC) gets one socket toward the server per client address, so the
//! server sees one peer per client; TCP is relayed as a byte stream, one upstream connection per
//! accepted one, with delay, jitter and rate only. It never forwards to itself (a loop), holds
//! at most its byte budget ([`RelayConfig::max_held`]), [`MAX_UDP_FLOWS`] flows and
//! [`MAX_TCP_CONNECTIONS`] connections, and says
//! when the system refuses it a socket.

mod clock;
mod hold;
mod inline;
mod registry;
mod running;
mod tcp;
mod udp;

pub use hold::MAX_HELD_BYTES;
pub use inline::RunRelay;
pub use registry::{MAX_TCP_CONNECTIONS, MAX_UDP_FLOWS};
pub use running::{Relay, RelayConfig};
pub use udp::UDP_FLOW_IDLE;
pub use wirebench_core::record::RelayCounts;
