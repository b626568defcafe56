//! The plausibility checks against reports and results that cannot be true, and truthful ones.
use super::*;
use crate::vocab::counters::IntervalSample;
use crate::vocab::plan::Mechanism;
use crate::wire::proto::Omitted;

const MIB: u64 = 1 << 20;
const SECOND: u64 = 1_000_000_000;

fn report(bytes: u64, messages: u64) -> ServerReport {
    ServerReport {
        protocol: Protocol::Tcp,
        mechanism: Mechanism::Stream,
        messages,
        bytes,
        elapsed_ns: SECOND / 2,
        ..ServerReport::default()
    }
}

fn sent(bytes: u64, messages: u64) -> ClientView {
    ClientView::Sent { messages, bytes }
}

#[test]
fn a_truthful_report_passes() {
    assert_eq!(
        check_report(sent(MIB, 1024), SECOND, &report(MIB, 1024)),
        Ok(())
    );
    assert_eq!(
        check_report(sent(MIB, 1024), SECOND, &report(MIB - 1024, 1023)),
        Ok(()),
        "fewer arrived than were sent: a loss, not a lie"
    );
}

#[test]
fn more_arriving_than_was_sent_is_inconsistent() {
    let err = check_report(sent(MIB, 1024), SECOND, &report(10 * MIB, 1024)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the server's report is inconsistent: it says 10485760 bytes arrived, but 1048576 were sent"
    );
    let err = check_report(sent(MIB, 1024), SECOND, &report(MIB, 1025)).unwrap_err();
    assert!(
        err.to_string().contains("1025 messages arrived, but 1024"),
        "{err}"
    );
    let udp = ServerReport {
        protocol: Protocol::Udp,
        lost: 10,
        ..report(1000 * 1000, 1000)
    };
    let err = check_report(sent(1000 * 1000, 1005), SECOND, &udp).unwrap_err();
    assert!(
        err.to_string()
            .contains("1000 messages arrived and 10 were lost"),
        "{err}"
    );
}

#[test]
fn a_reverse_server_cannot_claim_less_than_arrived() {
    let view = ClientView::Received {
        messages: 100,
        bytes: 100_000,
    };
    assert_eq!(check_report(view, SECOND, &report(100_000, 100)), Ok(()));
    let err = check_report(view, SECOND, &report(99_000, 99)).unwrap_err();
    assert!(
        err.to_string()
            .contains("it sent 99000 bytes, but 100000 arrived"),
        "{err}"
    );
}

#[test]
fn an_aborted_report_is_never_a_complete_run() {
    let aborted = ServerReport {
        aborted: true,
        abort_reason: Some("the client sent too fast".into()),
        ..report(MIB, 1024)
    };
    assert_eq!(
        check_report(sent(MIB, 1024), SECOND, &aborted),
        Err(ReportIssue::Aborted("the client sent too fast".into()))
    );
    let silent = ServerReport {
        abort_reason: None,
        ..aborted
    };
    assert_eq!(
        check_report(sent(MIB, 1024), SECOND, &silent)
            .unwrap_err()
            .to_string(),
        "the server ended the session: no reason given"
    );
}

#[test]
fn absurd_times_and_figures_are_inconsistent() {
    let long = ServerReport {
        elapsed_ns: 3600 * SECOND,
        ..report(MIB, 1024)
    };
    let err = check_report(sent(MIB, 1024), SECOND, &long).unwrap_err();
    assert!(
        err.to_string()
            .contains("its transfer time is 3600.000 s, but the session lasted 1.000 s"),
        "{err}"
    );
    let idle = ServerReport {
        idle_after_last_ns: u64::MAX,
        ..report(MIB, 1024)
    };
    assert!(check_report(sent(MIB, 1024), SECOND, &idle).is_err());
    let jitter = ServerReport {
        jitter_us: Some(-1.0),
        ..report(MIB, 1024)
    };
    assert!(check_report(sent(MIB, 1024), SECOND, &jitter).is_err());
    let omitted = ServerReport {
        omitted: Some(Omitted {
            bytes: 2 * MIB,
            messages: 1,
            elapsed_ns: 1,
        }),
        ..report(MIB, 1024)
    };
    assert!(check_report(sent(MIB, 1024), SECOND, &omitted).is_err());
    let backwards = ServerReport {
        intervals: vec![IntervalSample {
            start_ns: 10,
            end_ns: 5,
            bytes: 1,
            lost: None,
            retransmitted: None,
            tcp: None,
            jitter_ns: None,
        }],
        ..report(MIB, 1024)
    };
    assert!(check_report(sent(MIB, 1024), SECOND, &backwards).is_err());
}

#[test]
fn a_server_cannot_answer_more_requests_than_were_sent() {
    let rr = report(20, 20);
    assert_eq!(
        check_report(ClientView::Requests { sent: 20 }, SECOND, &rr),
        Ok(())
    );
    let err = check_report(ClientView::Requests { sent: 19 }, SECOND, &rr).unwrap_err();
    assert!(
        err.to_string()
            .contains("answered 20 requests, but 19 were sent"),
        "{err}"
    );
}

#[test]
fn a_loss_split_beyond_the_loss_is_not_believed() {
    let sent = ClientView::Sent {
        messages: 100,
        bytes: 100_000,
    };
    let udp = ServerReport {
        protocol: Protocol::Udp,
        messages: 90,
        bytes: 90_000,
        lost: 10,
        dropped_by_host: Some(10),
        ..ServerReport::default()
    };
    assert_eq!(check_report(sent, 1_000_000, &udp), Ok(()));
    let more = ServerReport {
        dropped_by_host: Some(11),
        ..udp.clone()
    };
    assert!(matches!(
        check_report(sent, 1_000_000, &more),
        Err(ReportIssue::Inconsistent(why)) if why.contains("dropped 11 messages, but 10 were lost")
    ));
    let reversed = ServerReport {
        messages: 100,
        not_sent: 101,
        ..udp
    };
    let received = ClientView::Received {
        messages: 90,
        bytes: 90_000,
    };
    assert!(matches!(
        check_report(received, 1_000_000, &reversed),
        Err(ReportIssue::Inconsistent(_))
    ));
}

#[test]
fn series_and_counters_past_what_a_session_can_hold_are_inconsistent() {
    use crate::vocab::counters::{CpuUsage, TransportStats};
    let client = sent(MIB, 1024);
    let waited = SECOND;
    let sample = |start_ns, end_ns, bytes| IntervalSample {
        start_ns,
        end_ns,
        bytes,
        ..IntervalSample::default()
    };
    // Intervals adding up to 50 times what was counted.
    let mut r = report(MIB, 1024);
    r.intervals = (0..50)
        .map(|i| sample(i * 1000, (i + 1) * 1000, MIB))
        .collect();
    assert!(matches!(
        check_report(client, waited, &r),
        Err(ReportIssue::Inconsistent(_))
    ));
    // A 1 ns interval holding 2 GiB: faster than any path, even over the 1 ms an interval's
    // rate is taken over at least.
    const GIB: u64 = 1 << 30;
    let big = sent(4 * GIB, 4 * GIB / 1024);
    let mut r = report(4 * GIB, 4 * GIB / 1024);
    r.intervals = vec![sample(0, 1, 2 * GIB)];
    assert!(matches!(
        check_report(big, waited, &r),
        Err(ReportIssue::Inconsistent(_))
    ));
    // An honest series whose last interval is 300 ns long and holds one 1 MiB read (the work
    // ended right after a tick): 28 Tbit/s over its own span, and believed.
    let mut r = report(2 * MIB, 2048);
    r.intervals = vec![
        sample(0, SECOND / 4, MIB),
        sample(SECOND / 4, SECOND / 4 + 300, MIB),
    ];
    assert_eq!(check_report(sent(2 * MIB, 2048), waited, &r), Ok(()));
    // A truthful series passes.
    let mut r = report(MIB, 1024);
    r.intervals = vec![
        sample(0, SECOND / 4, MIB / 2),
        sample(SECOND / 4, SECOND / 2, MIB / 2),
    ];
    assert_eq!(check_report(client, waited, &r), Ok(()));
    // TCP duplicates of 2^63.
    let mut r = report(MIB, 1024);
    r.duplicates = 1 << 63;
    assert!(check_report(client, waited, &r).is_err());
    // A congestion window of 2^64 - 1, retransmissions past the packets sent.
    let stats = TransportStats {
        packets_sent: 100,
        ..TransportStats::default()
    };
    let mut r = report(MIB, 1024);
    r.transport = Some(TransportStats {
        cwnd_bytes: Some(u64::MAX),
        ..stats.clone()
    });
    assert!(check_report(client, waited, &r).is_err());
    r.transport = Some(TransportStats {
        packets_retransmitted: 1_000_000_000_000,
        ..stats.clone()
    });
    assert!(check_report(client, waited, &r).is_err());
    r.transport = Some(stats);
    assert_eq!(check_report(client, waited, &r), Ok(()));
    // 2 × 10^9 s of CPU in a session of a millisecond.
    r.cpu = Some(CpuUsage {
        user_us: 2_000_000_000_000_000,
        ..CpuUsage::default()
    });
    assert!(check_report(client, SECOND / 1000, &r).is_err());
}

fn stream(
    id: u32,
    bytes: u64,
    start_time: f64,
    end_time: f64,
) -> crate::wire::iperf3::StreamResult {
    crate::wire::iperf3::StreamResult {
        id,
        bytes,
        start_time,
        end_time,
        ..Default::default()
    }
}

fn results(streams: Vec<crate::wire::iperf3::StreamResult>) -> TestResults {
    TestResults {
        streams,
        ..TestResults::default()
    }
}

#[test]
fn iperf3_results_are_believed_only_where_they_can_be_true() {
    let ours = results(vec![
        stream(1, 100 * MIB, 0.0, 1.0),
        stream(3, 100 * MIB, 0.0, 1.0),
    ]);
    let truthful = results(vec![
        stream(1, 100 * MIB, 0.0, 1.01),
        stream(3, 99 * MIB, 0.0, 1.0),
    ]);
    assert_eq!(check_iperf3_results(&ours, &truthful, true, false), Ok(()));
    let lies = [
        // Five streams added.
        results((0..7).map(|i| stream(i, MIB, 0.0, 1.0)).collect()),
        // A stream the test never opened.
        results(vec![stream(9, MIB, 0.0, 1.0)]),
        // Ten times the bytes sent.
        results(vec![stream(1, 1000 * MIB, 0.0, 1.0)]),
        // A 1 ns test.
        results(vec![stream(1, 100 * MIB, 0.0, 1e-9)]),
        // An end time of 10^12 s.
        results(vec![stream(1, MIB, 0.0, 1e12)]),
        // Not a number.
        results(vec![stream(1, MIB, 0.0, f64::NAN)]),
    ];
    for lie in &lies {
        assert!(
            matches!(
                check_iperf3_results(&ours, lie, true, false),
                Err(ReportIssue::Inconsistent(_))
            ),
            "{lie:?}"
        );
    }
    // Reversed: the server cannot have sent less than arrived, nor (TCP) far more.
    let sent_less = results(vec![stream(1, MIB, 0.0, 1.0)]);
    assert!(check_iperf3_results(&ours, &sent_less, false, false).is_err());
    let sent_far_more = results(vec![stream(
        1,
        100 * MIB + TCP_UNDELIVERED_MAX + 1,
        0.0,
        1.0,
    )]);
    assert!(check_iperf3_results(&ours, &sent_far_more, false, false).is_err());
    let mut cpu = truthful.clone();
    cpu.cpu_util_total = f64::INFINITY;
    assert!(check_iperf3_results(&ours, &cpu, true, false).is_err());
}

#[test]
fn a_data_socket_address_must_be_an_address() {
    let mut r = report(MIB, 1024);
    r.data_path.local_addr = Some("127.0.0.1:5310".into());
    assert_eq!(check_report(sent(MIB, 1024), SECOND, &r), Ok(()));
    r.data_path.local_addr = Some("<script>alert(1)</script>".into());
    assert!(check_report(sent(MIB, 1024), SECOND, &r).is_err());
}
