//! iperf3's client flags on `wirebench run` beyond the ones `run` shares with it: those with a
//! meaning here (accepted with iperf3's meaning) and those without one, which `config` answers
//! with one line saying what to use instead (never clap's "unexpected argument"). The list
//! of every iperf3 flag and what it is here: docs/guide/iperf3.md.

use std::path::PathBuf;

use clap::Args;

/// The help heading of iperf3's flags.
const HEADING: &str = "iperf3's flags";

/// iperf3's client flags that `run` takes with iperf3's meaning.
#[derive(Debug, Args, Clone, Default)]
pub struct Iperf3Flags {
    /// Send N blocks of -l bytes instead of -n bytes, as iperf3's -k (K/M/G: 1024s): the
    /// total is N × -l, exact. Not with -n or -t.
    #[arg(short = 'k', long = "blockcount", value_name = "N", help_heading = HEADING)]
    pub blockcount: Option<String>,
    /// Prefix every line of the text output with "TITLE:  ", and add "title" to the JSON
    /// document, as iperf3's -T.
    #[arg(short = 'T', long = "title", value_name = "TITLE", help_heading = HEADING)]
    pub title: Option<String>,
    /// More detail, as iperf3's -V: each run block also shows both ends' data path (socket
    /// buffers, congestion control, CPU) and transport counters.
    #[arg(short = 'V', long = "verbose", help_heading = HEADING)]
    pub verbose: bool,
    /// Write the output (stdout and stderr) to FILE instead, appending, as iperf3's --logfile.
    #[arg(long, value_name = "FILE", help_heading = HEADING)]
    pub logfile: Option<PathBuf>,
    /// Run this client on CPU N (Linux), as iperf3's -A N. With --iperf3, N,M also asks the
    /// iperf3 server to run the test on its CPU M; a wirebench server's CPU is set where it
    /// runs (taskset).
    #[arg(short = 'A', long = "affinity", value_name = "N[,M]", help_heading = HEADING)]
    pub affinity: Option<String>,
    /// Pace each TCP sender in the kernel (SO_MAX_PACING_RATE, the fq qdisc) to RATE, as
    /// iperf3's --fq-rate: the same as --rate on TCP. TCP only (UDP and QUIC: --rate).
    #[arg(long = "fq-rate", value_name = "RATE", help_heading = HEADING)]
    pub fq_rate: Option<String>,
    /// Open the client's sockets (control and data, every protocol) from this local address,
    /// as iperf3's -B.
    #[arg(short = 'B', long = "bind", value_name = "ADDR", help_heading = HEADING)]
    pub bind: Option<String>,
    /// TCP maximum segment size of the data connections, bytes (TCP_MAXSEG, 88 to 65495), on
    /// both ends, as iperf3's -M.
    #[arg(short = 'M', long = "set-mss", value_name = "BYTES", help_heading = HEADING)]
    pub mss: Option<String>,
    /// IP type of service of the data packets (0 to 255; 0x.. and 0.. as iperf3 takes them,
    /// e.g. -S 0x10), as iperf3's -S: TCP on both ends, UDP and QUIC on the client's sockets.
    #[arg(short = 'S', long = "tos", value_name = "N", help_heading = HEADING)]
    pub tos: Option<String>,
    /// As iperf3's --get-server-output. wirebench always shows the server's view: each run
    /// block has the server's line (its counts, time and abort reason), the JSON its figures.
    #[arg(long, help_heading = HEADING)]
    pub get_server_output: bool,
    /// Print one JSON object per line as the run goes, as iperf3's --json-stream: {"event":
    /// "start", "data": ...} as each run starts, "interval" every -i (1 s when -i is not
    /// given), "end" with the run's record, "error" if the campaign fails (schema:
    /// docs/json-stream.schema.json). With --iperf3-shape the data is in iperf3's shapes.
    #[arg(long, conflicts_with = "json", help_heading = HEADING)]
    pub json_stream: bool,
    /// With -J: print iperf3's -J document of the run (start, intervals, end.streams,
    /// end.sum_sent, end.sum_received, UDP lost_percent and jitter_ms) rendered from
    /// wirebench's record, so iperf3's dashboards and scripts read it; one run (one protocol,
    /// one mode, --repeat 1). With --json-stream: iperf3's shapes in each event.
    #[arg(long, help_heading = HEADING)]
    pub iperf3_shape: bool,
    /// As iperf3's --forceflush: wirebench writes every line as it goes already.
    #[arg(long, help_heading = HEADING)]
    pub forceflush: bool,
    /// As iperf3's --udp-counters-64bit: wirebench's UDP header always carries a 64-bit
    /// sequence number.
    #[arg(long, help_heading = HEADING)]
    pub udp_counters_64bit: bool,
    /// As iperf3's --repeating-payload: wirebench's payload is a fixed pattern already.
    #[arg(long, help_heading = HEADING)]
    pub repeating_payload: bool,
    /// Set IP's Don't Fragment on every UDP datagram the client sends, as iperf3's
    /// --dont-fragment (IPv4; IPv6 routers never fragment, and the client's own stack no longer
    /// does either): a datagram larger than the path MTU is refused, with the -l to use, instead
    /// of fragmented. UDP only; with --iperf3 the server's datagrams (-R) get it too.
    #[arg(long = "dont-fragment", help_heading = HEADING)]
    pub dont_fragment: bool,
    /// As iperf3's --gsro (3.21): wirebench's UDP uses segmentation offload (GSO) by itself
    /// where the kernel has it, and its receivers read batches of datagrams.
    #[arg(long, help_heading = HEADING)]
    pub gsro: bool,
}

/// iperf3's client flags that have no meaning for wirebench: each is answered with what to use
/// instead. Hidden from `--help` (the guide lists them).
#[derive(Debug, Args, Clone, Default)]
pub struct Iperf3Refused {
    /// -Z/--zerocopy.
    #[arg(short = 'Z', long = "zerocopy", hide = true)]
    pub zerocopy: bool,
    /// --sctp.
    #[arg(long = "sctp", hide = true)]
    pub sctp: bool,
    /// -F/--file.
    #[arg(short = 'F', long = "file", hide = true)]
    pub file: Option<String>,
    /// -I/--pidfile.
    #[arg(short = 'I', long = "pidfile", hide = true)]
    pub pidfile: Option<String>,
    /// --cport.
    #[arg(long = "cport", hide = true)]
    pub cport: Option<String>,
    /// -L/--flowlabel.
    #[arg(short = 'L', long = "flowlabel", hide = true)]
    pub flowlabel: Option<String>,
    /// --dscp.
    #[arg(long = "dscp", hide = true)]
    pub dscp: Option<String>,
    /// --extra-data.
    #[arg(long = "extra-data", hide = true)]
    pub extra_data: Option<String>,
    /// --username.
    #[arg(long = "username", hide = true)]
    pub username: Option<String>,
    /// --rsa-public-key-path.
    #[arg(long = "rsa-public-key-path", hide = true)]
    pub rsa_public_key_path: Option<String>,
    /// --connect-timeout.
    #[arg(long = "connect-timeout", hide = true)]
    pub connect_timeout: Option<String>,
    /// --rcv-timeout.
    #[arg(long = "rcv-timeout", hide = true)]
    pub rcv_timeout: Option<String>,
    /// --snd-timeout.
    #[arg(long = "snd-timeout", hide = true)]
    pub snd_timeout: Option<String>,
    /// --no-fq-socket-pacing.
    #[arg(long = "no-fq-socket-pacing", hide = true)]
    pub no_fq_socket_pacing: bool,
    /// --pacing-timer.
    #[arg(long = "pacing-timer", hide = true)]
    pub pacing_timer: Option<String>,
    /// --timestamps.
    #[arg(long = "timestamps", hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub timestamps: Option<String>,
    /// -d/--debug.
    #[arg(short = 'd', long = "debug", hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub debug: Option<String>,
    /// -m/--mptcp.
    #[arg(short = 'm', long = "mptcp", hide = true)]
    pub mptcp: bool,
    /// --skip-rx-copy.
    #[arg(long = "skip-rx-copy", hide = true)]
    pub skip_rx_copy: bool,
    /// --bind-dev.
    #[arg(long = "bind-dev", hide = true)]
    pub bind_dev: Option<String>,
    /// --json-stream-full-output.
    #[arg(long = "json-stream-full-output", hide = true)]
    pub json_stream_full_output: bool,
    /// --cntl-ka.
    #[arg(long = "cntl-ka", hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub cntl_ka: Option<String>,
    /// -v (iperf3's --version).
    #[arg(short = 'v', hide = true)]
    pub version: bool,
}
