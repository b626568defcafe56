//! Unit tests of the rate search: bisection to the capacity, confirmation, early ends, bounds
//! and refused configurations.

use super::*;

/// A link that carries up to `capacity` bit/s without loss and drops the excess.
fn link(capacity: u64) -> impl Fn(u64) -> TrialCounts {
    move |rate| {
        let sent = 10_000;
        let carried = if rate <= capacity {
            sent
        } else {
            (sent as f64 * capacity as f64 / rate as f64) as u64
        };
        TrialCounts {
            sent,
            received: carried,
        }
    }
}

fn run(search: &mut RateSearch, counts: impl Fn(Trial) -> TrialCounts) -> SearchOutcome {
    for _ in 0..200 {
        match search.poll_trial() {
            Next::Done(outcome) => return outcome,
            Next::Run(trial) => search.handle_result(counts(trial)),
        }
    }
    panic!("the search did not end: {:?}", search.history());
}

#[test]
fn finds_the_capacity_within_the_resolution_and_confirms_it() {
    for capacity in [1_234_567_u64, 200_000_000, 999_000_000] {
        let mut s = RateSearch::new(SearchConfig::new(1_000_000, 10_000_000_000, 0.0)).unwrap();
        let l = link(capacity);
        let outcome = run(&mut s, |t| l(t.rate_bps));
        let SearchOutcome::Found { rate_bps } = outcome else {
            panic!("{outcome:?}");
        };
        assert!(rate_bps <= capacity, "{rate_bps} > {capacity}");
        assert!(
            rate_bps as f64 >= capacity as f64 * 0.99,
            "{rate_bps} not within 1% of {capacity}"
        );
        let h = s.history();
        assert_eq!(h.last().map(|r| r.trial.kind), Some(TrialKind::Confirm));
        assert!(h.len() <= 30, "{} trials", h.len());
        // Every probe above the capacity failed, every one at or below passed.
        assert!(h.iter().all(|r| r.passed == (r.trial.rate_bps <= capacity)));
    }
}

fn so_far(planned: u64, received: u64, next_seq: u64) -> TrialSoFar {
    // A trial of `planned` 1000-byte messages at 40 Mbit/s (200 ms), on schedule.
    let sent_bytes = next_seq * 1000;
    TrialSoFar {
        rate_bps: 40_000_000,
        planned_messages: planned,
        planned_bytes: planned * 1000,
        elapsed_ns: sent_bytes * 8 * 1_000_000_000 / 40_000_000,
        sent_bytes,
        received: ReceivedSoFar {
            messages: received,
            next_seq,
        },
    }
}

#[test]
fn a_trial_fails_early_once_its_missing_messages_beyond_the_late_ones_exceed_the_allowance() {
    // 0.1% of 10,000 messages may be lost: 10. 1% (100) may still be late. Halfway, with
    // 110 missing below the highest received, 10 count as lost: not yet decided.
    let s = RateSearch::new(SearchConfig::new(1, 10, 0.001)).unwrap();
    assert_eq!(late_allowance(10_000), 100);
    assert_eq!(s.decide_early(&so_far(10_000, 4_890, 5_000)), None);
    // One more missing: 11 lost, more than the whole trial may lose.
    assert_eq!(
        s.decide_early(&so_far(10_000, 4_889, 5_000)),
        Some(EarlyEnd::Loss)
    );
    // Strict (no loss allowed), 250 messages: 16 may be late; the 17th missing decides.
    let strict = RateSearch::new(SearchConfig::new(1, 10, 0.0)).unwrap();
    assert_eq!(late_allowance(250), 16);
    assert_eq!(strict.decide_early(&so_far(250, 84, 100)), None);
    assert_eq!(
        strict.decide_early(&so_far(250, 83, 100)),
        Some(EarlyEnd::Loss)
    );
    // Nothing received yet decides nothing.
    assert_eq!(strict.decide_early(&so_far(250, 0, 0)), None);
}

#[test]
fn a_sender_too_far_behind_to_reach_95_percent_fails_early() {
    let s = RateSearch::new(SearchConfig::new(1, 10, 0.0)).unwrap();
    // 10,000 messages of 1000 B at 40 Mbit/s: 2 s planned. After 1 s it has sent 4.4 MB
    // (on schedule: 5 MB): at best the 10 MB take 1 s + 5.6 MB ÷ 5 MB/s − 5 ms caught up
    // = 2.115 s, which is 37.8 Mbit/s, below 95% of 40 (38 Mbit/s): decided.
    let mut t = so_far(10_000, 4_400, 4_400);
    t.elapsed_ns = 1_000_000_000;
    assert_eq!(s.decide_early(&t), Some(EarlyEnd::Sender));
    // 4.8 MB after 1 s: at best 2.04 s, 39.2 Mbit/s: it can still make it.
    let mut t = so_far(10_000, 4_800, 4_800);
    t.elapsed_ns = 1_000_000_000;
    assert_eq!(s.decide_early(&t), None);
    // On schedule is never decided; nor is a sender that has sent everything.
    assert_eq!(s.decide_early(&so_far(10_000, 5_000, 5_000)), None);
    let mut done = so_far(10_000, 10_000, 10_000);
    done.elapsed_ns *= 3;
    assert_eq!(s.decide_early(&done), None);
}

#[test]
fn a_trial_ended_early_fails_whatever_arrived_late() {
    let mut s = RateSearch::new(SearchConfig::new(1_000, 1_000_000, 0.0)).unwrap();
    s.handle_ended_early(TrialCounts {
        sent: 300,
        received: 300,
    });
    assert!(!s.history()[0].passed);
    assert_eq!(
        s.poll_trial(),
        Next::Run(Trial {
            rate_bps: 1_000,
            kind: TrialKind::Probe
        })
    );
}

#[test]
fn a_path_that_carries_the_high_bound_needs_two_trials() {
    let mut s = RateSearch::new(SearchConfig::new(1_000, 1_000_000, 0.0)).unwrap();
    let l = link(u64::MAX);
    assert_eq!(
        run(&mut s, |t| l(t.rate_bps)),
        SearchOutcome::Found {
            rate_bps: 1_000_000
        }
    );
    assert_eq!(s.history().len(), 2);
}

#[test]
fn a_path_below_the_low_bound_is_said_so() {
    let mut s = RateSearch::new(SearchConfig::new(1_000_000, 1_000_000_000, 0.0)).unwrap();
    let l = link(500_000);
    assert_eq!(run(&mut s, |t| l(t.rate_bps)), SearchOutcome::BelowLow);
    let rates: Vec<u64> = s.history().iter().map(|r| r.trial.rate_bps).collect();
    assert_eq!(
        rates,
        [1_000_000_000, 1_000_000],
        "high, then low, then done"
    );
}

#[test]
fn allowed_loss_is_a_share_of_the_messages_sent() {
    let s = RateSearch::new(SearchConfig::new(1, 10, 0.001)).unwrap();
    assert!(s.passes(TrialCounts {
        sent: 10_000,
        received: 9_990
    }));
    assert!(!s.passes(TrialCounts {
        sent: 10_000,
        received: 9_989
    }));
    assert!(
        !s.passes(TrialCounts::default()),
        "nothing sent proves nothing"
    );
    // A trial of 10,000 that has lost 11 fails whatever follows: it may stop.
    assert!(s.fails_already(10_000, 11));
    assert!(!s.fails_already(10_000, 10));
    let strict = RateSearch::new(SearchConfig::new(1, 10, 0.0)).unwrap();
    assert!(strict.fails_already(10_000, 1));
}

#[test]
fn a_failed_confirmation_searches_on_below_it() {
    // The first confirmation is spoilt by a burst of loss; later trials are clean.
    let capacity = 300_000_000;
    let mut s = RateSearch::new(SearchConfig::new(1_000_000, 1_000_000_000, 0.0)).unwrap();
    let l = link(capacity);
    let spoilt = std::cell::Cell::new(false);
    let outcome = run(&mut s, |t| {
        if t.kind == TrialKind::Confirm && !spoilt.replace(true) {
            TrialCounts {
                sent: 10_000,
                received: 9_000,
            }
        } else {
            l(t.rate_bps)
        }
    });
    let SearchOutcome::Found { rate_bps } = outcome else {
        panic!("{outcome:?}");
    };
    let first_confirm = s
        .history()
        .iter()
        .find(|r| r.trial.kind == TrialKind::Confirm)
        .map(|r| r.trial.rate_bps)
        .unwrap();
    assert!(rate_bps < first_confirm, "{rate_bps} !< {first_confirm}");
    assert!(rate_bps as f64 >= first_confirm as f64 * 0.98);
}

#[test]
fn confirmations_that_keep_failing_end_as_unstable() {
    let mut s = RateSearch::new(SearchConfig::new(1_000, 1_000_000, 0.0)).unwrap();
    let l = link(u64::MAX);
    let outcome = run(&mut s, |t| match t.kind {
        TrialKind::Confirm => TrialCounts {
            sent: 100,
            received: 50,
        },
        TrialKind::Probe => l(t.rate_bps),
    });
    assert!(
        matches!(outcome, SearchOutcome::Unstable { .. }),
        "{outcome:?}"
    );
    let confirms = s
        .history()
        .iter()
        .filter(|r| r.trial.kind == TrialKind::Confirm)
        .count();
    assert_eq!(confirms, 4, "3 failures allowed, the 4th ends it");
}

#[test]
fn bad_configurations_are_refused() {
    let ok = SearchConfig::new(1, 10, 0.0);
    assert!(RateSearch::new(SearchConfig { low_bps: 0, ..ok }).is_err());
    assert!(RateSearch::new(SearchConfig { low_bps: 11, ..ok }).is_err());
    assert!(RateSearch::new(SearchConfig {
        resolution: 0.0,
        ..ok
    })
    .is_err());
    assert!(RateSearch::new(SearchConfig {
        resolution: f64::NAN,
        ..ok
    })
    .is_err());
    assert!(RateSearch::new(SearchConfig {
        max_loss: 1.0,
        ..ok
    })
    .is_err());
    assert!(RateSearch::new(SearchConfig {
        max_loss: -0.1,
        ..ok
    })
    .is_err());
    // Done is done: more results change nothing.
    let mut s = RateSearch::new(SearchConfig::new(5, 5, 0.0)).unwrap();
    s.handle_result(TrialCounts {
        sent: 1,
        received: 1,
    });
    s.handle_result(TrialCounts {
        sent: 1,
        received: 1,
    });
    assert_eq!(
        s.poll_trial(),
        Next::Done(SearchOutcome::Found { rate_bps: 5 })
    );
    s.handle_result(TrialCounts {
        sent: 1,
        received: 0,
    });
    assert_eq!(s.history().len(), 2);
}

#[test]
fn a_rate_the_sender_could_not_offer_fails_whatever_arrived() {
    let mut search = RateSearch::new(SearchConfig {
        low_bps: 1_000_000,
        high_bps: 1_000_000_000,
        resolution: 0.01,
        max_loss: 0.0,
        max_confirm_failures: 1,
    })
    .unwrap();
    // The high bound is tried first; its sender fell short, nothing was lost.
    let Next::Run(first) = search.poll_trial() else {
        panic!("a first trial")
    };
    assert_eq!(first.rate_bps, 1_000_000_000);
    search.handle_shortfall(TrialCounts {
        sent: 100,
        received: 100,
    });
    assert!(!search.history()[0].passed);
    // So the search goes below it instead of calling it found.
    let Next::Run(next) = search.poll_trial() else {
        panic!("the search goes on")
    };
    assert!(next.rate_bps < 1_000_000_000);
}
