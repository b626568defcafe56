//! Retransmission timeout estimation (RFC 6298): owns SRTT, RTTVAR, the RTO and its back-off;
//! must not read clocks (samples and timeouts are reported by the caller).

use std::time::Duration;

/// Default floor of the adaptive RTO. RFC 6298's 1 s minimum is meant for the Internet; on
/// loopback or a LAN a 2 ms floor keeps one lost datagram from costing a second.
pub const DEFAULT_MIN_RTO: Duration = Duration::from_millis(2);
/// Default ceiling of the adaptive RTO, back-off included.
pub const DEFAULT_MAX_RTO: Duration = Duration::from_secs(2);
/// Default RTO before the first round-trip sample.
pub const DEFAULT_INITIAL_RTO: Duration = Duration::from_millis(200);

/// Clock granularity G of RFC 6298 (we time with a nanosecond monotonic clock).
const GRANULARITY: Duration = Duration::from_micros(1);

/// RFC 6298 estimator: SRTT and RTTVAR with α = 1/8, β = 1/4, K = 4, and exponential back-off.
#[derive(Debug, Clone, PartialEq)]
pub struct RtoEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    base_rto: Duration,
    backoff: u32,
    min: Duration,
    max: Duration,
}

impl RtoEstimator {
    /// An estimator with `initial` RTO before any sample, clamped to `[min, max]`.
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        let max = max.max(min);
        RtoEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            base_rto: initial.clamp(min, max),
            backoff: 0,
            min,
            max,
        }
    }

    /// Feeds one round-trip sample (of a message sent once: Karn's rule is the caller's);
    /// resets the back-off.
    pub fn on_sample(&mut self, rtt: Duration) {
        match self.srtt {
            None => {
                // RFC 6298 §2.2: SRTT = R, RTTVAR = R/2.
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                // §2.3: RTTVAR = 3/4 RTTVAR + 1/4 |SRTT − R|; SRTT = 7/8 SRTT + 1/8 R.
                let diff = srtt.abs_diff(rtt);
                self.rttvar = self.rttvar * 3 / 4 + diff / 4;
                self.srtt = Some(srtt * 7 / 8 + rtt / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(rtt);
        self.base_rto = (srtt + (self.rttvar * 4).max(GRANULARITY)).clamp(self.min, self.max);
        self.backoff = 0;
    }

    /// A timeout happened: double the RTO (§5.5), up to the ceiling.
    pub fn on_timeout(&mut self) {
        if self.rto() < self.max {
            self.backoff = self.backoff.saturating_add(1);
        }
    }

    /// The current timeout, back-off included.
    pub fn rto(&self) -> Duration {
        let factor = 1u32.checked_shl(self.backoff.min(31)).unwrap_or(u32::MAX);
        self.base_rto
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// The smoothed round-trip time, once there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn first_sample_sets_srtt_and_rttvar() {
        let mut e = RtoEstimator::new(ms(200), ms(2), ms(2000));
        assert_eq!(e.rto(), ms(200));
        assert_eq!(e.srtt(), None);
        e.on_sample(ms(10));
        // RTO = SRTT + 4·RTTVAR = 10 + 4·5.
        assert_eq!(e.srtt(), Some(ms(10)));
        assert_eq!(e.rto(), ms(30));
        e.on_sample(ms(10));
        // RTTVAR = 3/4·5 + 0 = 3.75; SRTT = 10.
        assert_eq!(e.rto(), ms(10) + Duration::from_micros(15_000));
    }

    #[test]
    fn floor_ceiling_and_backoff() {
        let mut e = RtoEstimator::new(ms(200), ms(2), ms(100));
        e.on_sample(Duration::from_micros(20));
        assert_eq!(e.rto(), ms(2), "the floor holds");
        e.on_timeout();
        assert_eq!(e.rto(), ms(4));
        e.on_timeout();
        e.on_timeout();
        assert_eq!(e.rto(), ms(16));
        for _ in 0..50 {
            e.on_timeout();
        }
        assert_eq!(e.rto(), ms(100), "back-off stops at the ceiling");
        e.on_sample(Duration::from_micros(20));
        assert_eq!(e.rto(), ms(2), "a sample resets the back-off");
        assert_eq!(RtoEstimator::new(ms(5000), ms(2), ms(100)).rto(), ms(100));
    }

    #[test]
    fn second_sample_follows_rfc6298_exactly() {
        let mut e = RtoEstimator::new(ms(200), ms(2), ms(2000));
        e.on_sample(ms(10));
        e.on_sample(ms(20));
        // RTTVAR = 3/4·5 + 1/4·|10 − 20| = 6.25; SRTT = 7/8·10 + 1/8·20 = 11.25; RTO = 11.25 + 4·6.25.
        assert_eq!(e.srtt(), Some(Duration::from_micros(11_250)));
        assert_eq!(e.rto(), Duration::from_micros(36_250));
    }

    #[test]
    fn zero_sample_uses_granularity_then_floor_and_bounds_are_ordered() {
        let mut e = RtoEstimator::new(ms(200), Duration::ZERO, ms(100));
        e.on_sample(Duration::ZERO);
        assert_eq!(e.rto(), GRANULARITY, "K·RTTVAR = 0 is replaced by G");
        // min above max: max is raised to min instead of panicking in clamp.
        assert_eq!(RtoEstimator::new(ms(1), ms(50), ms(10)).rto(), ms(50));
        assert_eq!(DEFAULT_MIN_RTO, ms(2));
        assert_eq!(DEFAULT_MAX_RTO, ms(2000));
        assert_eq!(DEFAULT_INITIAL_RTO, ms(200));
    }
}
