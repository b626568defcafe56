//! The wirebench server: one port number for TCP (control connections and TCP data) and UDP
//! (wirebench datagrams and QUIC), many sessions at once. Each session ends with one
//! [`SessionSummary`] on the channel given to [`Server::run`], aborted sessions included.

mod auth;
mod options;
mod registry;
mod reverse;
mod reverse_udp;
mod rr_session;
mod session;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use wirebench_core::proto::{ConnKind, ServerReport, SessionParams};

use crate::control;
use crate::engine::quic;
use crate::tls::ServerIdentity;
pub use options::ServerOptions;
use registry::Registry;

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

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    endpoint: quinn::Endpoint,
    shared: Arc<Shared>,
    local: SocketAddr,
}

/// State every connection handler shares.
#[derive(Debug)]
struct Shared {
    registry: Arc<Registry>,
    cert_der: Vec<u8>,
    /// Effective receive and send buffers of the shared UDP socket.
    udp_buffers: (u64, u64),
    /// A second handle on the shared UDP socket, for reversed UDP sessions' data.
    udp_tx: reverse_udp::UdpTx,
    /// Limits and authentication.
    options: ServerOptions,
}

impl Server {
    /// Binds TCP and UDP on the same port. With port 0 the OS picks a TCP port and UDP takes
    /// the same number (retrying a few times if that UDP port is taken).
    pub async fn bind(
        listen: SocketAddr,
        identity: ServerIdentity,
        options: ServerOptions,
    ) -> Result<Server> {
        let registry = Arc::new(Registry::default());
        let attempts = if listen.port() == 0 { 20 } else { 1 };
        let mut last_err = None;
        for _ in 0..attempts {
            let tcp = crate::net::tcp_listener(listen)?;
            let port = tcp
                .local_addr()
                .context("while reading the TCP port")?
                .port();
            let udp_addr = SocketAddr::new(listen.ip(), port);
            match crate::net::udp_socket(listen.is_ipv6(), Some(udp_addr), None) {
                Ok(udp) => {
                    let (udp_recv, udp_send) =
                        crate::net::buffer_sizes(&socket2::SockRef::from(&udp));
                    let udp_tx = udp
                        .try_clone()
                        .and_then(reverse_udp::UdpTx::new)
                        .context("while preparing the UDP socket for sending")?;
                    let endpoint = quic::server_endpoint(udp, &identity, registry.clone())?;
                    let listener =
                        TcpListener::from_std(tcp).context("while registering the TCP listener")?;
                    let local = listener
                        .local_addr()
                        .context("while reading the TCP address")?;
                    return Ok(Server {
                        listener,
                        endpoint,
                        shared: Arc::new(Shared {
                            registry,
                            cert_der: identity.leaf_der().to_vec(),
                            udp_buffers: (udp_recv as u64, udp_send as u64),
                            udp_tx,
                            options: options.clone(),
                        }),
                        local,
                    });
                }
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err
            .unwrap_or_else(|| anyhow::anyhow!("no port"))
            .context(format!("cannot use UDP port {} next to TCP", listen.port())))
    }

    /// The address (and the one port) the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until the task is dropped or the listener fails; every session's summary and
    /// every notice goes to `events`.
    pub async fn run(self, events: mpsc::UnboundedSender<ServerEvent>) -> Result<()> {
        self.shared.registry.set_notices(events.clone());
        let quic_events = events.clone();
        let quic_shared = self.shared.clone();
        let endpoint = self.endpoint.clone();
        let quic_task = tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let shared = quic_shared.clone();
                let events = quic_events.clone();
                tokio::spawn(async move {
                    let peer = incoming.remote_address();
                    if let Err(e) = session::attach_quic(
                        incoming,
                        &shared.registry,
                        shared.options.psk.is_some(),
                    )
                    .await
                    {
                        let _ = events.send(ServerEvent::Notice(ServerNotice {
                            peer,
                            message: format!("QUIC connection dropped: {e:#}"),
                        }));
                    }
                });
            }
        });
        // Abort the QUIC accept loop when this future ends or is dropped.
        let _guard = AbortOnDrop(quic_task);
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(x) => x,
                // Running out of descriptors or a reset during accept ends one connection, not the server.
                Err(e) => {
                    let _ = events.send(ServerEvent::Notice(ServerNotice {
                        peer: self.local,
                        message: format!("accept failed: {e}"),
                    }));
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let shared = self.shared.clone();
            let events = events.clone();
            tokio::spawn(async move {
                handle_tcp(stream, peer, shared, events).await;
            });
        }
    }
}

/// Reads the preamble of a new TCP connection and routes it: control connections become
/// sessions, data connections are handed to the session waiting for them.
async fn handle_tcp(
    mut stream: tokio::net::TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<ServerEvent>,
) {
    let notice = |message: String| {
        let _ = events.send(ServerEvent::Notice(ServerNotice { peer, message }));
    };
    let preamble = match control::read_preamble(&mut stream).await {
        Ok(p) => p,
        Err(e) => {
            // Tell the peer why, in our framing, then close; a garbage client costs one line.
            let reason = format!("{e:#}");
            let _ = control::send(
                &mut stream,
                &wirebench_core::proto::ControlMessage::Error {
                    reason: reason.clone(),
                },
            )
            .await;
            notice(format!("connection refused: {reason}"));
            control::close_gracefully(stream).await;
            return;
        }
    };
    match preamble.kind {
        ConnKind::Control => {
            let _ = stream.set_nodelay(true);
            session::serve(&mut stream, peer, &shared, &events).await;
            control::close_gracefully(stream).await;
        }
        ConnKind::Data => {
            if let Err(e) = shared.registry.attach_stream(
                &preamble,
                peer.ip(),
                registry::DataStream::Tcp(stream),
            ) {
                notice(format!("data connection refused: {e}"));
            }
        }
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
