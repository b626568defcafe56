//! The server's side of QUIC connections driven inline (`engine::quic::inline`): a client that
//! drives its connection inline (stop-and-wait, one-probe ping) marks its first packet, and the server then
//! serves that connection from a thread and a UDP socket of its own, as the client does, while
//! quinn's endpoint keeps every other connection on the shared socket.
//!
//! How a connection leaves the shared socket: its first packet (a QUIC Initial whose
//! destination connection ID starts with [`INLINE_MARK`]) reaches quinn's endpoint driver,
//! whose demultiplexer (`engine::demux`) gives it to [`InlineRouter::take`]. That binds a new
//! socket to the server's port (`SO_REUSEPORT`, as the receive lanes are) and connects it to
//! the client: the kernel delivers a connected socket's datagrams to it ahead of the port's
//! group, so the rest of the connection never passes quinn's thread. What reached the shared
//! socket before the connect is handed over ([`Forwarded`]) until the handshake is done. The
//! connection's one thread then completes the handshake, reads the stream's preamble, tells the
//! session waiting for it ([`InlineAttach`]) and plays the role that session gives it
//! ([`Accepted::serve`]): one thread per connection, as on the client.
//!
//! Why: through quinn, each round trip passed the endpoint driver, the connection driver and
//! the session's task: 7.8 µs of server CPU per 1 KiB round trip on two CPUs, 5.4 inline, 2.9
//! for our TCP server. Ping and `rr` with one request outstanding mark their connection too.
//!
//! The socket is bound before it is connected, and in between it is an unconnected member of
//! the port's group: once the group holds any connected socket, Linux gives such a member
//! every datagram that reaches the port, whatever the steering program says (kernel 6.18; a
//! thread preempted there caught other UDP sessions' data and other connections' packets).
//! The connection's thread hands each datagram that did not come from its client back to the
//! shared socket ([`Strays`], `engine::demux`), which routes it as if it had arrived there.
//!
//! Anything that fails here (no free socket, the port not open to a group, too many
//! connections being accepted) leaves the packet to quinn's endpoint, which serves the
//! connection as before: the client cannot tell, apart from the speed. An older server
//! (no router) does the same.
//!
//! Not handled: a client whose address changes mid-connection (NAT rebinding). Its packets
//! then reach the shared socket, where quinn does not know the connection, so it ends (quinn
//! would have followed the new address). A round-trip session sends every second at least
//! (keep-alives), which keeps a NAT's mapping in place.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use quinn_proto::{EndpointConfig, ServerConfig, StreamId};
use socket2::SockRef;
use tokio::sync::oneshot;
use wirebench_core::wire::proto::{ConnKind, DataPathInfo, Preamble, PREAMBLE_LEN};

use super::inline::{is_marked_initial, Forwarded, InlineConnection, InlineStream};
use crate::engine::demux::{QuicDivert, Strays};
use crate::transport::control::SETUP_TIMEOUT;
use crate::transport::net;

/// The most connections in their handshake at once on threads of their own; more go to quinn.
const MAX_ACCEPTING: usize = 64;

/// Where an accepted connection goes: the session its preamble names.
pub trait InlineAttach: Send + Sync {
    /// Hands the connection, whose first stream opened with the data preamble `preamble`, to
    /// its session; an error says why none took it (the connection is then closed).
    fn attach(&self, preamble: &Preamble, peer: SocketAddr, accepted: Accepted) -> Result<()>;

    /// A connection from `peer` ended before its session had it, or datagrams from `peer`
    /// were dropped on the way: `why`, for the server's notices (as quinn's connections that
    /// fail their handshake or attach).
    fn dropped(&self, peer: SocketAddr, why: String);
}

/// Takes marked connections off the server's shared socket (see the module).
pub struct InlineRouter {
    /// The shared socket's address.
    local: SocketAddr,
    /// The endpoint's settings and the server's, for every connection.
    configs: (Arc<EndpointConfig>, Arc<ServerConfig>),
    attach: Arc<dyn InlineAttach>,
    /// The connections in their handshake, by client address: what reaches the shared socket
    /// from there goes to them.
    accepting: Mutex<HashMap<SocketAddr, Arc<Forwarded>>>,
    /// How many there are, read without the lock on every QUIC datagram.
    count: AtomicUsize,
    /// Where a connection's socket hands back what reached it from another address (it can,
    /// between its bind and its connect): read by the shared socket (`engine::demux`).
    strays: Arc<Strays>,
}

impl std::fmt::Debug for InlineRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineRouter")
            .field("local", &self.local)
            .field("accepting", &self.count.load(Ordering::Relaxed))
            .finish()
    }
}

impl InlineRouter {
    /// A router for the server on `shared` (whose port it opens to a group), serving with
    /// `server` (`engine::quic::server_config`, quinn's endpoint's too), handing connections
    /// to `attach`; the divert to give the server's endpoint (`engine::quic::server_endpoint`).
    pub fn start(
        shared: &UdpSocket,
        server: ServerConfig,
        attach: Arc<dyn InlineAttach>,
    ) -> Result<Box<dyn QuicDivert>> {
        let local = shared
            .local_addr()
            .context("while reading the UDP address")?;
        // The lanes (`engine::udp::lanes`) may have opened it already.
        SockRef::from(shared)
            .set_reuse_port(true)
            .context("while opening the UDP port to connected sockets")?;
        let mut endpoint = EndpointConfig::default();
        endpoint.grease_quic_bit(false);
        endpoint
            .max_udp_payload_size(super::MAX_UDP_PAYLOAD)
            .context("while sizing the QUIC receive buffers")?;
        Ok(Box::new(Arc::new(InlineRouter {
            local,
            configs: (Arc::new(endpoint), Arc::new(server)),
            attach,
            accepting: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            strays: Arc::default(),
        })))
    }
}

impl QuicDivert for Arc<InlineRouter> {
    /// Takes the QUIC datagrams of connections served inline: their first, and what follows
    /// it to the shared socket while they are accepted.
    fn take(&self, data: &[u8], stride: usize, peer: SocketAddr, dst_ip: Option<IpAddr>) -> bool {
        if self.count.load(Ordering::Relaxed) > 0 {
            if let Some(forwarded) = self
                .accepting
                .lock()
                .ok()
                .and_then(|a| a.get(&peer).cloned())
            {
                forwarded.push(data, stride);
                return true;
            }
        }
        is_marked_initial(data) && self.serve_apart(data, stride, peer, dst_ip).is_ok()
    }

    fn strays(&self) -> Arc<Strays> {
        Arc::clone(&self.strays)
    }
}

impl InlineRouter {
    /// Starts serving the connection that `data` opens, on a socket and a thread of its own.
    fn serve_apart(
        self: &Arc<Self>,
        data: &[u8],
        stride: usize,
        peer: SocketAddr,
        dst_ip: Option<IpAddr>,
    ) -> Result<()> {
        let mut accepting = self
            .accepting
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        if accepting.len() >= MAX_ACCEPTING {
            bail!("too many QUIC connections being accepted");
        }
        let (socket, peer_here) = net::udp_connected_port_socket(self.local, dst_ip, peer)
            .context("while connecting a QUIC socket")?;
        let forwarded = Arc::new(Forwarded::default());
        forwarded.push(data, stride);
        accepting.insert(peer, Arc::clone(&forwarded));
        self.count.store(accepting.len(), Ordering::Relaxed);
        drop(accepting);
        let router = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("wb-quic-conn".into())
            .spawn(move || {
                let leave = Leave {
                    router: Arc::clone(&router),
                    peer,
                };
                let forwarded_ip = dst_ip.filter(|_| router.local.ip().is_unspecified());
                // Errors end the connection: a misbehaving client costs only its own thread.
                let served = accept(socket, (peer_here, forwarded_ip), forwarded, &router, leave);
                if let Err(e) = served {
                    router
                        .attach
                        .dropped(peer, format!("QUIC connection dropped: {e:#}"));
                }
                // Its socket hands nothing back any more: what could not be handed is said.
                if let Some((lost, from)) = router.strays.take_dropped() {
                    router.attach.dropped(
                        from,
                        format!(
                            "{lost} UDP datagrams dropped: a QUIC connection's socket caught them before it was connected, and the queue back to the shared socket was full"
                        ),
                    );
                }
            });
        if let Err(e) = spawned {
            self.leave(peer);
            return Err(e.into());
        }
        Ok(())
    }

    /// The connection from `peer` no longer takes what reaches the shared socket.
    fn leave(&self, peer: SocketAddr) {
        if let Ok(mut accepting) = self.accepting.lock() {
            accepting.remove(&peer);
            self.count.store(accepting.len(), Ordering::Relaxed);
        }
    }
}

/// Removes a connection from the router's table when its accepting ends, however it ends.
struct Leave {
    router: Arc<InlineRouter>,
    peer: SocketAddr,
}

impl Drop for Leave {
    fn drop(&mut self) {
        self.router.leave(self.peer);
    }
}

/// The connection's thread: the handshake, the preamble, then the work its session gives it
/// (none within [`SETUP_TIMEOUT`], or the session gone, closes the connection).
fn accept(
    socket: UdpSocket,
    addresses: (SocketAddr, Option<IpAddr>),
    forwarded: Arc<Forwarded>,
    router: &InlineRouter,
    leave: Leave,
) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let waker = socket.try_clone()?;
    let info = super::client_socket_info(&socket);
    let mut conn = InlineConnection::accept(
        socket,
        addresses,
        (forwarded, Arc::clone(&router.strays)),
        &router.configs,
        Arc::clone(&stop),
    )?;
    let mut raw = [0u8; PREAMBLE_LEN];
    let stream = conn.accept_bi(&mut raw, SETUP_TIMEOUT)?;
    // By now every datagram of the connection comes to its own socket: the router stops
    // handing any over, then the last it handed are taken.
    drop(leave);
    conn.stop_forwarding()?;
    let preamble = Preamble::decode(&raw)?;
    if preamble.kind != ConnKind::Data {
        bail!("the QUIC stream did not open with a data preamble");
    }
    let (jobs, job) = mpsc::sync_channel(1);
    let accepted = Accepted {
        info,
        stop: Arc::clone(&stop),
        waker,
        jobs,
    };
    router.attach.attach(&preamble, addresses.0, accepted)?;
    // No work: the session refused the connection or ended (and said so itself).
    let Ok((job, linger)) = job.recv_timeout(SETUP_TIMEOUT) else {
        return Ok(());
    };
    let conn = Mutex::new(conn);
    job(&conn, stream);
    let mut conn = conn.into_inner().unwrap_or_else(PoisonError::into_inner);
    conn.serve_until(&stop, Some(linger));
    Ok(())
}

/// A session's work on its connection's thread: it plays its role on the stream and sends its
/// outcome itself.
type Job = Box<dyn FnOnce(&Mutex<InlineConnection>, StreamId) + Send>;

/// A server's inline connection after its handshake, whose client opened its stream with a
/// data preamble: its thread waits for the session's work ([`Accepted::serve`]).
pub struct Accepted {
    info: DataPathInfo,
    stop: Arc<AtomicBool>,
    waker: UdpSocket,
    jobs: mpsc::SyncSender<(Job, Duration)>,
}

impl std::fmt::Debug for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepted")
            .field("info", &self.info)
            .finish()
    }
}

/// What a session's work on an [`Accepted`] connection ended with.
pub struct Served<T> {
    /// What the work returned.
    pub value: T,
    /// The connection's figures when the work ended.
    pub stats: quinn::ConnectionStats,
    /// What its socket ran with, and the CPU the work ended on.
    pub data_path: DataPathInfo,
}

/// Stops a session's work on its inline connection (the client is gone).
pub struct ServeStop {
    stop: Arc<AtomicBool>,
    waker: UdpSocket,
}

impl ServeStop {
    /// Ends every wait of the work at once with an error.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        net::wake_reader(&self.waker);
    }
}

impl Accepted {
    /// Runs `work` on the connection's stream (a reading and a writing handle), on the
    /// connection's own thread; its outcome comes as soon as it ends (an error: the thread is
    /// gone). The connection then stays up, at most `linger`, for its last acknowledgements,
    /// until the client closes it or it is stopped.
    pub fn serve<T, F>(self, linger: Duration, work: F) -> (oneshot::Receiver<Served<T>>, ServeStop)
    where
        T: Send + 'static,
        F: FnOnce(&mut InlineStream<'_>, &mut InlineStream<'_>) -> T + Send + 'static,
    {
        let Accepted {
            info,
            stop,
            waker,
            jobs,
        } = self;
        let (done, outcome) = oneshot::channel();
        // The work may make tokio timers (a session's meter pausing its writes).
        let runtime = tokio::runtime::Handle::try_current().ok();
        let job: Job = Box::new(move |conn, stream| {
            let _inside = runtime.as_ref().map(|r| r.enter());
            let value = {
                let (mut reader, mut writer) = (
                    InlineStream::new(conn, stream),
                    InlineStream::new(conn, stream),
                );
                work(&mut reader, &mut writer)
            };
            let stats = conn.lock().unwrap_or_else(PoisonError::into_inner).stats();
            let _ = done.send(Served {
                value,
                stats,
                data_path: DataPathInfo {
                    cpu: net::current_cpu(),
                    ..info
                },
            });
        });
        // A thread that already gave up drops the job, and with it `done`.
        let _ = jobs.send((job, linger));
        (outcome, ServeStop { stop, waker })
    }
}
