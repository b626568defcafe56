//! What one iperf3 test counted on the server, and its three renderings: the results
//! document the client gets (iperf3's time span: from the test's start, or the end of its
//! omitted seconds, to TEST_END; omitted counts apart), the server's own output text
//! (`--get-server-output`) and the report of its one session line. Owns those figures; must
//! not do I/O.

use std::fmt::Write as _;
use std::time::Instant;

use wirebench_core::vocab::counters::CpuUsage;
use wirebench_core::vocab::plan::{Mechanism, Protocol};
use wirebench_core::vocab::units::duration_ns;
use wirebench_core::wire::iperf3::{
    self as wire, StreamResult, TestPlan, TestResults, UdpReceiver,
};
use wirebench_core::wire::proto::{Omitted, ServerReport};

/// One data stream's figures at the end of a test.
#[derive(Debug, Clone, Default)]
pub(super) struct StreamTally {
    /// The stream's place in the order the client opened them (0-based).
    pub index: u32,
    /// The server sent on it.
    pub sends: bool,
    /// Bytes moved over the whole test.
    pub bytes: u64,
    /// Calls (TCP reads or writes) or datagrams (UDP) over the whole test.
    pub calls: u64,
    /// Bytes and calls at the end of the omitted seconds.
    pub mark: (u64, u64),
    /// A UDP stream the server received on: the hub's accounting (its own omit mark inside).
    pub receiver: Option<UdpReceiver>,
    /// TCP retransmissions of a stream the server sent on, after the omitted seconds.
    pub retransmits: Option<u64>,
}

impl StreamTally {
    /// Bytes after the omitted seconds.
    fn counted_bytes(&self) -> u64 {
        match &self.receiver {
            Some(r) => r.bytes_counted(),
            None => self.bytes.saturating_sub(self.mark.0),
        }
    }
}

/// A test's time line on the server's clock.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    /// TEST_START.
    pub start: Instant,
    /// The end of the omitted seconds, if the test asked for some and lasted past them.
    pub mark: Option<Instant>,
    /// TEST_END (or the moment the test stopped).
    pub end: Instant,
}

impl Span {
    /// The seconds the figures cover: from the mark (or the start) to the end.
    pub(super) fn counted_s(&self) -> f64 {
        self.end
            .saturating_duration_since(self.mark.unwrap_or(self.start))
            .as_secs_f64()
    }
}

/// What the results document says besides the streams.
#[derive(Debug, Clone, Default)]
pub(super) struct Extras {
    /// CPU time this process spent over the test.
    pub cpu: Option<CpuUsage>,
    /// The congestion control of the TCP data sockets.
    pub congestion: Option<String>,
    /// The server's output, when the client asked for it.
    pub output: Option<String>,
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The results document the server sends the client, as a real iperf3 server fills it.
pub(super) fn results(
    tallies: &[StreamTally],
    plan: &TestPlan,
    span: &Span,
    extras: Extras,
) -> TestResults {
    let wall_s = span.end.saturating_duration_since(span.start).as_secs_f64();
    let (cpu_total, cpu_user, cpu_system) = extras.cpu.unwrap_or_default().percent_of(wall_s);
    let tcp_sender = !plan.udp && tallies.iter().any(|t| t.sends);
    TestResults {
        cpu_util_total: cpu_total,
        cpu_util_user: cpu_user,
        cpu_util_system: cpu_system,
        sender_has_retransmits: match (tcp_sender, tallies.iter().any(|t| t.sends)) {
            (true, _) => i64::from(tallies.iter().any(|t| t.retransmits.is_some())),
            (false, true) => 0,
            (false, false) => -1,
        },
        congestion_used: extras.congestion,
        streams: tallies
            .iter()
            .map(|t| stream_result(t, plan, span))
            .collect(),
        server_output_text: extras.output,
    }
}

fn stream_result(t: &StreamTally, plan: &TestPlan, span: &Span) -> StreamResult {
    let mut r = StreamResult {
        id: wire::stream_id(t.index),
        bytes: t.counted_bytes(),
        retransmits: t.retransmits.map_or(-1, int),
        start_time: 0.0,
        end_time: span.counted_s(),
        omitted_errors: Some(0),
        omitted_packets: Some(0),
        ..StreamResult::default()
    };
    if let Some(u) = &t.receiver {
        let mark = u.mark();
        r.jitter = u.jitter_s;
        r.errors = int(u.lost);
        r.omitted_errors = Some(int(mark.lost));
        r.packets = int(u.highest);
        r.omitted_packets = Some(int(mark.highest));
    } else if plan.udp && t.sends {
        r.packets = int(t.calls);
        r.omitted_packets = Some(int(t.mark.1));
    }
    r
}

/// The session the gate's line shows: what the server sent (`-R`) or read (forward, and the
/// client → server half of `--bidir`), over the whole test, the omitted seconds apart.
pub(super) fn session_report(
    tallies: &[StreamTally],
    plan: &TestPlan,
    span: &Span,
) -> ServerReport {
    let shown: Vec<&StreamTally> = tallies.iter().filter(|t| t.sends == plan.reverse).collect();
    let messages = |bytes: u64, calls: u64, received: u64| -> u64 {
        if !plan.udp {
            bytes.div_ceil(u64::from(plan.len.max(1)))
        } else if plan.reverse {
            calls
        } else {
            received
        }
    };
    let mut report = ServerReport {
        protocol: if plan.udp {
            Protocol::Udp
        } else {
            Protocol::Tcp
        },
        mechanism: Mechanism::Stream,
        elapsed_ns: duration_ns(span.end.saturating_duration_since(span.start)),
        ..ServerReport::default()
    };
    let mut marked = (0u64, 0u64);
    for t in &shown {
        let (bytes, calls) = t
            .receiver
            .as_ref()
            .map_or((t.bytes, t.calls), |u| (u.bytes, u.datagrams));
        report.bytes += bytes;
        report.read_calls += calls;
        marked.0 += t.mark.0;
        let (unique, unique_marked) = match &t.receiver {
            Some(u) => {
                report.lost += u.lost;
                report.out_of_order += u.out_of_order;
                let jitter_us = u.jitter_s * 1e6;
                report.jitter_us = Some(report.jitter_us.map_or(jitter_us, |j| j.max(jitter_us)));
                let mark = u.mark();
                marked.0 += mark.bytes;
                (
                    u.datagrams - u.out_of_order.min(u.datagrams),
                    mark.datagrams,
                )
            }
            None => (0, 0),
        };
        report.messages += messages(bytes, calls, unique);
        marked.1 += messages(t.mark.0, t.mark.1, unique_marked);
    }
    if let Some(mark) = span.mark {
        report.omitted = Some(Omitted {
            bytes: marked.0,
            messages: marked.1,
            elapsed_ns: duration_ns(mark.saturating_duration_since(span.start)),
        });
    }
    report
}

/// The server's own output of a test, as `--get-server-output` shows it: iperf3's summary
/// table, one row per stream and their sum.
pub(super) fn output_text(
    test: u64,
    peer: &str,
    tallies: &[StreamTally],
    plan: &TestPlan,
    span: &Span,
) -> String {
    let seconds = span.counted_s();
    let mut out = format!(
        "-----------------------------------------------------------\n\
         wirebench server: iperf3 test {test} from {peer}: {}, {} stream(s){}\n",
        if plan.udp { "UDP" } else { "TCP" },
        plan.parallel,
        match (plan.reverse, plan.bidir) {
            (true, _) => ", reverse",
            (_, true) => ", bidirectional",
            _ => "",
        },
    );
    out.push_str(if plan.udp {
        "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
    } else {
        "[ ID] Interval           Transfer     Bitrate\n"
    });
    let row = |id: &str, bytes: u64, udp: Option<(f64, u64, u64)>, role: &str| {
        let mut line = format!(
            "[{id:>3}]   0.00-{seconds:<5.2} sec  {}  {}",
            iperf3_bytes(bytes),
            iperf3_rate(bytes, seconds)
        );
        if let Some((jitter_s, lost, total)) = udp {
            let pct = if total > 0 {
                lost as f64 * 100.0 / total as f64
            } else {
                0.0
            };
            let _ = write!(
                line,
                "  {:.3} ms  {lost}/{total} ({pct:.2}%)",
                jitter_s * 1e3
            );
        }
        let _ = writeln!(line, "  {role}");
        line
    };
    for sends in [false, true] {
        let group: Vec<&StreamTally> = tallies.iter().filter(|t| t.sends == sends).collect();
        if group.is_empty() {
            continue;
        }
        let role = if sends { "sender" } else { "receiver" };
        let mut sum = (0u64, 0.0f64, 0u64, 0u64);
        for t in &group {
            let udp = t.receiver.as_ref().map(|u| {
                let mark = u.mark();
                (
                    u.jitter_s,
                    u.lost.saturating_sub(mark.lost),
                    u.highest.saturating_sub(mark.highest),
                )
            });
            let udp = match (udp, plan.udp && sends) {
                (Some(u), _) => Some(u),
                (None, true) => Some((0.0, 0, t.calls.saturating_sub(t.mark.1))),
                (None, false) => None,
            };
            sum.0 += t.counted_bytes();
            if let Some((j, l, n)) = udp {
                sum.1 = sum.1.max(j);
                sum.2 += l;
                sum.3 += n;
            }
            out.push_str(&row(
                &wire::stream_id(t.index).to_string(),
                t.counted_bytes(),
                udp,
                role,
            ));
        }
        if group.len() > 1 {
            let udp = plan.udp.then_some((sum.1, sum.2, sum.3));
            out.push_str(&row("SUM", sum.0, udp, role));
        }
    }
    out
}

/// Bytes as iperf3 prints a transfer: KBytes, MBytes, GBytes of 1024.
fn iperf3_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    let (value, unit) = if b >= 1024.0 * 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0 * 1024.0), "GBytes")
    } else if b >= 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0), "MBytes")
    } else if b >= 1024.0 {
        (b / 1024.0, "KBytes")
    } else {
        (b, "Bytes")
    };
    format!("{value:>6.2} {unit}")
}

/// A rate as iperf3 prints a bitrate: Kbits, Mbits, Gbits of 1000 per second.
fn iperf3_rate(bytes: u64, seconds: f64) -> String {
    let bps = if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    };
    let (value, unit) = if bps >= 1e9 {
        (bps / 1e9, "Gbits/sec")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbits/sec")
    } else if bps >= 1e3 {
        (bps / 1e3, "Kbits/sec")
    } else {
        (bps, "bits/sec")
    };
    format!("{value:>6.2} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use wirebench_core::wire::iperf3::UdpHeader;

    fn plan(udp: bool, reverse: bool, bidir: bool) -> TestPlan {
        TestPlan {
            udp,
            reverse,
            parallel: 1,
            len: 1000,
            bytes: None,
            blocks: None,
            time_s: 2,
            rate_bps: 0,
            counters_64bit: false,
            bidir,
            omit_s: 1,
            fq_rate_bps: 0,
            window: None,
            mss: None,
            nodelay: false,
            tos: None,
            congestion: None,
            server_output: false,
        }
    }

    fn span() -> Span {
        let start = Instant::now();
        Span {
            start,
            mark: Some(start + Duration::from_secs(1)),
            end: start + Duration::from_secs(3),
        }
    }

    #[test]
    fn omitted_seconds_leave_the_figures_and_the_span() {
        let udp = {
            let mut r = UdpReceiver::default();
            for count in 1..=10u64 {
                if count == 7 {
                    r.mark_omitted();
                }
                if count != 3 && count != 9 {
                    let h = UdpHeader {
                        sec: 0,
                        usec: 0,
                        count,
                    };
                    r.on_datagram(&h, 1000, 0.0);
                }
            }
            r
        };
        let tallies = [
            StreamTally {
                index: 0,
                receiver: Some(udp),
                ..StreamTally::default()
            },
            StreamTally {
                index: 1,
                sends: true,
                bytes: 9000,
                calls: 9,
                mark: (5000, 5),
                ..StreamTally::default()
            },
        ];
        let p = plan(true, false, true);
        let doc = results(&tallies, &p, &span(), Extras::default());
        let r = &doc.streams[0];
        // Received 1, 2, 4, 5, 6 before the mark; 7, 8, 10 after (9 lost).
        assert_eq!((r.id, r.bytes, r.packets, r.errors), (1, 3000, 10, 2));
        assert_eq!((r.omitted_packets, r.omitted_errors), (Some(6), Some(1)));
        assert_eq!((r.start_time, r.end_time), (0.0, 2.0));
        let s = &doc.streams[1];
        assert_eq!(
            (s.id, s.bytes, s.packets, s.omitted_packets),
            (3, 4000, 9, Some(5))
        );
        assert_eq!(doc.sender_has_retransmits, 0);
        // The line: what was read, the whole test, the mark apart.
        let line = session_report(&tallies, &p, &span());
        assert_eq!((line.bytes, line.messages, line.lost), (8000, 8, 2));
        assert_eq!(line.elapsed_ns, 3_000_000_000);
        let omitted = line.omitted.unwrap();
        assert_eq!((omitted.bytes, omitted.messages), (5000, 5));
        assert_eq!(omitted.elapsed_ns, 1_000_000_000);
    }

    #[test]
    fn a_reverse_tcp_test_reports_what_was_sent_and_its_retransmissions() {
        let tallies = [StreamTally {
            index: 0,
            sends: true,
            bytes: 5 << 20,
            calls: 40,
            retransmits: Some(3),
            ..StreamTally::default()
        }];
        let mut p = plan(false, true, false);
        p.omit_s = 0;
        let start = Instant::now();
        let span = Span {
            start,
            mark: None,
            end: start + Duration::from_millis(1500),
        };
        let doc = results(
            &tallies,
            &p,
            &span,
            Extras {
                cpu: Some(CpuUsage {
                    user_us: 150_000,
                    system_us: 600_000,
                    shared_process: false,
                }),
                congestion: Some("reno".into()),
                output: None,
            },
        );
        assert_eq!(doc.sender_has_retransmits, 1);
        assert_eq!(doc.streams[0].retransmits, 3);
        assert_eq!(doc.streams[0].bytes, 5 << 20);
        assert!(
            (doc.cpu_util_total - 50.0).abs() < 1e-9,
            "{}",
            doc.cpu_util_total
        );
        assert!((doc.cpu_util_system - 40.0).abs() < 1e-9);
        let line = session_report(&tallies, &p, &span);
        assert_eq!(
            (line.bytes, line.messages, line.read_calls),
            (5 << 20, 5243, 40)
        );
        let text = output_text(7, "127.0.0.1:5000", &tallies, &p, &span);
        assert!(
            text.contains("[  1]   0.00-1.50  sec    5.00 MBytes   27.96 Mbits/sec  sender"),
            "{text}"
        );
    }
}
