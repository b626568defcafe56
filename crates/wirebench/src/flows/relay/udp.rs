//! UDP forwarding of the relay: owns the front socket's dispatch loop and one task per client
//! address (its own socket toward the server, one impairment machine per direction); must not
//! decide anything about a datagram itself — the core machine does. What the flows hold comes
//! out of the relay's byte budget; a datagram that finds no room (or a client beyond the flow
//! limit, or no socket to be had) is dropped and told as a trouble. Datagrams are dated by the
//! kernel's arrival stamps, so a stalled relay's link model keeps real time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use wirebench_core::machine::impair::{Impairer, Impairments};
use wirebench_core::security::amplification::is_hello_or_echo;

use super::clock::wait_until;
use super::registry::{FlowSlot, Registry, Trouble, MAX_UDP_FLOWS};
use crate::transport::arrival;

/// A UDP flow with no datagram either way for this long is closed (its upstream socket freed).
pub const UDP_FLOW_IDLE: Duration = Duration::from_secs(120);

/// Largest datagram relayed (the largest UDP payload over IPv6, with room).
const MAX_DATAGRAM: usize = 65_536;

/// Datagrams queued from the dispatcher to one flow's task before the dispatcher waits (their
/// bytes count against the relay's budget like the rest).
const FLOW_QUEUE: usize = 8192;

/// Reads the front socket and hands each datagram, stamped with its arrival time, to its
/// client's flow (started on the first datagram from a new address).
pub(super) async fn dispatch_loop(
    front: Arc<UdpSocket>,
    upstream: SocketAddr,
    impairments: Impairments,
    seed: u64,
    registry: Arc<Registry>,
) {
    let mut flows: HashMap<SocketAddr, mpsc::Sender<Arrival>> = HashMap::new();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut next_index = 0u64;
    // Each datagram is dated by the kernel when it arrived: a relay stalled by a busy host
    // must not see what came during the stall as one burst at its end (its queue would drop
    // what a real link had carried, and its link would stand idle for the stall).
    arrival::stamp_arrivals(&front);
    loop {
        let (n, from, arrived) = match arrival::recv_from(&front, &mut buf).await {
            Ok(x) => x,
            Err(_) => {
                // A transient error (e.g. an ICMP report surfacing): keep serving the others,
                // without spinning on a socket that keeps failing.
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                continue;
            }
        };
        // Its bytes are held from here until it leaves (or is dropped by its flow's machine);
        // without room it is dropped, and its flow counts the drop.
        let item = if registry.hold.try_take(n as u64) {
            (arrived, Some(Bytes::copy_from_slice(&buf[..n])))
        } else {
            (arrived, None)
        };
        let taken = if item.1.is_some() { n as u64 } else { 0 };
        let item = match flows.get(&from) {
            Some(tx) => match tx.send(item).await {
                Ok(()) => continue,
                // The flow ended (idle): start a new one for this datagram.
                Err(mpsc::error::SendError(item)) => {
                    flows.remove(&from);
                    item
                }
            },
            None => item,
        };
        let Some(slot) = registry.udp_flow() else {
            registry.hold.give_back(taken);
            registry.trouble(Trouble::Flows, || {
                format!(
                    "relay: datagrams from a new client ({from}) dropped: {} UDP flows run already, the most it relays at once",
                    MAX_UDP_FLOWS
                )
            });
            continue;
        };
        let back = match upstream_socket(upstream).await {
            Ok(s) => s,
            Err(e) => {
                registry.hold.give_back(taken);
                registry.trouble(Trouble::Sockets, || {
                    format!(
                        "relay: no socket towards {upstream} for client {from}: {e:#} (out of file descriptors? raise `ulimit -n`); its datagrams are dropped"
                    )
                });
                continue;
            }
        };
        let (tx, rx) = mpsc::channel(FLOW_QUEUE);
        let index = next_index;
        next_index += 1;
        let flow = Flow {
            front: front.clone(),
            back,
            client: from,
            registry: Arc::clone(&registry),
            slot,
        };
        tokio::spawn(flow.run(rx, impairments, seed, index));
        match tx.send(item).await {
            Ok(()) => {
                flows.insert(from, tx);
            }
            Err(_) => registry.hold.give_back(taken),
        }
    }
}

/// A datagram handed to its flow: when it arrived, and its bytes (None: dropped for want of
/// room, for the flow to count).
type Arrival = (Instant, Option<Bytes>);

fn out_of_room(limit: u64) -> String {
    format!(
        "relay: datagrams dropped, the relay holds its most ({limit} bytes, --max-held) already"
    )
}

/// A socket connected to the server, for one client.
async fn upstream_socket(upstream: SocketAddr) -> anyhow::Result<UdpSocket> {
    let socket = UdpSocket::from_std(crate::transport::net::udp_socket(
        upstream.is_ipv6(),
        None,
        None,
    )?)?;
    socket.connect(upstream).await?;
    arrival::stamp_arrivals(&socket);
    Ok(socket)
}

/// One client's flow: its sockets, its place in the registry.
struct Flow {
    front: Arc<UdpSocket>,
    back: UdpSocket,
    client: SocketAddr,
    registry: Arc<Registry>,
    slot: FlowSlot,
}

impl Flow {
    /// The client's datagrams both ways through two impairment machines (streams `2·index`
    /// up, `2·index + 1` down of the seed), until it has been idle for [`UDP_FLOW_IDLE`].
    async fn run(
        self,
        mut from_client: mpsc::Receiver<Arrival>,
        impairments: Impairments,
        seed: u64,
        index: u64,
    ) {
        let Flow {
            front,
            back,
            client,
            registry,
            slot,
        } = self;
        let hold = &registry.hold;
        let mut up: Impairer<Bytes> = Impairer::new(impairments.up, seed, 2 * index);
        let mut down: Impairer<Bytes> = Impairer::new(impairments.down, seed, 2 * index + 1);
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut last_activity = Instant::now();
        // Bytes this flow has taken from the relay's budget: what its machines hold.
        let mut taken = 0u64;
        loop {
            let now = Instant::now();
            while let Some(p) = up.poll_release(now) {
                // A refused send is the network's loss, as on a real path; the server counts it.
                let _ = back.send(&p).await;
            }
            while let Some(p) = down.poll_release(now) {
                let _ = front.send_to(&p, client).await;
            }
            hold.settle(&mut taken, up.pending_bytes() + down.pending_bytes());
            publish(&slot, &up, &down);
            let idle_end = last_activity + UDP_FLOW_IDLE;
            let wake = [up.poll_timeout(), down.poll_timeout(), Some(idle_end)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(idle_end);
            tokio::select! {
                item = from_client.recv() => match item {
                    Some((arrived, Some(p))) => {
                        last_activity = arrived;
                        // The dispatcher took its bytes: they are this flow's now.
                        taken += p.len() as u64;
                        // A whole address-validation hello or its echo is session set-up,
                        // like the control connection: it passes unimpaired and uncounted,
                        // so the relay's figures are the data's.
                        if is_hello_or_echo(&p) {
                            let _ = back.send(&p).await;
                        } else {
                            up.handle_packet(arrived, p.len(), p);
                        }
                    }
                    Some((arrived, None)) => {
                        last_activity = arrived;
                        up.refuse_packet();
                        publish(&slot, &up, &down);
                        registry.trouble(Trouble::Memory, || out_of_room(hold.limit()));
                    }
                    None => break,
                },
                r = arrival::recv_from(&back, &mut buf) => {
                    if let Ok((n, _, arrived)) = r {
                        last_activity = arrived;
                        if is_hello_or_echo(&buf[..n]) {
                            let _ = front.send_to(&buf[..n], client).await;
                        } else if hold.try_take(n as u64) {
                            taken += n as u64;
                            down.handle_packet(last_activity, n, Bytes::copy_from_slice(&buf[..n]));
                        } else {
                            down.refuse_packet();
                            publish(&slot, &up, &down);
                            registry.trouble(Trouble::Memory, || out_of_room(hold.limit()));
                        }
                    }
                }
                () = wait_until(wake) => {
                    if Instant::now() >= idle_end && up.pending() == 0 && down.pending() == 0 {
                        break;
                    }
                }
            }
        }
        // Datagrams still queued for this flow were never forwarded: their bytes go back.
        from_client.close();
        while let Ok((_, p)) = from_client.try_recv() {
            taken += p.map_or(0, |p| p.len() as u64);
        }
        hold.settle(&mut taken, 0);
        drop(slot);
    }
}

/// Makes the flow's counts what its machines say.
fn publish(slot: &FlowSlot, up: &Impairer<Bytes>, down: &Impairer<Bytes>) {
    if let Ok(mut c) = slot.counts.lock() {
        *c = [up.counts(), down.counts()];
    }
}
