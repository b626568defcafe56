//! QUIC driven inline at both ends (issue 42): on one server port, a connection whose client
//! marks its first packet (`engine::quic::inline`, stop-and-wait's) is served on a socket and a
//! thread of its own (`engine::quic::inline_server`), and every other connection by quinn's
//! endpoint as before. Real sockets on loopback, the server's real endpoint.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wirebench::engine::demux::DatagramHandler;
use wirebench::engine::quic::home::ConnectionHomes;
use wirebench::engine::quic::inline::{InlineConnection, InlineStream};
use wirebench::engine::quic::inline_server::{Accepted, InlineAttach, InlineRouter};
use wirebench::engine::quic::{self};
use wirebench::engine::stream::blocking::block_on;
use wirebench::transport::tls::ServerIdentity;
use wirebench_core::machine::seq::DropMark;
use wirebench_core::wire::proto::{Preamble, PREAMBLE_LEN};

use crate::support::within;

/// Hands every connection served inline to the test.
struct ToTest(Mutex<mpsc::Sender<(Preamble, Box<Accepted>)>>);

impl InlineAttach for ToTest {
    fn attach(&self, preamble: &Preamble, _: SocketAddr, accepted: Accepted) -> anyhow::Result<()> {
        let sent = self
            .0
            .lock()
            .map(|tx| tx.send((*preamble, Box::new(accepted))).is_ok());
        anyhow::ensure!(matches!(sent, Ok(true)), "the test is gone");
        Ok(())
    }

    fn dropped(&self, peer: SocketAddr, why: String) {
        panic!("the connection from {peer} was dropped: {why}");
    }
}

/// The server's own datagrams: none come in this test.
#[derive(Debug)]
struct NoDatagrams;

impl DatagramHandler for NoDatagrams {
    fn handle(
        &self,
        _: &[u8],
        _: usize,
        _: (SocketAddr, Option<std::net::IpAddr>),
        _: Option<DropMark>,
        _: &mut dyn FnMut(&[u8]) -> bool,
    ) {
    }
}

/// A server's QUIC endpoint on loopback, as `wirebench server` starts it, with the inline
/// router handing its connections to `inline` (None: no router, as an older server): its
/// address, its certificate, the endpoint and its threads.
fn server(
    inline: Option<Arc<dyn InlineAttach>>,
) -> (SocketAddr, Vec<u8>, quinn::Endpoint, ConnectionHomes) {
    let identity = ServerIdentity::self_signed().expect("a certificate");
    let bind: SocketAddr = "127.0.0.1:0".parse().expect("an address");
    let socket = wirebench::transport::net::udp_socket(false, Some(bind), None).expect("UDP");
    let server = socket.local_addr().expect("its address");
    let homes = ConnectionHomes::start().expect("threads");
    let config = quic::server_config(&identity).expect("QUIC settings");
    let router =
        inline.map(|attach| InlineRouter::start(&socket, config.clone(), attach).expect("router"));
    let handlers: (Arc<dyn DatagramHandler>, _) = (Arc::new(NoDatagrams), router);
    let endpoint = quic::server_endpoint(socket, config, handlers, &homes).expect("the endpoint");
    (server, identity.leaf_der().to_vec(), endpoint, homes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_connection_is_served_inline_and_the_others_by_quinn() {
    within(async {
        let (tx, handed) = mpsc::channel();
        let (server, cert, endpoint, homes) = server(Some(Arc::new(ToTest(Mutex::new(tx)))));

        // The inline client: its preamble and four bytes, then the server's answer.
        let client_cert = cert.clone();
        let client = tokio::task::spawn_blocking(move || {
            let socket = InlineConnection::socket(server)?;
            let stop = Arc::new(AtomicBool::new(false));
            let (mut c, _) = InlineConnection::connect(socket, server, client_cert, None, stop)?;
            let stream = c.open_bi()?;
            c.write_all(stream, &Preamble::data(7, 42).encode())?;
            c.write_all(stream, b"ping")?;
            let conn = Mutex::new(c);
            let mut answer = [0u8; 4];
            block_on(InlineStream::new(&conn, stream).read_exact(&mut answer))?;
            anyhow::Ok(answer)
        });
        let (preamble, accepted) =
            tokio::task::spawn_blocking(move || handed.recv_timeout(Duration::from_secs(20)))
                .await
                .expect("the waiting thread")
                .expect("the marked connection reaches the inline server, not quinn");
        assert_eq!((preamble.session, preamble.token), (7, 42));
        let (served, _stop) = accepted.serve(Duration::from_millis(200), |reader, writer| {
            let mut asked = [0u8; 4];
            block_on(async {
                reader.read_exact(&mut asked).await?;
                writer.write_all(b"pong").await?;
                writer.flush().await?;
                std::io::Result::Ok(asked)
            })
        });
        let asked = served
            .await
            .expect("the work ends")
            .value
            .expect("read and answered");
        assert_eq!(&asked, b"ping");
        let answer = client
            .await
            .expect("the client thread")
            .expect("the exchange");
        assert_eq!(&answer, b"pong");

        // A client of quinn's own (unmarked) is accepted by quinn's endpoint.
        let accepting = tokio::spawn(async move {
            let connection = endpoint.accept().await.expect("an incoming").await?;
            let (_send, mut recv) = connection.accept_bi().await?;
            let mut raw = [0u8; PREAMBLE_LEN];
            recv.read_exact(&mut raw).await?;
            anyhow::Ok(Preamble::decode(&raw)?)
        });
        let (_client_endpoint, connection, _) = quic::connect(server, cert, None)
            .await
            .expect("a quinn client");
        let (mut send, _recv) = connection.open_bi().await.expect("a stream");
        send.write_all(&Preamble::data(8, 43).encode())
            .await
            .expect("the preamble");
        let preamble = accepting
            .await
            .expect("the accept task")
            .expect("quinn serves it");
        assert_eq!((preamble.session, preamble.token), (8, 43));
        drop(homes);
    })
    .await;
}

/// A server without the inline router (an older wirebench): quinn's endpoint serves a marked
/// connection like any other, so a new client still works against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_connection_is_served_by_quinn_where_nothing_serves_it_inline() {
    within(async {
        let (server, cert, endpoint, homes) = server(None);
        let accepting = tokio::spawn(async move {
            let connection = endpoint.accept().await.expect("an incoming").await?;
            let (mut send, mut recv) = connection.accept_bi().await?;
            let mut raw = [0u8; PREAMBLE_LEN];
            recv.read_exact(&mut raw).await?;
            send.write_all(b"pong").await?;
            send.finish()?;
            // Until the client has the answer and closes.
            connection.closed().await;
            anyhow::Ok(Preamble::decode(&raw)?)
        });
        let answer = tokio::task::spawn_blocking(move || {
            let socket = InlineConnection::socket(server)?;
            let stop = Arc::new(AtomicBool::new(false));
            let (mut c, _) = InlineConnection::connect(socket, server, cert, None, stop)?;
            let stream = c.open_bi()?;
            c.write_all(stream, &Preamble::data(9, 44).encode())?;
            let conn = Mutex::new(c);
            let mut answer = [0u8; 4];
            block_on(InlineStream::new(&conn, stream).read_exact(&mut answer))?;
            anyhow::Ok(answer)
        })
        .await
        .expect("the client thread")
        .expect("quinn answers the marked client");
        assert_eq!(&answer, b"pong");
        let preamble = accepting
            .await
            .expect("the accept task")
            .expect("quinn served it");
        assert_eq!((preamble.session, preamble.token), (9, 44));
        drop(homes);
    })
    .await;
}
