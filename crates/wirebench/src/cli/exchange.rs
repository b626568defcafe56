//! The flags of `wirebench ping` and `wirebench rr`: request and response sizes, counts,
//! concurrency and flows.

use std::path::PathBuf;

use clap::Args;

use super::common::{AddressArgs, StoreArgs};

/// Flags `ping` and `rr` share: where, how long, timeouts and output.
#[derive(Debug, Args, Clone)]
pub struct ExchangeArgs {
    /// Server to test against, HOST or HOST:PORT (IPv6 as [ADDR]:PORT). Without it, a server is
    /// started in-process on 127.0.0.1 on a free port.
    #[arg(short = 'c', long)]
    pub server: Option<String>,
    /// Transport protocol(s): tcp, udp, quic; a comma list runs each in turn.
    #[arg(
        long = "proto",
        value_name = "PROTO",
        default_value = "tcp",
        default_value_if("udp", clap::builder::ArgPredicate::IsPresent, "udp")
    )]
    pub protocols: String,
    /// UDP: the same as --proto udp (iperf3's -u).
    #[arg(short = 'u', long = "udp", conflicts_with = "protocols")]
    pub udp: bool,
    /// Server port, address family.
    #[command(flatten)]
    pub address: AddressArgs,
    /// Requests (probes) per flow, at least 1 (ping: also -c, as ping(8)'s). Default: 100 for
    /// ping; rr runs for -t/--time.
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    pub count: Option<u64>,
    /// Issue new requests for this long (e.g. 5s, 500ms; a bare number is seconds, as on
    /// `run`), counted from the session start
    /// (connection set-up included), then wait for the outstanding ones. Default for rr: 5s.
    /// (Formerly --duration, still accepted for one release.)
    #[arg(
        short = 't',
        long = "time",
        alias = "duration",
        value_name = "DURATION"
    )]
    pub duration: Option<String>,
    /// Pause after issuing each request, per flow (e.g. 10ms). Default: none. (Formerly
    /// --interval, still accepted for one release; -i/--interval is run's report interval.)
    #[arg(long = "gap", alias = "interval", value_name = "DURATION")]
    pub interval: Option<String>,
    /// UDP: how long a request waits for its response before it is sent again or lost (100us to 60s).
    #[arg(long, default_value = "1s")]
    pub timeout: String,
    /// UDP: times a request is sent again after a timeout before it counts as lost (0 to 100).
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// Print one JSON document (schema: docs/rr-output.schema.json) instead of text (-J as
    /// iperf3's).
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Prove to the server that we hold the pre-shared key in FILE (the server's --psk), and
    /// refuse a server that does not prove it too. With no --server, the embedded server
    /// requires the key.
    #[arg(long, value_name = "FILE")]
    pub psk: Option<PathBuf>,
}

/// Flags of `wirebench ping`.
#[derive(Debug, Args)]
pub struct PingArgs {
    /// Server to ping, HOST or HOST:PORT (IPv6 as [ADDR]:PORT), as ping(8) takes its target;
    /// the same as --server. Without either, a server is started in-process on 127.0.0.1.
    #[arg(value_name = "SERVER", conflicts_with = "server")]
    pub target: Option<String>,
    /// Probe size in bytes (request and answer alike): 1..16MiB for TCP and QUIC, up to 65491
    /// for UDP over IPv4 (65511 over IPv6). Units allowed (1KiB). (-l/--msg-size as on run;
    /// formerly --size, still accepted for one release.)
    #[arg(
        short = 'l',
        long = "msg-size",
        alias = "size",
        value_name = "SIZE",
        default_value = "64"
    )]
    pub size: String,
    /// Also list every probe answered at its first try — when it was sent (the client's wall
    /// clock), its round trip, and its up and down delays — in the JSON (`one_way.probes`) and
    /// the store, for per-packet histograms (probes of 16 bytes or more).
    #[arg(long)]
    pub per_probe: bool,
    /// Where, how long, timeouts and output.
    #[command(flatten)]
    pub common: ExchangeArgs,
    /// Where the sweep is stored (`wirebench report --rr ID` shows it).
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Flags of `wirebench rr`.
#[derive(Debug, Args)]
pub struct RrArgs {
    /// Request size in bytes (same limits as ping's -l).
    #[arg(long, default_value = "64")]
    pub request: String,
    /// Response size in bytes (same limits as ping's -l).
    #[arg(long, default_value = "512")]
    pub response: String,
    /// Requests outstanding per flow (K), 1 to 10000; a comma list (10,20,40,80) runs each in turn.
    #[arg(long, default_value = "1")]
    pub concurrency: String,
    /// Flows (T), 1 to 1024: each its own TCP connection, QUIC connection or UDP socket; a
    /// comma list (1,2,3) runs each in turn, every --concurrency at each (one result per
    /// protocol × flows × K).
    #[arg(long, default_value = "1")]
    pub flows: String,
    /// Open a fresh TCP or QUIC connection for every request (not UDP) and report the handshake
    /// time per request apart from the response time.
    #[arg(long)]
    pub new_connection: bool,
    /// What path the requests cross, one line stored with every result and printed by
    /// `report --rr` (lab/netns-lab.sh rr fills it in: "netns lab: tbf rate ..."). A note that
    /// starts with "relay" (e.g. "relay --loss 2%") also gets the caveat that the relay drops
    /// UDP datagrams only, so TCP's retransmissions there are the kernel's over clean loopback.
    #[arg(long, value_name = "TEXT")]
    pub path_note: Option<String>,
    /// Where, how long, timeouts and output.
    #[command(flatten)]
    pub common: ExchangeArgs,
    /// Where the sweep is stored (`wirebench report --rr ID` shows it).
    #[command(flatten)]
    pub store: StoreArgs,
}
