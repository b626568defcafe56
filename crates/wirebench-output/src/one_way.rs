//! Text of one-way delays: each direction's median and p99 with the bound every figure carries,
//! and where the clock offset came from. Formats the core record; never estimates.

use wirebench_core::record::one_way::{ClockSource, DelayFigures, OneWayDelay};

use super::delay::{signed, time};

/// "up p50 8.9 µs, p99 12.0 µs · down p50 8.6 µs, p99 11.2 µs (each ± 11.4 µs; …)", or why
/// there are none.
pub fn one_way_text(w: &OneWayDelay) -> String {
    let Some(clock) = &w.clock else {
        return directions_text(w);
    };
    let mut s = format!(
        "{} (each ± {}; clock offset {}, {}",
        directions_text(w),
        time(clock.bound_ns as f64),
        signed_offset(clock.offset_ns),
        clock.source.label()
    );
    if let Some(claim) = clock.contradicted {
        s.push_str(&format!(
            "; {} was claimed and contradicted",
            claim_name(claim)
        ));
    }
    s.push(')');
    s
}

/// Each direction's median and p99, and the exchanges left out; or why there are none.
pub fn directions_text(w: &OneWayDelay) -> String {
    if w.clock.is_none() {
        return format!(
            "not measured: {}",
            w.unavailable.as_deref().unwrap_or("no exchange was timed")
        );
    }
    let direction = |name: &str, d: &Option<DelayFigures>| match d {
        Some(d) => format!(
            "{name} p50 {}, p99 {}",
            time(d.p50_ns as f64),
            time(d.p99_ns as f64)
        ),
        None => format!("{name} none"),
    };
    let mut s = format!(
        "{} · {}",
        direction("up", &w.up),
        direction("down", &w.down)
    );
    if w.outside_bound > 0 {
        s.push_str(&format!(
            "; {} of {} exchanges fell outside the bound and are left out",
            w.outside_bound, w.exchanges
        ));
    }
    s
}

fn claim_name(source: ClockSource) -> &'static str {
    match source {
        ClockSource::SameClock => "one clock (same boot)",
        ClockSource::Synchronized => "synchronization",
        ClockSource::Exchanges => "nothing",
    }
}

/// An offset with its sign: in s from a second up, else as [`time`].
fn signed_offset(ns: i64) -> String {
    if ns.unsigned_abs() >= 1_000_000_000 {
        format!("{:+.6} s", ns as f64 / 1e9)
    } else {
        signed(ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirebench_core::record::one_way::ClockFigures;

    #[test]
    fn the_bound_and_its_source_go_with_the_figures() {
        let figures = |p50| DelayFigures {
            min_ns: p50,
            p50_ns: p50,
            p99_ns: p50 * 2,
            max_ns: p50 * 3,
        };
        let w = OneWayDelay {
            exchanges: 10,
            clock: Some(ClockFigures {
                source: ClockSource::Exchanges,
                offset_ns: 2_500_002_269,
                bound_ns: 11_400,
                drift_ppm: 0.0,
                drift_bound_ppm: 500.0,
                contradicted: Some(ClockSource::SameClock),
            }),
            unavailable: None,
            up: Some(figures(8_900)),
            down: Some(figures(8_600)),
            outside_bound: 1,
            probes: Vec::new(),
        };
        assert_eq!(
            one_way_text(&w),
            "up p50 8.9 µs, p99 17.8 µs · down p50 8.6 µs, p99 17.2 µs; 1 of 10 exchanges fell outside the bound and are left out (each ± 11.4 µs; clock offset +2.500002 s, estimated from the exchanges; one clock (same boot) was claimed and contradicted)"
        );
        let none = OneWayDelay::unavailable(0, "the server does not stamp its answers");
        assert_eq!(
            one_way_text(&none),
            "not measured: the server does not stamp its answers"
        );
    }
}
