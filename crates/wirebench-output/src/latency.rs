//! Text of `run --latency-probe`: the "latency under load" block printed under a run — per
//! probe flow, the idle median, the loaded p50/p90/p99, the increase and the probe counts, and
//! each direction's delay idle and loaded where the probes were stamped.
//! Formatting only; the figures come from `wirebench_core::record::loaded_latency` (JSON
//! carries the record itself, with its time series).

use std::fmt::Write as _;

use wirebench_core::record::loaded_latency::{LoadedLatency, ProbeFlowRecord, ProbePhase};

use super::delay::{signed, time};
use super::one_way::{directions_text, one_way_text};

/// The block, one heading line and three lines per probe flow, each indented by two spaces.
pub fn block(l: &LoadedLatency) -> String {
    let mut s = String::new();
    for p in &l.probes {
        let _ = writeln!(
            s,
            "  latency under load ({} probe every {:?}):",
            p.protocol,
            std::time::Duration::from_nanos(p.interval_ns)
        );
        let _ = writeln!(s, "    idle:     {}", phase(&p.idle, false));
        let _ = writeln!(s, "    loaded:   {}", phase(&p.loaded, true));
        let _ = writeln!(s, "    increase: {}", increase(p));
        if let Some(w) = &p.one_way {
            let _ = writeln!(s, "    one-way idle:   {}", one_way_text(&w.idle));
            let _ = writeln!(s, "    one-way loaded: {}", directions_text(&w.loaded));
        }
    }
    s
}

fn phase(p: &ProbePhase, ladder: bool) -> String {
    let counts = format!(
        "{} sent, {} answered, {} lost, over {:.2} s",
        p.sent,
        p.answered,
        p.lost,
        p.duration_ns as f64 / 1e9
    );
    match (&p.rtt, ladder) {
        (None, _) => format!("no probe answered ({counts})"),
        (Some(r), false) => format!("p50 {} ({counts})", time(r.p50_ns as f64)),
        (Some(r), true) => format!(
            "p50 {}, p90 {}, p99 {} ({counts})",
            time(r.p50_ns as f64),
            time(r.p90_ns as f64),
            time(r.p99_ns as f64)
        ),
    }
}

fn increase(p: &ProbeFlowRecord) -> String {
    match &p.increase {
        None => "unknown (a phase had no answered probe)".to_string(),
        Some(i) => format!(
            "{} at p50, {} at p99 (over the idle p50)",
            signed(i.p50_ns),
            signed(i.p99_ns)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::record::loaded_latency::{PhaseSamples, ProbeSample};
    use wirebench_core::vocab::plan::Protocol;

    fn phase_of(rtts_us: &[u64], lost: u64) -> PhaseSamples {
        PhaseSamples {
            answered: rtts_us
                .iter()
                .map(|&us| ProbeSample {
                    t_ns: 0,
                    rtt_ns: us * 1000,
                    up_ns: None,
                    down_ns: None,
                })
                .collect(),
            lost,
            duration_ns: 1_500_000_000,
            exchanges: Vec::new(),
        }
    }

    #[test]
    fn the_block_shows_idle_loaded_increase_and_counts() {
        let l = LoadedLatency {
            probes: vec![
                ProbeFlowRecord::of(
                    Protocol::Tcp,
                    (100_000_000, 2_000_000_000),
                    &phase_of(&[100, 200, 300], 0),
                    &phase_of(&[50_000, 100_000, 150_000], 2),
                    None,
                ),
                ProbeFlowRecord::of(
                    Protocol::Udp,
                    (10_000_000, 2_000_000_000),
                    &phase_of(&[], 1),
                    &phase_of(&[90], 0),
                    None,
                ),
            ],
        };
        assert_eq!(
            block(&l),
            "  latency under load (tcp probe every 100ms):
    idle:     p50 200.0 µs (3 sent, 3 answered, 0 lost, over 1.50 s)
    loaded:   p50 100.00 ms, p90 150.00 ms, p99 150.00 ms (5 sent, 3 answered, 2 lost, over 1.50 s)
    increase: +99.80 ms at p50, +149.80 ms at p99 (over the idle p50)
  latency under load (udp probe every 10ms):
    idle:     no probe answered (1 sent, 0 answered, 1 lost, over 1.50 s)
    loaded:   p50 90.0 µs, p90 90.0 µs, p99 90.0 µs (1 sent, 1 answered, 0 lost, over 1.50 s)
    increase: unknown (a phase had no answered probe)
"
        );
    }
}
