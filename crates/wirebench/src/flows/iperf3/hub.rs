//! The UDP side of the iperf3 listener: one task owns the listener's UDP socket, answers
//! iperf3's connect messages, and counts each UDP stream's datagrams by sender address (into
//! the test's accounting and its gate meter), without locks or allocation per datagram. Tests
//! talk to it by [`HubCmd`]s.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};
use wirebench_core::wire::iperf3::{self as wire, UdpHeader, UdpReceiver};

use crate::flows::server::meter::Meter;

/// Requests to the UDP hub.
pub(super) enum HubCmd {
    /// A test waits for `count` UDP streams from `ip`; each new stream's address goes to `streams`.
    Expect {
        test: u64,
        ip: IpAddr,
        count: u32,
        counters_64bit: bool,
        streams: mpsc::UnboundedSender<SocketAddr>,
        /// The test's meter: every datagram of its streams is counted there as it arrives.
        meter: Arc<Meter>,
    },
    /// The test's omitted seconds are over: mark each of its streams' counts (`-O`).
    Mark { test: u64 },
    /// The test ended: hand back each stream's accounting, in stream order, and forget the
    /// streams.
    Finish {
        test: u64,
        reply: oneshot::Sender<Vec<UdpReceiver>>,
    },
    /// Forget everything about a test.
    Forget { test: u64 },
}

/// One UDP stream the hub knows.
struct HubStream {
    test: u64,
    index: usize,
    counters_64bit: bool,
    acct: UdpReceiver,
    meter: Arc<Meter>,
}

/// A test waiting for UDP streams.
struct Expecting {
    test: u64,
    ip: IpAddr,
    left: u32,
    next_index: usize,
    counters_64bit: bool,
    streams: mpsc::UnboundedSender<SocketAddr>,
    meter: Arc<Meter>,
}

/// Owns the iperf3 UDP socket's receive side: answers connect messages, and counts the
/// datagrams of every UDP stream by sender address, without locks or allocation per datagram.
pub(super) async fn hub(socket: Arc<UdpSocket>, mut cmds: mpsc::UnboundedReceiver<HubCmd>) {
    let epoch = Instant::now();
    let mut expecting: Vec<Expecting> = Vec::new();
    let mut streams: HashMap<SocketAddr, HubStream> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                None => return,
                Some(HubCmd::Expect { test, ip, count, counters_64bit, streams: tx, meter }) => {
                    expecting.push(Expecting { test, ip, left: count, next_index: 0, counters_64bit, streams: tx, meter });
                }
                Some(HubCmd::Mark { test }) => {
                    // Datagrams already queued arrived before the mark.
                    drain(&socket, &mut buf, &mut expecting, &mut streams, epoch).await;
                    for s in streams.values_mut().filter(|s| s.test == test) {
                        s.acct.mark_omitted();
                    }
                }
                Some(HubCmd::Finish { test, reply }) => {
                    // Datagrams already queued arrived before TEST_END was handled: count them.
                    drain(&socket, &mut buf, &mut expecting, &mut streams, epoch).await;
                    let mut mine: Vec<(usize, UdpReceiver)> = Vec::new();
                    streams.retain(|_, s| {
                        if s.test == test {
                            mine.push((s.index, std::mem::take(&mut s.acct)));
                            false
                        } else {
                            true
                        }
                    });
                    expecting.retain(|e| e.test != test);
                    mine.sort_by_key(|(index, _)| *index);
                    let _ = reply.send(mine.into_iter().map(|(_, acct)| acct).collect());
                }
                Some(HubCmd::Forget { test }) => {
                    streams.retain(|_, s| s.test != test);
                    expecting.retain(|e| e.test != test);
                }
            },
            r = socket.recv_from(&mut buf) => {
                // Errors here are ICMP reports about earlier sends; the next datagram may be fine.
                if let Ok((n, from)) = r {
                    on_datagram(&socket, &buf[..n], from, &mut expecting, &mut streams, epoch).await;
                }
            }
        }
    }
}

/// Counts every datagram already queued on the socket.
async fn drain(
    socket: &UdpSocket,
    buf: &mut [u8],
    expecting: &mut [Expecting],
    streams: &mut HashMap<SocketAddr, HubStream>,
    epoch: Instant,
) {
    while let Ok((n, from)) = socket.try_recv_from(buf) {
        on_datagram(socket, &buf[..n], from, expecting, streams, epoch).await;
    }
}

/// Handles one datagram in the hub.
async fn on_datagram(
    socket: &UdpSocket,
    data: &[u8],
    from: SocketAddr,
    expecting: &mut [Expecting],
    streams: &mut HashMap<SocketAddr, HubStream>,
    epoch: Instant,
) {
    let is_connect = data == wire::UDP_CONNECT_MSG || data == wire::LEGACY_UDP_CONNECT_MSG;
    if let Some(s) = streams.get_mut(&from) {
        if is_connect {
            // The client repeated its connect message: our reply was lost.
            let _ = socket.send_to(&wire::UDP_CONNECT_REPLY, from).await;
        } else if let Ok(h) = UdpHeader::decode(data, s.counters_64bit) {
            let now = Instant::now();
            s.acct
                .on_datagram(&h, data.len(), now.duration_since(epoch).as_secs_f64());
            s.meter.count_read(data.len() as u64);
        }
        return;
    }
    if !is_connect {
        return;
    }
    let ip = crate::transport::net::canonical_ip(from.ip());
    let Some(pos) = expecting.iter().position(|e| e.ip == ip && e.left > 0) else {
        return;
    };
    let e = &mut expecting[pos];
    if socket
        .send_to(&wire::UDP_CONNECT_REPLY, from)
        .await
        .is_err()
    {
        return;
    }
    streams.insert(
        from,
        HubStream {
            test: e.test,
            index: e.next_index,
            counters_64bit: e.counters_64bit,
            acct: UdpReceiver::default(),
            meter: e.meter.clone(),
        },
    );
    e.next_index += 1;
    e.left -= 1;
    let _ = e.streams.send(from);
}
