//! wirebench: measure how fast data moves over TCP, UDP and QUIC, by streaming or by
//! stop-and-wait, with exact counts on both sides. The binary is a thin shell around
//! [`run_cli`]; tests drive servers and clients in-process through the same modules.

pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod control;
pub mod engine;
pub mod net;
pub mod output;
pub mod runner;
pub mod server;
pub mod tls;

use std::process::ExitCode;

use anyhow::{Context, Result};

use cli::{Cli, Command};
use config::{RunConfig, ServerConfig};

/// Runs a parsed command line to its end; usage errors come back as [`config::UsageError`].
pub fn run_cli(cli: Cli) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match cli.command {
        Command::Server(args) => {
            let cfg = ServerConfig::from_args(&args)?;
            let result = runtime.block_on(commands::server::execute(cfg));
            shut_down(runtime);
            result?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            let cfg = RunConfig::from_args(&args)?;
            let ok = runtime.block_on(commands::run::execute(cfg))?;
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}

/// Ends the runtime without waiting for ever on data-path threads still blocked in a socket
/// call (a session cut by Ctrl-C): they die with the process.
fn shut_down(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
}
