//! The flags of `wirebench latency` (latency under load, by direction).

use std::path::PathBuf;

use clap::Args;

use super::common::StoreArgs;

/// Flags of `wirebench latency`.
#[derive(Debug, Args)]
pub struct LatencyArgs {
    /// Server to test against, HOST or HOST:PORT (IPv6 as [ADDR]:PORT), as ping's target.
    /// Without it (and without --server), a server is started in-process on 127.0.0.1.
    #[arg(value_name = "SERVER")]
    pub target: Option<String>,
    /// The server, as a flag (the positional SERVER is the same).
    #[arg(short = 'c', long, conflicts_with = "target")]
    pub server: Option<String>,
    /// The phases, in order, comma separated: idle, upload, download, both.
    #[arg(long, default_value = "idle,upload,download,both")]
    pub phases: String,
    /// How long each phase lasts, 1s to 300s.
    #[arg(
        short = 't',
        long = "time",
        value_name = "DURATION",
        default_value = "5s"
    )]
    pub phase_time: String,
    /// The load's transport: tcp or quic.
    #[arg(long, default_value = "tcp")]
    pub load: String,
    /// Load flows per loaded direction, 1 to 16.
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1)]
    pub streams: u32,
    /// Bytes per write of the load, 1 to 16MiB (units allowed).
    #[arg(
        short = 'l',
        long = "msg-size",
        value_name = "SIZE",
        default_value = "128KiB"
    )]
    pub msg_size: String,
    /// The probes' transport: udp, tcp or quic (each stamped by the server: each direction's
    /// delay).
    #[arg(long, default_value = "udp")]
    pub probe: String,
    /// Spacing of the probes, 1ms to 1s; each leaves on schedule, answered or not.
    #[arg(long, value_name = "DURATION", default_value = "20ms")]
    pub probe_interval: String,
    /// Print one JSON document instead of text (the record, with every probe as a time series).
    #[arg(long)]
    pub json: bool,
    /// Prove to the server that we hold the pre-shared key in FILE (the server's --psk). With no
    /// server given, the embedded server requires the key.
    #[arg(long, value_name = "FILE")]
    pub psk: Option<PathBuf>,
    /// Where the test is stored, with every probe (`wirebench report --latency ID` charts each
    /// direction over time).
    #[command(flatten)]
    pub store: StoreArgs,
}
