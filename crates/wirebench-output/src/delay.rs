//! How a delay reads: µs below a millisecond, ms from there, with a sign where it may be
//! negative (an increase, an offset, a one-way figure within its bound).

/// Below a millisecond in µs, else in ms.
pub fn time(ns: f64) -> String {
    if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

/// A signed delay: `+1.50 ms`, `-200.0 µs`.
pub fn signed(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "+" };
    format!("{sign}{}", time(ns.unsigned_abs() as f64))
}
