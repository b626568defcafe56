//! The words of a `run` plan before any figure: its heading (a sweep's sizes and totals, a
//! long stop-and-wait plan announced), each run's progress-bar label, and the heading of the
//! run in flight before it has figures (for its interval lines).

use wirebench_core::record::count_of;
use wirebench_core::vocab::plan::{Combination, Mechanism};

use crate::runner::{PlannedRun, RunConfig};

/// The values of `items` in first-seen order, without repeats.
pub(super) fn distinct<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The plan line of a sweep: how many runs, which sizes and totals.
pub(super) fn sweep_heading(cfg: &RunConfig, total_runs: usize) -> String {
    let sizes = distinct(cfg.points.iter().map(|p| p.msg_size));
    let totals = distinct(cfg.points.iter().map(|p| p.total_bytes));
    format!(
        "wirebench: {}: {} × {} × {} × {}; sizes {} B; totals {}",
        count_of(total_runs, "run", "runs"),
        count_of(sizes.len(), "message size", "message sizes"),
        count_of(totals.len(), "total", "totals"),
        count_of(cfg.combinations.len(), "combination", "combinations"),
        count_of(cfg.repeat as usize, "repeat", "repeats"),
        sizes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        totals
            .iter()
            .map(|t| wirebench_core::record::total_label(*t))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Stop-and-wait sends one message per round trip, so its time is the message count times the
/// round-trip time. When the plan's stop-and-wait messages would take over an hour at a 1 ms
/// round trip (a LAN), say so before starting.
pub(super) fn long_stop_and_wait_note(cfg: &RunConfig) -> Option<String> {
    if cfg.time.is_some() {
        // A timed run lasts its time, whatever the round trip.
        return None;
    }
    // Every stop-and-wait run of the plan, warm-ups included, is a round trip per message.
    let round_trips: u64 = cfg
        .plan
        .runs()
        .iter()
        .filter(|r| r.combination.mechanism == Mechanism::StopAndWait)
        .map(|r| r.session.messages)
        .fold(0, u64::saturating_add);
    let hours = round_trips as f64 * 1e-3 / 3600.0;
    (hours >= 1.0).then(|| {
        format!(
            "note: this plan's stop-and-wait runs make {round_trips} round trips: about {hours:.1} h \
             at 1 ms per round trip (a LAN), {:.1} h at 100 µs (loopback); fewer bytes (-n) or larger \
             messages (-l) shorten it",
            hours / 10.0
        )
    })
}

/// Streaming TCP or QUIC at the default 1 KiB, which a plan gets when it also has UDP or
/// stop-and-wait runs (one size across the runs it sets side by side; a plan of TCP and QUIC
/// streams alone defaults to 128 KiB, `config::run`): every message is its own write, so
/// those runs measure small writes, not the bulk throughput iperf3's first run shows. Said
/// under the first run's figures, with what to type instead.
pub(super) fn default_size_note(cfg: &RunConfig) -> Option<String> {
    // Streams beside other runs: the plan the small default goes to (`config::run`'s rule).
    let bulk = |c: &Combination| c.is_bulk_stream();
    let mixed = cfg.combinations.iter().any(bulk) && !cfg.combinations.iter().all(bulk);
    (cfg.default_msg_size && mixed).then(|| {
        format!(
            "note: messages are {} B (the default -l when a plan has UDP or stop-and-wait runs), \
             each its own write: {}x the writes of iperf3's 128 KiB blocks, so TCP and QUIC \
             streaming measure small writes; for bulk throughput as iperf3 measures it, run \
             them alone (their default is 128KiB) or add -l 128KiB",
            cfg.msg_size,
            (128 * 1024 / cfg.msg_size.max(1)).max(1)
        )
    })
}

/// What the progress bar says for each run of the plan, in plan order.
pub(super) fn run_labels(cfg: &RunConfig) -> Vec<String> {
    let measured = cfg.plan.runs().iter().filter(|r| !r.warmup);
    measured
        .map(|run| {
            let c = run.combination;
            let mut label = format!("{} {}", c.protocol, c.mechanism);
            if cfg.points.len() > 1 {
                label.push_str(&format!(
                    ", {} B × {}",
                    run.point.msg_size,
                    wirebench_core::record::total_label(run.point.total_bytes)
                ));
            }
            label.push_str(&format!(
                ", repeat {}/{}",
                run.repeat_index + 1,
                run.repeats
            ));
            label
        })
        .collect()
}

/// The heading of the measured run `run` (of `of`), before it has any figure (for its interval
/// lines).
pub(super) fn heading_in_flight(run: &PlannedRun, of: usize) -> String {
    format!(
        "[{}/{of}] {} {}, run {}",
        run.position,
        run.combination.protocol,
        run.combination.mechanism,
        run.repeat_index + 1
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn cfg(args: &[&str]) -> RunConfig {
        let argv = ["wirebench", "run"].iter().chain(args).copied();
        match Cli::parse_from(argv).command {
            Command::Run(a) => RunConfig::from_args(&a).unwrap(),
            other => panic!("not run: {other:?}"),
        }
    }

    #[test]
    fn a_plan_of_tcp_and_quic_streams_alone_defaults_to_bulk_blocks() {
        for args in [&[][..], &["--proto", "tcp,quic"], &["-P", "2", "-R"]] {
            let c = cfg(args);
            assert_eq!(c.msg_size, 128 * 1024, "{args:?}");
            assert_eq!(default_size_note(&c), None, "{args:?}");
        }
        // Anything else keeps the lab reports' 1 KiB, one size across the plan.
        for args in [
            &["--proto", "udp"][..],
            &["--mode", "saw"],
            &["--proto", "tcp,udp"],
            &["--mode", "stream,saw"],
        ] {
            assert_eq!(cfg(args).msg_size, 1024, "{args:?}");
        }
    }

    #[test]
    fn a_streaming_tcp_or_quic_run_at_the_small_default_says_what_it_measures() {
        let note = default_size_note(&cfg(&["--proto", "udp,quic"])).expect("the plan's note");
        assert!(note.contains("1024 B (the default -l when"), "{note}");
        assert!(note.contains("128x the writes"), "{note}");
        assert!(note.contains("add -l 128KiB"), "{note}");
        assert!(default_size_note(&cfg(&["--mode", "stream,saw"])).is_some());
        // Asked for (even 1 KiB), the bulk default, UDP alone, or stop-and-wait alone: nothing
        // to say.
        assert_eq!(default_size_note(&cfg(&["-l", "1024"])), None);
        assert_eq!(default_size_note(&cfg(&[])), None);
        assert_eq!(default_size_note(&cfg(&["--proto", "udp"])), None);
        assert_eq!(default_size_note(&cfg(&["--mode", "saw"])), None);
    }

    #[test]
    fn the_run_in_flight_is_found_in_plan_order() {
        let c = cfg(&[
            "--proto", "tcp,udp", "--mode", "stream", "-l", "100,200", "-n", "1000", "--repeat",
            "2", "--rate", "1G",
        ]);
        // Plan: 100 B: tcp ×2, udp ×2; then 200 B: tcp ×2, udp ×2.
        let names: Vec<String> = (1..=8)
            .map(|i| {
                let r = c.plan.at(i).expect("in the plan").aborted();
                assert_eq!(r.position, i as u64);
                format!(
                    "{} {} {}",
                    r.params.protocol, r.params.msg_size, r.repeat_index
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                "tcp 100 0",
                "tcp 100 1",
                "udp 100 0",
                "udp 100 1",
                "tcp 200 0",
                "tcp 200 1",
                "udp 200 0",
                "udp 200 1"
            ]
        );
        let r = c.plan.at(7).unwrap().aborted();
        assert_eq!(
            (r.params.total_bytes, r.params.rate_bps),
            (1000, Some(1_000_000_000))
        );
        assert!(c.plan.at(0).is_none());
        assert!(c.plan.at(9).is_none(), "past the end: nothing in flight");
    }

    #[test]
    fn long_stop_and_wait_plans_are_announced() {
        // 10 GiB in 1 KiB messages: 10,485,760 round trips, about 2.9 h at 1 ms.
        let note = long_stop_and_wait_note(&cfg(&["--mode", "saw", "-l", "1KiB", "-n", "10GiB"]));
        let note = note.expect("announced");
        assert!(note.contains("10485760 round trips"), "{note}");
        assert!(note.contains("2.9 h"), "{note}");
        // Streaming, or a short stop-and-wait plan, says nothing.
        assert_eq!(
            long_stop_and_wait_note(&cfg(&["--mode", "stream", "-l", "1KiB", "-n", "10GiB"])),
            None
        );
        assert_eq!(
            long_stop_and_wait_note(&cfg(&["--mode", "saw", "-l", "1KiB", "-n", "100MiB"])),
            None
        );
    }
}
