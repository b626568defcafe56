//! What the server tells whoever runs it: one summary per session (aborted ones included) and
//! one notice per thing that is not a session. Plain records; nothing here sends them.

use std::net::SocketAddr;

use wirebench_core::wire::proto::{ServerReport, SessionParams};

/// What the server knows about one finished (or aborted) session.
#[derive(Debug, Clone)]
pub struct SessionSummary {
    /// Session id (random, as announced to the client).
    pub session: u32,
    /// The client's control connection address.
    pub peer: SocketAddr,
    /// What the client asked for.
    pub params: SessionParams,
    /// What the server read.
    pub report: ServerReport,
}

/// Something the server noticed that is not a session: a refused connection, a stray datagram.
#[derive(Debug, Clone)]
pub struct ServerNotice {
    /// Where it came from.
    pub peer: SocketAddr,
    /// What happened, one line.
    pub message: String,
}

/// Events the server reports to whoever runs it.
#[derive(Debug, Clone)]
pub enum ServerEvent {
    /// A session ended (completed or aborted).
    Session(Box<SessionSummary>),
    /// A connection was refused or dropped before it became a session.
    Notice(ServerNotice),
}
