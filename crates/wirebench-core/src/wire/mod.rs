//! Wire formats: bytes as they travel between peers — our control protocol and datagram header,
//! iperf3's and QUIC perf's framing, DNS messages — and naming a peer from its first bytes.

pub mod datagram;
pub mod dns;
pub mod iperf3;
pub mod peer_kind;
pub mod perf;
pub mod proto;
