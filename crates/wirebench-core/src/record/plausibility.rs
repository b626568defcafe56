//! Whether a server's report can be believed: owns the one check a client makes of the report
//! it receives against what it did itself (more bytes or messages arrived than were sent,
//! times longer than the session lasted, loss beyond what was sent, a report marked aborted),
//! so a lying or broken server's figures are never stored or shown as a complete run. Pure: the
//! client passes in what it counted and how long it waited.

use crate::vocab::plan::Protocol;
use crate::wire::proto::ServerReport;

/// What the client itself counted in the session the report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientView {
    /// The client sent (a forward transfer): messages (UDP: unique ones) and payload bytes.
    Sent {
        /// Messages sent, each counted once.
        messages: u64,
        /// Payload bytes sent, each counted once.
        bytes: u64,
    },
    /// The client received (`-R`): what it read of what the server says it sent.
    Received {
        /// Messages read (UDP: unique ones).
        messages: u64,
        /// Payload bytes read (unique).
        bytes: u64,
    },
    /// A request-response session: requests sent, retries included.
    Requests {
        /// Request messages the client put on the wire.
        sent: u64,
    },
}

impl ClientView {
    /// What a transfer's client counted: sent forward, received when `reverse`.
    pub fn of(reverse: bool, messages: u64, bytes: u64) -> ClientView {
        if reverse {
            ClientView::Received { messages, bytes }
        } else {
            ClientView::Sent { messages, bytes }
        }
    }
}

/// Slack allowed between the server's clock and the client's wait for it (one scheduling
/// delay, one round trip): a server span longer than the client's whole wait plus this is
/// impossible.
pub const CLOCK_SLACK_NS: u64 = 2_000_000_000;

/// Why a report is not a complete run's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportIssue {
    /// The server says it ended the session early.
    #[error("the server ended the session: {0}")]
    Aborted(String),
    /// The figures cannot all be true.
    #[error("the server's report is inconsistent: {0}")]
    Inconsistent(String),
}

/// Checks `report` against what the client counted (`client`) and how long the client's side
/// of the session lasted (`waited_ns`, from its request to the report's arrival). Every figure
/// a later view derives (goodput, loss, the server's rate) comes from a report that passed.
pub fn check_report(
    client: ClientView,
    waited_ns: u64,
    report: &ServerReport,
) -> Result<(), ReportIssue> {
    let wrong = |what: String| Err(ReportIssue::Inconsistent(what));
    match client {
        ClientView::Sent { messages, bytes } => {
            if report.bytes > bytes {
                return wrong(format!(
                    "it says {} bytes arrived, but {bytes} were sent",
                    report.bytes
                ));
            }
            if report.messages > messages {
                return wrong(format!(
                    "it says {} messages arrived, but {messages} were sent",
                    report.messages
                ));
            }
            let lost_and_delivered = report.lost.saturating_add(report.messages);
            if report.protocol == Protocol::Udp && lost_and_delivered > messages {
                return wrong(format!(
                    "it says {} messages arrived and {} were lost, but {messages} were sent",
                    report.messages, report.lost
                ));
            }
        }
        ClientView::Received { messages, bytes } => {
            if bytes > report.bytes {
                return wrong(format!(
                    "it says it sent {} bytes, but {bytes} arrived",
                    report.bytes
                ));
            }
            if messages > report.messages {
                return wrong(format!(
                    "it says it sent {} messages, but {messages} arrived",
                    report.messages
                ));
            }
        }
        ClientView::Requests { sent } => {
            if report.messages > sent {
                return wrong(format!(
                    "it says it answered {} requests, but {sent} were sent",
                    report.messages
                ));
            }
        }
    }
    if let Some(dropped) = report.dropped_by_host.filter(|d| *d > report.lost) {
        return wrong(format!(
            "it says its host dropped {dropped} messages, but {} were lost",
            report.lost
        ));
    }
    if report.not_sent > report.messages {
        return wrong(format!(
            "it says its host did not send {} of the {} messages it sent",
            report.not_sent, report.messages
        ));
    }
    let longest = waited_ns.saturating_add(CLOCK_SLACK_NS);
    for (name, ns) in [
        ("its transfer time", report.elapsed_ns),
        (
            "its idle time after the last byte",
            report.idle_after_last_ns,
        ),
    ] {
        if ns > longest {
            return wrong(format!(
                "{name} is {:.3} s, but the session lasted {:.3} s",
                ns as f64 / 1e9,
                waited_ns as f64 / 1e9
            ));
        }
    }
    if let Some(j) = report.jitter_us {
        if !j.is_finite() || j < 0.0 {
            return wrong(format!("its jitter is {j} µs"));
        }
    }
    if let Some(o) = report.omitted {
        if o.bytes > report.bytes || o.messages > report.messages {
            return wrong(format!(
                "it omitted {} bytes of the {} it counted",
                o.bytes, report.bytes
            ));
        }
    }
    if let Some(s) = report
        .intervals
        .iter()
        .find(|s| s.end_ns < s.start_ns || s.bytes > report.bytes)
    {
        return wrong(format!(
            "an interval from {} ns to {} ns holds {} bytes of the {} it counted",
            s.start_ns, s.end_ns, s.bytes, report.bytes
        ));
    }
    // Figures that cannot be true say more than the flag: they are checked first.
    if report.aborted {
        return Err(ReportIssue::Aborted(
            report
                .abort_reason
                .clone()
                .unwrap_or_else(|| "no reason given".into()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::metrics::IntervalSample;
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
}
