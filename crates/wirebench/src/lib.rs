//! wirebench: measure how fast data moves over TCP, UDP and QUIC, by streaming or by
//! stop-and-wait, with exact counts on both sides. The binary is a thin shell around
//! [`run_cli`]; tests drive servers and clients in-process through the same modules.

pub mod cli;
pub mod commands;
pub mod config;
pub mod engine;
pub mod exporter;
pub mod flows;
pub mod output;
pub mod report;
pub mod runner;
pub mod store;
pub mod transport;

use std::process::ExitCode;

use anyhow::Result;

use cli::Cli;

/// Runs a parsed command line to its end on a runtime built for it; usage errors come back as
/// [`wirebench_core::vocab::error::UsageError`].
pub fn run_cli(cli: Cli) -> Result<ExitCode> {
    commands::dispatch(cli.command)
}
