//! One module per subcommand: each turns a validated configuration into work and output;
//! [`dispatch`] builds the command's runtime (`runtime`) and sends its validated configuration
//! (`config` reads the command line) to its module.

pub mod clock;
pub mod compare;
pub mod dns;
pub mod embedded;
pub mod exporter;
pub mod history;
pub mod import;
pub mod interop;
pub mod latency;
pub mod recorder;
pub mod relay;
pub mod report;
pub mod rpm;
pub mod rr;
pub mod run;
pub mod run_output;
pub mod runtime;
pub mod server;
pub mod store;

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{self, Command};
use crate::config::history::{self as queries, Selection};
use crate::config::{self, args, RunCommand, ServerConfig, StoreTarget};
use runtime::run_to_end;
use wirebench_core::record::lifecycle::CampaignKind;

/// Runs one parsed command to its end on a runtime built for it; usage errors come back as
/// [`wirebench_core::vocab::error::UsageError`].
pub fn dispatch(command: Command) -> Result<ExitCode> {
    let runtime = runtime::runtime_for(&command)?;
    match command {
        Command::Server(args) => {
            let cfg = ServerConfig::from_args(&args)?;
            run_to_end(runtime, server::execute(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => run(config::run_command(&args)?, runtime),
        Command::Relay(args) => {
            let (cfg, json) = config::relay_command(&args)?;
            run_to_end(runtime, relay::execute(cfg, json))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ping(args) => {
            let cfg = config::rr::RrConfig::from_ping(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            Ok(run_to_end(runtime, rr::execute(cfg, store))?.exit_code())
        }
        Command::Rr(args) => {
            let cfg = config::rr::RrConfig::from_rr(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            Ok(run_to_end(runtime, rr::execute(cfg, store))?.exit_code())
        }
        Command::Exporter(args) => {
            let cfg = config::exporter::ExporterConfig::from_args(&args)?;
            run_to_end(runtime, exporter::execute(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Dns(args) => {
            let cfg = config::dns::DnsConfig::from_args(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            Ok(run_to_end(runtime, dns::execute(cfg, store))?.exit_code())
        }
        Command::Rpm(args) => {
            let cfg = config::rpm::RpmConfig::from_args(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            Ok(run_to_end(runtime, rpm::execute(cfg, store))?.exit_code())
        }
        Command::Latency(args) => {
            let cfg = config::latency::LatencyConfig::from_args(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            Ok(run_to_end(runtime, latency::execute(cfg, store))?.exit_code())
        }
        offline => offline_command(offline),
    }
}

/// `wirebench run`: an iperf3 test, a QUIC perf test or wirebench's own plan, the process set
/// up first as iperf3's flags ask.
fn run(command: RunCommand, runtime: tokio::runtime::Runtime) -> Result<ExitCode> {
    let _prepared = run_output::prepare(command.output(), command.text())?;
    match command {
        RunCommand::Iperf3 { cfg, store, output } => {
            run_to_end(runtime, interop::run_iperf3(*cfg, store, output))?;
            Ok(ExitCode::SUCCESS)
        }
        RunCommand::Perf { cfg, .. } => {
            run_to_end(runtime, interop::run_perf(*cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        RunCommand::Plan {
            cfg,
            store,
            quiet,
            output,
        } => Ok(run_to_end(runtime, run::execute(*cfg, store, quiet, output))?.exit_code()),
    }
}

/// The commands that move no traffic: the store's records, the manual and completions.
fn offline_command(command: Command) -> Result<ExitCode> {
    let stdout = &mut std::io::stdout().lock();
    match command {
        Command::Runs(db) => history::list(&config::db_path(&db)?, stdout)?,
        Command::Show(args) => {
            let q = queries::show_query(&args)?;
            history::show(&q.db, q.id, stdout)?;
        }
        Command::Export(args) => {
            let q = queries::export_query(&args)?;
            history::export(&q.db, q.kind, q.id, stdout)?;
        }
        Command::Report(args) => write_report(&queries::report_query(&args)?, stdout)?,
        Command::Compare(args) => {
            let q = queries::compare_query(&args)?;
            let ok = if q.rpm {
                compare::execute_rpm(&q.db, q.a, q.b, q.fail_on_regression, stdout)?
            } else {
                compare::execute(&q.db, q.a, q.b, q.fail_on_regression, stdout)?
            };
            return Ok(exit_status(ok));
        }
        Command::Completions(args) => {
            let shell = args::completions_shell(&args);
            // Rendered into memory first: clap_complete panics on a failed write (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut args::command(), "wirebench", &mut script);
            write_stdout(&script).context("while writing the completion script to stdout")?;
        }
        Command::Man(args) => manual(args::man_dir(&args).as_deref())?,
        Command::Store(cli::StoreCommand::Copy(args)) => {
            let (from, to) = queries::store_copy(&args)?;
            self::store::copy(&from, &to, stdout)?;
        }
        Command::Import(args) => {
            let q = queries::import_query(&args)?;
            import::import(&q.db, &q.file, clock::unix_now(), q.again, stdout)?;
        }
        _ => unreachable!("dispatch runs the commands that move traffic"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `wirebench report`: one stored sweep (rr, DNS, rpm) or transfer campaigns, as `query` asks.
fn write_report(query: &queries::ReportQuery, stdout: &mut impl std::io::Write) -> Result<()> {
    let db = &query.db;
    use crate::store::{dns::Dns, latency::Latency, rpm::Rpm, rr::Rr};
    use report::{execute, execute_sweep, Options};
    let which = match &query.selection {
        Selection::Last(n) => report::Which::Last(*n),
        Selection::Ids(ids) => report::Which::Ids(ids.clone()),
    };
    let (format, output) = (query.format, query.output.as_deref());
    match query.sweep {
        Some(CampaignKind::Dns) => execute_sweep::<Dns>(db, &which, format, output, stdout),
        Some(CampaignKind::Rpm) => execute_sweep::<Rpm>(db, &which, format, output, stdout),
        Some(CampaignKind::Latency) => execute_sweep::<Latency>(db, &which, format, output, stdout),
        Some(_) => execute_sweep::<Rr>(db, &which, format, output, stdout),
        None => {
            let opts = Options {
                format,
                layout: query.layout,
                run: query.run,
                output,
            };
            execute(db, &which, opts, stdout)
        }
    }
}

/// `wirebench man`: the manual pages into `dir`, or the main page to stdout.
fn manual(dir: Option<&std::path::Path>) -> Result<()> {
    if let Some(dir) = dir {
        return std::fs::create_dir_all(dir)
            .and_then(|()| clap_mangen::generate_to(args::command(), dir))
            .with_context(|| format!("cannot write the manual pages into {}", dir.display()));
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(args::command())
        .render(&mut page)
        .context("while rendering the manual page")?;
    write_stdout(&page).context("while writing the manual page to stdout")
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

/// Exit status 0 when the command did all it was asked, 1 when part of it failed (it said
/// what on stderr).
fn exit_status(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
