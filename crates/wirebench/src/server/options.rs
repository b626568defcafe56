//! What a server allows and requires of its clients (limits, authentication); decided once at
//! start from the `server` flags and shared read-only by every connection handler.

/// A server's policy. `Default` is an open server with the default limits, as the embedded
/// server of `run`, `ping` and `rr` uses.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {}
