//! iperf3's flags on `wirebench run`, validated: the values they give (`-k`, `-i` in bare
//! seconds, `-M`, `-S`, `--fq-rate`), how `run` presents and sets itself up ([`RunOutput`]:
//! `-T`, `-V`, `--logfile`, `--json-stream`, `--iperf3-shape`, `-A`, `-B`), and the one-line
//! answer to each iperf3 flag that has no meaning here.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use wirebench_core::vocab::error::UsageError;
use wirebench_core::vocab::units::{parse_duration, BitRate, ByteSize, UnitError};
use wirebench_core::wire::proto::MSS_RANGE;

use crate::cli::{Iperf3Refused, RunArgs};

use super::error::usage;

/// How `run` shows its results and sets up its process, from iperf3's output flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunOutput {
    /// `-T`: every text line starts with "TITLE:  "; the JSON carries "title".
    pub title: Option<String>,
    /// `-V`: run blocks show both ends' data path and transport counters.
    pub verbose: bool,
    /// `--logfile`: stdout and stderr go to this file, appended.
    pub logfile: Option<PathBuf>,
    /// `--json-stream`: one JSON object per line as the run goes.
    pub json_stream: bool,
    /// `--iperf3-shape`: iperf3's document shapes (with `-J` or `--json-stream`).
    pub iperf3_shape: bool,
    /// `-A N`: the CPU this client runs on.
    pub cpu: Option<usize>,
    /// `-A N,M` with `--iperf3`: the CPU the iperf3 server runs the test on.
    pub server_cpu: Option<u32>,
    /// `-B`: the local address of every socket the client opens.
    pub bind: Option<IpAddr>,
    /// `-S`: the type of service of every socket the client opens.
    pub tos: Option<u8>,
    /// `--dont-fragment`: Don't Fragment on every UDP datagram the client sends.
    pub dont_fragment: bool,
}

impl RunOutput {
    /// Validates the flags that decide how `run` presents itself and sets up its process.
    pub fn from_args(args: &RunArgs) -> Result<RunOutput, UsageError> {
        refused(&args.refused)?;
        let f = &args.iperf3_flags;
        if f.iperf3_shape && !(args.json || f.json_stream) {
            return Err(usage(
                "--iperf3-shape shapes a JSON output: add -J (one document) or --json-stream",
            ));
        }
        if f.json_stream && args.iperf3.iperf3.is_some() {
            return Err(usage(
                "--json-stream streams wirebench's own runs as they go; with --iperf3 use -J \
                 (and --iperf3-shape for iperf3's document)",
            ));
        }
        if let Some(title) = &f.title {
            if title.chars().any(char::is_control) {
                return Err(usage(
                    "-T/--title: a title is one line of text (no control characters)",
                ));
            }
        }
        let (cpu, server_cpu) = match &f.affinity {
            None => (None, None),
            Some(text) => affinity(text)?,
        };
        if server_cpu.is_some() && args.iperf3.iperf3.is_none() {
            return Err(usage(
                "-A N,M: a wirebench server's CPU is set where it runs (taskset -c M wirebench \
                 server); give -A N for this client's",
            ));
        }
        let bind = f
            .bind
            .as_deref()
            .map(|b| {
                b.trim_matches(|c| c == '[' || c == ']')
                    .parse::<IpAddr>()
                    .map_err(|_| {
                        usage(format!(
                            "-B/--bind {b}: give a local IP address (e.g. 192.0.2.10 or ::1)"
                        ))
                    })
            })
            .transpose()?;
        Ok(RunOutput {
            title: f.title.clone(),
            verbose: f.verbose,
            logfile: f.logfile.clone(),
            json_stream: f.json_stream,
            iperf3_shape: f.iperf3_shape,
            cpu,
            server_cpu,
            bind,
            tos: f.tos.as_deref().map(tos).transpose()?,
            dont_fragment: f.dont_fragment,
        })
    }
}

impl RunOutput {
    /// Refuses `-J --iperf3-shape` for a plan of more than one run: iperf3's document holds
    /// one test.
    pub fn check_plan(&self, runs: usize) -> Result<(), UsageError> {
        if self.iperf3_shape && !self.json_stream && runs > 1 {
            return Err(usage(format!(
                "-J --iperf3-shape prints iperf3's document of one test, and this plan has {runs} runs: \
                 give one protocol, one mode and --repeat 1, or use --json-stream --iperf3-shape \
                 (one line per event of every run)"
            )));
        }
        Ok(())
    }
}

/// `-A N` or `-A N,M` (iperf3 also reads `-A N/...` as N).
fn affinity(text: &str) -> Result<(Option<usize>, Option<u32>), UsageError> {
    let bad = || {
        usage(format!(
            "-A/--affinity {text}: give a CPU number N (this client's), or N,M with --iperf3 (M: the iperf3 server's)"
        ))
    };
    let (local, rest) = match text.find([',', '/']) {
        Some(at) => (&text[..at], Some(&text[at..])),
        None => (text, None),
    };
    let cpu = local.trim().parse::<usize>().map_err(|_| bad())?;
    let server = match rest {
        Some(r) if r.starts_with(',') => Some(r[1..].trim().parse::<u32>().map_err(|_| bad())?),
        _ => None,
    };
    Ok((Some(cpu), server))
}

/// `-S`: a type of service as iperf3 takes it (decimal, 0x.. hex or 0.. octal), 0 to 255.
pub(super) fn tos(text: &str) -> Result<u8, UsageError> {
    let t = text.trim();
    let parsed = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16)
    } else if t.len() > 1 && t.starts_with('0') {
        u32::from_str_radix(&t[1..], 8)
    } else {
        t.parse::<u32>()
    };
    parsed
        .ok()
        .and_then(|v| u8::try_from(v).ok())
        .ok_or_else(|| {
            usage(format!(
                "-S/--tos {text}: allowed 0 to 255 (e.g. 16, 0x10 or 020; DSCP EF is -S 184)"
            ))
        })
}

/// `-M`: a TCP maximum segment size in bytes.
pub(super) fn mss(text: &str) -> Result<u32, UsageError> {
    let v: ByteSize = text
        .parse()
        .map_err(|e| usage(format!("-M/--set-mss: {e}")))?;
    u32::try_from(v.0)
        .ok()
        .filter(|m| (MSS_RANGE.0..=MSS_RANGE.1).contains(m))
        .ok_or_else(|| {
            usage(format!(
                "-M/--set-mss {text} is out of range: allowed {} to {} bytes",
                MSS_RANGE.0, MSS_RANGE.1
            ))
        })
}

/// `-k`: a block count (K/M/G are 1024s, as iperf3's), at least 1.
pub(super) fn blockcount(text: &str) -> Result<u64, UsageError> {
    let v: ByteSize = text
        .parse()
        .map_err(|e| usage(format!("-k/--blockcount: {e} (a count such as 1000 or 1K)")))?;
    if v.0 == 0 {
        return Err(usage("-k/--blockcount must be at least 1 block"));
    }
    Ok(v.0)
}

/// `-b/--rate` as iperf3 takes it: `0` is unpaced (None), as iperf3's `-b 0`; iperf3's
/// `RATE/BURST` (packets per burst) is refused with what to give instead.
pub(super) fn pacing_rate(text: &str) -> Result<Option<BitRate>, UsageError> {
    if let Some((rate, burst)) = text.split_once('/') {
        // `50MB/s` is a rate in bytes per second, not a burst.
        if !burst.eq_ignore_ascii_case("s") {
            return Err(usage(format!(
                "-b/--rate {text}: iperf3's /{burst} (packets per burst) has no wirebench equivalent: \
                 the sender paces every send by the clock; give -b {rate}"
            )));
        }
    }
    // iperf3 reads a bare 0 (or 0 with a unit) as no pacing at all.
    if text
        .trim()
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse::<f64>()
        == Ok(0.0)
    {
        return Ok(None);
    }
    match text.parse::<BitRate>() {
        Ok(rate) => Ok(Some(rate)),
        Err(UnitError::ZeroRate(_)) => Ok(None),
        Err(e) => Err(usage(format!("--rate: {e} (0: unpaced, as iperf3's -b 0)"))),
    }
}

/// `--fq-rate`: a rate.
pub(super) fn fq_rate(text: &str) -> Result<BitRate, UsageError> {
    text.parse::<BitRate>()
        .map_err(|e| usage(format!("--fq-rate: {e}")))
}

/// `-i`: a duration with a unit, or a bare number of seconds as iperf3's (`-i 1`, `-i .5`);
/// `-i 0` means no interval lines, as iperf3's.
pub(super) fn interval(text: &str) -> Result<Option<Duration>, UsageError> {
    let t = text.trim();
    let bare = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if bare && t.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Ok(None);
    }
    let parsed = if bare {
        let seconds = if t.starts_with('.') {
            format!("0{t}")
        } else {
            t.to_string()
        };
        parse_duration(&format!("{seconds}s"))
    } else {
        parse_duration(t)
    };
    parsed.map(Some).map_err(|e| {
        usage(format!(
            "-i/--interval: {e} (a bare number is seconds: -i 1)"
        ))
    })
}

/// The one-line answer to an iperf3 flag that has no meaning for wirebench.
fn refused(r: &Iperf3Refused) -> Result<(), UsageError> {
    let answer = if r.zerocopy {
        "-Z/--zerocopy: wirebench has no sendfile mode (its senders write from one buffer they reuse); drop -Z"
    } else if r.sctp {
        "--sctp: wirebench does not speak SCTP; its protocols are --proto tcp, udp and quic"
    } else if r.file.is_some() {
        "-F/--file: wirebench sends generated bytes, not a file's; to time a file copy use the copy itself (e.g. scp or curl) beside wirebench's figures"
    } else if r.pidfile.is_some() {
        "-I/--pidfile: wirebench runs in the foreground; the shell's $! is its PID (wirebench server & echo $! > FILE)"
    } else if r.cport.is_some() {
        "--cport: wirebench's client ports are the OS's; pin the address with -B, and filter by the server's port"
    } else if r.flowlabel.is_some() {
        "-L/--flowlabel: not set by wirebench; mark the traffic with -S (type of service) instead"
    } else if r.dscp.is_some() {
        "--dscp: give the type of service with -S (DSCP << 2: EF is -S 184, AF41 is -S 136)"
    } else if r.extra_data.is_some() {
        "--extra-data: give a title with -T; the JSON carries it"
    } else if r.username.is_some() || r.rsa_public_key_path.is_some() {
        "--username/--rsa-public-key-path: wirebench servers authenticate clients with a pre-shared key: --psk FILE on both ends"
    } else if r.connect_timeout.is_some() || r.rcv_timeout.is_some() || r.snd_timeout.is_some() {
        "--connect-timeout/--rcv-timeout/--snd-timeout: wirebench's client gives up on a silent server by itself (10 s to connect, and when data stops); drop the flag"
    } else if r.no_fq_socket_pacing {
        "--no-fq-socket-pacing: wirebench paces in the kernel only when asked (--rate or --fq-rate on TCP); drop the flag"
    } else if r.pacing_timer.is_some() {
        "--pacing-timer: wirebench's UDP pacing has no timer to set; drop the flag"
    } else if r.timestamps.is_some() {
        "--timestamps: prefix the lines as they come with ts(1) (moreutils): wirebench run -i 1 | ts"
    } else if r.debug.is_some() {
        "-d/--debug: wirebench has no debug output; -V shows both ends' data path and counters, --json everything measured"
    } else if r.mptcp {
        "-m/--mptcp: wirebench speaks plain TCP; run it under mptcpize (mptcpize run wirebench run ...)"
    } else if r.skip_rx_copy {
        "--skip-rx-copy: wirebench's receivers always copy what they read, as a real receiver does; drop the flag"
    } else if r.bind_dev.is_some() {
        "--bind-dev: give the interface's address with -B (ip -br addr shows it)"
    } else if r.json_stream_full_output {
        "--json-stream-full-output: --json-stream's end event carries each run's whole record already; use --json-stream"
    } else if r.cntl_ka.is_some() {
        "--cntl-ka: wirebench watches its control connection itself (a vanished peer ends the run); drop the flag"
    } else if r.version {
        "-v: wirebench's version is `wirebench --version`"
    } else {
        return Ok(());
    };
    Err(usage(answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_values_parse_as_iperf3_reads_them() {
        assert_eq!(tos("16").unwrap(), 16);
        assert_eq!(tos("0x10").unwrap(), 16);
        assert_eq!(tos("020").unwrap(), 16);
        assert!(tos("256").is_err() && tos("0x1g").is_err());
        assert_eq!(interval("1").unwrap(), Some(Duration::from_secs(1)));
        assert_eq!(interval(".3").unwrap(), Some(Duration::from_millis(300)));
        assert_eq!(interval("0.5").unwrap(), Some(Duration::from_millis(500)));
        assert_eq!(interval("250ms").unwrap(), Some(Duration::from_millis(250)));
        assert_eq!(interval("0").unwrap(), None);
        assert!(interval("soon").is_err());
        assert_eq!(blockcount("1K").unwrap(), 1024);
        assert!(blockcount("0").is_err());
        assert_eq!(mss("1000").unwrap(), 1000);
        assert!(mss("40").is_err());
        assert_eq!(affinity("2").unwrap(), (Some(2), None));
        assert_eq!(affinity("2/2").unwrap(), (Some(2), None));
        assert_eq!(affinity("1,3").unwrap(), (Some(1), Some(3)));
        assert!(affinity("x").is_err());
    }
}
