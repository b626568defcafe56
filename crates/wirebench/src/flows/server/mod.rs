//! The wirebench server: one port number for TCP (control connections and TCP data) and UDP
//! (wirebench datagrams and QUIC), many sessions at once. Every session of every kind passes
//! one [`gate::Gate`] (admission, limits, accounting, its one line), and ends with one
//! [`SessionSummary`] on the channel given to [`Server::run`], aborted sessions included.
//! Each kind of session is a type (`kind::SessionKind`, its kinds in `kinds/`) that `session`
//! dispatches to; what the kinds share is in `kit/`, below them.

mod admission;
mod auth;
mod counts;
mod events;
pub mod gate;
mod kind;
mod kinds;
mod kit;
pub mod meter;
pub mod options;
mod quic_attach;
mod registry;
mod session;
mod shared;
mod stop;
mod udp_tx;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use wirebench_core::wire::proto::ConnKind;

use crate::engine::quic;
use crate::engine::quic::home::ConnectionHomes;
use crate::engine::quic::inline_server::InlineRouter;
use crate::engine::udp::lanes::Lanes;
use crate::transport::control;
use crate::transport::tls::ServerIdentity;
pub use counts::MetricsHandle;
pub use events::{ServerEvent, ServerNotice, SessionSummary};
pub use options::{Limits, ServerOptions};
use registry::Registry;
use shared::Shared;
use udp_tx::UdpTx;

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    endpoint: quinn::Endpoint,
    shared: Arc<Shared>,
    local: SocketAddr,
    /// The UDP receive lanes; dropped (their threads stopped) when the server is.
    _lanes: Option<Lanes>,
    /// Why the server runs without lanes although asked for some, said once it runs.
    lane_notice: Option<String>,
}

/// Starts the receive lanes `options` ask for beside the shared UDP socket and spreads the
/// registry's UDP sessions over them; on failure, says why (everything is then received on
/// the shared socket, as without lanes).
fn start_lanes(
    udp: &std::net::UdpSocket,
    options: &ServerOptions,
    registry: &Arc<Registry>,
) -> (Option<Lanes>, Option<String>) {
    let count = options.lanes();
    if count == 0 {
        return (None, None);
    }
    match Lanes::start(udp, count, registry.clone()) {
        Ok(lanes) => {
            registry.set_lanes(Arc::clone(lanes.set()));
            (Some(lanes), None)
        }
        Err(e) => (
            None,
            Some(format!(
                "UDP sessions are received on one socket: {count} receive lanes could not start ({e})"
            )),
        ),
    }
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
        let quic_homes =
            ConnectionHomes::start().context("while starting the QUIC connection threads")?;
        let attempts = if listen.port() == 0 { 20 } else { 1 };
        let mut last_err = None;
        for _ in 0..attempts {
            let tcp = crate::transport::net::tcp_listener(listen)?;
            let port = tcp
                .local_addr()
                .context("while reading the TCP port")?
                .port();
            let udp_addr = SocketAddr::new(listen.ip(), port);
            match crate::transport::net::udp_socket(listen.is_ipv6(), Some(udp_addr), None) {
                Ok(udp) => {
                    let (udp_recv, udp_send) =
                        crate::transport::net::buffer_sizes(&socket2::SockRef::from(&udp));
                    let udp_tx = udp
                        .try_clone()
                        .and_then(UdpTx::new)
                        .context("while preparing the UDP socket for sending")?;
                    let (lanes, lane_notice) = start_lanes(&udp, &options, &registry);
                    // Without it every QUIC connection is quinn's, as it always was.
                    let quic_cfg = quic::server_config(&identity)?;
                    let inline = InlineRouter::start(&udp, quic_cfg.clone(), registry.clone()).ok();
                    // The router opened the port to connected sockets and reads what they hand
                    // back: UDP round trips may have sockets of their own too.
                    if let (Some(inline), Ok(local)) = (&inline, udp.local_addr()) {
                        registry.serve_round_trips_apart(local, inline.strays());
                    }
                    let endpoint = quic::server_endpoint(
                        udp,
                        quic_cfg,
                        (registry.clone(), inline),
                        &quic_homes,
                    )?;
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
                            gate: gate::Gate::new(&options.limits),
                            options: options.clone(),
                            quic_homes: quic_homes.clone(),
                        }),
                        local,
                        _lanes: lanes,
                        lane_notice,
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

    /// The server's counters, readable while it runs (for `--metrics`).
    pub fn metrics(&self) -> MetricsHandle {
        MetricsHandle {
            metrics: Arc::clone(&self.shared.gate.metrics),
            admission: Arc::clone(self.shared.gate.admission()),
        }
    }

    /// The server's gate, for another listener whose sessions it must admit, limit, count
    /// and report (the iperf3 listener of `server --iperf3`).
    pub fn gate(&self) -> Arc<gate::Gate> {
        Arc::clone(&self.shared.gate)
    }

    /// Serves until the task is dropped; every session's summary and every notice goes to
    /// `events`.
    pub async fn run(self, events: mpsc::UnboundedSender<ServerEvent>) -> Result<()> {
        let (_keep, stop) = watch::channel(StopRequest::Serve);
        self.run_until(events, stop).await
    }

    /// Serves until `stop` asks to drain: from then on new sessions are refused, running ones
    /// may finish within the shutdown grace period (`Limits::shutdown_grace`), and the rest are
    /// aborted — at once when `stop` asks to abort. Returns when no session runs any more; by
    /// then every session's summary is in `events`.
    pub async fn run_until(
        self,
        events: mpsc::UnboundedSender<ServerEvent>,
        mut stop: watch::Receiver<StopRequest>,
    ) -> Result<()> {
        let shared = self.shared.clone();
        shared.gate.set_events(events.clone());
        let local = self.local;
        let draining = async move {
            if stop.wait_for(|s| *s != StopRequest::Serve).await.is_err() {
                // Nobody can ask any more: serve for ever.
                std::future::pending::<()>().await;
            }
            let admission = shared.gate.admission();
            admission.close();
            let running = admission.running();
            let grace = shared.options.limits.shutdown_grace;
            shared.gate.notice(
                local,
                format!("shutting down: {running} sessions running, {grace:?} to finish"),
            );
            tokio::select! {
                () = admission.idle() => {}
                () = tokio::time::sleep(grace) => {}
                _ = stop.wait_for(|s| *s == StopRequest::Abort) => {}
            }
            // Sessions still running abort now and report at once; the bound is for a
            // session stuck in a kernel call.
            shared.gate.abort_all();
            let _ = tokio::time::timeout(ABORT_WAIT, admission.idle()).await;
        };
        tokio::select! {
            () = draining => Ok(()),
            result = self.serve(events) => result,
        }
    }

    /// Accepts connections for ever.
    async fn serve(self, events: mpsc::UnboundedSender<ServerEvent>) -> Result<()> {
        self.shared.registry.set_notices(events.clone());
        if let Some(message) = &self.lane_notice {
            self.shared.gate.notice(self.local, message.clone());
        }
        let quic_shared = self.shared.clone();
        let endpoint = self.endpoint.clone();
        let quic_task = tokio::spawn(async move {
            while let Some(incoming) = endpoint.accept().await {
                let shared = quic_shared.clone();
                let peer = incoming.remote_address();
                // The handshake, and a perf session, run on the connection's home.
                match shared.quic_homes.accept(incoming) {
                    Ok((connecting, home)) => {
                        home.clone().spawn(async move {
                            if let Err(e) = quic_attach::attach(connecting, home, &shared).await {
                                shared
                                    .gate
                                    .notice(peer, format!("QUIC connection dropped: {e:#}"));
                            }
                        });
                    }
                    Err(e) => shared.gate.notice(
                        peer,
                        format!("QUIC connection dropped: QUIC handshake failed: {e}"),
                    ),
                }
            }
        });
        // Abort the QUIC accept loop when this future ends or is dropped.
        let _guard = AbortOnDrop(quic_task);
        let mut failed_accepts = 0u64;
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(x) => x,
                // Running out of descriptors or a reset during accept ends one connection, not
                // the server. Said the 1st, 2nd, 4th, 8th… time: out of descriptors, accept
                // fails every 10 ms until one is freed.
                Err(e) => {
                    failed_accepts += 1;
                    if failed_accepts.is_power_of_two() {
                        let _ = events.send(ServerEvent::Notice(ServerNotice {
                            peer: self.local,
                            message: format!(
                                "accept failed: {e} ({failed_accepts} so far; out of file descriptors? raise `ulimit -n`)"
                            ),
                        }));
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let shared = self.shared.clone();
            tokio::spawn(async move {
                handle_tcp(stream, peer, shared).await;
            });
        }
    }
}

/// What the owner of a running server asks of it (see [`Server::run_until`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    /// Keep serving.
    Serve,
    /// Refuse new sessions, let running ones finish within the grace period.
    Drain,
    /// Abort the running sessions now (each still reports, marked aborted).
    Abort,
}

/// How long aborted sessions may take to report before the server stops anyway.
const ABORT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads the preamble of a new TCP connection and routes it: control connections become
/// sessions, data connections are handed to the session waiting for them.
async fn handle_tcp(mut stream: tokio::net::TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let notice = |message: String| shared.gate.notice(peer, message);
    // One deadline for the preamble and the session request: a client that connects and then
    // trickles (or sends nothing) holds a connection for at most this long.
    let hello_timeout = shared.options.limits.hello_timeout;
    let hello_deadline = tokio::time::Instant::now() + hello_timeout;
    let preamble =
        match tokio::time::timeout_at(hello_deadline, control::read_preamble(&mut stream))
            .await
            .unwrap_or_else(|_| {
                Err(anyhow::anyhow!(
                    "no preamble within {hello_timeout:?} (the server's --hello-timeout)"
                ))
            }) {
            Ok(p) => p,
            Err(e) => {
                // Tell the peer why, in our framing, then close; a garbage client costs one line.
                let reason = format!("{e:#}");
                let _ = control::send(
                    &mut stream,
                    &wirebench_core::wire::proto::ControlMessage::Error {
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
            session::serve(&mut stream, peer, &shared, hello_deadline).await;
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
