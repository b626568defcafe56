//! The control connection: its framing (`frame.rs`: preambles and length-prefixed control
//! messages over any async byte stream) and, over it, the client's side of a session's set-up
//! and end: the session request (answering a pre-shared key's challenge with `auth`, naming a
//! peer that is not a wirebench server), the server's report and a graceful close.

pub mod auth;
mod frame;

pub use frame::{
    read_preamble, recv, recv_max, recv_raw, recv_raw_max, recv_setup, send, write_preamble,
    SETUP_TIMEOUT,
};

use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use wirebench_core::wire::peer_kind::{self, PeerKind, WIREBENCH_HEAD_LEN};
use wirebench_core::wire::proto::{self, ControlMessage, Preamble};

/// How long a closing connection may keep sending before we stop draining it.
const CLOSE_DRAIN: Duration = Duration::from_secs(1);

/// Closes a TCP connection so that what we wrote last (an error frame, a report) reaches the
/// peer: closing with unread input would make the kernel send a reset that can destroy it. We
/// send FIN, then discard input until the peer closes, 1 MiB, or one second has passed.
pub async fn close_gracefully(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let mut budget: usize = 1 << 20;
    let _ = tokio::time::timeout(CLOSE_DRAIN, async {
        while budget > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => budget = budget.saturating_sub(n),
            }
        }
    })
    .await;
}

/// What the server answered to a session request: the session's id and token, and for QUIC the
/// certificate to pin.
#[derive(Debug, Clone)]
pub struct Accepted {
    /// The session id, for data preambles and UDP headers.
    pub session: u32,
    /// The token data connections present.
    pub token: u32,
    /// QUIC: the server's certificate (DER).
    pub quic_cert: Option<Vec<u8>>,
    /// What the server's kernel says of its clock; None from a server before one-way delays.
    pub clock: Option<wirebench_core::vocab::clock_offset::ClockInfo>,
}

/// Opens a control connection to `server` and asks for a session with `request`; returns the
/// connection and what the server granted, or the server's refusal as the error.
pub async fn request_session(
    server: std::net::SocketAddr,
    request: &ControlMessage,
) -> Result<(TcpStream, Accepted)> {
    request_session_auth(server, request, None).await
}

/// Like [`request_session`]; with a pre-shared key, answers the server's challenge and checks
/// the server's proof (see [`auth`]), and refuses a server that never asks for the key.
pub async fn request_session_auth(
    server: std::net::SocketAddr,
    request: &ControlMessage,
    psk: Option<&wirebench_core::security::auth::Psk>,
) -> Result<(TcpStream, Accepted)> {
    let mut ctrl = crate::transport::net::connect_tcp(server)
        .await
        .with_context(|| format!("cannot connect to the server at {server}"))?;
    // Control messages are small and answered at once: Nagle would only delay them.
    let _ = ctrl.set_nodelay(true);
    // The request's exact bytes are part of what a pre-shared-key MAC covers.
    let mut frame = Vec::with_capacity(256);
    proto::encode_frame(request, &mut frame);
    // Preamble and request in one write: at least 37 bytes, so an iperf3 server takes them for
    // its cookie and answers at once (see `first_answer`).
    let mut hello = Preamble::control().encode().to_vec();
    hello.extend_from_slice(&frame);
    if let Err(e) = ctrl.write_all(&hello).await {
        // A peer that spoke first and closed (a banner, then goodbye), or closed at once, is
        // still worth naming.
        let head = read_head(&mut ctrl, Instant::now() + BANNER_WAIT).await;
        if let Some(kind) = head.kind.filter(|k| !k.is_wirebench()) {
            bail!("{}", kind.explain(&server.to_string()));
        }
        return Err(e).context("while sending the session request");
    }
    let head = first_answer(&mut ctrl, server).await?;
    let answer = recv_setup(&mut (&head[..]).chain(&mut ctrl))
        .await
        .context("the server did not accept the session")?;
    let answer = auth::client_handshake(&mut ctrl, answer, &frame[4..], psk).await?;
    match answer {
        ControlMessage::Accepted {
            session,
            token,
            quic_cert,
            clock,
        } => Ok((
            ctrl,
            Accepted {
                session,
                token,
                quic_cert,
                clock,
            },
        )),
        ControlMessage::Rejected { reason } => bail!("the server refused the session: {reason}"),
        ControlMessage::Error { reason } => bail!("the server reported an error: {reason}"),
        _ => bail!("the server answered the session request with something unexpected"),
    }
}

/// How long a peer may stay silent after our session request before a second connection asks
/// it what it is (a wirebench server answers within a round trip; an HTTP server waiting for the
/// rest of a request, never).
pub const PROBE_AFTER: Duration = Duration::from_millis(400);

/// How long the probe connection waits for its answer.
const PROBE_WAIT: Duration = Duration::from_millis(600);

/// What the probe connection sends: an HTTP request that HTTP servers answer and TLS servers
/// refuse with an alert, 37 bytes or more so that an iperf3 server takes it for a cookie and
/// answers, and a bad preamble a wirebench server answers with an error frame.
const PROBE_REQUEST: &[u8] = b"GET / HTTP/1.0\r\nUser-Agent: wirebench-probe\r\n\r\n";

/// How long we keep reading a foreign peer's first line once we know it is not a wirebench
/// server (for the message only).
const BANNER_WAIT: Duration = Duration::from_millis(200);

/// The first bytes a peer sent and what they say it is; `kind` is `None` when it sent nothing
/// that tells before the deadline.
struct Head {
    bytes: Vec<u8>,
    kind: Option<PeerKind>,
}

/// Reads the first answer to our session request far enough to know it is a wirebench control
/// frame, and returns the bytes read (at most [`WIREBENCH_HEAD_LEN`], to be read again before
/// the rest of the stream). Anything else is an error naming what answered, in one line: an SSH
/// or SMTP banner and an HTTP or TLS refusal arrive at once, an iperf3 server answers our first
/// 37 bytes with a state byte, and a peer silent for [`PROBE_AFTER`] is asked by a second
/// connection what it is.
async fn first_answer(ctrl: &mut TcpStream, server: std::net::SocketAddr) -> Result<Vec<u8>> {
    let name = server.to_string();
    let read = read_head(ctrl, Instant::now() + SETUP_TIMEOUT);
    let probe = async {
        tokio::time::sleep(PROBE_AFTER).await;
        probe(server).await
    };
    let head = tokio::select! {
        head = read => head,
        Some(kind) = probe => bail!("{}", kind.explain(&name)),
    };
    match head.kind {
        Some(PeerKind::Wirebench) => Ok(head.bytes),
        Some(kind) => bail!("{}", kind.explain(&name)),
        None => bail!(
            "{name} accepted the connection but answered nothing within {SETUP_TIMEOUT:?} of our \
             session request: not a wirebench server, or one too busy to answer"
        ),
    }
}

/// Asks `server` on a second connection what it is (see [`PROBE_REQUEST`]); `Some` only for a
/// peer that named itself as something other than a wirebench server.
async fn probe(server: std::net::SocketAddr) -> Option<PeerKind> {
    let deadline = Instant::now() + PROBE_WAIT;
    let mut stream = tokio::time::timeout_at(deadline, crate::transport::net::connect_tcp(server))
        .await
        .ok()?
        .ok()?;
    tokio::time::timeout_at(deadline, stream.write_all(PROBE_REQUEST))
        .await
        .ok()?
        .ok()?;
    read_head(&mut stream, deadline)
        .await
        .kind
        .filter(|k| !k.is_wirebench() && *k != PeerKind::Closed)
}

/// Reads a peer's first bytes until [`peer_kind::classify`] names them, the peer closes, or
/// `deadline` passes. Reads at most [`WIREBENCH_HEAD_LEN`] bytes while they may begin a
/// wirebench frame; once they cannot, reads on (briefly) to the end of the first line, for the
/// message.
async fn read_head(stream: &mut TcpStream, deadline: Instant) -> Head {
    let mut bytes = Vec::with_capacity(256);
    let mut buf = [0u8; 256];
    let kind = loop {
        let room = if bytes.len() < WIREBENCH_HEAD_LEN {
            WIREBENCH_HEAD_LEN - bytes.len()
        } else {
            buf.len()
        };
        match tokio::time::timeout_at(deadline, stream.read(&mut buf[..room])).await {
            Err(_) => {
                let kind = (!bytes.is_empty())
                    .then(|| peer_kind::classify(&bytes, true))
                    .flatten();
                return Head { bytes, kind };
            }
            // A reset is a close as far as naming the peer goes.
            Ok(Ok(0) | Err(_)) => break peer_kind::classify(&bytes, true),
            Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
        }
        if let Some(kind) = peer_kind::classify(&bytes, false) {
            break Some(kind);
        }
    };
    let Some(kind) = kind else {
        return Head { bytes, kind: None };
    };
    let quotes_a_line = matches!(
        kind,
        PeerKind::Ssh { .. }
            | PeerKind::Http { .. }
            | PeerKind::Greeting220 { .. }
            | PeerKind::Text { .. }
    );
    if !quotes_a_line || bytes.contains(&b'\n') {
        return Head {
            bytes,
            kind: Some(kind),
        };
    }
    // Not ours: read the rest of its first line, if it comes at once, to quote it.
    let until = deadline.min(Instant::now() + BANNER_WAIT);
    while bytes.len() < 256 && !bytes.contains(&b'\n') {
        match tokio::time::timeout_at(until, stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => bytes.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let kind = peer_kind::classify(&bytes, true).unwrap_or(kind);
    Head {
        bytes,
        kind: Some(kind),
    }
}

/// Waits for the server's report that ends a session, skipping the receipts a rate-search
/// trial's server may have sent before it saw the client's done message.
pub async fn read_report(ctrl: &mut TcpStream) -> Result<proto::ServerReport> {
    loop {
        // A report carries the server's interval series: larger than other messages, bounded.
        match recv_max(ctrl, proto::MAX_REPORT_FRAME)
            .await
            .context("while waiting for the server's report")?
        {
            Some(ControlMessage::Report(r)) => return Ok(*r),
            Some(ControlMessage::Receipt { .. }) => continue,
            Some(ControlMessage::Error { reason }) => {
                bail!("the server reported an error: {reason}")
            }
            Some(_) => bail!("the server sent something other than its report"),
            None => bail!("the server closed the control connection without a report"),
        }
    }
}
