//! wirebench: measure how fast data moves over TCP, UDP and QUIC, by streaming or by
//! stop-and-wait, with exact counts on both sides. The binary is a thin shell around
//! [`commands::dispatch`]; tests drive servers and clients in-process through the same modules.
//! This file only declares the layers (and names the leaf crates): it imports none of them, so
//! no layer's use of `crate::store` and the like makes an arrow back up.

pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod exporter;
pub mod flows;
pub mod runner;
pub mod transport;

// The leaves are crates of their own (they see only wirebench-core, and the compiler holds them
// to it); under these names the shell and its tests reach them as before.
pub use wirebench_output as output;
pub use wirebench_report as report;
pub use wirebench_store as store;
