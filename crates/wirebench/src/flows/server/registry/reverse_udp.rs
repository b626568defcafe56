//! The registry's entry for a reversed UDP session: where its client wants the data (the
//! latest hello) and the acknowledgements that arrive for it. Counts nothing; the session
//! (`kinds::udp_send`) sends.

use std::net::SocketAddr;
use std::sync::Mutex;

use tokio::sync::{mpsc, Notify};
use wirebench_core::wire::datagram::{Header, Kind};

/// A reversed UDP session as the registry sees it: where its client is, and the
/// acknowledgements that arrive for it.
#[derive(Debug)]
pub struct ReverseUdp {
    id: u32,
    client: Mutex<Option<SocketAddr>>,
    hello: Notify,
    acks: mpsc::UnboundedSender<u64>,
}

impl ReverseUdp {
    /// A session `id` and the receiving end of its acknowledgements (sequence numbers).
    pub fn new(id: u32) -> (ReverseUdp, mpsc::UnboundedReceiver<u64>) {
        let (acks, rx) = mpsc::unbounded_channel();
        let slot = ReverseUdp {
            id,
            client: Mutex::new(None),
            hello: Notify::new(),
            acks,
        };
        (slot, rx)
    }

    /// Handles the datagrams of one receive from `from`: a hello names the data's destination
    /// (the latest one wins, so a client behind a rebinding NAT still gets its data), an
    /// acknowledgement goes to the sender. Anything else is ignored.
    pub fn on_datagrams(&self, data: &[u8], stride: usize, from: SocketAddr) {
        for datagram in data.chunks(stride.max(1)) {
            let Ok(header) = Header::decode(datagram) else {
                continue;
            };
            if header.session != self.id {
                continue;
            }
            match header.kind {
                Kind::Hello => {
                    if let Ok(mut client) = self.client.lock() {
                        *client = Some(from);
                    }
                    self.hello.notify_one();
                }
                Kind::Ack => {
                    let _ = self.acks.send(header.seq);
                }
                Kind::Data | Kind::Request | Kind::Response => {}
            }
        }
    }

    /// The session's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Where the client asked for the data, once it has said.
    pub async fn client(&self) -> SocketAddr {
        loop {
            let notified = self.hello.notified();
            if let Some(addr) = self.client.lock().ok().and_then(|c| *c) {
                return addr;
            }
            notified.await;
        }
    }
}
