//! Entry points for untrusted bytes: owns the harness functions that feed arbitrary input to every
//! decoder and state machine a peer can reach (control messages with the server's field checks
//! and the client's report check, UDP data datagrams and the receiver's sequence accounting, the
//! relay's impairment machine, iperf3's control and UDP formats, DNS responses, QUIC perf
//! requests) and check that the results are sane; must not do I/O or read clocks (a caller that
//! needs an origin for time passes it in).
//!
//! The cargo-fuzz targets in `fuzz/` and the stable replay test `tests/decoders.rs` both call
//! [`Target::run`], so what is fuzzed and what CI replays cannot drift apart. A harness panics
//! only when a decoder panics or an invariant it states is broken: that is the finding.

mod control;
mod cursor;
mod datagram;
mod dns;
mod impair;
mod iperf3;
mod one_line;
mod perf;
mod seeds;
mod target;

pub use control::control_connection;
pub use datagram::{data_datagrams, seq_tracker};
pub use dns::dns_response;
pub use impair::impairer;
pub use iperf3::{iperf3_control, iperf3_udp};
pub use perf::perf_requests;
pub use seeds::seeds;
pub use target::Target;
