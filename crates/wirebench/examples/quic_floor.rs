//! Bare quinn's stop-and-wait floor, for the benchmark: what one round trip costs with quinn
//! alone, so that `bench/compare.py` can tell the part of `wirebench run --proto quic --mode saw`
//! that is quinn's (and tokio's) from the part that is ours.
//!
//! Two endpoints in one process, each on its own multi-threaded tokio runtime (as the two
//! processes of a wirebench run are), with quinn's own UDP sockets and default transport
//! settings, and wirebench's TLS set-up (AES-128-GCM first, a pinned self-signed certificate).
//! Over one bidirectional stream the client writes a `SIZE`-byte message, the server reads it
//! whole and answers one byte, and the client waits for that byte: the same exchange as our
//! stop-and-wait, with none of our session, gate or meter code around it.
//!
//! With `tuned`, both endpoints take wirebench's UDP socket (readiness only for what quinn
//! waits for) and transport settings instead of quinn's: quinn as wirebench drives it, still
//! without our flows.
//!
//! ```sh
//! cargo run --release --example quic_floor -- [COUNT] [SIZE] [bare|tuned]
//! ```
//! prints `{"count":…,"size":…,"p50_us":…,"p99_us":…,"mean_us":…}`. Loopback only.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use wirebench::engine::quic::{self, socket::QuicUdpSocket};
use wirebench::transport::tls;
use wirebench_core::vocab::stats::nearest_rank;

fn main() -> ExitCode {
    match measure() {
        Ok(()) => ExitCode::SUCCESS,
        // One line, as every wirebench error: what went wrong, then why.
        Err(e) => {
            eprintln!("quic_floor: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Reads the arguments, runs the round trips and prints their summary.
fn measure() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let count: usize = match args.next() {
        Some(a) => a
            .parse()
            .context("COUNT must be a whole number of round trips")?,
        None => 20_000,
    };
    let size: usize = match args.next() {
        Some(a) => a
            .parse()
            .context("SIZE must be a message size in bytes (1 to 65535)")?,
        None => 1024,
    };
    let tuned = match args.next().as_deref() {
        None | Some("bare") => false,
        Some("tuned") => true,
        Some(other) => bail!("the third argument is bare or tuned, not {other:?}"),
    };
    if count == 0 || !(1..=65535).contains(&size) {
        bail!("COUNT must be at least 1 and SIZE 1 to 65535 bytes");
    }

    let identity = tls::ServerIdentity::self_signed()?;
    let pinned = identity.leaf_der().to_vec();
    let server_rt = runtime()?;
    let client_rt = runtime()?;

    let server = server_rt.block_on(async {
        let crypto = QuicServerConfig::try_from(tls::server_crypto(&identity)?)?;
        let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        if !tuned {
            return anyhow::Ok(quinn::Endpoint::server(cfg, local)?);
        }
        cfg.transport_config(quic::transport());
        let socket = std::net::UdpSocket::bind(local)?;
        socket.set_nonblocking(true)?;
        let socket = QuicUdpSocket::new(socket)?;
        let runtime = Arc::new(quinn::TokioRuntime);
        let endpoint_cfg = quinn::EndpointConfig::default();
        Ok(quinn::Endpoint::new_with_abstract_socket(
            endpoint_cfg,
            Some(cfg),
            socket,
            runtime,
        )?)
    })?;
    let server_addr = server.local_addr()?;
    let serving = server_rt.spawn(serve(server, size));

    // The client runs as a task, as wirebench's does: quinn's drivers run on the workers, and a
    // future driven by `block_on` on this thread would cross threads at every wake-up.
    let rtts = client_rt
        .block_on(client_rt.spawn(client(server_addr, pinned, count, size, tuned)))
        .context("the client task failed")??;
    serving.abort();

    let mut sorted = rtts;
    sorted.sort_unstable();
    // Percentiles by nearest rank, as wirebench's own summaries take them.
    let us = |per_mille| nearest_rank(&sorted, per_mille).unwrap_or(0) as f64 / 1e3;
    let mean = sorted.iter().sum::<u64>() as f64 / sorted.len() as f64;
    println!(
        "{{\"count\":{count},\"size\":{size},\"p50_us\":{:.3},\"p99_us\":{:.3},\"mean_us\":{:.3}}}",
        us(500),
        us(990),
        mean / 1e3
    );
    Ok(())
}

/// A multi-threaded tokio runtime with its default worker count, as wirebench's client uses.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start a tokio runtime")
}

/// The server: accepts one connection and one stream, and answers each whole message with a byte.
async fn serve(endpoint: quinn::Endpoint, size: usize) -> Result<()> {
    let incoming = endpoint.accept().await.context("no connection came")?;
    let connection = incoming.await?;
    let (mut send, mut recv) = connection.accept_bi().await?;
    let mut message = vec![0u8; size];
    loop {
        if recv.read_exact(&mut message).await.is_err() {
            return Ok(());
        }
        send.write_all(&[1]).await?;
    }
}

/// The client: `count` stop-and-wait round trips, each timed from the write to the answer.
async fn client(
    server: SocketAddr,
    pinned: Vec<u8>,
    count: usize,
    size: usize,
    tuned: bool,
) -> Result<Vec<u64>> {
    let crypto = QuicClientConfig::try_from(tls::client_crypto(pinned)?)?;
    let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    let mut endpoint = if tuned {
        cfg.transport_config(quic::client_transport(quic::DEFAULT_MTU));
        let socket = std::net::UdpSocket::bind(local)?;
        socket.set_nonblocking(true)?;
        quic::client_endpoint(socket, quinn::EndpointConfig::default())?
    } else {
        quinn::Endpoint::client(local)?
    };
    endpoint.set_default_client_config(cfg);
    let connection = endpoint.connect(server, tls::SERVER_NAME)?.await?;
    let (mut send, mut recv) = connection.open_bi().await?;
    let message = vec![0u8; size];
    let mut answer = [0u8; 1];
    let mut rtts = Vec::with_capacity(count);
    for _ in 0..count {
        let sent_at = Instant::now();
        send.write_all(&message).await?;
        recv.read_exact(&mut answer).await?;
        rtts.push(sent_at.elapsed().as_nanos() as u64);
    }
    connection.close(0u32.into(), b"done");
    endpoint.wait_idle().await;
    Ok(rtts)
}
