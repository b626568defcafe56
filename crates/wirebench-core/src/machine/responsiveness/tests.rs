//! Unit tests of the draft's aggregation, the ramp and the record.

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn trimmed_mean_drops_the_top_five_percent() {
    // 1..=20 ms: floor(20 × 0.05) = 1 value dropped (20); mean of 1..=19 = 190 / 19 = 10.
    let v: Vec<f64> = (1..=20).map(f64::from).collect();
    assert_eq!(trimmed_mean(&v, 95.0), Some(10.0));
    // 1..=40 with the two largest replaced by outliers 1000 and 5000: floor(40 × 0.05) = 2
    // dropped, exactly the outliers; mean of 1..=38 = 741 / 38 = 19.5.
    let mut v: Vec<f64> = (1..=38).map(f64::from).collect();
    v.extend([5000.0, 1000.0]);
    assert_eq!(trimmed_mean(&v, 95.0), Some(19.5));
    // 19 values: floor(19 × 0.05) = 0 dropped; mean of 1..=19 = 10.
    let v: Vec<f64> = (1..=19).map(f64::from).collect();
    assert_eq!(trimmed_mean(&v, 95.0), Some(10.0));
    // One value is its own mean; nothing gives nothing.
    assert_eq!(trimmed_mean(&[7.0], 95.0), Some(7.0));
    assert_eq!(trimmed_mean(&[], 95.0), None);
    // Order does not matter: the trim is of the largest, not the last.
    assert_eq!(
        trimmed_mean(
            &[
                30.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0,
                15.0, 16.0, 17.0, 18.0, 19.0
            ],
            95.0
        ),
        Some(10.0)
    );
}

#[test]
fn rpm_formula_tcp_only_and_with_tls() {
    // TCP only: foreign = 60000 / ((10 + 30) / 2) = 60000 / 20 = 3000;
    // self = 60000 / 40 = 1500; RPM = (3000 + 1500) / 2 = 2250.
    let c = Components {
        foreign_tcp_ms: 10.0,
        foreign_tls_ms: None,
        foreign_request_ms: 30.0,
        self_request_ms: 40.0,
    };
    let f = rpm(&c).unwrap();
    assert!(close(f.foreign_rpm, 3000.0));
    assert!(close(f.self_rpm, 1500.0));
    assert!(close(f.rpm, 2250.0));
    // With TLS 20 ms: foreign = 60000 / ((10 + 20 + 30) / 3) = 60000 / 20 = 3000, same.
    // With TLS 50 ms: 60000 / (90 / 3) = 2000; RPM = (2000 + 1500) / 2 = 1750.
    let f = rpm(&Components {
        foreign_tls_ms: Some(50.0),
        ..c
    })
    .unwrap();
    assert!(close(f.foreign_rpm, 2000.0));
    assert!(close(f.rpm, 1750.0));
    // A zero component has no RPM.
    assert_eq!(
        rpm(&Components {
            self_request_ms: 0.0,
            ..c
        }),
        None
    );
}

#[test]
fn stability_over_the_last_mad_moving_averages() {
    // Last four 100, 102, 98, 100: mean 100, deviations 0, 2, -2, 0, population variance
    // (0 + 4 + 4 + 0) / 4 = 2, σ = 1.414 < 5 % × 100 = 5: stable.
    assert!(is_stable(&[10.0, 100.0, 102.0, 98.0, 100.0], 4, 5.0));
    // 90, 100, 110, 100: variance (100 + 0 + 100 + 0) / 4 = 50, σ = 7.07 ≥ 5: not stable.
    assert!(!is_stable(&[90.0, 100.0, 110.0, 100.0], 4, 5.0));
    // Only three moving averages: never stable, whatever their spread.
    assert!(!is_stable(&[100.0, 100.0, 100.0], 4, 5.0));
    // Judged against the most recent value: 95, 105, 95, 105 has σ = 5 < 5 % × 105 = 5.25,
    // stable; 95, 105, 105, 95 has the same σ = 5 but 5 % × 95 = 4.75: not stable.
    assert!(is_stable(&[95.0, 105.0, 95.0, 105.0], 4, 5.0));
    assert!(!is_stable(&[95.0, 105.0, 105.0, 95.0], 4, 5.0));
}

#[test]
fn moving_average_goodput_spans_mad_intervals() {
    // Intervals of 1 s with 1, 2, 3, 4, 5 MB: the last four hold 14 MB over 4 s:
    // 14e6 × 8 / 4 = 28 Mbit/s.
    let bytes = [1_000_000, 2_000_000, 3_000_000, 4_000_000, 5_000_000];
    assert_eq!(
        moving_average_goodput_bps(&bytes, 4, 1_000_000_000),
        Some(28e6)
    );
    assert_eq!(
        moving_average_goodput_bps(&bytes[..3], 4, 1_000_000_000),
        None
    );
}

#[test]
fn confidence_and_rating_words() {
    assert_eq!(Confidence::of(3, 4, false), Confidence::Low);
    assert_eq!(Confidence::of(4, 4, false), Confidence::Medium);
    assert_eq!(Confidence::of(2, 4, true), Confidence::High);
    // 60000 / 200 ms = 300 RPM is the Poor/Fair line, 60 ms = 1000, 10 ms = 6000.
    assert_eq!(Rating::of(299.9), Rating::Poor);
    assert_eq!(Rating::of(300.0), Rating::Fair);
    assert_eq!(Rating::of(999.0), Rating::Fair);
    assert_eq!(Rating::of(1000.0), Rating::Good);
    assert_eq!(Rating::of(5999.0), Rating::Good);
    assert_eq!(Rating::of(6000.0), Rating::Excellent);
    assert_eq!(Rating::Excellent.word(), "Excellent");
}

#[test]
fn probe_rate_respects_mps_and_ptc() {
    let p = Parameters::draft();
    // 1 Gbit/s: 5 % = 50 Mbit/s over 48000 bits per pair = 1041 pairs/s, capped at 100.
    assert_eq!(p.probe_rate(1e9), 100.0);
    // 9.6 Mbit/s: 5 % = 480 kbit/s / 48000 = 10 pairs/s.
    assert!(close(p.probe_rate(9.6e6), 10.0));
    // 100 kbit/s: 0.104 pairs/s, raised to the floor of one per second.
    assert_eq!(p.probe_rate(1e5), 1.0);
}

fn probes(tcp: f64, request: f64, own: f64, n: usize) -> IntervalProbes {
    IntervalProbes {
        foreign_tcp_ms: vec![tcp; n],
        foreign_tls_ms: Vec::new(),
        foreign_request_ms: vec![request; n],
        self_request_ms: vec![own; n],
    }
}

#[test]
fn ramp_adds_a_flow_per_interval_then_saturates_and_stabilises() {
    let p = Parameters::draft();
    let mut m = RampMachine::new(p);
    // Goodput 10 MB per interval from the start: the moving average exists from interval 3
    // (the 4th), and the 4th moving average (interval 6) completes a window of four
    // identical values, σ = 0 < 5 %: saturated at interval 6, after 7 intervals.
    let mut saturated_at = None;
    let mut done_at = None;
    for i in 0..16 {
        // Probes: tcp 2 ms, request 4 ms, self 6 ms → foreign 60000 / 3 = 20000,
        // self 10000, RPM 15000.
        let step = m.handle_interval(10_000_000, probes(2.0, 4.0, 6.0, 10));
        if step.goodput_saturated_now {
            saturated_at = Some(i);
        }
        if step.done {
            done_at = Some(i);
            break;
        }
        assert!(
            step.add_flow,
            "a flow is added at every interval before the end"
        );
    }
    assert_eq!(saturated_at, Some(6));
    // Responsiveness needs four values after saturation: intervals 7, 8, 9, 10.
    assert_eq!(done_at, Some(10));
    assert_eq!(m.flows(), 11, "INP 1 + one per interval 0..=9");
    assert_eq!(m.goodput_confidence(), Confidence::High);
    assert_eq!(m.responsiveness_confidence(), Confidence::High);
    let f = m.current_figures().unwrap();
    assert!(close(f.rpm, 15000.0));
    // 10 MB per 1 s interval = 80 Mbit/s.
    assert_eq!(m.goodput_moving_averages_bps().last(), Some(&80e6));
}

#[test]
fn ramp_without_stability_has_low_then_medium_confidence() {
    let mut m = RampMachine::new(Parameters::draft());
    // Goodput doubling every interval never stabilises.
    for i in 0..5 {
        m.handle_interval(1 << i, probes(1.0, 1.0, 1.0, 1));
    }
    // 5 intervals → 2 moving averages < MAD: Low.
    assert_eq!(m.goodput_confidence(), Confidence::Low);
    for i in 5..8 {
        m.handle_interval(1 << i, probes(1.0, 1.0, 1.0, 1));
    }
    // 8 intervals → 5 moving averages ≥ MAD, never stable: Medium; RPM stage never ran.
    assert_eq!(m.goodput_confidence(), Confidence::Medium);
    assert_eq!(m.responsiveness_confidence(), Confidence::Low);
    // Flows stop at MNP.
    for _ in 8..30 {
        m.handle_interval(1, probes(1.0, 1.0, 1.0, 1));
    }
    assert_eq!(m.flows(), 16);
}

#[test]
fn a_refused_flow_stops_the_ramp() {
    let mut m = RampMachine::new(Parameters::draft());
    assert!(m.handle_interval(1, probes(1.0, 1.0, 1.0, 1)).add_flow);
    // The second flow was refused: the ramp stays at one flow and asks for no more.
    m.flows_capped(1);
    for _ in 0..5 {
        assert!(!m.handle_interval(1, probes(1.0, 1.0, 1.0, 1)).add_flow);
    }
    assert_eq!(m.flows(), 1);
}

#[test]
fn components_cover_only_the_last_mad_intervals() {
    let mut m = RampMachine::new(Parameters::draft());
    // An old interval with 100 ms probes, then four with 10 ms: only the four count.
    m.handle_interval(1, probes(100.0, 100.0, 100.0, 5));
    for _ in 0..4 {
        m.handle_interval(1, probes(10.0, 10.0, 10.0, 5));
    }
    let c = m.current_components().unwrap();
    assert_eq!(c.foreign_request_ms, 10.0);
    // 60000 / 10 = 6000 for both halves.
    assert!(close(m.current_figures().unwrap().rpm, 6000.0));
}
