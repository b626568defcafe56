//! wirebench-core: owns the pure logic of wirebench (units, wire formats, transfer machines, accounting,
//! statistics); must not open sockets, read clocks, spawn tasks or write to a terminal.
//!
//! Time enters only as `Instant`/`Duration` arguments, so every machine here can be driven by a virtual
//! clock in deterministic tests; the `wirebench` crate owns all I/O.

#![warn(missing_docs)]

pub mod amplification;
pub mod auth;
pub mod dns;
pub mod error;
pub mod impair;
pub mod iperf3;
pub mod limits;
pub mod metrics;
pub mod pacing;
pub mod peer_kind;
pub mod perf;
pub mod plan;
pub mod proto;
pub mod ratesearch;
pub mod record;
pub mod responsiveness;
pub mod rr;
pub mod rto;
pub mod saw;
pub mod send_window;
pub mod seq;
pub mod stats;
pub mod sweep;
pub mod units;
pub mod untrusted;
pub mod wire;
