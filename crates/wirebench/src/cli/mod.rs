//! Command-line flags as the user types them (clap derive). The doc comments here are the `--help`
//! text. Nothing here validates combinations: `config` turns these raw flags into typed settings.

use clap::{Parser, Subcommand};

mod common;
mod dns;
mod exchange;
mod exporter;
mod history;
mod iperf3_flags;
mod latency;
mod relay;
mod rpm;
mod run;
mod server;
mod shell;

pub use common::{AddressArgs, DbArgs, StoreArgs};
pub use dns::DnsArgs;
pub use exchange::{ExchangeArgs, PingArgs, RrArgs};
pub use exporter::ExporterArgs;
pub use history::{
    CompareArgs, ExportArgs, ImportArgs, ReportArgs, ReportFormat, ReportLayout, ShowArgs,
    StoreCommand, StoreCopyArgs,
};
pub use iperf3_flags::{Iperf3Flags, Iperf3Refused};
pub use latency::LatencyArgs;
pub use relay::RelayArgs;
pub use rpm::RpmArgs;
pub use run::{Iperf3Args, PerfArgs, PlanArgs, RunArgs, SearchArgs};
pub use server::{ServerArgs, DEFAULT_PORT};
pub use shell::{CompletionsArgs, ManArgs};

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
    /// Every session of every kind (transfers, ping and rr, QUIC perf, iperf3 tests) passes one
    /// gate: its request checked field by field, the limits below, one line, /metrics counts
    /// (docs/security.md says what it guarantees). SIGINT, SIGTERM or SIGHUP stops it.
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
    /// A throughput campaign's document is the `run --json` document plus a `campaign` block
    /// (id, uid, times, status, planned sizes and totals, each run's size, total and place in
    /// the plan, environment). With --rr, --dns or --rpm the id is such a campaign and the
    /// document is a campaign document (kind, campaign, plan, results). An export taken while
    /// the campaign ran, imported, is brought up to date by importing a later export of it.
    Export(ExportArgs),
    /// Store a campaign from a file written by `wirebench export`, `wirebench run --json` or
    /// kept in a spool file (docs/store.md).
    ///
    /// A campaign the store holds unfinished (imported while it ran) is brought up to date: the
    /// results it lacks and its end. One it holds in full is refused unless --again.
    Import(ImportArgs),
    /// Copy results between stores: an SQLite file and a PostgreSQL database, either way.
    ///
    /// Example: wirebench store copy --from ~/.local/share/wirebench/results.sqlite3
    /// --to postgres://wirebench@db.example/wirebench
    #[command(subcommand)]
    Store(StoreCommand),
    /// Summarise stored campaigns as a table, Markdown, CSV, JSON or an HTML page with charts.
    ///
    /// Several ids (or --last N) make one report. Per configuration (message size × total ×
    /// protocol × mechanism): min / avg / median / max / stddev of goodput, time, loss, round
    /// trips, and both sides' messages and bytes; or, with --layout grid, the lab-report table
    /// (rows = totals or sizes, columns = protocol × mechanism, cells min / avg / max of time
    /// and goodput). --dns, --rr and --rpm report a stored sweep of those commands.
    ///
    /// Examples: wirebench report --last --format markdown -o results.md;
    /// wirebench report 1 2 3 --layout grid; wirebench report --last 7 --format html -o lab.html
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
    /// The server stamps every answer (when the probe arrived, when the answer left), so ping
    /// also prints each direction's delay ("one-way: up …, down …") with the bound of the two
    /// hosts' clock offset: well under a microsecond on one host, else what the probes' own
    /// exchanges prove (half the best round trip) or both kernels' synchronization, whichever
    /// is narrower and not contradicted (docs/guide/one-way-delay.md; probes of 16 bytes or
    /// more).
    ///
    /// The results are stored as a ping sweep, as rr stores its sweeps: `wirebench runs` lists
    /// it, `wirebench report --rr ID` shows it (--no-store keeps nothing).
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
    /// load); a comma list for --flows sweeps T the same way (response time and requests/s as
    /// sessions are added). With --new-connection every request opens a fresh TCP or QUIC
    /// connection (as netperf TCP_CRR does) and the handshake time per request is reported
    /// apart from the response time. The sweep is stored: `wirebench report --rr --last`.
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
    /// Latency under load, by direction: round trips and each direction's one-way delay while
    /// the path is idle, while the client uploads, while it downloads, and both at once.
    ///
    /// Small probes (UDP by default, one every --probe-interval) run through every phase; the
    /// server stamps each probe when it arrives and when its answer leaves, so each
    /// direction's delay is measured apart: the queue an upload builds shows in "up", a
    /// download's in "down". Every one-way figure carries the bound of the clock offset
    /// between the hosts: exact when both ends read one clock (the same host, or namespaces of
    /// one kernel), else what the probes' own exchanges prove (half the best round trips), or
    /// the kernels' estimated error when both say their clocks are synchronized — whichever is
    /// narrower and not contradicted by the probes. Each loaded phase runs -P timed TCP (or
    /// QUIC) flows per direction and prints their goodput. Without a server it runs against
    /// one started in-process on loopback. Each test is stored as a latency campaign.
    ///
    /// Example: wirebench latency -c server.example -t 5s -P 4
    #[command(after_long_help = LATENCY_AFTER_HELP)]
    Latency(LatencyArgs),
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
    /// requests or queries per second. /metrics serves the exporter's own counters. A query
    /// holding a control character is refused (400). SIGINT, SIGTERM or SIGHUP stops it.
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

const LATENCY_AFTER_HELP: &str = "\
A one-way figure whose delay falls outside the bound (below zero by more than it) is counted and
said, never shown. JSON (--json) holds the clock (offset, bound, drift, its source and any claim
the probes contradicted), each phase's probes, round trips, one-way delays and goodput, and every
probe as a time series with its up and down split. Guide: docs/guide/one-way-delay.md.

Exit status: 0 every phase had answered probes and its load ran, 1 otherwise, 2 bad usage,
128 + the signal when a signal stopped it.";

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
are printed on SIGUSR1 and at exit (Ctrl-C, SIGTERM or SIGHUP); --json prints them as one JSON
object per line. The same --seed with the same traffic makes the same decisions. A --to that is
the relay's own --listen is refused; the relay holds at most 256 MiB and 1024 UDP clients, and
says on stderr when it drops for want of room or the system refuses it a socket.";
