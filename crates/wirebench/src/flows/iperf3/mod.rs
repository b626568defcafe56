//! iperf3 interoperability: owns talking iperf3's protocol over real sockets, as a client
//! (`wirebench run --iperf3`) and as an extra listener of `wirebench server --iperf3`; must not
//! define the wire formats (those are `wirebench_core::wire::iperf3`) nor touch wirebench's own
//! protocol.

mod blocking_io;
pub mod client;
mod hub;
pub mod record;
pub mod server;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use wirebench_core::wire::iperf3::{self, State, COOKIE_LEN};

/// How long either end waits for the other during set-up and the results exchange.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A fresh random cookie.
pub fn new_cookie() -> [u8; COOKIE_LEN] {
    let mut random = [0u8; COOKIE_LEN - 1];
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut random);
    iperf3::make_cookie(&random)
}

/// Sends one state byte.
pub async fn send_state<W: AsyncWrite + Unpin>(w: &mut W, state: State) -> Result<()> {
    w.write_all(&[state.to_byte()])
        .await
        .context("while sending an iperf3 state byte")?;
    w.flush()
        .await
        .context("while sending an iperf3 state byte")
}

/// Reads one state byte; `Ok(None)` when the peer closed the connection.
pub async fn recv_state<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<State>> {
    let mut b = [0u8; 1];
    match r.read(&mut b).await {
        Ok(0) => Ok(None),
        Ok(_) => Ok(Some(State::from_byte(b[0])?)),
        Err(e) => Err(anyhow::Error::from(e).context("while reading an iperf3 state byte")),
    }
}

/// Reads one state byte within [`SETUP_TIMEOUT`]; a closed connection is an error.
pub async fn expect_state<R: AsyncRead + Unpin>(r: &mut R, during: &str) -> Result<State> {
    match tokio::time::timeout(SETUP_TIMEOUT, recv_state(r)).await {
        Err(_) => bail!("the iperf3 peer said nothing for {SETUP_TIMEOUT:?} {during}"),
        Ok(Ok(None)) => bail!("the iperf3 peer closed the control connection {during}"),
        Ok(Ok(Some(s))) => Ok(s),
        Ok(Err(e)) => Err(e),
    }
}

/// Sends one length-prefixed JSON document.
pub async fn send_json<W: AsyncWrite + Unpin, T: Serialize>(w: &mut W, value: &T) -> Result<()> {
    let framed = iperf3::encode_json(value)?;
    w.write_all(&framed)
        .await
        .context("while sending an iperf3 JSON document")?;
    w.flush()
        .await
        .context("while sending an iperf3 JSON document")
}

/// Reads one length-prefixed JSON document within [`SETUP_TIMEOUT`].
pub async fn recv_json<R: AsyncRead + Unpin, T: DeserializeOwned>(r: &mut R) -> Result<T> {
    let read = async {
        let mut prefix = [0u8; 4];
        r.read_exact(&mut prefix)
            .await
            .context("while reading the length of an iperf3 JSON document")?;
        let mut text = vec![0u8; iperf3::json_len(prefix)?];
        r.read_exact(&mut text)
            .await
            .context("while reading an iperf3 JSON document")?;
        Ok::<_, anyhow::Error>(iperf3::decode_json(&text)?)
    };
    tokio::time::timeout(SETUP_TIMEOUT, read)
        .await
        .map_err(|_| anyhow::anyhow!("the iperf3 peer sent no JSON document in time"))?
}

/// Reads the 37-byte cookie that opens a TCP connection, within [`SETUP_TIMEOUT`].
pub async fn recv_cookie<R: AsyncRead + Unpin>(r: &mut R) -> Result<[u8; COOKIE_LEN]> {
    let mut cookie = [0u8; COOKIE_LEN];
    tokio::time::timeout(SETUP_TIMEOUT, r.read_exact(&mut cookie))
        .await
        .map_err(|_| anyhow::anyhow!("no iperf3 cookie within {SETUP_TIMEOUT:?}"))?
        .context("while reading the iperf3 cookie")?;
    iperf3::check_cookie(&cookie)?;
    Ok(cookie)
}

/// Seconds since `start`, as iperf3's results carry them.
pub fn seconds_since(start: std::time::Instant, at: std::time::Instant) -> f64 {
    at.saturating_duration_since(start).as_secs_f64()
}

/// The send time written into UDP headers: seconds and microseconds since `epoch` (iperf3
/// receivers use only differences, for jitter).
pub fn udp_timestamp(epoch: std::time::Instant) -> (u32, u32) {
    let d = epoch.elapsed();
    // Wraps after 136 years of one test.
    (d.as_secs() as u32, d.subsec_micros())
}
