//! Why bytes from an iperf3 peer were refused ([`Iperf3Error`], one line for users), and the
//! error number a server sends iperf3's client for each refusal.

/// Why bytes from an iperf3 peer were refused; one line, for users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Iperf3Error {
    /// A state byte iperf3 does not define.
    #[error("iperf3 peer sent unknown state {0}")]
    UnknownState(i8),
    /// The cookie is not 36 printable characters and a NUL.
    #[error("not an iperf3 cookie (expected 36 printable characters and a NUL)")]
    BadCookie,
    /// A JSON document longer than [`MAX_JSON_LEN`](super::limits::MAX_JSON_LEN) (or empty).
    #[error("iperf3 peer announced a JSON document of {0} bytes (allowed 1 to 1048576)")]
    JsonLength(u32),
    /// The JSON text does not parse into what was expected.
    #[error("iperf3 peer sent invalid JSON: {0}")]
    Json(String),
    /// The parameters ask for something this implementation does not do.
    #[error("unsupported iperf3 test: {0}")]
    Unsupported(String),
    /// The client asked for SCTP.
    #[error("unsupported iperf3 test: SCTP (--sctp) is not served; use TCP or -u")]
    NoSctp,
    /// A UDP datagram too short for its header.
    #[error("UDP datagram of {0} bytes is shorter than the iperf3 header")]
    ShortDatagram(usize),
}

impl Iperf3Error {
    /// The error number a server sends with `SERVER_ERROR` for this refusal, so the iperf3
    /// client prints its own message for it.
    pub fn errno(&self) -> i32 {
        match self {
            Iperf3Error::NoSctp => errno::NO_SCTP,
            _ => errno::UNIMPLEMENTED,
        }
    }
}

/// iperf3's error numbers a server sends after `SERVER_ERROR` (its `i_errno`), for the
/// refusals wirebench makes.
pub mod errno {
    /// "an option you are trying to set is not implemented yet".
    pub const UNIMPLEMENTED: i32 = 13;
    /// "No SCTP support available".
    pub const NO_SCTP: i32 = 18;
}
