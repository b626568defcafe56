//! A UDP session's socket of its own: a socket on the server's port, connected to one client and
//! read by a thread of its own, for the sessions whose figure is a round trip (one request
//! outstanding: `ping`, `rr -c 1`). Every other UDP session is received on the lanes
//! (`engine::udp::lanes`) or the shared socket, as before.
//!
//! Why: a lane receives with `recvmsg` (it must read GRO sizes, drop marks and destination
//! addresses) on the socket that the port group's steering program picks, and the registry
//! looks up each datagram's session. The kernel finds a connected socket by its four-tuple
//! before it looks at the group at all, the thread reads it with plain receives and answers on
//! the socket's cached route. Measured with `lab/udp-receive-cost.c` (both ends on one CPU, 1
//! KiB): a lane's receive 1.02× a plain `recvfrom` echo server's round trip (sockperf's), a
//! connected socket of the group 0.98×.
//!
//! The socket is bound before it is connected, and in between it can catch anyone's datagrams
//! that reach the port (kernel 6.18: `engine::demux::Strays`). So the thread asks who sent
//! each datagram, always (a datagram that the kernel had routed to the socket just before the
//! connect can be queued just after it), and hands back what another address sent to the
//! shared socket, which routes it as if it had arrived there.
//!
//! The thread hands the client's datagrams to the session's handler and sends its answers on
//! the connected socket. It ends when its [`OwnSocket`] is dropped (the session ended): that
//! shuts the socket down, which wakes the receive. At most [`MAX_OWN_SOCKETS`] run at once;
//! beyond them a session stays on the lanes.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::engine::demux::{DatagramHandler, Strays};
use crate::transport::net;

/// The most sessions served on sockets of their own at once (a thread each).
pub const MAX_OWN_SOCKETS: usize = 64;

/// The largest UDP payload: what one receive may bring.
const MAX_DATAGRAM: usize = 65_535;

/// Reports datagrams that a full [`Strays`] queue dropped: how many, and the last one's sender.
pub type LostStrays = Arc<dyn Fn(u64, SocketAddr) + Send + Sync>;

/// Opens sockets of their own for sessions of the server whose shared socket is at `local`.
pub struct OwnSockets {
    /// The shared socket's address.
    local: SocketAddr,
    /// Where a socket hands back what another address sent it (read by the shared socket).
    strays: Arc<Strays>,
    /// Told what the strays queue could not take.
    lost: LostStrays,
    /// How many sockets of their own are open.
    open: Arc<AtomicUsize>,
}

impl std::fmt::Debug for OwnSockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnSockets")
            .field("local", &self.local)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish()
    }
}

impl OwnSockets {
    /// Sockets beside the shared socket at `local` (whose port is open to a group), handing
    /// back others' datagrams to `strays` (the shared socket's) and telling `lost` what did not
    /// fit there.
    pub fn new(local: SocketAddr, strays: Arc<Strays>, lost: LostStrays) -> Self {
        OwnSockets {
            local,
            strays,
            lost,
            open: Arc::default(),
        }
    }

    /// How many sockets of their own are open now.
    pub fn open_now(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Serves what `peer` sends to `to` (the address it asked at; None: the shared socket's)
    /// on a socket connected to it and a thread of its own, handing it to `handler` as a lane
    /// does (`from` as the lanes name it, no drop mark) until the returned socket is dropped.
    /// An error (too many open, no socket, no thread) leaves the session where it was.
    pub fn open(
        &self,
        peer: SocketAddr,
        to: Option<IpAddr>,
        handler: Arc<dyn DatagramHandler>,
    ) -> io::Result<OwnSocket> {
        if self.local.ip().is_unspecified() && to.is_none() {
            // Bound to the wildcard, the socket would answer from the route's address, which
            // need not be the one the client asked at.
            return Err(io::Error::other(
                "the address the client asked at is unknown",
            ));
        }
        let slot = OpenSlot::take(&self.open)?;
        let socket = net::udp_port_socket_at(self.local, to).map_err(io_error)?;
        self.start(socket, slot, (peer, to), handler)
    }

    /// Connects `socket` (bound to the port, in the group) to `peer` and starts its thread.
    /// Should either step fail, what the socket caught since its bind goes back to the shared
    /// socket (the client's too: the lanes then serve the session).
    fn start(
        &self,
        socket: UdpSocket,
        slot: OpenSlot,
        (peer, to): (SocketAddr, Option<IpAddr>),
        handler: Arc<dyn DatagramHandler>,
    ) -> io::Result<OwnSocket> {
        // Where a handed-back datagram arrived, as the shared socket would have said.
        let stray_to = to.filter(|_| self.local.ip().is_unspecified());
        let peer_here = match net::connect_blocking(&socket, peer) {
            Ok(here) => here,
            Err(e) => {
                self.hand_back(&socket, stray_to);
                return Err(io_error(e));
            }
        };
        let waker = match socket.try_clone() {
            Ok(waker) => waker,
            Err(e) => {
                self.hand_back(&socket, stray_to);
                return Err(e);
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let serving = Serving {
            socket,
            client: (peer, peer_here, to),
            strays: (Arc::clone(&self.strays), stray_to, Arc::clone(&self.lost)),
            handler,
            stop: Arc::clone(&stop),
        };
        let spawned = std::thread::Builder::new()
            .name("udp-own".into())
            .spawn(move || {
                let _slot = slot;
                serving.run();
            });
        match spawned {
            Ok(thread) => Ok(OwnSocket {
                stop,
                waker,
                thread: Some(thread),
            }),
            // The clone reads the same socket, which outlives the refused thread's copy.
            Err(e) => {
                self.hand_back(&waker, stray_to);
                Err(e)
            }
        }
    }

    /// Gives everything queued on `socket` to the shared socket's queue, and says what did
    /// not fit.
    fn hand_back(&self, socket: &UdpSocket, stray_to: Option<IpAddr>) {
        if socket.set_nonblocking(true).is_err() {
            return;
        }
        let mut buf = vec![0u8; MAX_DATAGRAM];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            self.strays.push(&buf[..n], from, stray_to);
        }
        if let Some((dropped, from)) = self.strays.take_dropped() {
            (self.lost)(dropped, from);
        }
    }
}

fn io_error(e: anyhow::Error) -> io::Error {
    io::Error::other(format!("{e:#}"))
}

/// One of the [`MAX_OWN_SOCKETS`], held by a socket's thread and given back when it ends.
struct OpenSlot(Arc<AtomicUsize>);

impl OpenSlot {
    fn take(open: &Arc<AtomicUsize>) -> io::Result<OpenSlot> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_OWN_SOCKETS).then_some(n + 1)
        })
        .map_err(|_| io::Error::other("too many UDP sessions on sockets of their own"))?;
        Ok(OpenSlot(Arc::clone(open)))
    }
}

impl Drop for OpenSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A session's socket of its own; dropping it ends its thread.
#[derive(Debug)]
pub struct OwnSocket {
    stop: Arc<AtomicBool>,
    /// A clone of the socket, shut down to wake the thread.
    waker: UdpSocket,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OwnSocket {
    /// Ends the thread and waits for it (the registry does not wait: its lock may be held).
    pub fn close(mut self) {
        self.stop_thread();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    fn stop_thread(&self) {
        self.stop.store(true, Ordering::Release);
        net::wake_reader(&self.waker);
    }
}

impl Drop for OwnSocket {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// What a socket's thread works with.
struct Serving {
    socket: UdpSocket,
    /// The client as the lanes name it, as this socket names it, and the address it asked at.
    client: (SocketAddr, SocketAddr, Option<IpAddr>),
    /// The shared socket's queue, the address to give what goes there, and who hears of
    /// what did not fit.
    strays: (Arc<Strays>, Option<IpAddr>, LostStrays),
    handler: Arc<dyn DatagramHandler>,
    stop: Arc<AtomicBool>,
}

impl Serving {
    /// Receives until stopped: the client's datagrams to the handler, anyone else's back to the
    /// shared socket.
    fn run(self) {
        let Serving {
            socket,
            client: (peer, peer_here, to),
            strays: (strays, stray_to, lost),
            handler,
            stop,
        } = self;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut failures = 0u32;
        let mut reply = |bytes: &[u8]| socket.send(bytes).is_ok();
        while !stop.load(Ordering::Acquire) {
            match socket.recv_from(&mut buf) {
                Ok((n, from)) => {
                    failures = 0;
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let data = &buf[..n];
                    if from != peer_here {
                        strays.push(data, from, stray_to);
                        continue;
                    }
                    // As on a lane: nothing a datagram holds may end the thread.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        handler.handle(data, n.max(1), (peer, to), None, &mut reply)
                    }));
                }
                // An ICMP error about an earlier answer (the client's port closed), or a
                // signal: read on. The session's end stops the thread.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => super::back_off(&mut failures),
            }
        }
        if let Some((dropped, from)) = strays.take_dropped() {
            lost(dropped, from);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use wirebench_core::machine::seq::DropMark;

    use super::*;

    /// A datagram as the session saw it: its bytes, who sent it, where to.
    type Seen = (Vec<u8>, SocketAddr, Option<IpAddr>);

    /// Records what reached the session and answers each datagram with `ok`.
    #[derive(Debug, Default)]
    struct Echo(Mutex<Vec<Seen>>);

    impl DatagramHandler for Echo {
        fn handle(
            &self,
            data: &[u8],
            _stride: usize,
            (from, to): (SocketAddr, Option<IpAddr>),
            mark: Option<DropMark>,
            reply: &mut dyn FnMut(&[u8]) -> bool,
        ) {
            assert!(mark.is_none(), "a socket of its own has no drop marks");
            self.0.lock().unwrap().push((data.to_vec(), from, to));
            assert!(reply(b"ok"));
        }
    }

    fn loopback(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// A shared socket on the wildcard address of a free port, open to a group, as the server's
    /// is once its inline router runs.
    fn shared() -> UdpSocket {
        let socket =
            net::udp_port_group_socket(SocketAddr::from(([0, 0, 0, 0], 0))).expect("a socket");
        socket.set_nonblocking(false).unwrap();
        socket
    }

    fn client(to: SocketAddr) -> UdpSocket {
        let c = UdpSocket::bind(loopback(0)).unwrap();
        c.connect(to).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c
    }

    /// The client's datagrams reach the session through its own socket, which answers from the
    /// address the client asked at; another client's datagrams to the same port still reach the
    /// shared socket; the thread ends when its socket is closed, and its slot is free again.
    #[test]
    fn a_session_is_served_on_its_own_socket_and_others_are_not() {
        let shared = shared();
        let port = shared.local_addr().unwrap().port();
        let lost: LostStrays = Arc::new(|_, _| panic!("nothing is lost here"));
        let own = OwnSockets::new(shared.local_addr().unwrap(), Arc::default(), lost);
        let session = Arc::new(Echo::default());
        let c = client(loopback(port));
        let c_addr = c.local_addr().unwrap();
        let socket = own
            .open(c_addr, Some(loopback(port).ip()), session.clone())
            .expect("a socket of its own");
        assert_eq!(own.open_now(), 1);
        let mut buf = [0u8; 16];
        for round in 0..3u8 {
            c.send(&[round; 8]).unwrap();
            let n = c
                .recv(&mut buf)
                .expect("an answer from the session's socket");
            assert_eq!(&buf[..n], b"ok");
        }
        let other = client(loopback(port));
        other.send(b"to the shared socket").unwrap();
        let mut at_shared = [0u8; 64];
        let (n, from) = shared
            .recv_from(&mut at_shared)
            .expect("the shared socket's");
        assert_eq!(
            (&at_shared[..n], from),
            (&b"to the shared socket"[..], other.local_addr().unwrap())
        );
        socket.close();
        assert_eq!(own.open_now(), 0);
        let seen = session.0.lock().unwrap().clone();
        assert_eq!(
            seen,
            (0..3u8)
                .map(|r| (vec![r; 8], c_addr, Some(loopback(port).ip())))
                .collect::<Vec<_>>()
        );
    }

    /// A socket bound to the port at the address asked at, not yet connected, which has caught
    /// a datagram from `other` and then one from the client `c`. (Bound to that address, it
    /// is preferred by the kernel to the wildcard group: it catches both for sure.)
    struct Window {
        /// Held so that the port stays bound.
        _shared: UdpSocket,
        own: OwnSockets,
        strays: Arc<Strays>,
        c: UdpSocket,
        other: UdpSocket,
        to: Option<IpAddr>,
        slot: OpenSlot,
        bound: UdpSocket,
    }

    fn caught_in_the_window() -> Window {
        let shared = shared();
        let port = shared.local_addr().unwrap().port();
        let strays: Arc<Strays> = Arc::default();
        let lost: LostStrays = Arc::new(|_, _| panic!("nothing is lost here"));
        let own = OwnSockets::new(shared.local_addr().unwrap(), Arc::clone(&strays), lost);
        let (c, other) = (client(loopback(port)), client(loopback(port)));
        let to = Some(loopback(port).ip());
        let slot = OpenSlot::take(&own.open).unwrap();
        let bound = net::udp_port_socket_at(own.local, to).unwrap();
        other.send(b"someone else's").unwrap();
        c.send(b"the client's").unwrap();
        Window {
            _shared: shared,
            own,
            strays,
            c,
            other,
            to,
            slot,
            bound,
        }
    }

    /// A socket that cannot connect to its client (here: an IPv6 client for an IPv4 socket)
    /// gives back what it caught since its bind, the client's datagram too, and frees its slot.
    #[test]
    fn a_socket_that_cannot_start_gives_back_what_it_caught() {
        let w = caught_in_the_window();
        let unreachable = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 9));
        let session = Arc::new(Echo::default());
        let refused = w
            .own
            .start(w.bound, w.slot, (unreachable, w.to), session.clone());
        assert!(refused.is_err(), "an IPv4 socket connected to an IPv6 peer");
        assert_eq!(w.own.open_now(), 0);
        assert_eq!(
            w.strays.queued(),
            vec![
                (b"someone else's".to_vec(), w.other.local_addr().unwrap()),
                (b"the client's".to_vec(), w.c.local_addr().unwrap()),
            ]
        );
        assert!(session.0.lock().unwrap().is_empty());
    }

    /// What another address sent to the port between the socket's bind and its connect is
    /// handed back to the shared socket, the client's is served.
    #[test]
    fn what_others_sent_before_the_connect_goes_back() {
        let w = caught_in_the_window();
        let session = Arc::new(Echo::default());
        let c_addr = w.c.local_addr().unwrap();
        let socket = w
            .own
            .start(w.bound, w.slot, (c_addr, w.to), session.clone())
            .unwrap();
        let mut buf = [0u8; 16];
        let n = w.c.recv(&mut buf).expect("the session's answer");
        assert_eq!(&buf[..n], b"ok");
        // The other datagram was queued first: by the answer it was handed back.
        assert_eq!(
            w.strays.queued(),
            vec![(b"someone else's".to_vec(), w.other.local_addr().unwrap())]
        );
        socket.close();
        assert_eq!(
            session.0.lock().unwrap().clone(),
            vec![(b"the client's".to_vec(), c_addr, w.to)]
        );
    }
}
