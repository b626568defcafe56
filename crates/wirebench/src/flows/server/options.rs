//! What a server allows and requires of its clients (limits, authentication); decided once at
//! start from the `server` flags and shared read-only by every connection handler.

use std::time::Duration;

use wirebench_core::wire::proto::MAX_CONTROL_FRAME;

/// A server's policy. `Default` is an open server with the default limits, as the embedded
/// server of `run`, `ping` and `rr` uses.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// What one client, and all of them together, may ask of the server.
    pub limits: Limits,

    /// Pre-shared key every client must prove it holds (`--psk FILE`); None = an open server.
    /// With a key the server also refuses QUIC `perf` clients, which cannot present it.
    pub psk: Option<std::sync::Arc<wirebench_core::security::auth::Psk>>,

    /// UDP receive lanes (`--udp-lanes`): sockets on the shared port, each read by a thread
    /// of its own, over which UDP sessions spread (`engine::udp::lanes`). None = one per CPU;
    /// 0 = none, every datagram on the QUIC endpoint's socket.
    pub udp_lanes: Option<usize>,
}

impl ServerOptions {
    /// How many receive lanes these options ask for (one per CPU unless set).
    pub fn lanes(&self) -> usize {
        self.udp_lanes.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }
}

impl ServerOptions {
    /// These options, requiring `psk` of every client (None: open).
    pub fn with_psk(
        mut self,
        psk: Option<std::sync::Arc<wirebench_core::security::auth::Psk>>,
    ) -> Self {
        self.psk = psk;
        self
    }
}

/// Server limits. Each has a flag on `wirebench server`; a session that asks for more is
/// refused with a reason on its control connection, one that runs past them is aborted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Sessions running at once, all clients together (`--max-sessions`).
    pub max_sessions: usize,
    /// Sessions running at once from one client address (`--max-sessions-per-client`).
    pub max_sessions_per_client: usize,
    /// Longest a session may run, from its request to its report (`--max-duration`).
    pub max_duration: Duration,
    /// Largest total one session may transfer, in bytes (`--max-bytes`).
    pub max_bytes: u64,
    /// Highest data rate of one session in bit/s (`--max-rate`); None = unlimited.
    pub max_rate_bps: Option<u64>,
    /// Largest control message a client may send, in bytes (`--max-control-size`).
    pub max_control_size: usize,
    /// How long a new connection may take to send its preamble and its session request
    /// (`--hello-timeout`): a client that connects and then says nothing is closed after it.
    pub hello_timeout: Duration,
    /// After SIGINT/SIGTERM, how long running sessions may go on before they are aborted
    /// (`--shutdown-grace`).
    pub shutdown_grace: Duration,
}

use wirebench_core::vocab::limits::{DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_CLIENT};
/// Default of `--max-duration`.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(600);
/// Default of `--max-bytes`: 100 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 100 << 30;
/// Default of `--hello-timeout`.
pub const DEFAULT_HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `--shutdown-grace`.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Smallest `--max-control-size`: a session request with every option fits in it.
pub const MIN_CONTROL_SIZE: usize = 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_client: DEFAULT_MAX_SESSIONS_PER_CLIENT,
            max_duration: DEFAULT_MAX_DURATION,
            max_bytes: DEFAULT_MAX_BYTES,
            max_rate_bps: None,
            max_control_size: MAX_CONTROL_FRAME,
            hello_timeout: DEFAULT_HELLO_TIMEOUT,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}
