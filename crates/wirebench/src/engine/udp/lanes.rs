//! The server's UDP receive lanes: several sockets on the one shared port, each read by a thread
//! of its own, so that UDP sessions are received on as many cores as there are lanes instead of
//! all on the QUIC endpoint's one socket.
//!
//! The sockets form a reuseport group with the shared socket (index 0, quinn's). A classic BPF
//! program attached to the group steers each datagram by its first bytes: a QUIC packet (fixed
//! bit set) to the shared socket, a wirebench datagram to lane `1 + session % lanes` (its
//! session id is bytes 4..8 of our header), anything too short to say to the shared socket,
//! whose demultiplexer counts it as stray. A session's datagrams thus always meet one lane, and
//! the registry picks session ids so that live sessions spread evenly over the lanes.
//!
//! A lane thread waits in `recvmmsg` (`recvmsg` for one buffer) itself (no runtime hop between
//! a datagram and its handler: a stop-and-wait acknowledgement or a request's answer leaves
//! from the same thread, as sockperf's server does), reads each buffer's drop mark
//! (`SO_RXQ_OVFL`) and hands datagrams to the same [`DatagramHandler`] the shared socket's
//! demultiplexer feeds. It must not count anything itself.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use socket2::SockRef;
use wirebench_core::machine::seq::DropMark;

use super::batch_recv::{self as udp_recv, RecvBatch};
use super::nap;
use crate::engine::demux::DatagramHandler;

/// Buffers one lane receive takes at most (each up to 64 KiB, a GRO batch).
const LANE_SLOTS: usize = 8;

/// The most lanes a server runs.
pub const MAX_LANES: usize = 64;

/// The lanes' sockets and how many live sessions each carries: what the session registry
/// needs (which lane a session id meets, where its drop counter stands).
#[derive(Debug)]
pub struct LaneSet {
    sockets: Vec<Arc<UdpSocket>>,
    live: Vec<AtomicU32>,
}

impl LaneSet {
    /// How many lanes.
    pub fn count(&self) -> u32 {
        self.sockets.len() as u32
    }

    /// The lane the datagrams of `session` meet (the steering program's rule).
    pub fn lane_of(&self, session: u32) -> u32 {
        session % self.count().max(1)
    }

    /// A session id whose datagrams meet `lane`: `random` with its remainder by the lane count
    /// replaced by `lane`, so all but the few bits that name the lane stay random.
    pub fn id_on_lane(&self, random: u32, lane: u32) -> u32 {
        let n = self.count().max(1);
        (random - random % n).checked_add(lane).unwrap_or(lane)
    }

    /// The lane with the fewest live sessions (the first such from `start`, to spread ties).
    pub fn least_loaded(&self, start: u32) -> u32 {
        let n = self.count().max(1);
        (0..n)
            .map(|k| (start + k) % n)
            .min_by_key(|&lane| {
                self.live
                    .get(lane as usize)
                    .map_or(u32::MAX, |l| l.load(Ordering::Relaxed))
            })
            .unwrap_or(0)
    }

    /// A session now receives on `lane`.
    pub fn enter(&self, lane: u32) {
        if let Some(l) = self.live.get(lane as usize) {
            l.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A session of `lane` ended.
    pub fn leave(&self, lane: u32) {
        if let Some(l) = self.live.get(lane as usize) {
            let _ = l.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        }
    }

    /// Where `lane`'s drop counter stands now (None where the kernel does not say).
    pub fn mark_now(&self, lane: u32) -> Option<DropMark> {
        let socket = self.sockets.get(lane as usize)?;
        udp_recv::drops_now(&**socket).map(|dropped| DropMark {
            socket: socket_number(lane),
            dropped,
        })
    }
}

/// The number a lane's drop marks carry (0 stands for the shared socket, which has none).
fn socket_number(lane: u32) -> u32 {
    lane + 1
}

/// Running lanes; dropping them stops their threads.
#[derive(Debug)]
pub struct Lanes {
    set: Arc<LaneSet>,
    stop: Arc<AtomicBool>,
}

impl Lanes {
    /// Opens `shared`'s port to a group (`SO_REUSEPORT`), binds `count` lane sockets beside it,
    /// steers the group's datagrams as the module says, and starts a thread per lane handing
    /// them to `handler`. An error (no reuseport steering on this host) leaves the shared
    /// socket receiving everything, as before.
    ///
    /// `shared` must have been bound without `SO_REUSEPORT`: that bind then proved the port
    /// free, so no other socket (a server that went before, another process of this user) is
    /// in the group the lanes join.
    pub fn start(
        shared: &UdpSocket,
        count: usize,
        handler: Arc<dyn DatagramHandler>,
    ) -> io::Result<Lanes> {
        let local = shared.local_addr()?;
        let count = count.clamp(1, MAX_LANES);
        SockRef::from(shared).set_reuse_port(true)?;
        let grouped = (|| {
            let mut sockets = Vec::with_capacity(count);
            for _ in 0..count {
                sockets.push(Arc::new(lane_socket(local)?));
            }
            attach_steering(shared, count as u32)?;
            Ok(sockets)
        })();
        // On failure the lane sockets made so far are closed (they leave the group), and the
        // shared socket is closed to the group again.
        let sockets = grouped.inspect_err(|_: &io::Error| {
            let _ = SockRef::from(shared).set_reuse_port(false);
        })?;
        let set = Arc::new(LaneSet {
            live: (0..count).map(|_| AtomicU32::new(0)).collect(),
            sockets,
        });
        let stop = Arc::new(AtomicBool::new(false));
        // A socket bound to a wildcard address answers from the address it was asked at.
        let answer_from = local.ip().is_unspecified();
        for (lane, socket) in set.sockets.iter().enumerate() {
            let (socket, handler, told) = (Arc::clone(socket), Arc::clone(&handler), stop.clone());
            let number = socket_number(lane as u32);
            let spawned = std::thread::Builder::new()
                .name(format!("udp-lane-{lane}"))
                .spawn(move || serve(number, &socket, &*handler, &told, answer_from));
            if let Err(e) = spawned {
                // Lanes already running stop with the group's sockets.
                stop.store(true, Ordering::Relaxed);
                shut(&set);
                return Err(e);
            }
        }
        Ok(Lanes { set, stop })
    }

    /// The lanes' sockets and loads, for the session registry.
    pub fn set(&self) -> &Arc<LaneSet> {
        &self.set
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        shut(&self.set);
    }
}

/// Wakes every lane thread out of its receive (a shut-down socket returns at once).
fn shut(set: &LaneSet) {
    for socket in &set.sockets {
        crate::transport::net::wake_reader(socket);
    }
}

/// One lane socket: bound beside the shared one, blocking (its thread waits in the kernel),
/// with GRO and, for a wildcard address, the destination of each datagram (drop marks are
/// asked for by its thread, which must know whether it got them).
fn lane_socket(local: SocketAddr) -> io::Result<UdpSocket> {
    let socket = crate::transport::net::udp_port_group_socket(local)
        .map_err(|e| io::Error::other(format!("{e:#}")))?;
    socket.set_nonblocking(false)?;
    // No receive timeout: a stop wakes the lane by shutting its socket down (`shut`), and a
    // timeout would arm and cancel a kernel timer on every receive of a round trip.
    socket.set_read_timeout(None)?;
    udp_recv::enable_gro(&socket);
    if local.ip().is_unspecified() {
        udp_recv::enable_destination(&socket, local.is_ipv6())?;
    }
    Ok(socket)
}

/// A lane's loop: receive, hand each buffer to the handler with its drop mark, answer from
/// this socket; until told to stop.
fn serve(
    number: u32,
    socket: &UdpSocket,
    handler: &dyn DatagramHandler,
    stop: &AtomicBool,
    answer_from: bool,
) {
    // A buffer's mark is only worth comparing when the socket stamps marks (SO_RXQ_OVFL) and
    // its counter can be read for the session's baseline (SO_MEMINFO).
    let marks = udp_recv::enable_drop_marks(socket) && udp_recv::drops_now(socket).is_some();
    let mut batch = RecvBatch::new(LANE_SLOTS, marks);
    let mut width = ReceiveWidth::new();
    let mut failures = 0u32;
    nap::prepare_thread();
    while !stop.load(Ordering::Relaxed) {
        match batch.recv_at_most(socket, true, width.slots()) {
            Ok(buffers) => {
                width.received(buffers);
                failures = 0;
                let naps = nap::naps_after(&batch, buffers);
                for (data, r) in batch.received() {
                    let from_ip = r.to_ip.filter(|_| answer_from);
                    let mut reply =
                        |bytes: &[u8]| udp_recv::send_to(socket, bytes, r.from, from_ip).is_ok();
                    // Nothing a datagram holds may end the lane (and with it every session on
                    // it): a handler that panicked has dropped this buffer, and the lane reads on.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        handler.handle(
                            data,
                            r.stride,
                            (r.from, r.to_ip),
                            r.mark(number),
                            &mut reply,
                        )
                    }));
                }
                if naps {
                    nap::take();
                }
            }
            Err(_) => super::back_off(&mut failures),
        }
    }
}

/// How many buffers a lane's next receive asks for: all [`LANE_SLOTS`] while datagrams queue up
/// (a stream), one while they come one at a time (round trips: a request, its answer, the next
/// request). A receive of several buffers looks at the queue once more after the first, and
/// finds it empty in a round trip: one buffer at a time took a same-CPU UDP ping from 11.93 to
/// 11.64 µs at p50 (sockperf: 11.48). A lane asks for one after [`ReceiveWidth::SETTLE`]
/// receives in a row that brought one buffer each, and while it does, every
/// [`ReceiveWidth::PROBE`]th receive asks for all again: one that brings several goes back to
/// batches, so a stream that starts behind round trips waits at most that many receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReceiveWidth {
    /// Receives in a row that brought at most one buffer.
    singles: u32,
    /// Receives since the last full-width one.
    since_probe: u32,
}

impl ReceiveWidth {
    /// Receives of one buffer in a row before the lane asks for one at a time.
    const SETTLE: u32 = 64;
    /// One receive in this many asks for every slot while the lane asks for one.
    const PROBE: u32 = 16;

    fn new() -> Self {
        ReceiveWidth {
            singles: 0,
            since_probe: 0,
        }
    }

    /// Buffers the next receive asks for.
    fn slots(&self) -> usize {
        if self.singles < Self::SETTLE || self.since_probe + 1 >= Self::PROBE {
            LANE_SLOTS
        } else {
            1
        }
    }

    /// What the receive asked for by [`ReceiveWidth::slots`] brought: `buffers` of them.
    fn received(&mut self, buffers: usize) {
        let asked = self.slots();
        if buffers > 1 {
            self.singles = 0;
        } else {
            self.singles = self.singles.saturating_add(1);
        }
        self.since_probe = if asked == LANE_SLOTS {
            0
        } else {
            self.since_probe + 1
        };
    }
}

/// Attaches the steering program to the reuseport group of `shared` (index 0) and `lanes`
/// lane sockets (indices 1..=lanes).
#[cfg(target_os = "linux")]
fn attach_steering(shared: &UdpSocket, lanes: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let program = steering_program(lanes);
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: the kernel copies the program from `fprog` during the call; both live until then.
    let rc = unsafe {
        libc::setsockopt(
            shared.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Steering by program is Linux's.
#[cfg(not(target_os = "linux"))]
fn attach_steering(_shared: &UdpSocket, _lanes: u32) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// The steering program: returns the reuseport index for the UDP payload it is shown (a load
/// past its end makes a classic BPF program return 0, the shared socket).
#[cfg(target_os = "linux")]
fn steering_program(lanes: u32) -> [libc::sock_filter; 7] {
    use libc::{
        BPF_A, BPF_ABS, BPF_ADD, BPF_ALU, BPF_B, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_MOD,
        BPF_RET, BPF_W,
    };
    let op = |code: u32, jt: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf: 0,
        k,
    };
    [
        // A = the first byte.
        op(BPF_LD | BPF_B | BPF_ABS, 0, 0),
        // QUIC sets 0x40 (and a long header 0x80); ours never: QUIC goes to the last line.
        op(BPF_JMP | BPF_JSET | BPF_K, 4, 0xC0),
        // A = the session id (big endian, as BPF loads are).
        op(BPF_LD | BPF_W | BPF_ABS, 0, 4),
        op(BPF_ALU | BPF_MOD | BPF_K, 0, lanes.max(1)),
        op(BPF_ALU | BPF_ADD | BPF_K, 0, 1),
        op(BPF_RET | BPF_A, 0, 0),
        op(BPF_RET | BPF_K, 0, 0),
    ]
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use wirebench_core::wire::datagram::Header;

    use super::*;

    /// Records which lane (by its drop marks' socket number) saw which session.
    #[derive(Debug, Default)]
    struct Seen(Mutex<Vec<(u32, Option<u32>)>>);

    impl DatagramHandler for Seen {
        fn handle(
            &self,
            data: &[u8],
            _stride: usize,
            _addresses: (SocketAddr, Option<std::net::IpAddr>),
            mark: Option<DropMark>,
            reply: &mut dyn FnMut(&[u8]) -> bool,
        ) {
            let session = Header::decode(data).map_or(u32::MAX, |h| h.session);
            assert_ne!(session, PANICS, "a handler that fails on this datagram");
            self.0
                .lock()
                .unwrap()
                .push((session, mark.map(|m| m.socket)));
            assert!(reply(b"seen"));
        }
    }

    /// A session whose datagrams make the test handler panic.
    const PANICS: u32 = 13;

    /// Each session's datagrams meet lane `session % lanes`; QUIC-looking packets and short
    /// ones stay on the shared socket; the lane answers from the shared port; a datagram its
    /// handler panics on ends nothing (the lane reads on).
    #[test]
    fn datagrams_are_steered_by_session() {
        let shared =
            crate::transport::net::udp_socket(false, Some("127.0.0.1:0".parse().unwrap()), None)
                .unwrap();
        let seen = Arc::new(Seen::default());
        let lanes = Lanes::start(&shared, 3, seen.clone()).unwrap();
        assert_eq!(lanes.set().count(), 3);
        let port = shared.local_addr().unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut expected = Vec::new();
        // Lane 13 % 3 = 1, as session 7's: that lane must still answer after the panic.
        let mut poison = [0u8; 32];
        Header::data(PANICS, 0).write_to(&mut poison).unwrap();
        client.send_to(&poison, port).unwrap();
        for session in [7u32, 8, 9, 10, 3_000_000_001] {
            let mut datagram = [0u8; 32];
            Header::data(session, 0).write_to(&mut datagram).unwrap();
            client.send_to(&datagram, port).unwrap();
            let mut answer = [0u8; 8];
            let (n, from) = client.recv_from(&mut answer).unwrap();
            assert_eq!((&answer[..n], from), (&b"seen"[..], port));
            expected.push((session, Some(1 + session % 3)));
        }
        assert_eq!(*seen.0.lock().unwrap(), expected);
        // A QUIC-looking packet and a runt go to the shared socket, not to a lane.
        client.send_to(&[0x40u8; 32], port).unwrap();
        client.send_to(&[0x01u8; 3], port).unwrap();
        shared.set_nonblocking(false).unwrap();
        shared
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(shared.recv(&mut buf).unwrap(), 32);
        assert_eq!(shared.recv(&mut buf).unwrap(), 3);
        assert_eq!(seen.0.lock().unwrap().len(), expected.len());
        drop(lanes);
    }

    #[test]
    fn the_least_loaded_lane_takes_the_next_session() {
        let set = LaneSet {
            sockets: Vec::new(),
            live: (0..3).map(|_| AtomicU32::new(0)).collect(),
        };
        // With no sockets the count is 0; give it three by hand for the load logic.
        let set = LaneSet {
            sockets: (0..3)
                .map(|_| Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap()))
                .collect(),
            ..set
        };
        assert_eq!(set.least_loaded(1), 1);
        set.enter(1);
        set.enter(0);
        assert_eq!(set.least_loaded(0), 2);
        set.enter(2);
        set.leave(0);
        assert_eq!(set.least_loaded(2), 0);
        set.leave(0);
        assert_eq!(set.live[0].load(Ordering::Relaxed), 0, "never below zero");
        assert_eq!(set.lane_of(3_000_000_001), 3_000_000_001 % 3);
        for random in [0, 1, 2, 3_000_000_001, u32::MAX - 1, u32::MAX] {
            for lane in 0..3 {
                let id = set.id_on_lane(random, lane);
                assert_eq!(set.lane_of(id), lane, "{random} on lane {lane}: {id}");
            }
        }
    }

    #[test]
    fn a_lane_asks_for_one_buffer_in_round_trips_and_for_all_in_a_stream() {
        let mut width = ReceiveWidth::new();
        // Round trips: one buffer per receive; full batches until they have settled.
        for _ in 0..ReceiveWidth::SETTLE {
            assert_eq!(width.slots(), LANE_SLOTS);
            width.received(1);
        }
        // Then one at a time, but for a full-width probe every PROBE receives.
        let asked: Vec<usize> = (0..2 * ReceiveWidth::PROBE)
            .map(|_| {
                let n = width.slots();
                width.received(1);
                n
            })
            .collect();
        let full = asked.iter().filter(|&&n| n == LANE_SLOTS).count();
        assert_eq!(full, 2, "{asked:?}");
        assert_eq!(asked.iter().filter(|&&n| n == 1).count(), asked.len() - 2);
        // A stream starts: the next probe brings several, and the lane is back to batches.
        while width.slots() == 1 {
            width.received(1);
        }
        width.received(LANE_SLOTS);
        for _ in 0..ReceiveWidth::SETTLE {
            assert_eq!(width.slots(), LANE_SLOTS);
            width.received(3);
        }
        // A receive of nothing (a stop shut the socket down) counts as a receive of one.
        width.received(0);
        assert_eq!(width.slots(), LANE_SLOTS);
    }
}
