//! The flags of `wirebench run`: the plan, the data path, the output and the interop targets
//! (`--iperf3`, `--perf-server`), and the `--rate max` search.

use std::path::PathBuf;

use clap::Args;

use super::common::{AddressArgs, StoreArgs};
use super::iperf3_flags::{Iperf3Flags, Iperf3Refused};

/// Flags of `wirebench run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Server to test against, HOST or HOST:PORT (IPv6 as [ADDR]:PORT). Without it, a server is
    /// started in-process on 127.0.0.1 on a free port.
    #[arg(short = 'c', long)]
    pub server: Option<String>,
    /// Transport protocol(s): tcp, udp, quic; a comma list runs each.
    #[arg(
        long = "proto",
        value_name = "PROTO",
        default_value = "tcp",
        default_value_if("udp", clap::builder::ArgPredicate::IsPresent, "udp")
    )]
    pub protocols: String,
    /// UDP: the same as --proto udp (iperf3's -u; unlike iperf3, UDP is unpaced unless -b/--rate
    /// is given, except with --iperf3, where iperf3's 1Mbit default applies).
    #[arg(short = 'u', long = "udp", conflicts_with = "protocols")]
    pub udp: bool,
    /// Server port, address family.
    #[command(flatten)]
    pub address: AddressArgs,
    /// Transfer mechanism(s): stream (alias streaming) or saw (alias stop-and-wait); a comma list runs each.
    #[arg(long = "mode", default_value = "stream")]
    pub mechanisms: String,
    /// Application message size in bytes, or a sweep list (64,1KiB or 1..65535:x2): 1..65535 for every protocol (UDP: up to what one
    /// datagram holds after our 16-byte header, 65491 over IPv4); TCP and QUIC up to 16MiB.
    /// Units allowed (64KiB). Default 128KiB when every run streams over TCP or QUIC (bulk data
    /// in iperf3's blocks; a message is one write), else 1024 for the whole plan (round trips,
    /// UDP datagrams, and protocols or mechanisms set side by side compare one size; run says
    /// so under its first run when TCP or QUIC then stream 1 KiB writes); with --iperf3,
    /// iperf3's own: 128KiB for TCP, 1460 for UDP.
    #[arg(short = 'l', long = "msg-size", value_name = "SIZE")]
    pub msg_size: Option<String>,
    /// Total bytes to send, exact: 1073741824, 500MiB, 1GiB (K/M/G, KiB/MiB/GiB are binary;
    /// kB/MB/GB decimal), or a sweep list (1MiB,10MiB). The last message carries the remainder.
    /// Default 100MiB; with --iperf3 and no -n, -k or -t, iperf3's own: 10 seconds.
    #[arg(short = 'n', long = "total", value_name = "TOTAL")]
    pub total: Option<String>,
    /// Run every combination this many times and print Min/Avg/Max summaries.
    #[arg(short = 'r', long, default_value_t = 1)]
    pub repeat: u32,
    /// UDP stop-and-wait: fixed retransmission timeout (e.g. 1s, 20ms). Default: adaptive (RFC 6298 style).
    /// Refused when the plan has no UDP stop-and-wait run.
    #[arg(long)]
    pub rto: Option<String>,
    /// Pace the sender to this rate (e.g. 500Mbit, 1Gbit; -b as iperf3's): UDP streaming by
    /// the sender's clock, TCP by the kernel (SO_MAX_PACING_RATE, Linux), QUIC by the
    /// application; -R paces the server. Refused for a plan of UDP stop-and-wait alone.
    /// Default: as fast as it goes. `max` (UDP streaming only): first search the highest rate
    /// the path carries with at most --max-loss lost (RFC 2544 style, see "Rate search"), then
    /// run the transfer at the rate found; with a sweep (-l 512,1472) each message size × total
    /// searches its own rate, and its repeats share it. A failing trial ends as soon as the
    /// server's receive counts (reported every 20 ms) decide it. Refused for TCP, QUIC
    /// (congestion-controlled: it repairs loss and slows down, so its loss-free rate is simply
    /// what it reaches) and stop-and-wait.
    #[arg(short = 'b', long)]
    pub rate: Option<String>,
    /// UDP streaming: how long the server waits for datagrams still in flight after the client is done.
    #[arg(long, default_value = "250ms")]
    pub grace: String,
    /// Socket buffer size (SO_SNDBUF and SO_RCVBUF), e.g. 4MiB: TCP data sockets on both ends
    /// and the client's UDP socket. Default: the OS's (autotuning for TCP).
    #[arg(short = 'w', long = "window")]
    pub window: Option<String>,
    /// TCP congestion control on both ends, one of
    /// /proc/sys/net/ipv4/tcp_available_congestion_control (e.g. cubic, bbr, reno).
    #[arg(short = 'C', long = "congestion")]
    pub congestion: Option<String>,
    /// Set TCP_NODELAY on TCP data sockets when streaming too (stop-and-wait always sets it);
    /// -N as iperf3's.
    #[arg(short = 'N', long, visible_alias = "no-delay")]
    pub nodelay: bool,
    /// Spin on non-blocking sockets instead of sleeping, for the lowest stop-and-wait latency at
    /// the cost of a busy CPU: TCP on both ends, UDP on the client (the UDP server side still
    /// sleeps); not QUIC, and not UDP with -R.
    #[arg(long)]
    pub busy_poll: bool,
    /// QUIC: the largest UDP payload (path MTU) PMTU discovery may reach, either direction,
    /// 1200..65527 [default: 6550, the largest with segmentation offload; an Ethernet path stops
    /// at its own 1452-1472]. Loopback carries 65527 (less CPU per GiB still); above 6550 QUIC
    /// sends without segmentation offload. 1452 compares with quinn's default. The transport
    /// line and JSON report the MTU reached.
    #[arg(long, value_name = "BYTES")]
    pub quic_mtu: Option<u16>,
    /// Run each test as N flows at once (1 to 128), each its own connection (UDP: socket) and
    /// server session; -n is split exactly across them by whole messages. Prints the summed
    /// figures and one line per flow.
    #[arg(short = 'P', long, value_name = "N", default_value_t = 1)]
    pub parallel: u32,
    /// Print an interval line every D while a run goes: bytes and bit/s the client sent in
    /// it, and the server's bytes, bit/s and UDP loss in it. The JSON output keeps both
    /// series. A bare number is seconds as iperf3's -i (-i 1, -i .5), or give a unit (500ms);
    /// at least 10ms; -i 0 prints none. Every second by default with --json-stream,
    /// --iperf3-shape and --iperf3, as iperf3 reports.
    #[arg(short = 'i', long, value_name = "D")]
    pub interval: Option<String>,
    /// Reverse: the server sends and the client receives (every protocol and mechanism). The
    /// client then reports what it received (UDP: with loss, duplicates, reordering, jitter)
    /// and the server what it sent.
    #[arg(short = 'R', long)]
    pub reverse: bool,
    /// Both directions at once, as iperf3's --bidir: beside each run's client → server
    /// sessions, as many server → client ones (as -R) run at the same time; -P N is N flows
    /// each way, and -n (or -t) applies to each direction. Both directions' figures are
    /// printed (text and JSON) and stored; the run's goodput line adds them up and says
    /// "both directions". The -i lines as it goes are the client → server direction's (each
    /// server session keeps its own series). Every protocol and mechanism; not with -R; -P up
    /// to 64.
    #[arg(long)]
    pub bidir: bool,
    /// Print one JSON document (schema: docs/run-output.schema.json) instead of text (-J as
    /// iperf3's).
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Unit of the rates in the text output (run blocks and interval lines), as iperf3's -f:
    /// k, m, g, t (kbit/s .. Tbit/s) or K, M, G, T (KiB/s .. TiB/s). JSON keeps bit/s.
    #[arg(short = 'f', long = "rate-unit", value_name = "UNIT")]
    pub rate_unit: Option<String>,
    /// Put the impairment relay between client and server (started in-process on loopback):
    /// KEY=VALUE list of loss, delay, jitter, reorder, duplicate, rate, queue, each VALUE
    /// optionally up: or down:, e.g. loss=5%,delay=10ms or loss=up:2%,rate=down:50Mbit.
    /// Loss, reorder and duplicate apply to UDP and QUIC only.
    #[arg(long, value_name = "SPEC")]
    pub impair: Option<String>,
    /// Seed of the relay's random decisions (with --impair).
    #[arg(long, value_name = "S", default_value_t = 1, requires = "impair")]
    pub impair_seed: u64,
    /// Measure latency under load: beside every measured run, small request-response probes on
    /// sessions of their own (through the relay with --impair) — 10 before the load (idle
    /// round trip), then one per --probe-interval while it runs. Prints idle and loaded
    /// p50/p90/p99, the increase (loaded minus idle median: bufferbloat) and probes sent and
    /// lost; JSON and the store keep every probe as a time series. LIST: udp, tcp, quic, same
    /// (the run's protocol), comma separated; bare --latency-probe means udp,same.
    #[arg(
        long,
        value_name = "LIST",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "udp,same",
        conflicts_with_all = ["iperf3", "perf_server"]
    )]
    pub latency_probe: Option<String>,
    /// Spacing of the latency probes (with --latency-probe), 1ms to 10s; default 100ms. A
    /// probe unanswered within 2 s is counted lost; probes leave on schedule, answered or not.
    #[arg(long, value_name = "DURATION", requires = "latency_probe")]
    pub probe_interval: Option<String>,
    /// Results store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Warm-up and progress.
    #[command(flatten)]
    pub plan: PlanArgs,
    /// The rate search of --rate max.
    #[command(flatten)]
    pub search: SearchArgs,
    /// Tests against iperf3 servers.
    #[command(flatten)]
    pub iperf3: Iperf3Args,
    /// Tests against QUIC perf servers.
    #[command(flatten)]
    pub perf: PerfArgs,
    /// iperf3's flags with iperf3's meaning.
    #[command(flatten)]
    pub iperf3_flags: Iperf3Flags,
    /// iperf3's flags without a meaning here, each answered with what to use instead.
    #[command(flatten)]
    pub refused: Iperf3Refused,
    /// Prove to the server that we hold the pre-shared key in FILE (the server's --psk), and
    /// refuse a server that does not prove it too. With no --server, the embedded server
    /// requires the key. Not for --iperf3 or --perf-server.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["iperf3", "perf_server"])]
    pub psk: Option<PathBuf>,
}

/// Flags of `wirebench run` for testing against a real iperf3 server (`--iperf3`).
#[derive(Debug, Args, Clone, Default)]
pub struct Iperf3Args {
    /// Test against a real iperf3 server at HOST[:PORT] (default port 5201) instead of a
    /// wirebench server: --proto tcp or udp, -l block length, -n bytes or -t time, -P, -R,
    /// --rate (UDP, per stream; default 1Mbit as iperf3's). Prints our figures next to the
    /// server's and stores the test as a one-run campaign (--db, --no-store). -P and -R mean
    /// iperf3's -P (parallel streams) and -R (the server sends).
    #[arg(long, value_name = "HOST[:PORT]")]
    pub iperf3: Option<String>,
    /// Send for this long instead of sending -n bytes, as iperf3's -t: a bare number is
    /// seconds (-t 10), or give a unit (10s, 500ms, 2m). The sender stops after its last whole
    /// message and ends the session as usual, so both sides' counts stay exact; the output and
    /// the store say the time ended the run. Not with -n.
    #[arg(short = 't', long = "time", value_name = "DURATION")]
    pub time: Option<String>,
    /// Leave the first N of each run out of its figures, as iperf3's -O: a bare number is
    /// seconds (-O 1), or give a unit (500ms). Each end notes what it has moved N after its
    /// transfer began; goodput is what the receiver got after its mark over the time after
    /// the client's, and the output shows the omitted span apart. With -t, the run still
    /// sends for -t in all (iperf3 adds -O to -t: here -O must be shorter than -t). Not with
    /// --iperf3, --perf-server or --rate max.
    #[arg(short = 'O', long = "omit", value_name = "N")]
    pub omit: Option<String>,
}

/// Flags of `wirebench run` for testing against a QUIC perf server (`--perf-server`).
#[derive(Debug, Args, Clone, Default)]
pub struct PerfArgs {
    /// Test against a QUIC perf server (draft-banks-quic-performance-00, ALPN "perf") at
    /// HOST:PORT, e.g. a wirebench server's port; needs --proto quic and a trust choice
    /// (--perf-ca or --perf-insecure).
    #[arg(long, value_name = "HOST:PORT")]
    pub perf_server: Option<String>,
    /// Bytes to upload on one stream (e.g. 100MiB). Default: 10MiB when --download is not given.
    #[arg(long, value_name = "BYTES")]
    pub upload: Option<String>,
    /// Bytes to request from the server on one stream (e.g. 100MiB). Default: 10MiB when
    /// --upload is not given. With both, the upload runs first, then the download.
    #[arg(long, value_name = "BYTES")]
    pub download: Option<String>,
    /// Verify the perf server's certificate against this PEM CA (or self-signed) certificate.
    #[arg(long, value_name = "FILE", conflicts_with = "perf_insecure")]
    pub perf_ca: Option<PathBuf>,
    /// Name to verify in the server's certificate (default: the HOST of --perf-server).
    #[arg(long, value_name = "NAME", requires = "perf_ca")]
    pub perf_server_name: Option<String>,
    /// Accept any certificate from the perf server, unverified: anyone on the path can
    /// impersonate it. For lab use against servers with throw-away certificates.
    #[arg(long)]
    pub perf_insecure: bool,
}

/// Warm-up and progress flags of `wirebench run`.
#[derive(Debug, Args, Clone, Default)]
pub struct PlanArgs {
    /// Warm-up runs: before the measured runs of each message size × total, run every
    /// protocol × mechanism this many times, unmeasured (not printed, not stored).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup: u32,
    /// Hide the progress bar (runs done, current configuration and repeat, time left) that
    /// `run` draws on stderr when stderr is a terminal.
    #[arg(short, long)]
    pub quiet: bool,
}

/// The help heading of the rate search flags (per flag: a heading on the group would carry
/// over to the flags after it).
const SEARCH_HEADING: &str = "Rate search (--rate max, UDP streaming)";

/// The rate search of `wirebench run --rate max`: trials of paced UDP streaming, a binary
/// search between a low and a high bound, the rate found confirmed by a final trial. Each flag
/// is refused without --rate max.
#[derive(Debug, Args, Clone, Default)]
pub struct SearchArgs {
    /// Largest share of datagrams a passing trial may lose, e.g. 0%, 0.1% [default: 0%].
    #[arg(long, value_name = "PCT", help_heading = SEARCH_HEADING)]
    pub max_loss: Option<String>,
    /// Lowest rate tried [default: 10Mbit]; if it loses too much, no rate is found.
    #[arg(long, value_name = "RATE", help_heading = SEARCH_HEADING)]
    pub search_low: Option<String>,
    /// Highest rate tried (the first trial) [default: 10Gbit].
    #[arg(long, value_name = "RATE", help_heading = SEARCH_HEADING)]
    pub search_high: Option<String>,
    /// Stop when the highest passing and lowest failing rates are this close, as a share of
    /// the passing rate [default: 1%].
    #[arg(long, value_name = "PCT", help_heading = SEARCH_HEADING)]
    pub resolution: Option<String>,
    /// Length of a trial: each sends rate × this (at least 250 datagrams) [default: 200ms].
    #[arg(long, value_name = "D", help_heading = SEARCH_HEADING)]
    pub trial: Option<String>,
    /// The server's --grace for late datagrams after each trial (not the run's 250ms, which
    /// would make a dozen trials slow) [default: 30ms].
    #[arg(long, value_name = "D", help_heading = SEARCH_HEADING)]
    pub trial_grace: Option<String>,
}
