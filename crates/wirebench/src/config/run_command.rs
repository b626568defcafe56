//! Which test `wirebench run` runs, validated whole: an iperf3 server's (`--iperf3`), a QUIC
//! perf server's (`--perf-server`) or wirebench's own plan, each with the output flags it
//! takes and where its results go.

use crate::cli::RunArgs;
use crate::flows::iperf3::client::ClientConfig;
use crate::flows::perf::client::PerfConfig;
use crate::runner::RunConfig;

use super::interop::{iperf3_client, perf_client};
use super::iperf3_flags::RunOutput;
use super::store_target::StoreTarget;

/// A validated `wirebench run`.
#[derive(Debug)]
pub enum RunCommand {
    /// `--iperf3 HOST`: one iperf3 test.
    Iperf3 {
        /// The test.
        cfg: Box<ClientConfig>,
        /// Where its result goes.
        store: StoreTarget,
        /// iperf3's output flags.
        output: RunOutput,
    },
    /// `--perf-server HOST`: one QUIC perf test (never stored).
    Perf {
        /// The test.
        cfg: Box<PerfConfig>,
        /// iperf3's output flags.
        output: RunOutput,
    },
    /// wirebench's own plan against a wirebench server.
    Plan {
        /// The plan and everything it runs with.
        cfg: Box<RunConfig>,
        /// Where its results go.
        store: StoreTarget,
        /// `-q/--quiet`: no progress bar.
        quiet: bool,
        /// iperf3's output flags.
        output: RunOutput,
    },
}

impl RunCommand {
    /// Whether the output is text (not a JSON document nor JSON lines).
    pub fn text(&self) -> bool {
        match self {
            RunCommand::Iperf3 { cfg, .. } => !cfg.json,
            RunCommand::Perf { cfg, .. } => !cfg.json,
            RunCommand::Plan { cfg, .. } => !cfg.json,
        }
    }

    /// The output flags of every kind.
    pub fn output(&self) -> &RunOutput {
        match self {
            RunCommand::Iperf3 { output, .. }
            | RunCommand::Perf { output, .. }
            | RunCommand::Plan { output, .. } => output,
        }
    }
}

/// Validates `wirebench run`'s flags.
pub fn run_command(args: &RunArgs) -> anyhow::Result<RunCommand> {
    let output = RunOutput::from_args(args)?;
    if let Some(cfg) = iperf3_client(args)? {
        let cfg = Box::new(ClientConfig {
            server_cpu: output.server_cpu,
            ..cfg
        });
        let store = StoreTarget::from_args(&args.store)?;
        return Ok(RunCommand::Iperf3 { cfg, store, output });
    }
    if let Some(cfg) = perf_client(args)? {
        let cfg = Box::new(cfg);
        return Ok(RunCommand::Perf { cfg, output });
    }
    let cfg = RunConfig::from_args(args)?;
    output.check_plan(cfg.plan.measured())?;
    let store = StoreTarget::from_args(&args.store)?;
    Ok(RunCommand::Plan {
        cfg: Box::new(cfg),
        store,
        quiet: args.plan.quiet,
        output,
    })
}
