//! The flows layer: one kind of conversation each (a throughput client and server, request-response,
//! the latency probe, latency under load by direction, responsiveness, DNS, the impairment relay, iperf3 and QUIC `perf`), over the
//! engine and the transport. A flow never reaches up to the runner, config or commands.

pub mod client;
pub mod dns;
pub mod iperf3;
pub mod latency_probe;
pub mod load_phases;
pub mod parallel;
pub mod perf;
pub mod relay;
pub mod rpm;
pub mod rr_client;
pub mod server;
