//! Turns raw command-line flags into validated, typed settings. The only module that imports
//! `cli`; everything after it works with values that are known to be allowed.

mod address;
pub mod args;
pub mod dns;
mod error;
pub mod exporter;
pub mod history;
mod interop;
mod iperf3_flags;
pub mod latency;
pub mod latency_probe;
pub mod ratesearch;
mod relay;
pub mod rpm;
pub mod rr;
mod run;
mod run_command;
mod run_plan;
mod server;
mod store_target;

pub use address::resolve_target;
pub use interop::{iperf3_client, perf_client};
pub use iperf3_flags::RunOutput;
pub use relay::{relay_command, relay_config};
pub use run_command::{run_command, RunCommand};
pub use server::ServerConfig;
pub use store_target::{db_path, StoreTarget};

#[cfg(test)]
mod tests;
