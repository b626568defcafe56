//! Unit tests of the stop-and-wait machines: exact counts, timeouts, Karn's rule and the
//! adaptive timeout, and every message delivered exactly once over a simulated lossy link.

use super::*;
use crate::machine::rto::{DEFAULT_INITIAL_RTO, DEFAULT_MAX_RTO, DEFAULT_MIN_RTO};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn lossless_exchange_counts_exactly_with_a_remainder() {
    let t0 = Instant::now();
    let mut s = StopAndWaitSender::new(2500, 1000, RtoPolicy::Fixed(ms(100)));
    let mut r = StopAndWaitReceiver::new();
    let mut now = t0;
    let mut lens = Vec::new();
    while !s.is_done() {
        let tx = s.poll_transmit(now).expect("something to send");
        assert!(s.poll_transmit(now).is_none(), "one in flight");
        lens.push(tx.len);
        assert_eq!(r.handle_data(tx.seq), Delivery::New);
        now += ms(1);
        assert_eq!(
            s.handle_ack(tx.seq, now),
            AckOutcome::Acked { rtt: Some(ms(1)) }
        );
    }
    assert_eq!(lens, vec![1000, 1000, 500]);
    assert_eq!(
        (s.messages_acked(), s.bytes_acked(), s.transmissions()),
        (3, 2500, 3)
    );
    assert_eq!(s.poll_transmit(now), None);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn timeout_retransmits_and_karn_skips_the_sample() {
    let t0 = Instant::now();
    let mut s = StopAndWaitSender::new(10, 10, RtoPolicy::Fixed(ms(50)));
    let tx = s.poll_transmit(t0).unwrap();
    assert_eq!(s.poll_timeout(), Some(t0 + ms(50)));
    s.handle_timeout(t0 + ms(10)); // early: ignored
    assert_eq!(s.timeouts(), 0);
    s.handle_timeout(t0 + ms(50));
    assert_eq!(s.poll_timeout(), None, "due, not waiting");
    let again = s.poll_transmit(t0 + ms(50)).unwrap();
    assert_eq!((again.seq, again.retransmit), (tx.seq, true));
    assert_eq!(
        s.handle_ack(0, t0 + ms(51)),
        AckOutcome::Acked { rtt: None }
    );
    assert_eq!(s.handle_ack(0, t0 + ms(52)), AckOutcome::Stale);
    assert_eq!(
        (s.retransmissions(), s.timeouts(), s.stale_acks()),
        (1, 1, 1)
    );
    assert_eq!(s.current_rto(), ms(50), "a fixed RTO never changes");
    assert!(s.is_done());
}

#[test]
fn adaptive_rto_learns_and_backs_off() {
    let t0 = Instant::now();
    let est = RtoEstimator::new(DEFAULT_INITIAL_RTO, DEFAULT_MIN_RTO, DEFAULT_MAX_RTO);
    let mut s = StopAndWaitSender::new(100, 10, RtoPolicy::Adaptive(est));
    assert_eq!(s.current_rto(), DEFAULT_INITIAL_RTO);
    let tx = s.poll_transmit(t0).unwrap();
    s.handle_ack(tx.seq, t0 + ms(4));
    assert_eq!(s.current_rto(), ms(12), "4 + 4·2");
    let start = t0 + ms(10);
    s.poll_transmit(start).unwrap();
    s.handle_timeout(start + ms(12));
    assert_eq!(s.current_rto(), ms(24));
}

/// xorshift64*, so the lossy run is repeatable without a dependency.
struct Rng(u64);
impl Rng {
    fn chance(&mut self, p: f64) -> bool {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// A path with a 1 ms one-way delay that drops 20% each way, on a virtual clock.
#[test]
fn lossy_path_delivers_every_message_exactly_once() {
    let t0 = Instant::now();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let est = RtoEstimator::new(ms(20), ms(2), ms(200));
    let mut s = StopAndWaitSender::new(10_000 * 7 + 3, 7, RtoPolicy::Adaptive(est));
    let mut r = StopAndWaitReceiver::new();
    let mut now = t0;
    let (mut data_dropped, mut acks_dropped, mut data_arrived_dup) = (0u64, 0u64, 0u64);
    let mut delivered_bytes = 0u64;
    let mut steps = 0;
    while !s.is_done() {
        steps += 1;
        assert!(steps < 1_000_000, "the run finishes");
        let Some(tx) = s.poll_transmit(now) else {
            let deadline = s.poll_timeout().expect("a timer runs");
            now = deadline;
            s.handle_timeout(now);
            continue;
        };
        if rng.chance(0.2) {
            data_dropped += 1;
            continue;
        }
        match r.handle_data(tx.seq) {
            Delivery::New => delivered_bytes += u64::from(tx.len),
            Delivery::Duplicate => data_arrived_dup += 1,
            Delivery::Unexpected => panic!("stop-and-wait never sends ahead"),
        }
        if rng.chance(0.2) {
            acks_dropped += 1;
            continue;
        }
        // The ack comes back 2 ms later, unless the timer fires first.
        let ack_at = now + ms(2);
        if let Some(deadline) = s.poll_timeout() {
            if deadline <= ack_at {
                now = deadline;
                s.handle_timeout(now);
                // The late ack still arrives and is stale or acks the retransmission later.
            }
        }
        now = ack_at.max(now);
        s.handle_ack(tx.seq, now);
    }
    assert_eq!(r.delivered(), 10_001);
    assert_eq!(delivered_bytes, 70_003);
    assert_eq!(s.bytes_acked(), 70_003);
    assert_eq!(r.duplicates(), data_arrived_dup);
    assert!(data_dropped > 1000 && acks_dropped > 1000);
    // Every transmission beyond the first per message was caused by a timeout.
    assert_eq!(s.transmissions(), 10_001 + s.retransmissions());
    assert_eq!(s.retransmissions(), s.timeouts());
    assert!(s.retransmissions() >= data_dropped + acks_dropped);
}

#[test]
fn karn_keeps_the_backed_off_rto_until_a_clean_sample() {
    let t0 = Instant::now();
    let est = RtoEstimator::new(ms(200), ms(2), ms(2000));
    let mut s = StopAndWaitSender::new(20, 10, RtoPolicy::Adaptive(est));
    s.poll_transmit(t0).unwrap();
    s.handle_timeout(t0 + ms(200));
    assert_eq!(s.current_rto(), ms(400));
    let again = s.poll_transmit(t0 + ms(200)).unwrap();
    assert!(again.retransmit);
    assert_eq!(s.poll_timeout(), Some(t0 + ms(600)));
    // Ambiguous ack: no sample, so the backed-off RTO stays.
    assert_eq!(
        s.handle_ack(0, t0 + ms(210)),
        AckOutcome::Acked { rtt: None }
    );
    assert_eq!(s.current_rto(), ms(400));
    // A message sent once gives a sample: SRTT 10, RTTVAR 5, RTO 30 ms, back-off reset.
    let next = s.poll_transmit(t0 + ms(300)).unwrap();
    assert_eq!((next.seq, next.len, next.retransmit), (1, 10, false));
    assert_eq!(
        s.handle_ack(1, t0 + ms(310)),
        AckOutcome::Acked { rtt: Some(ms(10)) }
    );
    assert_eq!(s.current_rto(), ms(30));
    assert!(s.is_done());
}

#[test]
fn receiver_classifies_copies() {
    let mut r = StopAndWaitReceiver::new();
    assert_eq!(r.handle_data(0), Delivery::New);
    assert_eq!(r.handle_data(0), Delivery::Duplicate);
    assert_eq!(r.handle_data(2), Delivery::Unexpected);
    assert_eq!(r.handle_data(1), Delivery::New);
    assert_eq!(r.handle_data(0), Delivery::Duplicate);
    assert_eq!((r.delivered(), r.duplicates(), r.unexpected()), (2, 2, 1));
}

#[test]
fn nothing_to_send_is_done_at_once() {
    let mut s = StopAndWaitSender::new(0, 1000, RtoPolicy::Fixed(ms(10)));
    assert!(s.is_done());
    assert_eq!(s.poll_transmit(Instant::now()), None);
    assert_eq!(s.poll_timeout(), None);
    assert_eq!(s.handle_ack(0, Instant::now()), AckOutcome::Stale);
}

/// Marsaglia xorshift64: a seeded, dependency-free source for the simulated link.
struct XorShift(u64);
impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
    fn delay(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        ms(lo_ms + self.next() % (hi_ms - lo_ms + 1))
    }
}

struct SimOutcome {
    sender: StopAndWaitSender,
    receiver: StopAndWaitReceiver,
    deliveries: Vec<u32>,
    /// Data copies that arrived after an earlier copy of the same seq had arrived.
    late_copies: u64,
    copies_arrived: u64,
}

/// Drives sender and receiver over a simulated link with a virtual clock: each datagram, data or ack,
/// is dropped with `loss` percent and otherwise delayed by a random `delay_ms` (so copies can overtake
/// each other and acks can come back after the timer fired).
fn simulate(
    seed: u64,
    count: u64,
    policy: RtoPolicy,
    loss: u64,
    delay_ms: (u64, u64),
) -> SimOutcome {
    const MSG: u32 = 100;
    let t0 = Instant::now();
    let mut now = t0;
    let mut rng = XorShift(seed);
    let mut sender = StopAndWaitSender::new(count * u64::from(MSG) - 1, MSG, policy);
    let mut receiver = StopAndWaitReceiver::new();
    let mut to_receiver: Vec<(Instant, u64)> = Vec::new();
    let mut to_sender: Vec<(Instant, u64)> = Vec::new();
    let mut arrived = vec![false; count as usize];
    let mut deliveries = vec![0u32; count as usize];
    let (mut late_copies, mut copies_arrived) = (0, 0);
    for _ in 0..1_000_000 {
        while let Some(tx) = sender.poll_transmit(now) {
            if !rng.percent(loss) {
                to_receiver.push((now + rng.delay(delay_ms.0, delay_ms.1), tx.seq));
            }
        }
        if sender.is_done() {
            return SimOutcome {
                sender,
                receiver,
                deliveries,
                late_copies,
                copies_arrived,
            };
        }
        let next = to_receiver
            .iter()
            .chain(&to_sender)
            .map(|&(at, _)| at)
            .chain(sender.poll_timeout())
            .min()
            .expect("a datagram in flight or a timer");
        now = now.max(next);
        // Arrivals in time order; equal times keep send order.
        to_receiver.sort_by_key(|&(at, _)| at);
        let split = to_receiver.partition_point(|&(at, _)| at <= now);
        for (_, seq) in to_receiver.drain(..split).collect::<Vec<_>>() {
            copies_arrived += 1;
            if std::mem::replace(&mut arrived[seq as usize], true) {
                late_copies += 1;
            }
            match receiver.handle_data(seq) {
                Delivery::New => deliveries[seq as usize] += 1,
                Delivery::Duplicate => {}
                Delivery::Unexpected => panic!("seq {seq} sent ahead of the acknowledged one"),
            }
            if !rng.percent(loss) {
                to_sender.push((now + rng.delay(delay_ms.0, delay_ms.1), seq));
            }
        }
        to_sender.sort_by_key(|&(at, _)| at);
        let split = to_sender.partition_point(|&(at, _)| at <= now);
        for (_, seq) in to_sender.drain(..split).collect::<Vec<_>>() {
            sender.handle_ack(seq, now);
        }
        if sender
            .poll_timeout()
            .is_some_and(|deadline| now >= deadline)
        {
            sender.handle_timeout(now);
        }
    }
    panic!("simulation did not finish");
}

fn check_exactly_once(sim: &SimOutcome, count: u64) {
    assert!(
        sim.deliveries.iter().all(|&d| d == 1),
        "every message delivered exactly once"
    );
    assert_eq!(sim.receiver.delivered(), count);
    assert_eq!(sim.receiver.unexpected(), 0);
    assert_eq!(sim.receiver.duplicates(), sim.late_copies);
    assert_eq!(
        sim.copies_arrived,
        sim.receiver.delivered() + sim.receiver.duplicates()
    );
    assert!(sim.receiver.duplicates() <= sim.sender.retransmissions());
    assert_eq!(sim.sender.messages_acked(), count);
    assert_eq!(sim.sender.bytes_acked(), count * 100 - 1);
    assert_eq!(
        sim.sender.transmissions(),
        count + sim.sender.retransmissions()
    );
}

#[test]
fn lossy_jittery_link_adaptive_rto() {
    for seed in 1..=20 {
        let est = RtoEstimator::new(ms(200), ms(2), ms(2000));
        let sim = simulate(seed, 200, RtoPolicy::Adaptive(est), 20, (2, 12));
        check_exactly_once(&sim, 200);
        assert!(
            sim.sender.retransmissions() > 0,
            "seed {seed}: loss caused retransmissions"
        );
    }
}

#[test]
fn lossy_link_with_a_fixed_rto_shorter_than_some_round_trips() {
    // RTT is 4..=30 ms and the RTO 20 ms: spurious retransmissions, late copies and stale acks happen.
    let (mut late, mut stale) = (0, 0);
    for seed in 1..=20 {
        let sim = simulate(seed, 200, RtoPolicy::Fixed(ms(20)), 10, (2, 15));
        check_exactly_once(&sim, 200);
        assert_eq!(sim.sender.current_rto(), ms(20));
        late += sim.late_copies;
        stale += sim.sender.stale_acks();
    }
    assert!(
        late > 0 && stale > 0,
        "late copies {late}, stale acks {stale}"
    );
}
