//! The lines of a `--rate max` search: one per trial as it ends, the result, and the note on
//! the transfer that ran at the rate found.

use std::time::Duration;

use wirebench_core::record::ratesearch::{
    EarlyEndName, RateSearchRecord, TrialEntry, TrialKindName,
};
use wirebench_core::vocab::units::format_bitrate;

/// The line announcing a search (before its first trial); rates in bit/s, shares in %.
pub fn heading(
    msg_size: u32,
    low_bps: u64,
    high_bps: u64,
    resolution_pct: f64,
    max_loss_pct: f64,
    trial: Duration,
    trial_grace: Duration,
) -> String {
    format!(
        "rate search (--rate max): the highest UDP rate losing at most {} of {msg_size} B datagrams, \
         {} .. {} within {}, trials of {} ms, each with a {} ms server grace",
        pct(max_loss_pct),
        format_bitrate(low_bps as f64),
        format_bitrate(high_bps as f64),
        pct(resolution_pct),
        trial.as_millis(),
        trial_grace.as_millis()
    )
}

/// One trial: offered and sent rate, goodput, loss of datagrams sent, pass or fail.
pub fn trial_line(index: usize, t: &TrialEntry) -> String {
    let kind = match t.kind {
        TrialKindName::Probe => "probe",
        TrialKindName::Confirm => "confirm",
    };
    format!(
        "  trial {index:>2} {kind:<7} offered {:>13} (sent {:>13})  goodput {:>13}  lost {:>8} of {:>7}  {}",
        format_bitrate(t.rate_bps as f64),
        t.sent_bps
            .map_or_else(|| "too short".to_string(), format_bitrate),
        t.goodput_bps
            .map_or_else(|| "too short".to_string(), format_bitrate),
        pct(t.lost_pct),
        t.sent_messages,
        match t.ended_early {
            _ if t.passed => "pass".to_string(),
            None => "fail".to_string(),
            Some(why) => format!(
                "fail, ended early ({} of {} sent: {})",
                t.sent_messages,
                t.planned_messages,
                match why {
                    EarlyEndName::Loss => "lost too many already",
                    EarlyEndName::Sender => "the sender fell behind",
                }
            ),
        }
    )
}

/// The search's result line.
pub fn result_line(r: &RateSearchRecord) -> String {
    let how = format!(
        "{} trials in {:.1} s, max loss {}",
        r.trial_count(),
        r.seconds(),
        pct(r.max_loss_pct)
    );
    match (r.rate_bps, r.confirmation()) {
        (Some(rate), Some(c)) => format!(
            "rate found: {} (confirmed: lost {}, goodput {}; {how})",
            format_bitrate(rate as f64),
            pct(c.lost_pct),
            c.goodput_bps
                .map_or_else(|| "too short to time".to_string(), format_bitrate)
        ),
        _ if r.outcome == "below_low" => format!(
            "no rate found: even the low bound {} did not pass (it lost more than allowed, or \
             its sender could not keep to it) ({how}); lower --search-low",
            format_bitrate(r.low_bps as f64)
        ),
        _ => format!(
            "no rate found: the confirming trials kept failing, the path's loss (or the \
             sender's pace, on a busy host) changes from trial to trial ({how}); allow some \
             loss (--max-loss) or lengthen --trial"
        ),
    }
}

/// The note under a run that ran at the rate found.
pub fn found_note(r: &RateSearchRecord) -> Option<String> {
    let rate = r.rate_bps?;
    Some(format!(
        "  rate {}: found by the search, not given ({} trials, {:.1} s, max loss {})",
        format_bitrate(rate as f64),
        r.trial_count(),
        r.seconds(),
        pct(r.max_loss_pct)
    ))
}

/// A percentage without needless digits: "0%", "0.1%", "4.12%".
fn pct(p: f64) -> String {
    let s = format!("{p:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_drop_needless_digits() {
        assert_eq!(pct(0.0), "0%");
        assert_eq!(pct(0.1), "0.1%");
        assert_eq!(pct(4.1234), "4.123%");
    }
}
