//! The gate's rules on their own: refusals counted and told, one end per session (also for a
//! session dropped without one), a timed transfer that stopped early, the flag durations.

use super::super::meter::Moved;
use super::*;
use tokio::sync::mpsc;
use wirebench_core::wire::proto::DataPathOptions;

fn transfer(total: u64) -> SessionParams {
    SessionParams {
        duration_us: None,
        omit_us: None,
        protocol: Protocol::Tcp,
        mechanism: Mechanism::Stream,
        msg_size: 1000,
        total_bytes: total,
        rto_us: None,
        rate_bps: None,
        grace_us: 0,
        options: DataPathOptions::default(),
        interval_us: None,
        reverse: false,
    }
}

fn gate(limits: Limits) -> (Arc<Gate>, mpsc::UnboundedReceiver<ServerEvent>) {
    let gate = Gate::new(&limits);
    let (tx, rx) = mpsc::unbounded_channel();
    gate.set_events(tx);
    (gate, rx)
}

fn peer() -> SocketAddr {
    "127.0.0.1:40000".parse().unwrap()
}

fn sessions(rx: &mut mpsc::UnboundedReceiver<ServerEvent>) -> Vec<SessionSummary> {
    let mut out = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        if let ServerEvent::Session(s) = ev {
            out.push(*s);
        }
    }
    out
}

#[test]
fn a_refusal_names_the_field_or_the_flag_and_is_counted_and_told() {
    let (gate, mut rx) = gate(Limits {
        max_bytes: 1000,
        ..Limits::default()
    });
    let bad = SessionParams {
        interval_us: Some(1),
        ..transfer(100)
    };
    let why = gate.admit(peer(), Ask::Transfer(&bad)).unwrap_err();
    assert!(why.starts_with("interval_us 1 is out of range"), "{why}");
    let why = gate
        .admit(peer(), Ask::Transfer(&transfer(1001)))
        .unwrap_err();
    assert!(why.contains("at most 1000 bytes (--max-bytes)"), "{why}");
    let notices: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|e| match e {
            ServerEvent::Notice(n) => Some(n.message),
            ServerEvent::Session(_) => None,
        })
        .collect();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(notices[0].starts_with("session refused: interval_us 1"));
    let counts = super::super::counts::MetricsHandle {
        metrics: Arc::clone(&gate.metrics),
        admission: Arc::clone(gate.admission()),
    }
    .snapshot();
    assert_eq!(counts.sessions_started, 0);
    assert_eq!(
        counts.sessions_refused,
        [
            ("invalid-request".to_string(), 1),
            ("max-bytes".to_string(), 1)
        ]
    );
}

#[test]
fn a_request_a_kind_refuses_before_it_can_ask_is_counted_and_told_once() {
    let (gate, mut rx) = gate(Limits::default());
    gate.refuse(peer(), Kind::Iperf3, "SCTP is not supported");
    let notices: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
        .filter_map(|e| match e {
            ServerEvent::Notice(n) => Some(n.message),
            ServerEvent::Session(_) => None,
        })
        .collect();
    assert_eq!(notices, ["iperf3 test refused: SCTP is not supported"]);
    let counts = super::super::counts::MetricsHandle {
        metrics: Arc::clone(&gate.metrics),
        admission: Arc::clone(gate.admission()),
    }
    .snapshot();
    assert_eq!(
        counts.sessions_refused,
        [("invalid-request".to_string(), 1)]
    );
}

#[test]
fn a_pass_aborted_with_a_reason_reports_what_its_meter_counted() {
    let (gate, mut rx) = gate(Limits::default());
    let mut pass = gate.admit(peer(), Ask::Transfer(&transfer(100))).unwrap();
    pass.meter().count_read(40);
    let sent = pass.abort("the data path failed".to_string());
    assert!(sent.aborted);
    assert_eq!(sent.bytes, 40);
    assert_eq!(sent.abort_reason.as_deref(), Some("the data path failed"));
    drop(pass);
    assert_eq!(sessions(&mut rx).len(), 1);
}

#[test]
fn every_pass_ends_once_with_one_line_even_when_dropped_without_an_end() {
    let (gate, mut rx) = gate(Limits::default());
    let mut pass = gate.admit(peer(), Ask::Transfer(&transfer(100))).unwrap();
    pass.set_session(7);
    let report = ServerReport {
        bytes: 100,
        messages: 1,
        ..pass.empty_report()
    };
    let sent = pass.end(report, Ok(()));
    assert!(!sent.aborted);
    drop(pass);
    // A session task that failed before its end: dropped, still reported, as aborted.
    let lost = gate.admit(peer(), Ask::Transfer(&transfer(100))).unwrap();
    lost.set_session(8);
    drop(lost);
    let lines = sessions(&mut rx);
    assert_eq!(lines.len(), 2);
    assert_eq!((lines[0].session, lines[0].report.aborted), (7, false));
    assert_eq!(lines[1].session, 8);
    assert!(lines[1].report.aborted);
    assert!(lines[1]
        .report
        .abort_reason
        .as_deref()
        .unwrap()
        .contains("without a report"));
    let m = gate.metrics.clone();
    let counts = super::super::counts::MetricsHandle {
        metrics: m,
        admission: Arc::clone(gate.admission()),
    }
    .snapshot();
    assert_eq!(
        (
            counts.sessions_started,
            counts.sessions_finished,
            counts.sessions_aborted,
            counts.sessions_running
        ),
        (2, 1, 1, 0)
    );
}

#[test]
fn a_failure_and_peer_text_are_ended_as_aborted_and_made_safe() {
    let (gate, mut rx) = gate(Limits::default());
    let mut pass = gate.admit(peer(), Ask::Transfer(&transfer(100))).unwrap();
    let sent = pass.end(
        pass.empty_report(),
        Err("unexpected \u{1b}[2J\nFORGED".to_string()),
    );
    assert!(sent.aborted);
    assert_eq!(
        sent.abort_reason.as_deref(),
        Some("unexpected \\u{1b}[2J\\nFORGED")
    );
    assert_eq!(sessions(&mut rx)[0].report, sent);
}

#[test]
fn a_timed_transfer_whose_data_stopped_early_is_aborted() {
    let (gate, mut rx) = gate(Limits::default());
    let timed = SessionParams {
        duration_us: Some(5_000_000),
        mechanism: Mechanism::StopAndWait,
        ..transfer(UNBOUNDED_TOTAL)
    };
    let mut killed = gate.admit(peer(), Ask::Transfer(&timed)).unwrap();
    let report = ServerReport {
        bytes: 1000,
        messages: 1,
        elapsed_ns: 1_200_000_000,
        ..killed.empty_report()
    };
    let sent = killed.end(report.clone(), Ok(()));
    assert!(sent.aborted);
    assert!(
        sent.abort_reason
            .as_deref()
            .unwrap()
            .contains("stopped sending after 1.200 s of the 5.000 s"),
        "{:?}",
        sent.abort_reason
    );
    let mut full = gate.admit(peer(), Ask::Transfer(&timed)).unwrap();
    let on_time = ServerReport {
        elapsed_ns: 4_900_000_000,
        ..report
    };
    assert!(!full.end(on_time, Ok(())).aborted);
    assert_eq!(sessions(&mut rx).len(), 2);
}

#[test]
fn a_timed_session_is_bounded_by_max_bytes() {
    let (gate, _rx) = gate(Limits {
        max_bytes: 5000,
        ..Limits::default()
    });
    let timed = SessionParams {
        duration_us: Some(1_000_000),
        ..transfer(UNBOUNDED_TOTAL)
    };
    let pass = gate.admit(peer(), Ask::Transfer(&timed)).unwrap();
    assert_eq!(pass.params().total_bytes, 5000);
}

#[test]
fn durations_read_like_flags() {
    assert_eq!(flag_duration(Duration::from_secs(600)), "10m");
    assert_eq!(flag_duration(Duration::from_secs(90)), "90s");
    assert_eq!(flag_duration(Duration::from_secs(7200)), "2h");
    assert_eq!(flag_duration(Duration::from_millis(1500)), "1500ms");
}

#[tokio::test(start_paused = true)]
async fn the_stop_says_which_limit_ended_the_session() {
    let (gate, _rx) = gate(Limits {
        max_duration: Duration::from_secs(3),
        max_bytes: 1 << 20,
        ..Limits::default()
    });
    let pass = gate.admit(peer(), Ask::Transfer(&transfer(1000))).unwrap();
    let started = tokio::time::Instant::now();
    assert_eq!(
        pass.stop().await,
        "the session ran into the server's limit of 3s (--max-duration)"
    );
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    let pass = gate.admit(peer(), Ask::Transfer(&transfer(1000))).unwrap();
    pass.meter().watch(|| Moved {
        read: 0,
        sent: 2 << 20,
    });
    let why = pass.stop().await;
    assert!(why.contains("(--max-bytes)"), "{why}");
    let pass = gate.admit(peer(), Ask::Transfer(&transfer(1000))).unwrap();
    let stop = pass.stop();
    gate.abort_all();
    assert_eq!(stop.await, "the server shut down before the session ended");
}
