//! The flags of `wirebench completions` and `wirebench man`.

use std::path::PathBuf;

use clap::Args;

/// Flags of `wirebench completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// Flags of `wirebench man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write wirebench.1 and one wirebench-SUBCOMMAND.1 per subcommand into this directory
    /// instead of printing wirebench.1 on stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}
