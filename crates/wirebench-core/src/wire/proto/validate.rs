//! The ranges a server accepts for every field a client sends in a session request: owns those
//! ranges (documented in docs/security.md) and the one check of each request against them,
//! made before anything is allocated or started; a refusal names the field and says what is
//! allowed. Must not know the server's own limits (`--max-bytes` and the like: the gate checks
//! those) nor do I/O.

use super::params::{RrParams, SessionParams, MIN_RECEIPT_US, UNBOUNDED_TOTAL};
use crate::vocab::plan::{Protocol, MAX_STREAM_MSG_SIZE, MIN_MSG_SIZE};
use crate::wire::datagram;

/// Shortest interval series period (`interval_us`) a server keeps: 10 ms.
pub const MIN_INTERVAL_US: u64 = 10_000;
/// Most interval samples one session keeps: a longer series is refused when the session is
/// timed, and stopped (aborted) when it is not. 36,000 samples are an hour at one a tenth of a
/// second, or six minutes at the shortest period; about 1.7 MiB in memory and under 4 MiB in
/// the report.
pub const MAX_INTERVAL_SAMPLES: u64 = 36_000;
/// Longest interval period (`interval_us`): 24 hours. (A timed session and an omit span,
/// `duration_us` and `omit_us`, are bounded by the server's `--max-duration` instead.)
pub const MAX_INTERVAL_US: u64 = 86_400_000_000;
/// Longest grace period for late UDP datagrams (`grace_us`): 60 s.
pub const MAX_GRACE_US: u64 = 60_000_000;
/// Fixed stop-and-wait retransmission timeouts (`rto_us`) allowed: 100 µs to 60 s.
pub const RTO_RANGE_US: (u64, u64) = (100, 60_000_000);
/// Highest pacing rate (`rate_bps`): 10 Tbit/s (the lowest is 1 bit/s).
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;
/// Socket buffers (`options.window`) allowed: 4 KiB to 1 GiB.
pub const WINDOW_RANGE: (u32, u32) = (4 * 1024, 1 << 30);
/// Longest congestion-control name (the kernel's `TCP_CA_NAME_MAX` less its NUL).
pub const MAX_CONGESTION_NAME: usize = 15;

/// A congestion control's name as the kernel spells them (`cubic`, `bbr`, `dctcp`): 1 to
/// [`MAX_CONGESTION_NAME`] ASCII letters, digits, '_' or '-'. It goes into a setsockopt and
/// back into a peer's output, so nothing else is let through.
pub fn is_congestion_name(name: &str) -> bool {
    (1..=MAX_CONGESTION_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
/// Longest receipt period (`options.receipt_us`): 60 s (shorter than [`MIN_RECEIPT_US`] is
/// served at that).
pub const MAX_RECEIPT_US: u64 = 60_000_000;
/// QUIC payload sizes (`options.quic_mtu`) allowed, in bytes.
pub const QUIC_MTU_RANGE: (u16, u16) = (1200, 65527);

/// The TCP maximum segment sizes a session may ask for (`-M`), bytes: Linux's TCP_MIN_MSS
/// to the largest an IPv4 packet carries.
pub const MSS_RANGE: (u32, u32) = (88, 65_495);
/// Most flows (`flows`) and requests in flight per flow (`concurrency`) an rr request may
/// announce.
pub const MAX_RR_FLOWS: u32 = 1024;
/// See [`MAX_RR_FLOWS`].
pub const MAX_RR_CONCURRENCY: u32 = 10_000;

/// A field of a request outside its range: the reason a server gives, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FieldError(pub String);

fn out_of_range(field: &str, value: impl std::fmt::Display, allowed: &str) -> FieldError {
    FieldError(format!(
        "{field} {value} is out of range: allowed {allowed}"
    ))
}

/// The largest message of `protocol` from a client at an address of this family.
fn max_message(protocol: Protocol, ipv6: bool) -> u32 {
    match protocol {
        Protocol::Tcp | Protocol::Quic => MAX_STREAM_MSG_SIZE,
        Protocol::Udp => datagram::max_message_size(ipv6),
    }
}

impl SessionParams {
    /// Checks every field against its documented range; `ipv6` says whether the client came
    /// over IPv6 (UDP messages may then be a little larger).
    pub fn validate(&self, ipv6: bool) -> Result<(), FieldError> {
        let max = max_message(self.protocol, ipv6);
        if !(MIN_MSG_SIZE..=max).contains(&self.msg_size) {
            return Err(FieldError(format!(
                "message size {} is out of range for {}: allowed {MIN_MSG_SIZE} to {max} bytes",
                self.msg_size, self.protocol
            )));
        }
        if self.total_bytes == 0 {
            return Err(FieldError("total must be at least 1 byte".into()));
        }
        if self.total_bytes > UNBOUNDED_TOTAL {
            return Err(out_of_range(
                "total_bytes",
                self.total_bytes,
                &format!("1 to {UNBOUNDED_TOTAL}"),
            ));
        }
        if let Some(us) = self.rto_us {
            if !(RTO_RANGE_US.0..=RTO_RANGE_US.1).contains(&us) {
                return Err(out_of_range(
                    "rto_us",
                    us,
                    "100 (100 µs) to 60000000 (60 s)",
                ));
            }
        }
        if let Some(bps) = self.rate_bps {
            if !(1..=MAX_RATE_BPS).contains(&bps) {
                return Err(out_of_range(
                    "rate_bps",
                    bps,
                    &format!("1 to {MAX_RATE_BPS} bit/s"),
                ));
            }
        }
        if self.grace_us > MAX_GRACE_US {
            return Err(FieldError(
                "grace period is out of range: allowed up to 60s".into(),
            ));
        }
        self.validate_spans()?;
        self.validate_options()
    }

    /// `duration_us`, `omit_us` and `interval_us`, and the length of the interval series.
    fn validate_spans(&self) -> Result<(), FieldError> {
        let span = |field: &str, us: u64| {
            if us > 0 {
                Ok(())
            } else {
                Err(out_of_range(
                    field,
                    us,
                    "1 µs or more (up to the server's --max-duration)",
                ))
            }
        };
        if let Some(us) = self.duration_us {
            span("duration_us", us)?;
        }
        if let Some(us) = self.omit_us {
            span("omit_us", us)?;
        }
        if let Some(us) = self.interval_us {
            if !(MIN_INTERVAL_US..=MAX_INTERVAL_US).contains(&us) {
                return Err(out_of_range(
                    "interval_us",
                    us,
                    "10000 (10 ms) to 86400000000 (24 h)",
                ));
            }
            if let Some(duration) = self.duration_us {
                let samples = duration.div_ceil(us);
                if samples > MAX_INTERVAL_SAMPLES {
                    return Err(FieldError(format!(
                        "interval_us {us} over duration_us {duration} would make {samples} interval samples: allowed at most {MAX_INTERVAL_SAMPLES} (a longer period)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The data-path options.
    fn validate_options(&self) -> Result<(), FieldError> {
        let o = &self.options;
        if let Some(w) = o.window {
            if !(WINDOW_RANGE.0..=WINDOW_RANGE.1).contains(&w) {
                return Err(out_of_range(
                    "options.window",
                    w,
                    &format!("{} to {} bytes", WINDOW_RANGE.0, WINDOW_RANGE.1),
                ));
            }
        }
        if let Some(cc) = &o.congestion {
            if !is_congestion_name(cc) {
                return Err(FieldError(format!(
                    "options.congestion \"{}\" is not a congestion-control name: allowed 1 to {MAX_CONGESTION_NAME} letters, digits, '_' or '-'",
                    crate::vocab::text::peer_text(cc)
                )));
            }
        }
        if o.busy_poll && self.protocol == Protocol::Quic {
            return Err(FieldError(
                "busy-poll applies to TCP and UDP, not QUIC".into(),
            ));
        }
        if let Some(us) = o.receipt_us {
            if us > MAX_RECEIPT_US {
                return Err(out_of_range(
                    "options.receipt_us",
                    us,
                    &format!("up to {MAX_RECEIPT_US} (60 s; below {MIN_RECEIPT_US} served at {MIN_RECEIPT_US})"),
                ));
            }
        }
        if let Some(mss) = o.mss {
            if !(MSS_RANGE.0..=MSS_RANGE.1).contains(&mss) {
                return Err(out_of_range(
                    "options.mss",
                    mss,
                    &format!("{} to {} bytes", MSS_RANGE.0, MSS_RANGE.1),
                ));
            }
            if self.protocol != Protocol::Tcp {
                return Err(FieldError("options.mss applies to TCP only".into()));
            }
        }
        if let Some(mtu) = o.quic_mtu {
            if !(QUIC_MTU_RANGE.0..=QUIC_MTU_RANGE.1).contains(&mtu) {
                return Err(out_of_range(
                    "options.quic_mtu",
                    mtu,
                    &format!("{} to {} bytes", QUIC_MTU_RANGE.0, QUIC_MTU_RANGE.1),
                ));
            }
        }
        Ok(())
    }
}

impl RrParams {
    /// Checks every field against its documented range; `ipv6` as for
    /// [`SessionParams::validate`].
    pub fn validate(&self, ipv6: bool) -> Result<(), FieldError> {
        let max = max_message(self.protocol, ipv6);
        for (name, size) in [("request", self.request), ("response", self.response)] {
            if !(MIN_MSG_SIZE..=max).contains(&size) {
                return Err(FieldError(format!(
                    "{name} size {size} is out of range for {}: allowed {MIN_MSG_SIZE} to {max} bytes",
                    self.protocol
                )));
            }
        }
        if !(1..=MAX_RR_FLOWS).contains(&self.flows) {
            return Err(out_of_range(
                "flows",
                self.flows,
                &format!("1 to {MAX_RR_FLOWS}"),
            ));
        }
        if !(1..=MAX_RR_CONCURRENCY).contains(&self.concurrency) {
            return Err(out_of_range(
                "concurrency",
                self.concurrency,
                &format!("1 to {MAX_RR_CONCURRENCY}"),
            ));
        }
        if self.new_connection && self.protocol == Protocol::Udp {
            return Err(FieldError(
                "a new connection per request applies to TCP and QUIC, not UDP".into(),
            ));
        }
        if self.stamps && (self.response as usize) < crate::wire::datagram::STAMPS_LEN {
            return Err(FieldError(format!(
                "stamped answers need a response of at least {} bytes (asked: {} bytes)",
                crate::wire::datagram::STAMPS_LEN,
                self.response
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::plan::Mechanism;
    use crate::wire::proto::DataPathOptions;

    fn params() -> SessionParams {
        SessionParams {
            duration_us: None,
            omit_us: None,
            protocol: Protocol::Udp,
            mechanism: Mechanism::Stream,
            msg_size: 1200,
            total_bytes: 1_000_000,
            rto_us: None,
            rate_bps: Some(1_000_000),
            grace_us: 250_000,
            options: DataPathOptions::default(),
            interval_us: None,
            reverse: false,
        }
    }

    fn refused(p: SessionParams) -> String {
        p.validate(false).expect_err("refused").0
    }

    #[test]
    fn a_plain_request_passes() {
        assert_eq!(params().validate(false), Ok(()));
        let timed = SessionParams {
            duration_us: Some(10_000_000),
            total_bytes: UNBOUNDED_TOTAL,
            interval_us: Some(MIN_INTERVAL_US),
            omit_us: Some(1_000_000),
            ..params()
        };
        assert_eq!(timed.validate(false), Ok(()));
    }

    #[test]
    fn each_bad_field_is_named_with_what_is_allowed() {
        let cases: Vec<(SessionParams, &str)> = vec![
            (
                SessionParams {
                    interval_us: Some(1),
                    ..params()
                },
                "interval_us 1 is out of range: allowed 10000 (10 ms)",
            ),
            (
                SessionParams {
                    rate_bps: Some(0),
                    ..params()
                },
                "rate_bps 0 is out of range: allowed 1 to",
            ),
            (
                SessionParams {
                    rto_us: Some(0),
                    ..params()
                },
                "rto_us 0 is out of range",
            ),
            (
                SessionParams {
                    duration_us: Some(0),
                    ..params()
                },
                "duration_us 0 is out of range",
            ),
            (
                SessionParams {
                    omit_us: Some(0),
                    ..params()
                },
                "omit_us 0 is out of range",
            ),
            (
                SessionParams {
                    interval_us: Some(MAX_INTERVAL_US + 1),
                    ..params()
                },
                "interval_us 86400000001 is out of range",
            ),
            (
                SessionParams {
                    msg_size: 0,
                    ..params()
                },
                "message size 0 is out of range for udp: allowed 1 to 65491 bytes",
            ),
            (
                SessionParams {
                    total_bytes: 0,
                    ..params()
                },
                "total must be at least 1 byte",
            ),
            (
                SessionParams {
                    total_bytes: u64::MAX,
                    ..params()
                },
                "total_bytes 18446744073709551615 is out of range",
            ),
            (
                SessionParams {
                    grace_us: MAX_GRACE_US + 1,
                    ..params()
                },
                "grace period is out of range",
            ),
            (
                SessionParams {
                    options: DataPathOptions {
                        window: Some(1),
                        ..DataPathOptions::default()
                    },
                    ..params()
                },
                "options.window 1 is out of range",
            ),
            (
                SessionParams {
                    options: DataPathOptions {
                        congestion: Some("cubic;rm -rf".into()),
                        ..DataPathOptions::default()
                    },
                    ..params()
                },
                "options.congestion \"cubic;rm -rf\" is not a congestion-control name",
            ),
            (
                SessionParams {
                    options: DataPathOptions {
                        quic_mtu: Some(100),
                        ..DataPathOptions::default()
                    },
                    ..params()
                },
                "options.quic_mtu 100 is out of range",
            ),
            (
                SessionParams {
                    options: DataPathOptions {
                        receipt_us: Some(MAX_RECEIPT_US + 1),
                        ..DataPathOptions::default()
                    },
                    ..params()
                },
                "options.receipt_us 60000001 is out of range",
            ),
        ];
        for (p, want) in cases {
            let why = refused(p);
            assert!(why.contains(want), "{why:?} should say {want:?}");
        }
    }

    #[test]
    fn the_interval_series_of_a_timed_session_is_bounded() {
        let long = SessionParams {
            duration_us: Some(MAX_INTERVAL_SAMPLES * MIN_INTERVAL_US + 1),
            interval_us: Some(MIN_INTERVAL_US),
            ..params()
        };
        assert!(refused(long).contains("would make 36001 interval samples"));
        let fits = SessionParams {
            duration_us: Some(MAX_INTERVAL_SAMPLES * MIN_INTERVAL_US),
            interval_us: Some(MIN_INTERVAL_US),
            ..params()
        };
        assert_eq!(fits.validate(false), Ok(()));
    }

    #[test]
    fn ipv6_allows_a_slightly_larger_datagram() {
        let p = SessionParams {
            msg_size: datagram::max_message_size(true),
            ..params()
        };
        assert!(p.validate(false).is_err());
        assert_eq!(p.validate(true), Ok(()));
    }

    #[test]
    fn rr_requests_are_checked_field_by_field() {
        let rr = RrParams {
            protocol: Protocol::Tcp,
            request: 1,
            response: 16 << 20,
            flows: 1,
            concurrency: 4,
            new_connection: false,
            stamps: false,
        };
        assert_eq!(rr.validate(false), Ok(()));
        let bad = [
            (
                RrParams {
                    request: 0,
                    ..rr.clone()
                },
                "request size 0 is out of range for tcp: allowed 1 to",
            ),
            (
                RrParams {
                    flows: 0,
                    ..rr.clone()
                },
                "flows 0 is out of range: allowed 1 to 1024",
            ),
            (
                RrParams {
                    concurrency: 10_001,
                    ..rr.clone()
                },
                "concurrency 10001 is out of range",
            ),
            (
                RrParams {
                    protocol: Protocol::Udp,
                    response: 100,
                    new_connection: true,
                    ..rr.clone()
                },
                "applies to TCP and QUIC, not UDP",
            ),
        ];
        for (p, want) in bad {
            let why = p.validate(false).expect_err("refused").0;
            assert!(why.contains(want), "{why:?} should say {want:?}");
        }
    }
}
