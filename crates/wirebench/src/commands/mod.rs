//! One module per subcommand: each turns a validated configuration into work and output;
//! [`dispatch`] sends a parsed command line to its module.

pub mod compare;
pub mod dns;
pub mod embedded;
pub mod exporter;
pub mod history;
pub mod import;
pub mod interop;
pub mod recording;
pub mod relay;
pub mod report;
pub mod rpm;
pub mod rr;
pub mod run;
pub mod run_output;
pub mod server;
pub mod store;

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{self, Command};
use crate::config::{self, args, ServerConfig, StoreTarget};
use crate::run_to_end;
use crate::runner::{self, RunConfig};
use wirebench_core::record::lifecycle::CampaignKind;
use wirebench_core::vocab::error::UsageError;

/// Runs one parsed command to its end on `runtime`; usage errors come back as [`UsageError`].
pub fn dispatch(command: Command, runtime: tokio::runtime::Runtime) -> Result<ExitCode> {
    match command {
        Command::Server(args) => {
            let cfg = ServerConfig::from_args(&args)?;
            let result = run_to_end(runtime, server::execute(cfg));
            result?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            let output = config::RunOutput::from_args(&args)?;
            if let Some(mut cfg) = config::iperf3_client(&args)? {
                cfg.server_cpu = output.server_cpu;
                let store = StoreTarget::from_args(&args.store)?;
                let _prepared = run_output::prepare(&output, !cfg.json)?;
                let result = run_to_end(runtime, interop::run_iperf3(cfg, store, output.clone()));
                return result.map(|()| ExitCode::SUCCESS);
            }
            if let Some(cfg) = config::perf_client(&args)? {
                let _prepared = run_output::prepare(&output, !cfg.json)?;
                let result = run_to_end(runtime, interop::run_perf(cfg));
                return result.map(|()| ExitCode::SUCCESS);
            }
            let mut cfg = RunConfig::from_args(&args)?;
            output.check_plan(runner::planned_runs(&cfg) * cfg.points.len())?;
            // The stream's lines take the place of the text, as -J's document does.
            cfg.json |= output.json_stream;
            let store = StoreTarget::from_args(&args.store)?;
            let _prepared = run_output::prepare(&output, !cfg.json)?;
            let result = run_to_end(
                runtime,
                run::execute(cfg, store, args.plan.quiet, output.clone()),
            );
            Ok(result?.exit_code())
        }
        Command::Runs(db) => {
            history::list(&config::db_path(&db)?, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Show(args) => {
            let db = config::db_path(&args.db)?;
            history::show(&db, args.id, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Export(args) => {
            let db = config::db_path(&args.db)?;
            let kind = match (args.rr, args.dns, args.rpm) {
                (true, _, _) => CampaignKind::Rr,
                (_, true, _) => CampaignKind::Dns,
                (_, _, true) => CampaignKind::Rpm,
                _ => CampaignKind::Run,
            };
            history::export(&db, kind, args.id, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Report(args) => {
            let db = config::db_path(&args.db)?;
            let which = match args.last {
                Some(n) => report::Which::Last(usize::try_from(n).unwrap_or(usize::MAX)),
                None => report::Which::Ids(args.ids.clone()),
            };
            let format = report::format_of(args.format);
            let output = args.output.as_deref();
            let stdout = &mut std::io::stdout().lock();
            use crate::store::{dns::Dns, rpm::Rpm, rr::Rr};
            use report::{execute, execute_sweep, Options};
            if args.dns {
                execute_sweep::<Dns>(&db, &which, format, output, stdout)?;
            } else if args.rpm {
                execute_sweep::<Rpm>(&db, &which, format, output, stdout)?;
            } else if args.rr {
                execute_sweep::<Rr>(&db, &which, format, output, stdout)?;
            } else {
                let opts = Options {
                    format,
                    layout: report::layout_of(args.layout),
                    run: args.run.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
                    output,
                };
                execute(&db, &which, opts, stdout)?;
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
                let ok = compare::execute_rpm(
                    &db,
                    args.a,
                    args.b,
                    args.fail_on_regression,
                    &mut std::io::stdout().lock(),
                )?;
                return Ok(exit_status(ok));
            }
            let ok = compare::execute(
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
            let result = run_to_end(runtime, relay::execute(cfg, args.json));
            result?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Ping(args) => {
            let cfg = config::rr::RrConfig::from_ping(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, rr::execute(cfg, store));
            Ok(result?.exit_code())
        }
        Command::Rr(args) => {
            let cfg = config::rr::RrConfig::from_rr(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, rr::execute(cfg, store));
            Ok(result?.exit_code())
        }
        Command::Exporter(args) => {
            let cfg = config::exporter::ExporterConfig::from_args(&args)?;
            run_to_end(runtime, exporter::execute(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Dns(args) => {
            let cfg = config::dns::DnsConfig::from_args(&args)?;
            let store = config::StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, dns::execute(cfg, store));
            Ok(result?.exit_code())
        }
        Command::Rpm(args) => {
            let cfg = config::rpm::RpmConfig::from_args(&args)?;
            let store = StoreTarget::from_args(&args.store)?;
            let result = run_to_end(runtime, rpm::execute(cfg, store));
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
            let from = crate::store::Location::parse(args.from.as_os_str())?;
            let to = crate::store::Location::parse(args.to.as_os_str())?;
            self::store::copy(&from, &to, &mut std::io::stdout().lock())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(args) => {
            let db = config::db_path(&args.db)?;
            let out = &mut std::io::stdout().lock();
            import::import(&db, &args.file, run::unix_now(), args.again, out)?;
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

/// Exit status 0 when the command did all it was asked, 1 when part of it failed (it said
/// what on stderr).
fn exit_status(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
