//! The chart of a stored latency-under-load test (`wirebench latency`): each probe's one-way
//! delay, up and down, against time since the first phase began, the time axis labelled at
//! each phase's start with its name (idle, upload, download, both), so the queue each load
//! builds shows in its own direction. Draws with plotters' SVG backend into a string; owns
//! layout only — every delay comes from the result model; never opens files or reads clocks.

use std::io;

use wirebench_core::record::load_phases::LoadPhasesResult;
use wirebench_core::record::loaded_latency::ProbeSample;

use super::axis::{Axis, X_AXIS_PX, X_LABEL_GAP_PX};
use super::plot::{self, Plot};
use super::series::{Mark, Palette, Series};

/// Each direction's delay per probe over time, phases named on the time axis; `None` when no
/// probe carries a one-way split (no stamped probes).
pub fn one_way_over_time(title: &str, r: &LoadPhasesResult) -> io::Result<Option<String>> {
    let ms = |ns: i64| ns as f64 / 1e6;
    let seconds = |t_ns: u64| t_ns as f64 / 1e9;
    let samples = || r.phases.iter().flat_map(|p| &p.series);
    let mut palette = Palette::default();
    let mut series = Vec::new();
    for (name, of) in [
        (
            "Up (client → server)",
            (|s: &ProbeSample| s.up_ns) as fn(&ProbeSample) -> Option<i64>,
        ),
        ("Down (server → client)", |s| s.down_ns),
    ] {
        let marks: Vec<Mark> = samples()
            .filter_map(|s| Some(Mark::at(seconds(s.t_ns), ms(of(s)?))))
            .collect();
        if !marks.is_empty() {
            series.push(Series::new(name, palette.of(name), marks));
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let phase_ns = r.plan.phase_ns as f64;
    let t_hi = samples()
        .map(|s| seconds(s.t_ns))
        .fold(phase_ns / 1e9 * r.phases.len() as f64, f64::max);
    // Each phase starts where the one before it ended: its first probe, or its planned start.
    let starts: Vec<(f64, String)> = r
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let at = p
                .series
                .first()
                .map_or(i as f64 * phase_ns / 1e9, |s| seconds(s.t_ns));
            (at, format!("{} {:.1} s", p.phase.name(), at))
        })
        .collect();
    let x = Axis::linear(
        "Time since the first phase began; each phase named where it starts",
        0.0,
        (t_hi * 1.02).max(1e-3),
        X_AXIS_PX,
        X_LABEL_GAP_PX,
    )
    .labelled_at(&starts, X_AXIS_PX, X_LABEL_GAP_PX);
    let bound = r.clock.as_ref().map_or(0, |c| c.bound_ns);
    let chart = Plot {
        title: title.to_string(),
        x,
        y: plot::y_from_zero("One-way delay (ms)".into(), &series, None),
        bars: false,
        series: &series,
        notes: vec![format!(
            "each delay ± {:.3} ms (the clock bound)",
            bound as f64 / 1e6
        )],
    };
    plot::svg(&chart).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::record::load_phases::{LoadPhase, LoadPhasesPlan, PhaseMeasured};
    use wirebench_core::record::loaded_latency::PhaseSamples;
    use wirebench_core::vocab::clock_offset::{ClockClaim, Exchange};
    use wirebench_core::vocab::plan::Protocol;

    fn measured(start_s: u64, up_ms: i64) -> PhaseMeasured {
        let mut probes = PhaseSamples::default();
        for i in 0..5u64 {
            let t_ns = start_s * 1_000_000_000 + i * 100_000_000;
            let sent = 1_800_000_000_000_000_000 + t_ns as i64;
            probes.answered.push(ProbeSample {
                t_ns,
                rtt_ns: 2_000_000,
                up_ns: None,
                down_ns: None,
            });
            probes.exchanges.push(Some(Exchange {
                client_sent: sent,
                server_received: sent + up_ms * 1_000_000,
                server_sent: sent + up_ms * 1_000_000,
                client_received: sent + up_ms * 1_000_000 + 1_000_000,
            }));
        }
        PhaseMeasured {
            probes,
            ..PhaseMeasured::default()
        }
    }

    #[test]
    fn both_directions_over_time_with_the_phases_named() {
        let plan = LoadPhasesPlan {
            probe: Protocol::Udp,
            load: Protocol::Tcp,
            streams: 1,
            msg_size: 1024,
            phase_ns: 1_000_000_000,
            interval_ns: 100_000_000,
            timeout_ns: 2_000_000_000,
        };
        let r = LoadPhasesResult::of(
            plan.clone(),
            &[
                (LoadPhase::Idle, measured(0, 1)),
                (LoadPhase::Upload, measured(1, 40)),
            ],
            Some(ClockClaim::SameClock { error_ns: 0 }),
        );
        let svg = one_way_over_time("Test 1", &r).unwrap().expect("a chart");
        for text in [
            "Test 1",
            "One-way delay (ms)",
            "Up (client → server)",
            "Down (server → client)",
            "idle 0.0 s",
            "upload 1.0 s",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        let unstamped = LoadPhasesResult::of(plan, &[(LoadPhase::Idle, measured(0, 1))], None);
        assert_eq!(one_way_over_time("t", &unstamped).unwrap(), None);
    }
}
