//! The table of live sessions: hands data connections (TCP, QUIC) to the session that waits for
//! them, and routes wirebench UDP datagrams to their session. It owns ids and tokens, and the
//! entries it routes to (a reversed UDP session's, a UDP request-response session's, in files
//! of their own); it imports no session kind and does not count anything itself.

mod reverse_udp;
mod rr_udp;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use rand::Rng;
use tokio::sync::{mpsc, oneshot};
use wirebench_core::machine::seq::DropMark;
use wirebench_core::security::amplification::{
    encode_echo, AddressValidation, Budget, Verdict, MAX_VALIDATED,
};
use wirebench_core::vocab::plan::Mechanism;
use wirebench_core::wire::datagram::{Header, Kind};
use wirebench_core::wire::proto::Preamble;

use super::events::{ServerEvent, ServerNotice};
use crate::engine::demux::{DatagramHandler, Strays};
use crate::engine::quic::home::Home;
use crate::engine::quic::inline_server::{Accepted, InlineAttach};
use crate::engine::udp::lanes::LaneSet;
use crate::engine::udp::own_socket::{LostStrays, OwnSocket, OwnSockets};
use crate::engine::udp::receiver::UdpReceiver;
use crate::transport::net::canonical_ip;
pub use reverse_udp::ReverseUdp;
pub use rr_udp::RrUdpSession;

/// A data connection handed to its session.
#[derive(Debug)]
pub enum DataStream {
    /// A TCP connection (its preamble already read).
    Tcp(tokio::net::TcpStream),
    /// A QUIC stream pair (its preamble already read) and the connection that carries it.
    Quic(QuicData),
    /// A QUIC connection its client drives inline, served inline too, on a socket and thread
    /// of its own (`engine::quic::inline_server`); its stream's preamble already read.
    QuicInline(Box<Accepted>),
}

/// A QUIC data connection handed to its session.
#[derive(Debug)]
pub struct QuicData {
    /// The connection, kept alive for the session.
    pub connection: quinn::Connection,
    /// Server → client half (acknowledgements).
    pub send: quinn::SendStream,
    /// Client → server half (data).
    pub recv: quinn::RecvStream,
    /// The thread the connection runs on: the session's data loop runs there too.
    pub home: Home,
}

/// Where a session's datagrams go.
#[derive(Debug, Clone)]
enum UdpTarget {
    Forward(Arc<UdpReceiver>),
    Reverse(Arc<ReverseUdp>),
    Rr(Arc<RrUdpSession>),
}

#[derive(Debug)]
enum SlotKind {
    /// A TCP or QUIC session waiting for its data connection (taken once).
    Stream(Mutex<Option<oneshot::Sender<DataStream>>>),
    /// A UDP session receiving datagrams.
    Udp(Arc<UdpReceiver>),
    /// A reversed UDP session: the server sends, hellos and acknowledgements arrive.
    UdpReverse(Arc<ReverseUdp>),
    /// A TCP or QUIC request-response session: takes any number of data connections.
    RrStream(tokio::sync::mpsc::UnboundedSender<DataStream>),
    /// A UDP request-response session answering request datagrams.
    RrUdp(Arc<RrUdpSession>),
}

#[derive(Debug)]
struct Slot {
    token: u32,
    peer_ip: IpAddr,
    kind: SlotKind,
    /// Which source addresses presented the token (UDP), and what was dropped before.
    validation: Arc<Mutex<AddressValidation>>,
    /// A UDP round-trip session's sockets of its own (stop-and-wait, `rr` with one request
    /// outstanding), one per client address that presented the token
    /// (`engine::udp::own_socket`); None for other sessions. Dropping them (the slot
    /// leaves the table) ends their threads.
    own_sockets: Option<Mutex<HashMap<SocketAddr, OwnSocket>>>,
}

/// How a session's data arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arrival {
    /// On data connections (TCP, QUIC).
    Connections,
    /// In UDP datagrams, on the receive lanes (or the shared socket).
    Datagrams,
    /// In UDP datagrams one round trip at a time (stop-and-wait, or one request outstanding):
    /// on a socket of the session's own per client address once it presented the token, where
    /// the server can open one, which answers sooner than a lane (`engine::udp::own_socket`).
    RoundTrips,
}

/// Why a data connection or datagram was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No such session (ended, or never existed).
    #[error("no session {0:#010x}")]
    UnknownSession(u32),
    /// The token does not match the session's.
    #[error("wrong token for session {0:#010x}")]
    BadToken(u32),
    /// It came from another address than the session's control connection.
    #[error("session {session:#010x} belongs to another client address, not {from}")]
    WrongPeer {
        /// The session.
        session: u32,
        /// Where the data came from.
        from: IpAddr,
    },
    /// The session already has its data connection, or is no longer waiting.
    #[error("session {0:#010x} is not waiting for a data connection")]
    NotWaiting(u32),
}

/// Live sessions, by id.
#[derive(Debug, Default)]
pub struct Registry {
    slots: RwLock<HashMap<u32, Slot>>,
    /// UDP datagrams of ours that matched no session (or the wrong peer), dropped.
    stray_datagrams: AtomicU64,
    /// Where dropped datagrams are reported, once the server runs.
    notices: OnceLock<mpsc::UnboundedSender<ServerEvent>>,
    /// The server's receive lanes, when it runs them: UDP session ids are picked so that
    /// live sessions spread evenly over them.
    lanes: OnceLock<Arc<LaneSet>>,
    /// Opens sockets of their own for UDP round-trip sessions, when the server can.
    own_sockets: OnceLock<Arc<OwnSockets>>,
}

/// Removes its session from the registry when dropped, whatever path the session took.
#[derive(Debug)]
pub struct Registration {
    registry: Arc<Registry>,
    /// The session id.
    pub id: u32,
    /// The token the client must present.
    pub token: u32,
    /// The receive lane the session's datagrams meet (UDP sessions of a server with lanes).
    lane: Option<(Arc<LaneSet>, u32)>,
}

impl Registration {
    /// The receive lane the session's datagrams meet, and how many lanes there are; None
    /// when they all arrive on the shared socket.
    pub fn lane(&self) -> Option<(u32, u32)> {
        self.lane.as_ref().map(|(set, lane)| (*lane, set.count()))
    }

    /// Whether the session's datagrams arrive on a socket of its own (from some client
    /// address; `engine::udp::own_socket`).
    pub fn on_own_socket(&self) -> bool {
        let Ok(slots) = self.registry.slots.read() else {
            return false;
        };
        slots
            .get(&self.id)
            .and_then(|slot| slot.own_sockets.as_ref())
            .is_some_and(|own| own.lock().is_ok_and(|own| !own.is_empty()))
    }

    /// Where the drop counter of the socket this session receives on stands now; None
    /// without lanes (the shared socket does not say).
    pub fn drop_mark(&self) -> Option<DropMark> {
        self.lane
            .as_ref()
            .and_then(|(set, lane)| set.mark_now(*lane))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some((set, lane)) = &self.lane {
            set.leave(*lane);
        }
        let removed = match self.registry.slots.write() {
            Ok(mut slots) => slots.remove(&self.id),
            Err(_) => None,
        };
        // What address validation dropped for this session, one notice at its end.
        if let Some(slot) = removed {
            let dropped = slot
                .validation
                .lock()
                .map(|v| v.dropped())
                .unwrap_or_default();
            if dropped.total() > 0 {
                self.registry.notice(
                    SocketAddr::new(slot.peer_ip, 0),
                    format!(
                        "session {:#010x}: dropped {} UDP datagrams, never answered, from addresses that had not presented the session's token ({} hellos with a wrong token, {} other datagrams, {} hellos beyond {MAX_VALIDATED} addresses)",
                        self.id,
                        dropped.total(),
                        dropped.bad_token,
                        dropped.unvalidated,
                        dropped.too_many
                    ),
                );
            }
        }
    }
}

impl Registry {
    /// Sends dropped-datagram notices to `events` from now on (the first call wins).
    pub fn set_notices(&self, events: mpsc::UnboundedSender<ServerEvent>) {
        let _ = self.notices.set(events);
    }

    /// Spreads UDP sessions over `lanes` from now on (the first call wins).
    pub fn set_lanes(&self, lanes: Arc<LaneSet>) {
        let _ = self.lanes.set(lanes);
    }

    /// Serves UDP round-trip sessions on sockets of their own from now on (the first call
    /// wins): beside the shared socket at `local`, whose port is open to a group and which
    /// reads what they hand back from `strays` (`engine::udp::own_socket`).
    pub fn serve_round_trips_apart(self: &Arc<Self>, local: SocketAddr, strays: Arc<Strays>) {
        let registry = Arc::downgrade(self);
        let lost: LostStrays = Arc::new(move |lost, from| {
            if let Some(registry) = registry.upgrade() {
                registry.notice(
                    from,
                    format!(
                        "{lost} UDP datagrams dropped: a UDP session's own socket caught them before it was connected, and the queue back to the shared socket was full"
                    ),
                );
            }
        });
        let _ = self
            .own_sockets
            .set(Arc::new(OwnSockets::new(local, strays, lost)));
    }

    fn notice(&self, peer: SocketAddr, message: String) {
        if let Some(events) = self.notices.get() {
            let _ = events.send(ServerEvent::Notice(ServerNotice { peer, message }));
        }
    }

    /// Registers a TCP/QUIC session; the receiver yields its data connection.
    pub fn register_stream(
        self: &Arc<Self>,
        peer_ip: IpAddr,
    ) -> (Registration, oneshot::Receiver<DataStream>) {
        let (tx, rx) = oneshot::channel();
        let (reg, ()) = self.insert(peer_ip, Arrival::Connections, |_| {
            (SlotKind::Stream(Mutex::new(Some(tx))), ())
        });
        (reg, rx)
    }

    /// Registers a UDP session expecting `total_bytes` in messages of `msg_size`.
    pub fn register_udp(
        self: &Arc<Self>,
        peer_ip: IpAddr,
        mechanism: Mechanism,
        total_bytes: u64,
        msg_size: u32,
    ) -> (Registration, Arc<UdpReceiver>) {
        // Stop-and-wait is timed by its round trips, as a ping.
        let arrival = if mechanism == Mechanism::StopAndWait {
            Arrival::RoundTrips
        } else {
            Arrival::Datagrams
        };
        let (reg, session) = self.insert(peer_ip, arrival, |id| {
            let session = Arc::new(UdpReceiver::new(id, mechanism, total_bytes, msg_size));
            (SlotKind::Udp(session.clone()), session)
        });
        // No datagram of the session can have arrived yet: where its lane's drop counter
        // stands now is where its first receive is judged from.
        if let Some(mark) = reg.drop_mark() {
            session.baseline(mark);
        }
        (reg, session)
    }

    /// Registers a reversed UDP session (the server sends); the receiver yields the
    /// acknowledgements that arrive for it.
    pub fn register_udp_reverse(
        self: &Arc<Self>,
        peer_ip: IpAddr,
    ) -> (Registration, Arc<ReverseUdp>, mpsc::UnboundedReceiver<u64>) {
        let (reg, (slot, acks)) = self.insert(peer_ip, Arrival::Datagrams, |id| {
            let (slot, acks) = ReverseUdp::new(id);
            let slot = Arc::new(slot);
            (SlotKind::UdpReverse(slot.clone()), (slot, acks))
        });
        (reg, slot, acks)
    }

    /// Registers a TCP/QUIC request-response session; the receiver yields every data connection
    /// that presents its id and token, for as long as the registration lives.
    pub fn register_rr_stream(
        self: &Arc<Self>,
        peer_ip: IpAddr,
    ) -> (
        Registration,
        tokio::sync::mpsc::UnboundedReceiver<DataStream>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (reg, ()) = self.insert(peer_ip, Arrival::Connections, |_| {
            (SlotKind::RrStream(tx), ())
        });
        (reg, rx)
    }

    /// Registers a UDP request-response session answering `rr.request`-byte requests with
    /// `rr.response`-byte responses (stamped when `rr.stamps`).
    pub fn register_rr_udp(
        self: &Arc<Self>,
        peer_ip: IpAddr,
        rr: &wirebench_core::wire::proto::RrParams,
        meter: Arc<crate::flows::server::meter::Meter>,
    ) -> (Registration, Arc<RrUdpSession>) {
        let (sizes, stamps) = ((rr.request, rr.response), rr.stamps);
        let arrival = if rr.concurrency <= 1 {
            Arrival::RoundTrips
        } else {
            Arrival::Datagrams
        };
        self.insert(peer_ip, arrival, |id| {
            let session = Arc::new(RrUdpSession::new(id, sizes, stamps, meter));
            (SlotKind::RrUdp(session.clone()), session)
        })
    }

    /// Hands a data connection that presented `preamble` to its session.
    pub fn attach_stream(
        &self,
        preamble: &Preamble,
        from: IpAddr,
        data: DataStream,
    ) -> Result<(), AttachError> {
        let slots = self
            .slots
            .read()
            .map_err(|_| AttachError::UnknownSession(preamble.session))?;
        let slot = slots
            .get(&preamble.session)
            .ok_or(AttachError::UnknownSession(preamble.session))?;
        check(slot, preamble.session, preamble.token, from)?;
        if let SlotKind::RrStream(sessions) = &slot.kind {
            return sessions
                .send(data)
                .map_err(|_| AttachError::NotWaiting(preamble.session));
        }
        let SlotKind::Stream(waiting) = &slot.kind else {
            return Err(AttachError::NotWaiting(preamble.session));
        };
        let sender = waiting
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .ok_or(AttachError::NotWaiting(preamble.session))?;
        sender
            .send(data)
            .map_err(|_| AttachError::NotWaiting(preamble.session))
    }

    /// Picks a fresh random id and token, and stores the slot `make` builds for that id. A UDP
    /// session (`arrival` not by connections) of a server with receive lanes gets an id whose
    /// lane carries the fewest live sessions.
    fn insert<T>(
        self: &Arc<Self>,
        peer_ip: IpAddr,
        arrival: Arrival,
        make: impl FnOnce(u32) -> (SlotKind, T),
    ) -> (Registration, T) {
        let mut rng = rand::thread_rng();
        let token: u32 = rng.gen();
        let mut slots = match self.slots.write() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        let udp = arrival != Arrival::Connections;
        let lanes = self.lanes.get().filter(|_| udp).cloned();
        let lane = lanes.as_ref().map(|set| set.least_loaded(rng.gen()));
        // Ids are random so they are not guessable from outside (on a lane, all but the few
        // bits that name it); 0 is never used.
        let id = loop {
            let random: u32 = rng.gen();
            let id = match (&lanes, lane) {
                (Some(set), Some(lane)) => set.id_on_lane(random, lane),
                _ => random,
            };
            if id != 0 && !slots.contains_key(&id) {
                break id;
            }
        };
        let lane = lanes.zip(lane).map(|(set, lane)| {
            set.enter(lane);
            (set, lane)
        });
        let (kind, extra) = make(id);
        slots.insert(
            id,
            Slot {
                token,
                peer_ip: canonical_ip(peer_ip),
                kind,
                validation: Arc::new(Mutex::new(AddressValidation::new(token))),
                own_sockets: (arrival == Arrival::RoundTrips).then(Mutex::default),
            },
        );
        let reg = Registration {
            registry: self.clone(),
            id,
            token,
            lane,
        };
        (reg, extra)
    }

    fn udp_target(
        &self,
        id: u32,
        from: IpAddr,
    ) -> Option<(UdpTarget, Arc<Mutex<AddressValidation>>)> {
        let slots = self.slots.read().ok()?;
        let slot = slots.get(&id)?;
        if slot.peer_ip != canonical_ip(from) {
            return None;
        }
        let target = match &slot.kind {
            SlotKind::Udp(s) => UdpTarget::Forward(s.clone()),
            SlotKind::UdpReverse(s) => UdpTarget::Reverse(s.clone()),
            SlotKind::RrUdp(s) => UdpTarget::Rr(s.clone()),
            SlotKind::Stream(_) | SlotKind::RrStream(_) => return None,
        };
        Some((target, slot.validation.clone()))
    }

    /// Counts datagrams that match no session; the first, second, fourth, eighth... make a
    /// notice, so a flood is visible without flooding the log.
    fn stray(&self, count: u64, from: SocketAddr) {
        let before = self.stray_datagrams.fetch_add(count, Ordering::Relaxed);
        let after = before + count;
        if count > 0 && (before == 0 || before.ilog2() != after.ilog2()) {
            self.notice(
                from,
                format!(
                    "{after} UDP datagrams so far matched no session (unknown session, or another IP than the session's client): dropped, never answered"
                ),
            );
        }
    }
}

fn check(slot: &Slot, session: u32, token: u32, from: IpAddr) -> Result<(), AttachError> {
    if slot.token != token {
        return Err(AttachError::BadToken(session));
    }
    if slot.peer_ip != canonical_ip(from) {
        return Err(AttachError::WrongPeer {
            session,
            from: canonical_ip(from),
        });
    }
    Ok(())
}

impl InlineAttach for Registry {
    fn attach(
        &self,
        preamble: &Preamble,
        peer: SocketAddr,
        accepted: Accepted,
    ) -> anyhow::Result<()> {
        self.attach_stream(
            preamble,
            peer.ip(),
            DataStream::QuicInline(Box::new(accepted)),
        )
        .map_err(anyhow::Error::from)
    }

    fn dropped(&self, peer: SocketAddr, why: String) {
        self.notice(peer, why);
    }
}

impl DatagramHandler for Registry {
    fn handle(
        &self,
        data: &[u8],
        stride: usize,
        (from, to): (SocketAddr, Option<IpAddr>),
        mark: Option<DropMark>,
        reply: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        // One receive holds datagrams of one flow: route the batch by its first header.
        let stride = stride.max(1);
        let session = Header::decode(data).ok().and_then(|h| {
            self.udp_target(h.session, from.ip())
                .map(|target| (h.session, target))
        });
        let Some((id, (target, validation))) = session else {
            self.stray(data.len().div_ceil(stride) as u64, from);
            return;
        };
        if deliver((&target, &validation), data, stride, (from, mark), reply) {
            self.open_own_socket(id, (from, to));
        }
    }
}

impl Registry {
    /// Moves a UDP round-trip session's datagrams from `from` (which just presented its token,
    /// asking at `to`) to a socket of the session's own, where the server can open one; where it
    /// cannot, they keep arriving where they did.
    fn open_own_socket(&self, id: u32, (from, to): (SocketAddr, Option<IpAddr>)) {
        let Some(sockets) = self.own_sockets.get() else {
            return;
        };
        let Ok(slots) = self.slots.read() else {
            return;
        };
        let Some(slot) = slots.get(&id) else {
            return;
        };
        let Some(own) = &slot.own_sockets else {
            return;
        };
        let target = match &slot.kind {
            SlotKind::RrUdp(session) => UdpTarget::Rr(Arc::clone(session)),
            SlotKind::Udp(session) => UdpTarget::Forward(Arc::clone(session)),
            _ => return,
        };
        let Ok(mut own) = own.lock() else {
            return;
        };
        if own.contains_key(&from) {
            return;
        }
        let handler = Arc::new(OwnSocketSession {
            target,
            validation: Arc::clone(&slot.validation),
        });
        if let Ok(socket) = sockets.open(from, to, handler) {
            own.insert(from, socket);
        }
    }
}

/// What a session's socket of its own hands over: the datagrams of the one client address it
/// is connected to, delivered as the registry delivers what the lanes receive, without
/// looking the session up.
#[derive(Debug)]
struct OwnSocketSession {
    target: UdpTarget,
    validation: Arc<Mutex<AddressValidation>>,
}

impl DatagramHandler for OwnSocketSession {
    fn handle(
        &self,
        data: &[u8],
        stride: usize,
        (from, _to): (SocketAddr, Option<IpAddr>),
        mark: Option<DropMark>,
        reply: &mut dyn FnMut(&[u8]) -> bool,
    ) {
        let _ = deliver(
            (&self.target, &self.validation),
            data,
            stride.max(1),
            (from, mark),
            reply,
        );
    }
}

/// Delivers the datagrams of one receive from `from` to their session, `target`, through its
/// address validation: only a hello with the token validates a source, and nothing from a
/// source that has not is answered (or counted by the session). Whether a hello validated its
/// source here.
fn deliver(
    (target, validation): (&UdpTarget, &Mutex<AddressValidation>),
    data: &[u8],
    stride: usize,
    (from, mark): (SocketAddr, Option<DropMark>),
    reply: &mut dyn FnMut(&[u8]) -> bool,
) -> bool {
    let Ok(mut validation) = validation.lock() else {
        return false;
    };
    // The common case: a batch of data from a source that presented the token.
    let hello = Kind::Hello.to_byte();
    if validation.is_validated(from) && data.chunks(stride).all(|d| d.first() != Some(&hello)) {
        drop(validation);
        route(target, data, stride, (from, mark), reply);
        return false;
    }
    // Otherwise datagram by datagram.
    let mut validated = false;
    for datagram in data.chunks(stride) {
        let Ok(header) = Header::decode(datagram) else {
            continue;
        };
        match validation.on_datagram(&header, datagram, from) {
            Verdict::Hello => {
                validated = true;
                match target {
                    // A reversed session's answer is its data, sent to the latest hello.
                    UdpTarget::Reverse(s) => s.on_datagrams(datagram, datagram.len(), from),
                    UdpTarget::Forward(_) | UdpTarget::Rr(_) => {
                        let echo = encode_echo(&header);
                        let budget = Budget {
                            received: datagram.len() as u64,
                            sent: 0,
                        };
                        if budget.allows(echo.len() as u64) {
                            let _ = reply(&echo);
                        }
                    }
                }
            }
            Verdict::Pass => route(target, datagram, datagram.len(), (from, mark), reply),
            Verdict::BadToken | Verdict::Unvalidated | Verdict::TooMany => {}
        }
    }
    validated
}

/// Hands datagrams from a validated source to their session, with where the receiving
/// socket's drop counter stood.
fn route(
    target: &UdpTarget,
    data: &[u8],
    stride: usize,
    (from, mark): (SocketAddr, Option<DropMark>),
    reply: &mut dyn FnMut(&[u8]) -> bool,
) {
    match target {
        UdpTarget::Forward(s) => s.on_datagrams(data, stride, mark, reply),
        UdpTarget::Reverse(s) => s.on_datagrams(data, stride, from),
        UdpTarget::Rr(s) => s.on_datagrams(data, stride, reply),
    }
}
