//! The flags of `wirebench rpm` (responsiveness under working conditions).

use std::path::PathBuf;

use clap::Args;

use super::common::StoreArgs;

/// Flags of `wirebench rpm`.
#[derive(Debug, Args)]
pub struct RpmArgs {
    /// Server to test against, HOST or HOST:PORT (IPv6 as [ADDR]:PORT). Without it, a server is
    /// started in-process on 127.0.0.1 on a free port.
    #[arg(short = 'c', long)]
    pub server: Option<String>,
    /// Load direction: download (the server sends), upload, or both at once (one score).
    #[arg(long, default_value = "both")]
    pub direction: String,
    /// Most load flows per direction (the draft's MNP), 1 to 64.
    #[arg(long, default_value_t = 16)]
    pub max_flows: u32,
    /// Interval between ramp decisions (the draft's ID), 100ms to 5s.
    #[arg(long, default_value = "1s")]
    pub ramp_interval: String,
    /// Longest load phase (the result's confidence says whether it became stable), 1s to 300s.
    #[arg(long, default_value = "16s")]
    pub max_load: String,
    /// Most probe pairs per second (the draft's MPS), 1 to 100.
    #[arg(long, default_value_t = 100)]
    pub probe_rate: u32,
    /// Probe pairs measured before the load for the idle latency, 0 to 100.
    #[arg(long, default_value_t = 10)]
    pub idle_probes: u32,
    /// Put the impairment relay between client and server (started in-process on loopback),
    /// as `run --impair`: e.g. rate=20Mbit,queue=256KiB. TCP takes delay, jitter, rate, queue.
    #[arg(long, value_name = "SPEC")]
    pub impair: Option<String>,
    /// Print one JSON document (schema: docs/rpm-output.schema.json) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Prove to the server that we hold the pre-shared key in FILE (the server's --psk). With no
    /// --server, the embedded server requires the key.
    #[arg(long, value_name = "FILE")]
    pub psk: Option<PathBuf>,
    /// Where the test is stored, with its time series (`wirebench report --rpm ID` charts it,
    /// `wirebench compare --rpm A B` compares two).
    #[command(flatten)]
    pub store: StoreArgs,
}
