//! Text of `wirebench latency`: one line per phase — round trip, each direction's delay, each
//! direction's goodput, probes — under the clock the one-way figures share. Formats the core
//! record; never measures.

use std::fmt::Write as _;

use wirebench_core::record::load_phases::{LoadPhaseRecord, LoadPhasesResult};
use wirebench_core::record::one_way::DelayFigures;
use wirebench_core::vocab::units::{format_bitrate, ByteSize};

use super::delay::{signed, time};

/// The heading, the clock line and the phase table.
pub fn text(r: &LoadPhasesResult, server: &str) -> String {
    let p = &r.plan;
    let mut s = format!(
        "latency under load against {server}: {} probes every {:?}, {} load ({} per direction, {} writes), {:?} per phase\n",
        p.probe,
        std::time::Duration::from_nanos(p.interval_ns),
        p.load,
        if p.streams == 1 { "1 flow".to_string() } else { format!("{} flows", p.streams) },
        ByteSize(u64::from(p.msg_size)),
        std::time::Duration::from_nanos(p.phase_ns),
    );
    match &r.clock {
        Some(c) => {
            let _ = writeln!(
                s,
                "  clock: offset {} ± {}, {}{}; every one-way figure is ± {}",
                signed(c.offset_ns),
                time(c.bound_ns as f64),
                c.source.label(),
                c.contradicted
                    .map(|claim| format!(" ({claim:?} was claimed and contradicted)"))
                    .unwrap_or_default(),
                time(c.bound_ns as f64)
            );
        }
        None => s.push_str("  clock: no one-way delays (the server announced no clock: a wirebench before one-way delays)\n"),
    }
    let _ = writeln!(
        s,
        "  {:<9} {:>19} {:>19} {:>19} {:>14} {:>14}  probes",
        "phase", "rtt p50 / p99", "up p50 / p99", "down p50 / p99", "upload", "download"
    );
    for phase in &r.phases {
        let _ = writeln!(s, "  {}", phase_line(phase));
    }
    for phase in &r.phases {
        if let Some(w) = phase.one_way.as_ref().filter(|w| w.outside_bound > 0) {
            let _ = writeln!(
                s,
                "  {}: {} of {} probes fell outside the clock bound and are left out",
                phase.phase.name(),
                w.outside_bound,
                w.exchanges
            );
        }
        if let Some(e) = &phase.load_error {
            let _ = writeln!(s, "  {}: the load failed: {e}", phase.phase.name());
        }
    }
    s
}

fn phase_line(p: &LoadPhaseRecord) -> String {
    let pair = |a: u64, b: u64| format!("{} / {}", time(a as f64), time(b as f64));
    let rtt = p
        .probes
        .rtt
        .map_or("-".to_string(), |r| pair(r.p50_ns, r.p99_ns));
    let delay = |d: Option<DelayFigures>| {
        d.map_or("-".to_string(), |d| {
            format!("{} / {}", signed_time(d.p50_ns), signed_time(d.p99_ns))
        })
    };
    let (up, down) = match &p.one_way {
        Some(w) => (delay(w.up), delay(w.down)),
        None => ("-".to_string(), "-".to_string()),
    };
    let rate = |bps: Option<f64>| bps.map_or("-".to_string(), format_bitrate);
    format!(
        "{:<9} {:>19} {:>19} {:>19} {:>14} {:>14}  {} sent, {} lost",
        p.phase.name(),
        rtt,
        up,
        down,
        rate(p.upload_bps),
        rate(p.download_bps),
        p.probes.sent,
        p.probes.lost
    )
}

/// A delay that may be slightly negative within its bound.
fn signed_time(ns: i64) -> String {
    if ns < 0 {
        signed(ns)
    } else {
        time(ns as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::record::load_phases::{LoadPhase, LoadPhasesPlan, PhaseMeasured};
    use wirebench_core::record::loaded_latency::{PhaseSamples, ProbeSample};
    use wirebench_core::vocab::clock_offset::{ClockClaim, Exchange};
    use wirebench_core::vocab::plan::Protocol;

    #[test]
    fn one_line_per_phase_under_the_clock() {
        let probes = |up: i64, down: i64| {
            let mut p = PhaseSamples::default();
            for i in 0..4i64 {
                let sent = 1_800_000_000_000_000_000 + i * 20_000_000;
                p.answered.push(ProbeSample {
                    t_ns: 0,
                    rtt_ns: (up + down) as u64,
                    up_ns: None,
                    down_ns: None,
                });
                p.exchanges.push(Some(Exchange {
                    client_sent: sent,
                    server_received: sent + up,
                    server_sent: sent + up,
                    client_received: sent + up + down,
                }));
            }
            p
        };
        let plan = LoadPhasesPlan {
            probe: Protocol::Udp,
            load: Protocol::Tcp,
            streams: 1,
            msg_size: 131_072,
            phase_ns: 5_000_000_000,
            interval_ns: 20_000_000,
            timeout_ns: 2_000_000_000,
        };
        let phases = [
            (
                LoadPhase::Idle,
                PhaseMeasured {
                    probes: probes(100_000, 100_000),
                    ..PhaseMeasured::default()
                },
            ),
            (
                LoadPhase::Upload,
                PhaseMeasured {
                    probes: probes(40_000_000, 100_000),
                    upload_bps: Some(19_500_000.0),
                    ..PhaseMeasured::default()
                },
            ),
        ];
        let r = LoadPhasesResult::of(plan, &phases, Some(ClockClaim::SameClock { error_ns: 0 }));
        assert_eq!(
            text(&r, "127.0.0.1:5310"),
            "latency under load against 127.0.0.1:5310: udp probes every 20ms, tcp load (1 flow per direction, 131072 B (128 KiB) writes), 5s per phase
  clock: offset +0.0 µs ± 0.0 µs, one clock (same host); every one-way figure is ± 0.0 µs
  phase           rtt p50 / p99        up p50 / p99      down p50 / p99         upload       download  probes
  idle      200.0 µs / 200.0 µs 100.0 µs / 100.0 µs 100.0 µs / 100.0 µs              -              -  4 sent, 0 lost
  upload    40.10 ms / 40.10 ms 40.00 ms / 40.00 ms 100.0 µs / 100.0 µs   19.50 Mbit/s              -  4 sent, 0 lost
"
        );
    }
}
