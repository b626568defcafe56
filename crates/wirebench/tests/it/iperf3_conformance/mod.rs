//! iperf3's own release checks against `wirebench server --iperf3`: every line of
//! `test_commands.sh` (esnet/iperf), run with the iperf3 client on this machine against our
//! server (the binary, as a user starts it) and against a real `iperf3 -s` started by the test.
//! Each line prints ours beside theirs (exit status, time taken, sender and receiver bytes,
//! seconds and rate, UDP loss, the server's CPU and congestion control) and is checked for what
//! it is about. `-t 5` is `-t 1` here and `-O 2` is `-O 1` (a second keeps their meaning), the
//! lines without an end condition get `-t 1`, and `-A 2/2` is `-A 0/0` (a machine with two CPUs
//! has no CPU 2). Skips with a message without iperf3; `WIREBENCH_IPERF3=PATH` runs another
//! iperf3 build as both the client and the real server.

mod runs;

use std::process::Stdio;
use std::time::Duration;

use crate::support::within_for;
use runs::{client, version, Figures, Spawned};

/// Tolerance on a paced rate: the receiver's rate within this share of the rate asked (a
/// second at 1 Mbit/s is four 32 KiB datagrams, so one more or less is 25 %).
const RATE_TOLERANCE: f64 = 0.5;

/// How much longer than the real server a line may take on ours before it counts as slower
/// than iperf3 would be (a hang is far more; a busy machine adds less).
const SLACK: Duration = Duration::from_millis(2500);

/// How many times a line whose only failed checks are of timing ([`Check::Runs`],
/// [`Check::Spans`]) is run before it counts as failed.
const TIMING_ATTEMPTS: usize = 3;

/// A line that runs longer than this is taken as hung and killed.
const HUNG: Duration = Duration::from_secs(25);

/// The iperf3 build to run: `WIREBENCH_IPERF3`, or Debian's on PATH.
fn iperf3() -> String {
    std::env::var("WIREBENCH_IPERF3").unwrap_or_else(|_| "iperf3".to_string())
}

fn have_iperf3(test: &str) -> bool {
    let ok = std::process::Command::new(iperf3())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "SKIP {test}: `{}` is not installed (apt-get install iperf3)",
            iperf3()
        );
    }
    ok
}

/// What one line is about, beyond running to its end as it does against iperf3.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// Exit status 0 on both, ours no slower than theirs by more than [`SLACK`].
    Runs,
    /// The receiver's seconds are the sender's (iperf3's span, omitted seconds left out).
    Spans,
    /// The receiver's rate within [`RATE_TOLERANCE`] of this many bit/s.
    Rate(u64),
    /// UDP: what was received adds up with what was sent (±1 datagram per stream at the end).
    Datagrams(u64),
    /// At least this many bytes sent and (TCP) received: `-n` or `-k`.
    AtLeast(u64),
    /// The server's data sockets ran this congestion control (None: the system's default).
    Congestion(Option<&'static str>),
    /// The server's CPU use is reported.
    Cpu,
    /// The server's output came back with the results.
    ServerOutput,
    /// Both directions moved data.
    Bidir,
    /// The test is refused by both servers (ours with a message naming this).
    Refused(&'static str),
    /// The client itself refuses the command line: the same exit status and error on both.
    ClientRefuses,
}

/// One line of `test_commands.sh` and what it checks.
struct Case {
    line: &'static str,
    checks: &'static [Check],
}

const MIB: u64 = 1 << 20;
/// iperf3's default UDP rate, bit/s (its "1M" is 2^20).
const UDP_DEFAULT: u64 = 1 << 20;

/// `test_commands.sh`, in its order, split in four groups that run side by side with the
/// rest of the suite.
const BASIC: &[Case] = &[
    Case {
        line: "-V -t 1 -T test1",
        checks: &[
            Check::Runs,
            Check::Spans,
            Check::Cpu,
            Check::Congestion(None),
        ],
    },
    Case {
        line: "-u -V -t 1",
        checks: &[
            Check::Runs,
            Check::Spans,
            Check::Rate(UDP_DEFAULT),
            Check::Datagrams(1),
        ],
    },
    Case {
        line: "-i .3 -O 1 -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-i 1 -J -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-4 -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-4 -u -t 1",
        checks: &[Check::Runs, Check::Spans, Check::Datagrams(1)],
    },
    Case {
        line: "-6 -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-6 -u -t 1",
        checks: &[Check::Runs, Check::Spans, Check::Datagrams(1)],
    },
    Case {
        line: "-V -t 1 --fq-rate 5m",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-u -V -t 1 --fq-rate 5m",
        checks: &[Check::Runs, Check::Spans, Check::Datagrams(1)],
    },
];

const STREAMS: &[Case] = &[
    Case {
        line: "--sctp -V -t 1",
        checks: &[Check::Refused("SCTP")],
    },
    Case {
        line: "-P 3 -t 1",
        checks: &[Check::Runs, Check::Spans, Check::Cpu],
    },
    Case {
        line: "-u -P 3 -t 1",
        checks: &[
            Check::Runs,
            Check::Spans,
            Check::Rate(3 * UDP_DEFAULT),
            Check::Datagrams(3),
        ],
    },
    Case {
        line: "-P 2 -t 1 -R",
        checks: &[
            Check::Runs,
            Check::Spans,
            Check::Cpu,
            Check::Congestion(None),
        ],
    },
    Case {
        line: "-u -P 2 -t 1 -R",
        checks: &[
            Check::Runs,
            Check::Spans,
            Check::Rate(2 * UDP_DEFAULT),
            Check::Datagrams(2),
        ],
    },
    Case {
        line: "-P 2 -t 1 --bidir",
        checks: &[Check::Runs, Check::Spans, Check::Bidir],
    },
    Case {
        line: "-u -P 2 -t 1 --bidir",
        checks: &[Check::Runs, Check::Spans, Check::Bidir, Check::Datagrams(2)],
    },
    Case {
        line: "-Z -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-Z -t 1 -R",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-t 1 -w 8M",
        checks: &[Check::Runs, Check::Spans],
    },
];

const TOTALS: &[Case] = &[
    Case {
        line: "-n 5M",
        checks: &[Check::Runs, Check::Spans, Check::AtLeast(5 * MIB)],
    },
    Case {
        line: "-n 5M -u -b1G",
        checks: &[Check::Runs, Check::Spans, Check::AtLeast(5 * MIB)],
    },
    Case {
        line: "-n 5M -R",
        checks: &[Check::Runs, Check::Spans, Check::AtLeast(5 * MIB)],
    },
    Case {
        line: "-n 5M -u -b1G -R",
        checks: &[Check::Runs, Check::Spans, Check::AtLeast(5 * MIB)],
    },
    Case {
        line: "-n 5M -t 1",
        checks: &[Check::ClientRefuses],
    },
    Case {
        line: "-k 1K",
        checks: &[Check::Runs, Check::Spans, Check::AtLeast(1024 * 128 * 1024)],
    },
    Case {
        line: "-k 1K -u -b1G",
        checks: &[Check::Runs, Check::Spans],
    },
    // A reversed client counts its reads as blocks: it stops after 1024 reads, however
    // short, so no byte count follows from -k here.
    Case {
        line: "-k 1K -R",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-k 1K -u -b1G -R",
        checks: &[Check::Runs, Check::Spans],
    },
];

const OPTIONS: &[Case] = &[
    Case {
        line: "-A 0/0 -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-A 0/0 -u -b1G -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-u -b1G/100 -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    Case {
        line: "-M 1000 -V -t 1",
        checks: &[Check::Runs, Check::Spans],
    },
    // Beyond test_commands.sh: what the server must apply of the client's, and report.
    Case {
        line: "-R -b 10M -t 1",
        checks: &[Check::Runs, Check::Spans, Check::Rate(10 * MIB)],
    },
    Case {
        line: "--get-server-output -t 1",
        checks: &[Check::Runs, Check::ServerOutput],
    },
    Case {
        line: "-u --get-server-output -t 1",
        checks: &[Check::Runs, Check::ServerOutput],
    },
    // Last: Debian's iperf3 3.12 server keeps a -C for the tests after it.
    Case {
        line: "-C reno -V -t 1",
        checks: &[Check::Runs, Check::Spans, Check::Congestion(Some("reno"))],
    },
    Case {
        line: "-C reno -R -t 1",
        checks: &[Check::Runs, Check::Spans, Check::Congestion(Some("reno"))],
    },
];

#[tokio::test]
async fn test_commands_basic_lines_against_ours_and_iperf3() {
    run_group("basic", BASIC).await;
}

#[tokio::test]
async fn test_commands_stream_lines_against_ours_and_iperf3() {
    run_group("streams", STREAMS).await;
}

#[tokio::test]
async fn test_commands_total_lines_against_ours_and_iperf3() {
    run_group("totals", TOTALS).await;
}

#[tokio::test]
async fn test_commands_option_lines_against_ours_and_iperf3() {
    run_group("options", OPTIONS).await;
}

/// Runs each line against both servers, prints them side by side, then checks every line
/// (all of them are printed before the first failure is reported).
async fn run_group(name: &str, cases: &[Case]) {
    if !have_iperf3(name) {
        return;
    }
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let budget = Duration::from_secs(20 * cases.len() as u64 + 60);
    within_for(budget, name, async {
        let mut ours = Spawned::wirebench().await;
        let mut theirs = Spawned::iperf3().await;
        let mut failures = Vec::new();
        println!("test_commands.sh ({name}) with {}:", version());
        for case in cases {
            if case.line.contains("-6") && !ipv6 {
                println!("{:<28} skipped: no IPv6 loopback", case.line);
                continue;
            }
            // A timing check (how long, how many seconds) that fails is run again, against
            // both servers: a busy machine can stretch one run of either, while a server
            // that is slow or miscounts every time fails every attempt.
            for attempt in 1..=TIMING_ATTEMPTS {
                let a = client(ours.port, case.line).await;
                let b = client(theirs.port, case.line).await;
                println!("{:<28} ours:   {}", case.line, a.row());
                println!("{:<28} iperf3: {}", "", b.row());
                let failed: Vec<(Check, String)> = case
                    .checks
                    .iter()
                    .filter_map(|check| check_line(*check, &a, &b).err().map(|why| (*check, why)))
                    .collect();
                let timing_only = failed
                    .iter()
                    .all(|(c, _)| matches!(c, Check::Runs | Check::Spans));
                if failed.is_empty() || (timing_only && attempt < TIMING_ATTEMPTS) {
                    if !failed.is_empty() {
                        println!("{:<28} again: {:?}", "", failed);
                        continue;
                    }
                    break;
                }
                for (check, why) in failed {
                    failures.push(format!("{}: {check:?}: {why}", case.line));
                }
                break;
            }
            ours.still_running();
            theirs.still_running();
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    })
    .await;
}

/// Checks one line's figures; says what is wrong.
fn check_line(check: Check, ours: &Figures, theirs: &Figures) -> Result<(), String> {
    let done = |f: &Figures, who: &str| match (f.rc, &f.error) {
        (Some(0), None) => Ok(()),
        (None, _) => Err(format!("{who}: the client hung ({HUNG:?})")),
        (rc, e) => Err(format!("{who}: exit status {rc:?}, {e:?}")),
    };
    match check {
        Check::Runs => {
            done(theirs, "iperf3 -s")?;
            done(ours, "ours")?;
            if ours.wall > theirs.wall + SLACK {
                return Err(format!(
                    "took {:.2} s against ours, {:.2} s against iperf3 -s",
                    ours.wall.as_secs_f64(),
                    theirs.wall.as_secs_f64()
                ));
            }
        }
        Check::Spans => {
            // What iperf3 -s itself read on the same line is allowed on top: the gap a busy
            // machine puts between the two ends' clocks is the machine's, not the server's.
            let theirs_gap = theirs
                .directions()
                .iter()
                .map(|(s, r)| (s.seconds - r.seconds).abs())
                .fold(0.0, f64::max);
            for (sent, received) in ours.directions() {
                let gap = (sent.seconds - received.seconds).abs();
                if gap > (0.05 * sent.seconds).max(0.1) + theirs_gap {
                    return Err(format!(
                        "sender {:.3} s, receiver {:.3} s",
                        sent.seconds, received.seconds
                    ));
                }
            }
        }
        Check::Rate(asked) => {
            let received = ours.received.as_ref().ok_or("no receiver figures")?;
            let share = received.bps / asked as f64;
            if (share - 1.0).abs() > RATE_TOLERANCE {
                return Err(format!(
                    "received at {:.0} bit/s for {asked} asked",
                    received.bps
                ));
            }
        }
        Check::Datagrams(streams) => {
            for (sent, received) in ours.directions() {
                let (Some(s), Some(r), Some(lost)) =
                    (sent.packets, received.packets, received.lost)
                else {
                    return Err("no datagram counts".to_string());
                };
                if s == 0 || lost > r || r.abs_diff(s) > streams {
                    return Err(format!(
                        "sent {s} datagrams, received {r} of which {lost} lost"
                    ));
                }
            }
        }
        Check::AtLeast(n) => {
            let sent = ours.sent.as_ref().ok_or("no sender figures")?;
            let received = ours.received.as_ref().ok_or("no receiver figures")?;
            // UDP forward loses what it loses; the rest must reach the total.
            let reached = if received.packets.is_some() && !ours.reverse {
                sent.bytes
            } else {
                received.bytes
            };
            if sent.bytes < n || reached < n {
                return Err(format!(
                    "sent {}, received {} of {n}",
                    sent.bytes, received.bytes
                ));
            }
        }
        Check::Congestion(name) => {
            let want = match name {
                Some(n) => n.to_string(),
                None => std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
            };
            // The server's side: it receives forward, sends with -R.
            let server = if ours.reverse {
                &ours.sender_cc
            } else {
                &ours.receiver_cc
            };
            if server.as_deref() != Some(want.as_str()) {
                return Err(format!("the server used {server:?}, {want} asked"));
            }
        }
        Check::Cpu => {
            if ours.remote_cpu <= 0.0 {
                return Err(format!("remote CPU {}", ours.remote_cpu));
            }
        }
        Check::ServerOutput => {
            if !ours.server_output {
                return Err("no server output".to_string());
            }
        }
        Check::Bidir => {
            let moved = |f: &Figures| {
                f.bidir_reverse
                    .as_ref()
                    .is_some_and(|(s, r)| s.bytes > 0 && r.bytes > 0)
            };
            if !moved(ours) {
                return Err("no server → client direction".to_string());
            }
        }
        Check::Refused(what) => {
            // With -J an iperf3 client says its error in the document and may exit 0.
            let refused = |f: &Figures| f.rc != Some(0) || f.error.is_some();
            if !refused(theirs) || !refused(ours) {
                return Err("not refused".to_string());
            }
            // A client built without the feature refuses the flag itself, on either server.
            let client_refused = ours.stderr.contains("unrecognized option");
            if !client_refused && !ours.error.as_deref().unwrap_or("").contains(what) {
                return Err(format!("ours said {:?}", ours.error));
            }
        }
        Check::ClientRefuses => {
            if ours.rc == Some(0) || ours.rc != theirs.rc || ours.stderr != theirs.stderr {
                return Err(format!(
                    "{:?} {:?} / {:?} {:?}",
                    ours.rc, ours.stderr, theirs.rc, theirs.stderr
                ));
            }
        }
    }
    Ok(())
}
