//! A new QUIC connection on the server's shared UDP port, on its home thread
//! (`engine::quic::home`): a wirebench data connection (its first stream opens with a data
//! preamble) is handed to the session waiting for it, with its home; one that negotiated the
//! `perf` ALPN becomes a perf session through the gate, there.

use anyhow::{bail, Context, Result};

use super::registry::{DataStream, QuicData};
use super::shared::Shared;
use crate::engine::quic::home::Home;
use crate::transport::control::{self, SETUP_TIMEOUT};

/// Completes one accepted QUIC connection's handshake and routes it.
pub(super) async fn attach(
    connecting: quinn::Connecting,
    home: Home,
    shared: &Shared,
) -> Result<()> {
    let peer = connecting.remote_address();
    // Take the stream as soon as the client's first flight is in (0.5-RTT): a resumed client
    // that sent its preamble and first request as 0-RTT data is answered without waiting for
    // the rest of the handshake. Without early data the stream arrives after the handshake.
    let connection = match connecting.into_0rtt() {
        Ok((connection, _accepted)) => connection,
        Err(connecting) => connecting.await.context("QUIC handshake failed")?,
    };
    if crate::flows::perf::server::is_perf(&connection) {
        if shared.options.psk.is_some() {
            // A perf client has no control connection, so it cannot present the key.
            connection.close(
                quinn::VarInt::from_u32(crate::flows::perf::server::REFUSED),
                b"pre-shared key required",
            );
            bail!("QUIC perf client refused: this server requires a pre-shared key (--psk)");
        }
        super::kinds::perf::serve(connection, shared).await;
        return Ok(());
    }
    let (send, mut recv) = tokio::time::timeout(SETUP_TIMEOUT, connection.accept_bi())
        .await
        .context("the client opened no QUIC stream in time")?
        .context("while accepting the QUIC stream")?;
    let preamble = tokio::time::timeout(SETUP_TIMEOUT, control::read_preamble(&mut recv))
        .await
        .context("the client sent no preamble on its QUIC stream in time")??;
    if preamble.kind != wirebench_core::wire::proto::ConnKind::Data {
        bail!("the QUIC stream did not open with a data preamble");
    }
    shared
        .registry
        .attach_stream(
            &preamble,
            peer.ip(),
            DataStream::Quic(QuicData {
                connection,
                send,
                recv,
                home,
            }),
        )
        .map_err(anyhow::Error::from)
}
