//! wirebench: measure how fast data moves over TCP, UDP and QUIC, by streaming or by
//! stop-and-wait, with exact counts on both sides. The binary is a thin shell around
//! [`run_cli`]; tests drive servers and clients in-process through the same modules.

pub mod args;
pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod control;
pub mod counters;
pub mod dns;
pub mod engine;
pub mod environment;
pub mod exporter;
pub mod http;
pub mod inflight;
pub mod interval;
pub mod iperf3;
pub mod latency_probe;
pub mod liveness;
pub mod net;
pub mod output;
pub mod parallel;
pub mod perf;
pub mod relay;
pub mod report;
pub mod rpm;
pub mod rr_client;
pub mod runner;
pub mod server;
pub mod signals;
pub mod store;
pub mod tls;

use std::process::ExitCode;

use anyhow::{Context, Result};

use cli::{Cli, Command};
use config::{ServerConfig, StoreTarget};
use runner::RunConfig;
use wirebench_core::error::UsageError;

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

/// Runs a parsed command line to its end; usage errors come back as [`wirebench_core::error::UsageError`].
pub fn run_cli(cli: Cli) -> Result<ExitCode> {
    let runtime = runtime_for(&cli.command)?;
    match cli.command {
        Command::Server(args) => {
            let cfg = ServerConfig::from_args(&args)?;
            let result = run_to_end(runtime, commands::server::execute(cfg));
            result?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            if let Some(cfg) = config::iperf3_client(&args)? {
                let store = StoreTarget::from_args(&args.store)?;
                let result = run_to_end(runtime, commands::interop::run_iperf3(cfg, store));
                return result.map(|()| ExitCode::SUCCESS);
            }
            if let Some(cfg) = config::perf_client(&args)? {
                let result = run_to_end(runtime, commands::interop::run_perf(cfg));
                return result.map(|()| ExitCode::SUCCESS);
            }
            let cfg = RunConfig::from_args(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, commands::run::execute(cfg, store, args.plan.quiet));
            Ok(result?.exit_code())
        }
        Command::Runs(db) => {
            commands::history::list(&config::db_path(&db)?, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) => {
            let db = config::db_path(&args.db)?;
            commands::history::show(&db, args.id, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Export(args) => {
            let db = config::db_path(&args.db)?;
            commands::history::export(&db, args.id, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Report(args) => {
            let db = config::db_path(&args.db)?;
            let which = match args.id {
                Some(id) => commands::report::Which::Id(id),
                None => commands::report::Which::Last,
            };
            let format = commands::report::format_of(args.format);
            let output = args.output.as_deref();
            let stdout = &mut std::io::stdout().lock();
            use commands::report::{execute, execute_dns, execute_rpm, execute_rr};
            if args.dns {
                execute_dns(&db, which, format, output, stdout)?;
            } else if args.rpm {
                execute_rpm(&db, which, format, output, stdout)?;
            } else if args.rr {
                execute_rr(&db, which, format, output, stdout)?;
            } else {
                let run = args.run.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
                execute(&db, which, format, run, output, stdout)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare(args) => {
            let db = config::db_path(&args.db)?;
            if let Some(pct) = args.fail_on_regression {
                if !(pct.is_finite() && pct >= 0.0) {
                    return Err(UsageError(format!(
                        "--fail-on-regression {pct}: expected a percentage of 0 or more, e.g. 10"
                    ))
                    .into());
                }
            }
            if args.rpm {
                let ok = commands::compare::execute_rpm(
                    &db,
                    args.a,
                    args.b,
                    args.fail_on_regression,
                    &mut std::io::stdout().lock(),
                )?;
                return Ok(exit_status(ok));
            }
            let ok = commands::compare::execute(
                &db,
                args.a,
                args.b,
                args.fail_on_regression,
                &mut std::io::stdout().lock(),
            )?;
            Ok(exit_status(ok))
        }
        Command::Relay(args) => {
            let cfg = config::relay_config(&args)?;
            let result = run_to_end(runtime, commands::relay::execute(cfg, args.json));
            result?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ping(args) => {
            let cfg = config::rr::RrConfig::from_ping(&args)?;
            let result = run_to_end(runtime, commands::rr::execute(cfg, StoreTarget::Off));
            Ok(result?.exit_code())
        }
        Command::Rr(args) => {
            let cfg = config::rr::RrConfig::from_rr(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, commands::rr::execute(cfg, store));
            Ok(result?.exit_code())
        }
        Command::Exporter(args) => {
            let cfg = config::exporter::ExporterConfig::from_args(&args)?;
            run_to_end(runtime, commands::exporter::execute(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Dns(args) => {
            let cfg = config::dns::DnsConfig::from_args(&args)?;
            let store = config::StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, commands::dns::execute(cfg, store));
            Ok(result?.exit_code())
        }
        Command::Rpm(args) => {
            let cfg = config::rpm::RpmConfig::from_args(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, commands::rpm::execute(cfg, store));
            Ok(result?.exit_code())
        }
        Command::Completions(args) => {
            // Rendered into memory first: clap_complete panics on a failed write (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut args::command(), "wirebench", &mut script);
            write_stdout(&script).context("while writing the completion script to stdout")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man(args) => {
            if let Some(dir) = &args.dir {
                std::fs::create_dir_all(dir)
                    .and_then(|()| clap_mangen::generate_to(args::command(), dir))
                    .with_context(|| {
                        format!("cannot write the manual pages into {}", dir.display())
                    })?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut page = Vec::new();
            clap_mangen::Man::new(args::command())
                .render(&mut page)
                .context("while rendering the manual page")?;
            write_stdout(&page).context("while writing the manual page to stdout")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Store(cli::StoreCommand::Copy(args)) => {
            let from = store::Location::parse(args.from.as_os_str())?;
            let to = store::Location::parse(args.to.as_os_str())?;
            commands::store::copy(&from, &to, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(args) => {
            let db = config::db_path(&args.db)?;
            let id =
                commands::history::import(&db, &args.file, commands::run::unix_now(), args.again)?;
            println!(
                "imported {} as campaign {id} in {}",
                args.file.display(),
                db.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) is not an error.
fn write_stdout(bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Runs a command's future to its end as a task on `runtime`'s workers, then shuts the runtime
/// down. A task, not `block_on` on this thread: quinn's connection driver runs on a worker,
/// and a data path on the main thread paid a cross-thread wake-up per message each way
/// (measured: QUIC stop-and-wait p50 159 → 140 µs, 1 GiB upload 4.95 → 5.91 Gbit/s).
fn run_to_end<T: Send + 'static>(
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

/// Exit status 0 when the command did all it was asked, 1 when part of it failed (it said
/// what on stderr).
fn exit_status(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Ends the runtime without waiting for ever on data-path threads still blocked in a socket
/// call (a session cut by Ctrl-C): they die with the process.
fn shut_down(runtime: tokio::runtime::Runtime) {
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
}
