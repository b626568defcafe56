//! What a window of probes comes to: its trimmed-mean components, the RPM the draft's formula
//! makes of them, and the draft's confidence and rating words.

use serde::{Deserialize, Serialize};

/// The trimmed means of one window of probes, milliseconds.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Components {
    /// TM(tcp_f): TCP handshake of foreign probes.
    pub foreign_tcp_ms: f64,
    /// TM(tls_f): TLS handshake of foreign probes normalised to one round trip; `None` without TLS.
    pub foreign_tls_ms: Option<f64>,
    /// TM(http_f): request → response on a foreign probe's new connection.
    pub foreign_request_ms: f64,
    /// TM(http_l): request → response of self probes.
    pub self_request_ms: f64,
}

/// RPM from its components, the draft's way.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct RpmFigures {
    /// 60000 / mean of the foreign components (three with TLS, two without).
    pub foreign_rpm: f64,
    /// 60000 / TM(http_l).
    pub self_rpm: f64,
    /// (foreign + self) / 2.
    pub rpm: f64,
}

/// The draft's formula: `Foreign = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3)`, or
/// `/ 2` over TCP and HTTP alone without TLS; `Loaded = 60000 / TM(http_l)`;
/// `RPM = (Foreign + Loaded) / 2`. `None` when a component is not positive.
pub fn rpm(c: &Components) -> Option<RpmFigures> {
    let foreign_ms = match c.foreign_tls_ms {
        Some(tls) => (c.foreign_tcp_ms + tls + c.foreign_request_ms) / 3.0,
        None => (c.foreign_tcp_ms + c.foreign_request_ms) / 2.0,
    };
    if !(foreign_ms > 0.0 && c.self_request_ms > 0.0) {
        return None;
    }
    let foreign_rpm = 60_000.0 / foreign_ms;
    let self_rpm = 60_000.0 / c.self_request_ms;
    Some(RpmFigures {
        foreign_rpm,
        self_rpm,
        rpm: (foreign_rpm + self_rpm) / 2.0,
    })
}

/// The draft's confidence in one stage's figure.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Fewer than MAD intervals of the stage ran: the moving average never spanned its window.
    Low,
    /// At least MAD intervals ran, but the figure never became stable.
    Medium,
    /// The figure became stable within the tolerance.
    High,
}

impl Confidence {
    /// Confidence of a stage that ran `intervals` moving averages (out of `mad` needed) and
    /// did or did not reach stability.
    pub fn of(intervals: usize, mad: usize, stable: bool) -> Confidence {
        if stable {
            Confidence::High
        } else if intervals >= mad {
            Confidence::Medium
        } else {
            Confidence::Low
        }
    }

    /// The draft's word.
    pub fn word(self) -> &'static str {
        match self {
            Confidence::Low => "Low",
            Confidence::Medium => "Medium",
            Confidence::High => "High",
        }
    }
}

/// The draft's four classes of responsiveness.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Rating {
    /// Below 300 RPM (above 200 ms).
    Poor,
    /// 300 to 1000 RPM (200 to 60 ms).
    Fair,
    /// 1000 to 6000 RPM (60 to 10 ms).
    Good,
    /// 6000 RPM or more (10 ms or less).
    Excellent,
}

impl Rating {
    /// The class of `rpm`: a boundary value belongs to the better class.
    pub fn of(rpm: f64) -> Rating {
        if rpm >= 6000.0 {
            Rating::Excellent
        } else if rpm >= 1000.0 {
            Rating::Good
        } else if rpm >= 300.0 {
            Rating::Fair
        } else {
            Rating::Poor
        }
    }

    /// The draft's words.
    pub fn word(self) -> &'static str {
        match self {
            Rating::Poor => "Poor",
            Rating::Fair => "Fair",
            Rating::Good => "Good",
            Rating::Excellent => "Excellent",
        }
    }
}
