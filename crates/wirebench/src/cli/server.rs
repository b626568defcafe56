//! The flags of `wirebench server`: where it listens (by default on [`DEFAULT_PORT`], the port
//! clients assume too), its identity, its limits and its services.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args;

/// The port a wirebench server listens on when none is given (TCP and UDP both). Not iperf3's
/// 5201, so both servers can run side by side.
pub const DEFAULT_PORT: u16 = 5310;

/// Flags of `wirebench server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on (-B as iperf3's). The default `::` accepts IPv4 and IPv6 where
    /// the host allows both.
    #[arg(short = 'B', long, value_name = "ADDR", default_value = "::")]
    pub bind: IpAddr,
    /// Serve one session (an iperf3 test, a run's flow, a ping or rr exchange), then stop as
    /// on SIGTERM (sessions already running finish), as iperf3's -1/--one-off.
    #[arg(short = '1', long = "one-off")]
    pub one_off: bool,
    /// Port for TCP and UDP alike.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Print each session summary as one JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// UDP receive lanes: sockets on the server's port, each read by a thread of its own, over
    /// which UDP sessions spread, so that many flows are received on many cores and a request
    /// is answered by the thread that received it (0 to 64; 0: every datagram on the QUIC
    /// endpoint's one socket). Default: one per CPU. A session timed by its round trips
    /// (stop-and-wait, ping, rr -c 1) is served on a socket of its own instead, connected to
    /// its client (at most 64 at once).
    #[arg(long, value_name = "N")]
    pub udp_lanes: Option<usize>,
    /// PEM certificate chain for QUIC (default: a self-signed certificate made at start).
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
    /// Also serve real iperf3 clients (`iperf3 -c HOST -p PORT`: TCP and UDP, forward, -R and
    /// --bidir, -P, -O, the client's -b, --fq-rate, -w, -C, -M, -N, -S, --get-server-output)
    /// on --iperf3-port, with one session line per test (docs/guide/iperf3.md).
    #[arg(long)]
    pub iperf3: bool,
    /// Port of the iperf3 listener (TCP and UDP).
    #[arg(long, value_name = "PORT", default_value_t = wirebench_core::wire::iperf3::DEFAULT_PORT, requires = "iperf3")]
    pub iperf3_port: u16,
    /// Sessions running at once, all clients together; more are refused with a reason (1 to 100000).
    #[arg(long, value_name = "N", default_value_t = wirebench_core::vocab::limits::DEFAULT_MAX_SESSIONS, help_heading = "Limits")]
    pub max_sessions: usize,
    /// Sessions running at once from one client address (1 to --max-sessions). Default: 128
    /// (the largest -P), or --max-sessions if that is lower.
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub max_sessions_per_client: Option<usize>,
    /// Longest a session may run (e.g. 10m, 90s); a session still running then is aborted and
    /// reported as such.
    /// iperf3's --server-max-duration SECS is taken too (a bare number is seconds).
    #[arg(
        long,
        alias = "server-max-duration",
        value_name = "DURATION",
        default_value = "10m",
        help_heading = "Limits"
    )]
    pub max_duration: String,
    /// Most bytes one session may move, what the server reads and sends together (e.g.
    /// 100GiB): a larger total is refused, and a session of any kind (rr, perf, iperf3
    /// included) that reaches it is aborted.
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "100GiB",
        help_heading = "Limits"
    )]
    pub max_bytes: String,
    /// Highest data rate of one session (e.g. 100Mbit); default unlimited. The server paces
    /// what it sends and reads (rr responses, perf and iperf3 included); a UDP stream towards
    /// the server must be paced by its sender (--rate at most this), or it is refused, and a
    /// sender far above the rate it declared is aborted. iperf3's --server-bitrate-limit is
    /// taken too (its /SECS averaging is not: the rate holds as the session goes).
    #[arg(
        long,
        alias = "server-bitrate-limit",
        value_name = "RATE",
        help_heading = "Limits"
    )]
    pub max_rate: Option<String>,
    /// Largest control message a client may send, in bytes (1024 to 65536).
    #[arg(long, value_name = "BYTES", default_value_t = wirebench_core::wire::proto::MAX_CONTROL_FRAME, help_heading = "Limits")]
    pub max_control_size: usize,
    /// How long a new connection may take to send its preamble and session request before it
    /// is closed (slow or silent clients; 100ms to 60s).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        help_heading = "Limits"
    )]
    pub hello_timeout: String,
    /// On SIGINT, SIGTERM or SIGHUP, how long running sessions may go on before they are aborted (a
    /// second signal aborts them at once; 0s to 1h).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        help_heading = "Limits"
    )]
    pub shutdown_grace: String,
    /// Serve the server's own counters (sessions started, finished, aborted, refused by limit;
    /// bytes per protocol; sessions running) as Prometheus metrics at http://ADDR/metrics,
    /// e.g. 127.0.0.1:9310.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Require every client to prove it holds the pre-shared key in FILE (HMAC challenge-response
    /// on the control connection; the key never crosses the wire). FILE holds at least 16 bytes;
    /// surrounding whitespace is ignored (e.g. `head -c 32 /dev/urandom | base64 > FILE`). QUIC
    /// perf clients are then refused; the iperf3 listener, which cannot check a key, is not allowed.
    #[arg(long, value_name = "FILE", conflicts_with = "iperf3")]
    pub psk: Option<PathBuf>,
}
