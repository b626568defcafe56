//! wirebench: measure how fast data moves over TCP, UDP and QUIC, by streaming or by
//! stop-and-wait, with exact counts on both sides. The binary is a thin shell around
//! [`run_cli`]; tests drive servers and clients in-process through the same modules.

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

use std::process::ExitCode;

use anyhow::{Context, Result};

use cli::{Cli, Command};

/// Stack of each runtime worker: the size of a main thread's.
const COMMAND_STACK: usize = 8 << 20;

/// The runtime a command runs on: a multi-threaded one whose workers have a main thread's
/// stack (commands run on the workers, see `run_to_end`; a debug build's nested run futures
/// overflowed tokio's 2 MiB). The server leaves one CPU without a worker (see
/// [`server_workers`]); `TOKIO_WORKER_THREADS` overrides either count.
fn runtime_for(command: &Command) -> Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.thread_stack_size(COMMAND_STACK).enable_all();
    if matches!(command, Command::Server(_)) && std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(server_workers());
    }
    builder.build().context("cannot start the async runtime")
}

/// The server's worker threads: one per CPU but one, at least one. Its TCP sessions run on
/// threads of their own, and a QUIC session's task and quinn's driver for its connection,
/// split over two workers, fought over the connection's lock: on two CPUs one worker sent a
/// QUIC download at 7.9 Gbit/s and 1.15 server CPU s/GiB, two workers at 7.0 and 1.23
/// (loopback, 1 GiB in 128 KiB messages, medians of 5; uploads, UDP and round trips even).
fn server_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

/// Runs a parsed command line to its end on a runtime built for it; usage errors come back as
/// [`wirebench_core::vocab::error::UsageError`].
pub fn run_cli(cli: Cli) -> Result<ExitCode> {
    let runtime = runtime_for(&cli.command)?;
    commands::dispatch(cli.command, runtime)
}

/// Runs a command's future to its end as a task on `runtime`'s workers, then shuts the runtime
/// down. A task, not `block_on` on this thread: quinn's connection driver runs on a worker,
/// and a data path on the main thread paid a cross-thread wake-up per message each way
/// (measured: QUIC stop-and-wait p50 159 → 140 µs, 1 GiB upload 4.95 → 5.91 Gbit/s).
pub fn run_to_end<T: Send + 'static>(
    runtime: tokio::runtime::Runtime,
    command: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let result = runtime.block_on(async move { tokio::spawn(command).await });
    shut_down(runtime);
    match result.map_err(tokio::task::JoinError::try_into_panic) {
        Ok(v) => v,
        // The command panicked: go on panicking here, as if it had run on this thread.
        Err(Ok(payload)) => std::panic::resume_unwind(payload),
        Err(Err(_)) => unreachable!("the command's task is never aborted"),
    }
}

/// Ends the runtime without waiting for ever on data-path threads still blocked in a socket
/// call (a session cut by Ctrl-C): they die with the process.
fn shut_down(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
}
