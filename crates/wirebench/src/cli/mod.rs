//! Command-line flags as the user types them (clap derive). The doc comments here are the `--help`
//! text. Nothing here validates combinations: `config` turns these raw flags into typed settings.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// The port a wirebench server listens on when none is given (TCP and UDP both). Not iperf3's
/// 5201, so both servers can run side by side.
pub const DEFAULT_PORT: u16 = 5310;

const RUN_AFTER_HELP: &str = "\
Order: message sizes (-l) in the order given, then totals (-n) in the order given, then every
protocol × mechanism combination, protocols in the order given, then mechanisms in the order
given, repeats innermost. -l and -n take sweep lists: comma lists and ranges FROM..TO[:xN|:+STEP]
(default step x2; a range always ends at TO), e.g. -l 1..65535:x2 or -n 1MiB,10MiB.

Each run prints the client's figures (transmission time, messages sent, bytes sent, throughput,
send calls; UDP stop-and-wait also retransmissions and timeouts), the server's per-session
line (messages read, bytes read, time, throughput, read calls; UDP lost, duplicate and
out-of-order datagrams) and, for stop-and-wait, the round-trip time min / avg / max with
stddev, p50, p90, p99 and p99.9, then the transport counters of both ends (TCP_INFO; QUIC
stats; UDP tallies) with retrans_rate — the share of data packets sent again or lost, comparable
across protocols: TCP (total_retrans - dsack_dups) / data_segs_out, QUIC lost / sent packets,
UDP stop-and-wait retransmissions / datagrams, UDP streaming lost / sent — and the CPU seconds
(user + system, getrusage) of the client and server processes, with CPU seconds per GiB moved
(one figure for both with the embedded server, which shares the client's process). With
--repeat N > 1 it ends with Min / Avg / Max tables per combination, for the client view and
the server view.

Every finished run is committed to the results store before the next starts (default
$XDG_DATA_HOME/wirebench/results.sqlite3; --db PATH, --db postgres://user@host/dbname or
$WIREBENCH_DB, or --no-store). SIGINT (Ctrl-C), SIGTERM
or SIGHUP marks the campaign aborted and stores the run in flight as aborted, with the client's
figures so far; a second signal exits at once. A campaign whose process died without storing
its end (SIGKILL, a crash) is marked interrupted by the next command that opens the store on
that host. `wirebench runs`, `show`, `report`, `compare` and `export` read it back.

A client notices within about a second that its server is gone (the control connection closes,
the UDP port answers ICMP port unreachable, QUIC hears nothing for 3 s): it stops sending, says
what it had sent, and the run is stored as aborted with the reason; the exit status is 1.

Exit status: 0 every run finished, 1 a run failed (finished runs are still printed), 2 bad usage,
130 / 143 / 129 stopped by SIGINT / SIGTERM / SIGHUP (128 + the signal number).";

/// Measure how fast data moves over TCP, UDP and QUIC, by streaming or stop-and-wait.
#[derive(Debug, Parser)]
#[command(name = "wirebench", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a long-lived server: one port for TCP (control and TCP data) and UDP (UDP and QUIC data).
    ///
    /// It serves many sessions, one after another and at the same time, and prints one summary
    /// after each session: protocol, mechanism, messages read, bytes read, time and throughput.
    /// TCP sessions run on threads of their own; the rest (control, QUIC, UDP) on one worker
    /// thread fewer than there are CPUs, at least one (TOKIO_WORKER_THREADS=N sets the number).
    Server(ServerArgs),
    /// Run a test against a server (or, without --server, against one started in-process on loopback).
    ///
    /// Example: wirebench run --proto tcp,udp,quic --mode stream,saw -l 1024 -n 500MiB --repeat 5
    #[command(after_long_help = RUN_AFTER_HELP)]
    Run(Box<RunArgs>),
    /// List the campaigns in the results store: id, start time (UTC), what ran, runs stored, status.
    Runs(DbArgs),
    /// Show one stored campaign: its parameters, environment and every run with both views.
    Show(ShowArgs),
    /// Print one stored campaign as JSON on stdout, for `wirebench import` elsewhere.
    ///
    /// The document is the `run --json` document plus a `campaign` block (id, times, status,
    /// planned sizes and totals, each run's size and total, environment).
    Export(ShowArgs),
    /// Store a campaign from a file written by `wirebench export` or `wirebench run --json`.
    Import(ImportArgs),
    /// Copy results between stores: an SQLite file and a PostgreSQL database, either way.
    ///
    /// Example: wirebench store copy --from ~/.local/share/wirebench/results.sqlite3
    /// --to postgres://wirebench@db.example/wirebench
    #[command(subcommand)]
    Store(StoreCommand),
    /// Summarise one stored campaign as a table, Markdown, CSV, JSON or an HTML page with charts.
    ///
    /// Per configuration (message size × total × protocol × mechanism): min / avg / median / max
    /// / stddev of time, throughput, messages and bytes, for the client and the server view.
    ///
    /// Example: wirebench report --last --format markdown -o results.md
    Report(ReportArgs),
    /// Compare two stored campaigns per configuration, with a significance test.
    ///
    /// Median client transfer time and throughput, the ratio B/A, and a two-sided Mann–Whitney
    /// U test (normal approximation with tie and continuity correction), significant when
    /// p < 0.05.
    ///
    /// Needs about 4 or more runs per configuration on each side (--repeat) for any difference
    /// to be significant. Exit status 1 when --fail-on-regression is given and a configuration
    /// is slower by more than that many percent and significantly so.
    Compare(CompareArgs),
    /// Forward UDP (so also QUIC) and TCP from --listen to --to, impairing what passes.
    ///
    /// Example: wirebench relay --listen 127.0.0.1:5311 --to 127.0.0.1:5310 --loss 5% --delay 10ms
    #[command(after_long_help = RELAY_AFTER_HELP)]
    Relay(RelayArgs),
    /// Ping-pong over an open connection: round-trip time percentiles, lost and late probes (UDP),
    /// and connection set-up time (TCP connect, QUIC handshake, QUIC resumed with 0-RTT).
    ///
    /// As with ping(8), the server is the argument and -c is the count: `wirebench ping -c 5
    /// HOST` (the server is also --server; ping has no -c/--server, unlike run and rr).
    ///
    /// One flow, one probe outstanding; each probe is SIZE bytes and so is its answer. Prints
    /// min / avg / max / stddev and p50, p90, p99, p99.9 of the round trip (HDR histogram, 3
    /// significant digits). A UDP probe not answered within --timeout is sent again up to
    /// --retries times, then lost; an answer that comes after that is counted as late, never as
    /// a sample.
    ///
    /// Example: wirebench ping --proto tcp,udp,quic -l 1024 -c 20000 127.0.0.1
    #[command(
        mut_arg("server", |a| a.short(None)),
        mut_arg("count", |a| a.short('c'))
    )]
    Ping(PingArgs),
    /// Request-response load (DNS-like): T flows with K requests outstanding each; requests/s,
    /// response-time percentiles, UDP requests lost (timeout and retries) and late.
    ///
    /// A comma list for --concurrency sweeps K in one command, one line per K (loss grows with
    /// load). With --new-connection every request opens a fresh TCP or QUIC connection (as
    /// netperf TCP_CRR does) and the handshake time per request is reported apart from the
    /// response time.
    ///
    /// Example: wirebench rr --proto udp --request 64 --response 512 --concurrency 10,20,40,80 --flows 4
    Rr(RrArgs),
    /// DNS response time against a real resolver over UDP, TCP and DNS-over-TLS: queries/s,
    /// response-time percentiles, timeouts and retries, TC=1 answers retried over TCP, wrong
    /// answers, TCP retransmissions, and set-up cost (TCP connect, TLS handshake) apart.
    ///
    /// Every response is checked (ID, question echoed, QR, RCODE); one that does not match is
    /// counted as wrong, never timed. NOERROR, NXDOMAIN, SERVFAIL and REFUSED are counted
    /// apart. A comma list for --concurrency sweeps K in one command and prints the
    /// timeout/loss curve. Only query resolvers you run or may load.
    ///
    /// Example: wirebench dns --resolver 127.0.0.1:5353 --name host.example --transport udp,tcp --concurrency 10,20,40
    Dns(DnsArgs),
    /// Responsiveness under working conditions: round trips per minute (RPM) under load.
    ///
    /// After draft-ietf-ippm-responsiveness: loads the path with TCP flows, one more per
    /// interval, and measures round trips on new and on existing connections meanwhile. Prints round trips per minute with the draft's rating (Poor < 300 ≤ Fair < 1000 ≤ Good
    /// < 6000 ≤ Excellent) and confidence (Low, Medium, High), its foreign and self components,
    /// idle latency and goodput, in under 20 s by default. Without --server it runs against a
    /// server started in-process on loopback (put --impair rate=...,queue=... in front of it
    /// to see a bottleneck queue).
    ///
    /// Example: wirebench rpm -c server.example --direction both --json
    #[command(after_long_help = RPM_AFTER_HELP)]
    Rpm(RpmArgs),
    /// Print a shell completion script for bash, zsh, fish, elvish or powershell on stdout.
    ///
    /// Examples: wirebench completions bash > ~/.local/share/bash-completion/completions/wirebench;
    /// wirebench completions zsh > ~/.zfunc/_wirebench; wirebench completions fish >
    /// ~/.config/fish/completions/wirebench.fish
    Completions(CompletionsArgs),
    /// Print the manual page (roff) on stdout, or with --dir write one page per subcommand there.
    ///
    /// Examples: wirebench man | man -l -; wirebench man --dir /usr/local/share/man/man1
    Man(ManArgs),
    /// Serve Prometheus probes, as the blackbox exporter does: each scrape of
    /// /probe?target=HOST:PORT runs one bounded test against that wirebench server.
    ///
    /// Query parameters: target (HOST:PORT, required), proto (tcp, udp, quic), mode (stream,
    /// saw), total (default 10MiB), size (message size, default 1024), reverse (true/false).
    /// With kind=ping: target, proto, size (default 64) and count (round trips, default 100),
    /// as `wirebench ping`. With kind=rr: target, proto, request, response, concurrency, flows,
    /// count (requests per flow, default 1000), timeout, retries, as `wirebench rr`. With
    /// kind=dns (target is a DNS server): transport (udp, tcp), name (required), type, count
    /// (default 100), concurrency, flows, timeout, retries, as `wirebench dns`; it succeeds when
    /// every answer is NOERROR. With kind=iperf3 (target is a real iperf3 -s): proto (tcp,
    /// udp), total, size, parallel, reverse, rate, as `run --iperf3`. Every kind's volume counts
    /// against --max-total. The answer is Prometheus text: wirebench_probe_success (0 with
    /// wirebench_probe_failure_info{reason=...} when it failed), _duration_seconds,
    /// _goodput_bytes_per_second, bytes, UDP loss, retransmission ratio, RTT quantiles,
    /// requests or queries per second. /metrics serves the exporter's own counters.
    ///
    /// Example: wirebench exporter --listen 127.0.0.1:9311 --allow 10.0.0.0/8 --max-total 50MiB
    Exporter(ExporterArgs),
}

const RPM_AFTER_HELP: &str = "\
RPM = (foreign + self) / 2 with foreign = 60000 / ((TM(tcp) + TM(request)) / 2) on new
connections and self = 60000 / TM(request) on an existing one, TM the 95% trimmed mean in
milliseconds over the last MAD = 4 intervals. Goodput is stable when the standard deviation of
the last 4 moving averages is below 5% of the latest; RPM likewise after that. The load goes
through the server's normal session admission, so its --max-sessions, --max-rate, --max-bytes
and --psk apply; a refused flow stops the ramp. Where this differs from the draft is printed
with every result (and listed under \"differences\" in the JSON; schema:
docs/rpm-output.schema.json).

Each test is stored in the results database as an rpm campaign with its time series (every
interval's goodput and probe round trips; --db PATH, or --no-store): `wirebench report --rpm ID`
shows it (--format html charts latency over time above goodput), `wirebench compare --rpm A B`
compares two. SIGINT, SIGTERM or SIGHUP ends the load early and stores what finished as aborted.

Exit status: 0 an RPM was measured, 1 the test failed or no probe completed, 2 bad usage,
128 + the signal when a signal stopped it.";

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

/// Flags of `wirebench exporter`.
#[derive(Debug, Args)]
pub struct ExporterArgs {
    /// Address and port to serve HTTP on (/probe, /metrics).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9311")]
    pub listen: String,
    /// Targets a probe may test: IP, IP:PORT, [IPv6]:PORT, a CIDR block (10.0.0.0/8) or a host
    /// name (resolved once, at start); repeat the flag for more. Default: loopback only
    /// (127.0.0.0/8 and ::1). Others get 403; a probe's target is checked on its resolved address.
    #[arg(long, value_name = "HOST[:PORT]|CIDR", action = clap::ArgAction::Append)]
    pub allow: Vec<String>,
    /// Largest total one probe may transfer (a larger total= gets 400).
    #[arg(long, value_name = "SIZE", default_value = "100MiB")]
    pub max_total: String,
    /// Longest a probe may run; a smaller scrape timeout (X-Prometheus-Scrape-Timeout-Seconds,
    /// less 0.5s) wins. A probe that runs out of time answers wirebench_probe_success 0.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub max_time: String,
    /// Probes that may run at once; more get 429 (1 to 64).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_concurrent: usize,
    /// Store every finished probe in the results database, as `run`, `rr`, `dns` and
    /// `run --iperf3` store theirs (run and iperf3 probes as one-run campaigns, ping and rr as
    /// rr sweeps, dns as DNS campaigns), so `wirebench runs` and Prometheus agree. Default: no.
    #[arg(long)]
    pub store: bool,
    /// The database --store writes to (implies --store): a file or a postgres:// URL.
    /// Default: $WIREBENCH_DB, else the default results database.
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}

const RELAY_AFTER_HELP: &str = "\
Directions: every impairment flag takes VALUE for both directions, or up:VALUE (client → server)
or down:VALUE (server → client); repeat the flag for both, e.g. --loss up:5% --loss down:1%.

Order per packet: loss, then the rate limiter (a FIFO bottleneck; a packet that finds more than
--queue bytes waiting is dropped), then delay ± jitter. Jitter never reorders; --reorder holds a
packet back until the next one has left (at most 50 ms). UDP gets one socket toward the server
per client address. TCP is relayed as a byte stream: delay, jitter and rate apply, and all TCP
connections of a direction share one link and one --queue (a new connection waits behind the
others' queued bytes: a full queue adds queue / rate of delay; a full queue stops reading instead
of dropping); loss, reorder and duplicate apply to UDP only, and --proto tcp refuses them.

Counts per direction (received, forwarded, dropped, queue drops, duplicated, reordered, delayed)
are printed on SIGUSR1 and at exit (Ctrl-C or SIGTERM); --json prints them as one JSON object
per line. The same --seed with the same traffic makes the same decisions.";

/// Flags of `wirebench relay`.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to accept clients on, TCP and UDP on one port (e.g. 127.0.0.1:5311).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// The server to forward to, HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    pub to: String,
    /// Packet loss: P% at random, or ge:P/R[/H[/K]] for Gilbert–Elliott bursts (P good→bad,
    /// R bad→good, H loss in the bad state, default 100%, K in the good state, default 0%).
    #[arg(long, value_name = "[up:|down:]P", action = clap::ArgAction::Append)]
    pub loss: Vec<String>,
    /// One-way delay added to every packet (e.g. 10ms).
    #[arg(long, value_name = "[up:|down:]D", action = clap::ArgAction::Append)]
    pub delay: Vec<String>,
    /// Each packet's delay varies uniformly within ±D (never reordering).
    #[arg(long, value_name = "[up:|down:]D", action = clap::ArgAction::Append)]
    pub jitter: Vec<String>,
    /// Share of packets held back until the next one has left (e.g. 1%).
    #[arg(long, value_name = "[up:|down:]P", action = clap::ArgAction::Append)]
    pub reorder: Vec<String>,
    /// Share of packets sent twice (e.g. 1%).
    #[arg(long, value_name = "[up:|down:]P", action = clap::ArgAction::Append)]
    pub duplicate: Vec<String>,
    /// Bottleneck rate (e.g. 100Mbit): a token bucket one packet deep, so nothing leaves faster
    /// than the rate.
    #[arg(long, value_name = "[up:|down:]RATE", action = clap::ArgAction::Append)]
    pub rate: Vec<String>,
    /// Bytes the rate queue holds before it drops (default 256KiB).
    #[arg(long, value_name = "[up:|down:]SIZE", action = clap::ArgAction::Append)]
    pub queue: Vec<String>,
    /// Seed of the random decisions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Which transports to relay: tcp, udp or both (tcp,udp).
    #[arg(long, default_value = "tcp,udp")]
    pub proto: String,
    /// Print the counts as one JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

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

/// Where the server is beyond its name (iperf3's -p, -4 and -6), for `run`, `ping` and `rr`.
#[derive(Debug, Args, Clone, Default)]
pub struct AddressArgs {
    /// The server's port, as iperf3's -p: joined to a --server (or --iperf3) HOST given
    /// without one. Default: 5310 (--iperf3: 5201).
    #[arg(short = 'p', long = "port", value_name = "PORT")]
    pub port: Option<u16>,
    /// IPv4 only, as iperf3's -4: a server name resolves to an IPv4 address (the embedded server
    /// listens on 127.0.0.1, as by default).
    #[arg(
        short = '4',
        long = "ipv4",
        visible_alias = "version4",
        conflicts_with = "ipv6"
    )]
    pub ipv4: bool,
    /// IPv6 only, as iperf3's -6: a server name resolves to an IPv6 address; the embedded
    /// server listens on ::1.
    #[arg(short = '6', long = "ipv6", visible_alias = "version6")]
    pub ipv6: bool,
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
    /// Flows (T), 1 to 1024: each its own TCP connection, QUIC connection or UDP socket.
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
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

/// Flags of `wirebench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Baseline campaign id.
    pub a: i64,
    /// Campaign to compare with the baseline.
    pub b: i64,
    /// Exit with status 1 when B's median time is more than PCT percent above A's and the
    /// difference is significant (e.g. 10).
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
    /// A and B are rpm campaigns (as `wirebench rpm` printed them): compares RPM, loaded p50
    /// and p99 and the sample counts, with a Mann–Whitney U test of the probes' round trips.
    /// With --fail-on-regression PCT, exit status 1 when B's round trips are significantly
    /// longer and its RPM is lower, or its loaded p99 higher, by more than PCT percent.
    #[arg(long)]
    pub rpm: bool,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Flags of `wirebench report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Campaign id, as `wirebench runs` lists it.
    #[arg(required_unless_present = "last", conflicts_with = "last")]
    pub id: Option<i64>,
    /// Report on the newest campaign.
    #[arg(long)]
    pub last: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
    /// Write to this file instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// HTML: the run whose interval series (measured with `run -i D`) the throughput-over-time
    /// chart shows, numbered as `wirebench show` lists them. Default: the first run that has them.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub run: Option<u64>,
    /// The id (or --last) is a DNS campaign, as `wirebench dns` printed it: --format html
    /// charts its timeouts against concurrency; table prints its sweep table; json its results.
    #[arg(long, conflicts_with = "run")]
    pub dns: bool,
    /// The id (or --last) is an rr sweep, as `wirebench rr` printed it: --format html charts
    /// UDP loss and TCP/QUIC retransmissions against requests in flight; table prints the sweep
    /// table; json its results.
    #[arg(long, conflicts_with_all = ["run", "dns"])]
    pub rr: bool,
    /// The id (or --last) is an rpm campaign, as `wirebench rpm` printed it: RPM with the
    /// draft's rating, its components, idle and loaded latency and the intervals; --format html
    /// charts probe latency over time above the goodput; table, markdown, csv (one row per
    /// interval) or json.
    #[arg(long, conflicts_with_all = ["run", "dns", "rr"])]
    pub rpm: bool,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// Where the results database is (for the subcommands that read or write it).
#[derive(Debug, Args, Clone, Default)]
pub struct DbArgs {
    /// Results database: a file, or a PostgreSQL database as postgres://user[:password]@host[:port]/dbname
    /// (no TLS). Default: $WIREBENCH_DB, else $XDG_DATA_HOME/wirebench/results.sqlite3
    /// (~/.local/share/wirebench/results.sqlite3 when XDG_DATA_HOME is unset).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}

/// Results-store flags of `wirebench run`.
#[derive(Debug, Args, Clone, Default)]
pub struct StoreArgs {
    /// Results database; every finished run is committed to it before the next starts. A file,
    /// or a PostgreSQL database as postgres://user[:password]@host[:port]/dbname (no TLS).
    /// Default: $WIREBENCH_DB, else $XDG_DATA_HOME/wirebench/results.sqlite3
    /// (~/.local/share/wirebench/...).
    #[arg(long, value_name = "PATH|URL", conflicts_with = "no_store")]
    pub db: Option<PathBuf>,
    /// Do not store the results.
    #[arg(long)]
    pub no_store: bool,
}

/// Flags of `wirebench show` and `wirebench export`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Campaign id, as `wirebench runs` lists it.
    pub id: i64,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// The subcommands of `wirebench store`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy the history of one store into another (an SQLite file, a PostgreSQL database).
    ///
    /// Every campaign, run (finished and aborted), DNS campaign, rr sweep and rpm campaign of
    /// --from goes into --to, each campaign in one transaction; ids are given anew by --to.
    /// Campaigns --to already holds (same start time, host and plan) are skipped, so running it
    /// twice copies nothing twice. Both stores are migrated to the current schema first.
    #[command(visible_alias = "migrate")]
    Copy(StoreCopyArgs),
}

/// Flags of `wirebench store copy`.
#[derive(Debug, Args)]
pub struct StoreCopyArgs {
    /// The store to copy from: an SQLite file or a postgres://user@host/dbname URL.
    #[arg(long, value_name = "PATH|URL")]
    pub from: PathBuf,
    /// The store to copy into (created if it is a file that does not exist yet).
    #[arg(long, value_name = "PATH|URL")]
    pub to: PathBuf,
}

/// Flags of `wirebench import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// JSON file written by `wirebench export` or `wirebench run --json` (`-` reads stdin).
    pub file: PathBuf,
    /// Import it even if the store already holds this campaign (same start time, parameters
    /// and host): by default a second import of one export is refused.
    #[arg(long)]
    pub again: bool,
    /// The database.
    #[command(flatten)]
    pub db: DbArgs,
}

/// The formats of `wirebench report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Plain-text tables ("Statistics for TCP Streaming ...").
    Table,
    /// Markdown tables, one per configuration.
    Markdown,
    /// One CSV row per configuration × view × metric.
    Csv,
    /// One JSON document.
    Json,
    /// One self-contained HTML file with SVG charts and the tables.
    Html,
}

/// Flags of `wirebench server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on. The default `::` accepts IPv4 and IPv6 where the host allows both.
    #[arg(long, default_value = "::")]
    pub bind: IpAddr,
    /// Port for TCP and UDP alike.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Print each session summary as one JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
    /// PEM certificate chain for QUIC (default: a self-signed certificate made at start).
    #[arg(long, requires = "key")]
    pub cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, requires = "cert")]
    pub key: Option<PathBuf>,
    /// Also serve real iperf3 clients (`iperf3 -c HOST -p PORT`, TCP and UDP, forward and -R)
    /// on --iperf3-port, with one session line per test.
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
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10m",
        help_heading = "Limits"
    )]
    pub max_duration: String,
    /// Largest total one session may ask to transfer (e.g. 100GiB).
    #[arg(
        long,
        value_name = "SIZE",
        default_value = "100GiB",
        help_heading = "Limits"
    )]
    pub max_bytes: String,
    /// Highest data rate of one session (e.g. 100Mbit); default unlimited. The server paces
    /// what it sends and reads; a UDP stream towards the server must be paced by its sender
    /// (--rate at most this), or it is refused.
    #[arg(long, value_name = "RATE", help_heading = "Limits")]
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
    /// On SIGINT/SIGTERM, how long running sessions may go on before they are aborted (a
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
    /// Units allowed (64KiB).
    #[arg(
        short = 'l',
        long = "msg-size",
        value_name = "SIZE",
        default_value = "1024"
    )]
    pub msg_size: String,
    /// Total bytes to send, exact: 1073741824, 500MiB, 1GiB (K/M/G, KiB/MiB/GiB are binary;
    /// kB/MB/GB decimal), or a sweep list (1MiB,10MiB). The last message carries the remainder.
    #[arg(short = 'n', long = "total", default_value = "100MiB")]
    pub total: String,
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
    /// Set TCP_NODELAY on TCP data sockets when streaming too (stop-and-wait always sets it).
    #[arg(long)]
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
    /// Print an interval line every D while a run goes (e.g. 1s, 500ms): bytes and bit/s the
    /// client sent in it, and the server's bytes, bit/s and UDP loss in it. The JSON output keeps
    /// both series. At least 10ms.
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

/// Flags of `wirebench dns`.
#[derive(Debug, Args)]
pub struct DnsArgs {
    /// The resolver, ADDR or ADDR:PORT (IPv6 as [ADDR]:PORT). The port (default 53) is used for
    /// UDP and TCP; DoT uses --dot-port.
    #[arg(long)]
    pub resolver: String,
    /// The name every query asks for (e.g. example.org).
    #[arg(long)]
    pub name: String,
    /// The record type asked for: A, AAAA, MX, TXT, NS, SOA, CNAME, ...
    #[arg(long = "type", default_value = "A")]
    pub rtype: String,
    /// Transport(s): udp, tcp, dot (DNS-over-TLS); a comma list runs each in turn.
    #[arg(long, default_value = "udp")]
    pub transport: String,
    /// Queries per flow, at least 1.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub count: u64,
    /// Queries outstanding per flow (K), 1 to 10000; a comma list (10,20,40,80) runs each in
    /// turn and prints the timeout/loss curve.
    #[arg(long, default_value = "1")]
    pub concurrency: String,
    /// Flows (T), 1 to 1024: each its own UDP socket or TCP/TLS connection.
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// TCP and DoT: open a fresh connection for every query (UDP has none to open and ignores
    /// it); the connect and handshake times are reported apart from the response time.
    #[arg(long)]
    pub new_connection: bool,
    /// How long a query waits for its answer (100us to 60s). UDP: then it is sent again
    /// (--retries) or counted as a timeout; TCP/DoT: a connection silent this long loses its
    /// outstanding queries (timeouts) and is opened again.
    #[arg(long, default_value = "1s")]
    pub timeout: String,
    /// UDP: times a query is sent again (same ID) after a timeout before it counts as a
    /// timeout (0 to 100).
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// DoT: the resolver's TLS port.
    #[arg(long, default_value_t = 853)]
    pub dot_port: u16,
    /// DoT: the name sent as SNI and checked against the certificate. Default: the resolver
    /// as given in --resolver (an IP address then needs an IP in the certificate).
    #[arg(long)]
    pub dot_name: Option<String>,
    /// DoT: trust certificates issued by the CA certificate(s) in this PEM file.
    #[arg(long, value_name = "PEM")]
    pub dot_ca: Option<std::path::PathBuf>,
    /// DoT: accept any certificate. The queries are still encrypted, but anyone on the path
    /// can pose as the resolver: for tests against your own resolver only.
    #[arg(long, conflicts_with = "dot_ca")]
    pub dot_insecure: bool,
    /// Print one JSON document (schema: docs/dns-output.schema.json) instead of text (-J as
    /// iperf3's).
    #[arg(short = 'J', long)]
    pub json: bool,
    /// Where the results are stored (each result committed as it finishes); `wirebench report
    /// --dns ID` charts a stored DNS campaign.
    #[command(flatten)]
    pub store: StoreArgs,
}
