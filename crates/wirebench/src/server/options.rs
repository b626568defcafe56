//! What a server allows and requires of its clients (limits, authentication); decided once at
//! start from the `server` flags and shared read-only by every connection handler.

/// A server's policy. `Default` is an open server with the default limits, as the embedded
/// server of `run`, `ping` and `rr` uses.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    // --- Authentication (issue 7, `--psk`) ---
    /// Pre-shared key every client must prove it holds (`--psk FILE`); None = an open server.
    /// With a key the server also refuses QUIC `perf` clients, which cannot present it.
    pub psk: Option<std::sync::Arc<wirebench_core::auth::Psk>>,
}

impl ServerOptions {
    /// These options, requiring `psk` of every client (None: open).
    pub fn with_psk(mut self, psk: Option<std::sync::Arc<wirebench_core::auth::Psk>>) -> Self {
        self.psk = psk;
        self
    }
}
