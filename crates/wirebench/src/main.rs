//! The `wirebench` binary: parse flags, run, print the error chain on one line, map it to an
//! exit status (0 ok, 1 a run failed, 2 bad usage).

use std::process::ExitCode;

use wirebench::config::args::{self, ArgsError};
use wirebench_core::vocab::error::UsageError;

fn main() -> ExitCode {
    let cli = match args::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(ArgsError::Clap(e)) => e.exit(),
        Err(ArgsError::Usage(message)) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    match wirebench::commands::dispatch(cli.command) {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<UsageError>().is_some() => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
