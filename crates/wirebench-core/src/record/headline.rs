//! The figures a run is judged by, derived once from both sides' counts: the run's transfer
//! time ([`transfer_span_ns`], its one definition), goodput (what the receiver got over that
//! time), the sender's offered rate beside it, UDP delivery (loss, duplicates, reordering as
//! counts and shares) and the sender's retransmission rate. Every view shows these; none
//! derives its own.

use serde::{Deserialize, Serialize};

use super::loss::LossSplit;
use super::rate::{bits_per_second, MIN_TIMED_NS};
use super::ratesearch::TrialEntry;
use super::run::{ClientRecord, RttFigures, RunRecord, ServerRecord};
use crate::machine::ratesearch::TrialKind;
use crate::vocab::plan::{Mechanism, Protocol};

/// A run's headline figures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// The run's transfer time, ns, as [`transfer_span_ns`] defines it (less the omitted span
    /// with `-O`): the one span both goodput and the offered rate are taken over.
    pub transfer_ns: u64,
    /// Messages the sender sent (each once).
    pub sent_messages: u64,
    /// Payload bytes the sender sent (each once).
    pub sent_bytes: u64,
    /// Unique messages the receiver got.
    pub received_messages: u64,
    /// Unique payload bytes the receiver got.
    pub received_bytes: u64,
    /// Goodput: `received_bytes` × 8 / transfer time, bit/s; null when the run was too short
    /// to time (under [`MIN_TIMED_NS`]).
    pub goodput_bps: Option<f64>,
    /// Offered rate: `sent_bytes` × 8 / transfer time, bit/s; null when too short to time.
    pub sent_bps: Option<f64>,
    /// UDP: what the receiver found missing, repeated and out of order; null otherwise.
    pub delivery: Option<Delivery>,
    /// Share of the sender's data packets sent again (TCP, QUIC, UDP stop-and-wait) or lost
    /// (UDP streaming); null when unknown.
    pub retrans_rate: Option<f64>,
    /// Stop-and-wait round trips; null for streaming.
    pub rtt: Option<RttFigures>,
    /// `-O`: the span at the start left out of every figure above, ns (the client's, up to
    /// its omit mark): counts and time are what came after it. 0 without -O.
    #[serde(default)]
    pub omitted_ns: u64,
    /// `--bidir`: the figures above add up both directions (bytes and messages summed, over
    /// the longer of the two directions' transfer times); each direction's own figures are
    /// in [`DirectionHeadlines`]. False for a one-direction run.
    #[serde(default)]
    pub both_directions: bool,
}

/// A `--bidir` run's headline figures per direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DirectionHeadlines {
    /// The client sent, the server received.
    pub client_to_server: Headline,
    /// The server sent, the client received.
    pub server_to_client: Headline,
}

/// What a UDP receiver counted, with each count's share of the messages sent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Messages sent that never arrived.
    pub lost: u64,
    /// `lost` / messages sent × 100.
    pub lost_pct: f64,
    /// Extra copies of messages already received.
    pub duplicates: u64,
    /// `duplicates` / messages sent × 100.
    pub duplicates_pct: f64,
    /// New messages that arrived after a later one.
    pub out_of_order: u64,
    /// `out_of_order` / messages sent × 100.
    pub out_of_order_pct: f64,
    /// `lost` split by where: dropped by the receiving host, not sent by the sending host,
    /// lost on the path; absent where the receiver's socket does not say what it dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_split: Option<LossSplit>,
}

impl Headline {
    /// Whether the run lasted long enough for a rate to mean something.
    pub fn timed(&self) -> bool {
        self.goodput_bps.is_some()
    }

    /// The transfer time in seconds.
    pub fn transfer_seconds(&self) -> f64 {
        self.transfer_ns as f64 / 1e9
    }
}

/// `part` / `whole` × 100; 0 when `whole` is 0.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

impl RunRecord {
    /// The run's headline figures. Forward, the client sends and the server receives; with
    /// `-R` the other way round; with `--bidir` both directions added up (marked
    /// `both_directions`; see [`RunRecord::direction_headlines`] for each). With `-O`, what
    /// each end moved before its omit mark is left out, and the time before the client's.
    pub fn headline(&self) -> Headline {
        let forward = session_headline(self.kind(), self.reverse, &self.client, &self.server);
        match (self.direction_headlines(), self.server_to_client.as_deref()) {
            (Some(both), Some(back)) => {
                both_ways(&both, self.client.messages + back.server.messages)
            }
            _ => forward,
        }
    }

    /// `--bidir`: each direction's headline figures; None for a one-direction run.
    pub fn direction_headlines(&self) -> Option<DirectionHeadlines> {
        let back = self.server_to_client.as_deref()?;
        Some(DirectionHeadlines {
            client_to_server: session_headline(self.kind(), false, &self.client, &self.server),
            server_to_client: session_headline(self.kind(), true, &back.client, &back.server),
        })
    }

    /// The run's protocol and mechanism.
    fn kind(&self) -> (Protocol, Mechanism) {
        (self.protocol, self.mechanism)
    }
}

/// The run's transfer time, ns: the one definition every figure over time uses, from each
/// end's span of the run (`client_ns`: `ClientRecord::elapsed_ns`; `server_ns`:
/// `ServerRecord::elapsed_ns`). It is timed by when the data was delivered, never by when a
/// message on the control connection arrived, so neither host's scheduling after the data
/// arrived (nor a long way back for the report) moves it.
///
/// - **Streaming**: the longer of the two ends' spans. The receiver's runs from its first byte
///   read to its last. The sender's runs from its first byte handed to the transport to: for
///   TCP and QUIC, the arrival of the receiver's acknowledgement of its last byte (TCP: the
///   kernel's date of it, from TCP_INFO; QUIC: the acknowledgement of the stream's end), so it
///   is the usual end, one round trip after the first byte left; for UDP, which has no
///   acknowledgements, its last datagram sent (the receiver's span is then the longer when a
///   bottleneck queue delayed the data). The receiver's span also stands in when something
///   between the ends acknowledged TCP data before it arrived (a relay that terminates TCP).
/// - **Stop-and-wait**: the client's span, from its first message to the last
///   acknowledgement (`-R`: from the first byte it read to the last).
pub fn transfer_span_ns(mechanism: Mechanism, client_ns: u64, server_ns: u64) -> u64 {
    match mechanism {
        Mechanism::Stream => client_ns.max(server_ns),
        Mechanism::StopAndWait => client_ns,
    }
}

/// Payload bytes and messages one end moved after its omit mark (all of them without one).
fn after_mark(
    messages: u64,
    bytes: u64,
    omitted: Option<&crate::wire::proto::Omitted>,
) -> (u64, u64) {
    let (m, b) = omitted.map_or((0, 0), |o| (o.messages, o.bytes));
    (messages.saturating_sub(m), bytes.saturating_sub(b))
}

/// The headline of one direction: `reverse` when the server sent.
/// One direction of one session's headline: the client's and the server's records of a
/// session that sent client → server, or server → client when `reverse`.
pub fn session_headline(
    (protocol, mechanism): (Protocol, Mechanism),
    reverse: bool,
    c: &ClientRecord,
    s: &ServerRecord,
) -> Headline {
    let client = after_mark(c.messages, c.bytes, c.omitted.as_ref());
    let server = after_mark(s.messages, s.bytes, s.omitted.as_ref());
    let ((sent_messages, sent_bytes), (mut received_messages, mut received_bytes)) = if reverse {
        (server, client)
    } else {
        (client, server)
    };
    // -O: each end takes its mark on its own clock, from its own start, so the receiver's
    // mark can fall a few milliseconds before the sender's and count fewer bytes before it.
    // Bytes that arrived after the marks cannot exceed those sent after them: the excess is
    // that skew, not data, and a headline saying "710 of 700 bytes arrived" is not believed.
    if c.omitted.is_some() || s.omitted.is_some() {
        received_messages = received_messages.min(sent_messages);
        received_bytes = received_bytes.min(sent_bytes);
    }
    let span_ns = transfer_span_ns(mechanism, c.elapsed_ns, s.elapsed_ns);
    let omitted_ns = c.omitted.map_or(0, |o| o.elapsed_ns.min(span_ns));
    let transfer_ns = span_ns - omitted_ns;
    let seconds = transfer_ns as f64 / 1e9;
    let timed = transfer_ns >= MIN_TIMED_NS;
    // UDP delivery counts cover the whole run, the omitted span included: loss is counted
    // once, at the end.
    let whole_sent = if reverse { s.messages } else { c.messages };
    let delivery = (protocol == Protocol::Udp).then(|| {
        let (lost, duplicates, out_of_order, dropped_by_receiver) = match (&c.udp_received, reverse)
        {
            (Some(u), true) => (u.lost, u.duplicates, u.out_of_order, u.dropped_by_host),
            _ => (s.lost, s.duplicates, s.out_of_order, s.dropped_by_host),
        };
        let not_sent = if reverse { s.not_sent } else { c.not_sent };
        Delivery {
            lost,
            lost_pct: percent(lost, whole_sent),
            duplicates,
            duplicates_pct: percent(duplicates, whole_sent),
            out_of_order,
            out_of_order_pct: percent(out_of_order, whole_sent),
            loss_split: LossSplit::of(lost, dropped_by_receiver, not_sent),
        }
    });
    let sender = if reverse { &s.measured } else { &c.measured };
    Headline {
        transfer_ns,
        sent_messages,
        sent_bytes,
        received_messages,
        received_bytes,
        goodput_bps: timed.then(|| bits_per_second(received_bytes, seconds)),
        sent_bps: timed.then(|| bits_per_second(sent_bytes, seconds)),
        delivery,
        retrans_rate: sender.retrans_rate,
        rtt: c.rtt,
        omitted_ns,
        both_directions: false,
    }
}

/// Both directions added up: counts summed over the longer transfer time; UDP delivery
/// summed with its shares of all `whole_sent` messages (both senders' whole runs); no single
/// sender, so no retransmission rate.
fn both_ways(d: &DirectionHeadlines, whole_sent: u64) -> Headline {
    let (a, b) = (&d.client_to_server, &d.server_to_client);
    let transfer_ns = a.transfer_ns.max(b.transfer_ns);
    let seconds = transfer_ns as f64 / 1e9;
    let timed = a.timed() && b.timed();
    let sent_messages = a.sent_messages + b.sent_messages;
    let received_bytes = a.received_bytes + b.received_bytes;
    let sent_bytes = a.sent_bytes + b.sent_bytes;
    let delivery = match (a.delivery, b.delivery) {
        (Some(x), Some(y)) => {
            let sent = whole_sent;
            let (lost, duplicates, out_of_order) = (
                x.lost + y.lost,
                x.duplicates + y.duplicates,
                x.out_of_order + y.out_of_order,
            );
            Some(Delivery {
                lost,
                lost_pct: percent(lost, sent),
                duplicates,
                duplicates_pct: percent(duplicates, sent),
                out_of_order,
                out_of_order_pct: percent(out_of_order, sent),
                loss_split: x.loss_split.zip(y.loss_split).map(|(p, q)| p.plus(q)),
            })
        }
        _ => None,
    };
    Headline {
        transfer_ns,
        sent_messages,
        sent_bytes,
        received_messages: a.received_messages + b.received_messages,
        received_bytes,
        goodput_bps: timed.then(|| bits_per_second(received_bytes, seconds)),
        sent_bps: timed.then(|| bits_per_second(sent_bytes, seconds)),
        delivery,
        retrans_rate: None,
        rtt: a.rtt,
        omitted_ns: a.omitted_ns.max(b.omitted_ns),
        both_directions: true,
    }
}

/// A rate-search trial's figures are its run's headline: they are defined here, beside the
/// headline, so the search's record (`ratesearch`) stays below the run record that carries it.
impl TrialEntry {
    /// A trial at `rate_bps` of `kind`, from its run's record, judged `passed`: its counts,
    /// loss and goodput from the run's headline; its `sent_bps` the client's own rate over its
    /// own span (`client.rate_bps`), when the run lasted long enough to time.
    pub fn of(kind: TrialKind, rate_bps: u64, record: &RunRecord, passed: bool) -> TrialEntry {
        let headline = record.headline();
        let sent_bps = headline.timed().then_some(record.client.rate_bps);
        TrialEntry::from_headline(kind, rate_bps, &headline, sent_bps, passed)
    }

    /// A trial from its run's `headline` and the sender's own rate `sent_bps`.
    fn from_headline(
        kind: TrialKind,
        rate_bps: u64,
        headline: &Headline,
        sent_bps: Option<f64>,
        passed: bool,
    ) -> TrialEntry {
        TrialEntry {
            kind: kind.into(),
            rate_bps,
            sent_messages: headline.sent_messages,
            received_messages: headline.received_messages,
            lost_pct: headline.delivery.map_or(
                percent(
                    headline
                        .sent_messages
                        .saturating_sub(headline.received_messages),
                    headline.sent_messages,
                ),
                |d| d.lost_pct,
            ),
            goodput_bps: headline.goodput_bps,
            sent_bps,
            transfer_ns: headline.transfer_ns,
            passed,
            planned_messages: 0,
            ended_early: None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::run::{ClientRecord, EndMetrics, ServerRecord, UdpReceipt};
    use crate::vocab::plan::Mechanism;
    use crate::wire::proto::ServerReport;

    /// A run whose client sent `sent` 1000-byte messages in `ns` and whose server read `read`,
    /// losing the rest.
    pub(crate) fn run(protocol: Protocol, sent: u64, read: u64, ns: u64) -> RunRecord {
        let server = ServerReport {
            protocol,
            mechanism: Mechanism::Stream,
            messages: read,
            bytes: read * 1000,
            read_calls: read,
            elapsed_ns: ns / 2,
            idle_after_last_ns: 0,
            lost: sent.saturating_sub(read),
            dropped_by_host: None,
            not_sent: 0,
            duplicates: 0,
            out_of_order: 0,
            jitter_us: None,
            acks_sent: 0,
            aborted: false,
            abort_reason: None,
            data_path: Default::default(),
            transport: None,
            cpu: None,
            intervals: Vec::new(),
            omitted: None,
        };
        RunRecord {
            protocol,
            mechanism: Mechanism::Stream,
            repeat_index: 0,
            session: 7,
            client: ClientRecord {
                messages: sent,
                bytes: sent * 1000,
                seconds: ns as f64 / 1e9,
                elapsed_ns: ns,
                rate_bps: 0.0,
                send_calls: sent,
                datagrams: sent,
                retransmissions: 0,
                timeouts: 0,
                send_errors: 0,
                not_sent: 0,
                rtt: None,
                data_path: Default::default(),
                measured: EndMetrics::default(),
                udp_received: None,
                omitted: None,
            },
            server: ServerRecord::of(&server),
            relay: None,
            flows: Vec::new(),
            reverse: false,
            ended_by: Default::default(),
            loaded_latency: None,
            server_to_client: None,
            rate_search: None,
        }
    }

    #[test]
    fn goodput_is_what_arrived_over_the_transfer_time() {
        // 1000 messages of 1000 B sent in 0.5 s, 400 read: goodput 400 000 B × 8 / 0.5 s
        // = 6.4 Mbit/s, sent 16 Mbit/s, 600 lost = 60 % of those sent.
        let h = run(Protocol::Udp, 1000, 400, 500_000_000).headline();
        assert_eq!(h.goodput_bps, Some(6_400_000.0));
        assert_eq!(h.sent_bps, Some(16_000_000.0));
        let d = h.delivery.unwrap();
        assert_eq!((d.lost, d.lost_pct), (600, 60.0));
        assert_eq!((h.sent_bytes, h.received_bytes), (1_000_000, 400_000));
        // The server's own span is half the client's: its rate is not the headline.
        assert!(ServerRecord::of(&ServerReport::default()).rate_bps == 0.0);
    }

    #[test]
    fn tcp_has_no_delivery_figures_and_reversed_runs_swap_the_roles() {
        let h = run(Protocol::Tcp, 10, 10, 2_000_000).headline();
        assert!(h.delivery.is_none());
        assert_eq!(h.goodput_bps, Some(10_000.0 * 8.0 / 0.002));
        // -R: the server sent 10 messages, the client received 6 and counted 4 lost.
        let mut r = run(Protocol::Udp, 6, 10, 2_000_000);
        r.reverse = true;
        r.client.udp_received = Some(UdpReceipt {
            lost: 4,
            ..UdpReceipt::default()
        });
        let h = r.headline();
        assert_eq!((h.sent_messages, h.received_messages), (10, 6));
        assert_eq!(h.delivery.unwrap().lost_pct, 40.0);
        assert_eq!(h.goodput_bps, Some(6000.0 * 8.0 / 0.002));
    }

    #[test]
    fn a_stream_is_timed_by_the_longer_of_the_two_ends_spans() {
        // Acknowledged end to end: the sender's span (first byte sent to the acknowledgement
        // of the last) is the longer, by about a round trip.
        assert_eq!(transfer_span_ns(Mechanism::Stream, 2_001, 2_000), 2_001);
        // Delayed by a bottleneck queue after a UDP sender's last datagram, or acknowledged
        // early by a relay that terminates TCP: the receiver's span.
        assert_eq!(transfer_span_ns(Mechanism::Stream, 900, 2_000), 2_000);
        // Stop-and-wait: the client's span whatever the server's.
        assert_eq!(transfer_span_ns(Mechanism::StopAndWait, 900, 2_000), 900);
        // The headline takes it: 10 000 B over the server's 4 ms, not the client's 2 ms.
        let mut r = run(Protocol::Tcp, 10, 10, 2_000_000);
        r.server.elapsed_ns = 4_000_000;
        let h = r.headline();
        assert_eq!(h.transfer_ns, 4_000_000);
        assert_eq!(h.goodput_bps, Some(10_000.0 * 8.0 / 0.004));
    }

    #[test]
    fn a_run_under_a_millisecond_is_too_short_to_time() {
        let h = run(Protocol::Tcp, 1, 1, MIN_TIMED_NS - 1).headline();
        assert!(!h.timed());
        assert_eq!((h.goodput_bps, h.sent_bps), (None, None));
        assert!(run(Protocol::Tcp, 1, 1, MIN_TIMED_NS).headline().timed());
    }

    #[test]
    fn omit_leaves_out_what_each_end_moved_before_its_mark() {
        use crate::wire::proto::Omitted;
        // 1000 messages sent in 2 s, all read; 300 sent and 290 read before the marks, the
        // client's mark 0.5 s in: 710 were read after the receiver's mark, but only 700 were
        // sent after the sender's, so goodput is those 700 over the last 1.5 s.
        let mut r = run(Protocol::Tcp, 1000, 1000, 2_000_000_000);
        r.client.omitted = Some(Omitted {
            bytes: 300_000,
            messages: 300,
            elapsed_ns: 500_000_000,
        });
        r.server.omitted = Some(Omitted {
            bytes: 290_000,
            messages: 290,
            elapsed_ns: 499_000_000,
        });
        let h = r.headline();
        assert_eq!((h.transfer_ns, h.omitted_ns), (1_500_000_000, 500_000_000));
        assert_eq!((h.sent_bytes, h.received_bytes), (700_000, 700_000));
        assert_eq!((h.sent_messages, h.received_messages), (700, 700));
        assert_eq!(h.goodput_bps, Some(700_000.0 * 8.0 / 1.5));
        // A receiver whose mark came later (fewer after it) is taken as it counted.
        r.server.omitted = Some(Omitted {
            bytes: 320_000,
            messages: 320,
            elapsed_ns: 501_000_000,
        });
        assert_eq!(r.headline().received_bytes, 680_000);
        // A run that ended before its mark has nothing left to time.
        r.client.omitted = Some(Omitted {
            bytes: 1_000_000,
            messages: 1000,
            elapsed_ns: 2_000_000_000,
        });
        assert!(!r.headline().timed());
    }

    #[test]
    fn bidir_adds_both_directions_up_and_keeps_each() {
        use crate::record::run::DirectionRecord;
        // Client → server: 1000 of 1000 in 2 s; server → client: the server sent 500, the
        // client read 400 in 1 s and counted 100 lost.
        let mut r = run(Protocol::Udp, 1000, 1000, 2_000_000_000);
        let mut back = run(Protocol::Udp, 400, 500, 1_000_000_000);
        back.client.udp_received = Some(UdpReceipt {
            lost: 100,
            ..UdpReceipt::default()
        });
        r.server_to_client = Some(Box::new(DirectionRecord {
            session: 8,
            client: back.client,
            server: back.server,
        }));
        let d = r.direction_headlines().unwrap();
        assert_eq!(d.client_to_server.received_bytes, 1_000_000);
        assert_eq!(
            (
                d.server_to_client.sent_messages,
                d.server_to_client.received_messages
            ),
            (500, 400)
        );
        assert_eq!(d.server_to_client.delivery.unwrap().lost_pct, 20.0);
        assert_eq!(d.server_to_client.goodput_bps, Some(400_000.0 * 8.0));
        let h = r.headline();
        assert!(h.both_directions && !d.client_to_server.both_directions);
        assert_eq!((h.sent_messages, h.received_bytes), (1500, 1_400_000));
        assert_eq!(h.transfer_ns, 2_000_000_000);
        assert_eq!(h.goodput_bps, Some(1_400_000.0 * 8.0 / 2.0));
        let lost = h.delivery.unwrap();
        assert_eq!((lost.lost, lost.lost_pct), (100, 100.0 * 100.0 / 1500.0));
        assert!(run(Protocol::Udp, 1, 1, 2_000_000)
            .direction_headlines()
            .is_none());
    }

    #[test]
    fn the_loss_split_takes_each_share_from_the_end_that_knows_it() {
        // Forward: the server (receiver) says what its host dropped, the client (sender) what
        // its host did not send.
        let mut r = run(Protocol::Udp, 1000, 900, 2_000_000);
        r.server.dropped_by_host = Some(60);
        r.client.not_sent = 15;
        let split = r.headline().delivery.unwrap().loss_split.unwrap();
        assert_eq!(
            (split.receiving_host, split.sending_host, split.path),
            (60, 15, 25)
        );
        // -R: the other way round.
        r.reverse = true;
        r.server.not_sent = 3;
        r.client.udp_received = Some(UdpReceipt {
            lost: 10,
            dropped_by_host: Some(7),
            ..UdpReceipt::default()
        });
        let split = r.headline().delivery.unwrap().loss_split.unwrap();
        assert_eq!(
            (split.receiving_host, split.sending_host, split.path),
            (7, 3, 0)
        );
        // A receiver that cannot say: no split.
        r.client.udp_received = Some(UdpReceipt {
            lost: 10,
            ..UdpReceipt::default()
        });
        assert_eq!(r.headline().delivery.unwrap().loss_split, None);
    }

    /// A headline of `sent` 1000-byte messages, `received` of them, over 0.2 s.
    fn trial_headline(sent: u64, received: u64) -> Headline {
        Headline {
            transfer_ns: 200_000_000,
            sent_messages: sent,
            sent_bytes: sent * 1000,
            received_messages: received,
            received_bytes: received * 1000,
            goodput_bps: Some(received as f64 * 1000.0 * 8.0 / 0.2),
            sent_bps: Some(sent as f64 * 1000.0 * 8.0 / 0.2),
            delivery: None,
            retrans_rate: None,
            rtt: None,
            omitted_ns: 0,
            both_directions: false,
        }
    }

    #[test]
    fn a_trial_entry_takes_its_figures_from_the_headline() {
        let h = trial_headline(1000, 990);
        let t = TrialEntry::from_headline(TrialKind::Confirm, 40_000_000, &h, h.sent_bps, false);
        assert_eq!(t.lost_pct, 1.0);
        assert_eq!(t.goodput_bps, Some(39_600_000.0));
        assert_eq!(t.kind, crate::record::ratesearch::TrialKindName::Confirm);
        let v = serde_json::to_value(t).unwrap();
        assert_eq!(v["kind"], "confirm");
    }

    #[test]
    fn a_trial_entry_s_sent_rate_is_the_sender_s_over_its_own_span() {
        // The client's own rate, not the headline's (sent bytes over the transfer time).
        let mut run = run(crate::vocab::plan::Protocol::Udp, 1000, 1000, 500_000_000);
        run.client.rate_bps = 20_000_000.0;
        assert_eq!(run.headline().sent_bps, Some(16_000_000.0));
        let t = TrialEntry::of(TrialKind::Probe, 20_000_000, &run, true);
        assert_eq!(t.sent_bps, Some(20_000_000.0));
        assert_eq!(t.sent_messages, 1000);
    }
}
