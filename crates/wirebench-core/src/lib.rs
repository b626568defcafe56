//! wirebench-core: owns the pure logic of wirebench (units, wire formats, transfer machines, accounting,
//! statistics); must not open sockets, read clocks, spawn tasks or write to a terminal.
//!
//! Time enters only as `Instant`/`Duration` arguments, so every machine here can be driven by a virtual
//! clock in deterministic tests; the `wirebench` crate owns all I/O.

#![warn(missing_docs)]

pub mod machine;
pub mod record;
pub mod security;
#[cfg(feature = "fuzzing")]
pub mod untrusted;
pub mod vocab;
pub mod wire;
