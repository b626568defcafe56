//! One control connection on the server, from its request to the report sent back: reads the
//! request (authenticated when the server has a key), passes it through the gate, hands the
//! admitted session to its kind (`kinds/`, driven by `kind::serve`) and sends the report the
//! gate ended it with. Only dispatches: what the kinds share is in `kit`, never here.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wirebench_core::vocab::plan::Protocol;
use wirebench_core::wire::proto::{ControlMessage, RrParams};

use super::gate::Ask;
use super::kind::{self, Ended, SessionContext};
use super::kinds::rr::{RrStreams, RrUdp};
use super::kinds::stream::StreamReceive;
use super::kinds::stream_send::StreamSend;
use super::kinds::udp::UdpReceive;
use super::kinds::udp_send::UdpSend;
use super::kit::control::kind_name;
use super::shared::Shared;
use super::stop::{stop_reason, Interruptible};
use crate::transport::control;

/// Serves one control connection to its end.
pub(super) async fn serve(
    stream: &mut TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    hello_deadline: tokio::time::Instant,
) {
    let (mut rd, mut wr) = stream.split();
    let Some(request) = read_request(&mut rd, &mut wr, peer, shared, hello_deadline).await else {
        return;
    };
    let ask = match &request {
        ControlMessage::RrRequest(rr) => Ask::Exchange(rr),
        ControlMessage::SessionRequest(p) => Ask::Transfer(p),
        _ => return,
    };
    // Every session passes the gate before anything is allocated for it, and holds its place
    // until its report is sent (the pass is dropped last).
    let mut pass = match shared.gate.admit(peer, ask) {
        Ok(pass) => pass,
        Err(reason) => {
            refuse(&mut wr, ControlMessage::Rejected { reason }).await;
            return;
        }
    };
    // From here on the gate's stop (duration, limits, shutdown) interrupts the session.
    let mut rd = Interruptible::new(rd, pass.stop());
    let ctx = SessionContext {
        rd: &mut rd,
        wr: &mut wr,
        peer,
        shared,
        pass: &pass,
    };
    let (report, outcome) = match request {
        ControlMessage::RrRequest(rr) => exchange(&rr, ctx).await,
        _ => transfer(ctx).await,
    };
    // A client that is gone did not see its session to its end, whatever the data said.
    let outcome = match outcome {
        Ok(()) => client_left(&mut rd).await.map_or(Ok(()), Err),
        failed => failed,
    };
    let report = pass.end(report, outcome);
    let _ = control::send(&mut wr, &ControlMessage::Report(Box::new(report))).await;
    drop(pass);
}

/// Reads the session request (with a pre-shared key, after the client's proof) before the
/// hello deadline. Anything else is refused here, with its notice; None then.
async fn read_request<R, W>(
    rd: &mut R,
    wr: &mut W,
    peer: SocketAddr,
    shared: &Shared,
    hello_deadline: tokio::time::Instant,
) -> Option<ControlMessage>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let notice = |message: String| shared.gate.notice(peer, message);
    // The request (and, with a pre-shared key, the client's proof) must be in before the
    // hello deadline.
    let request = tokio::time::timeout_at(
        hello_deadline,
        super::auth::recv_request(rd, wr, peer, shared),
    )
    .await
    .unwrap_or_else(|_| {
        Err(anyhow::anyhow!(
            "no session request within {:?} (the server's --hello-timeout)",
            shared.options.limits.hello_timeout
        ))
    });
    let reason = match request {
        Ok(m @ (ControlMessage::SessionRequest(_) | ControlMessage::RrRequest(_))) => {
            return Some(m)
        }
        Ok(other) => format!("expected a session request, got {}", kind_name(&other)),
        // Authentication refused: the client has been told, the notice is sent.
        Err(e) if e.is::<super::auth::Refused>() => return None,
        Err(e) => format!("{e:#}"),
    };
    refuse(
        wr,
        ControlMessage::Error {
            reason: reason.clone(),
        },
    )
    .await;
    notice(format!("connection closed: {reason}"));
    None
}

/// A transfer, by protocol and direction.
async fn transfer<R, W>(ctx: SessionContext<'_, R, W>) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let p = ctx.pass.params();
    let quic = p.protocol == Protocol::Quic;
    match (p.protocol, p.reverse) {
        (Protocol::Tcp | Protocol::Quic, false) => kind::serve(StreamReceive { quic }, ctx).await,
        (Protocol::Tcp | Protocol::Quic, true) => kind::serve(StreamSend { quic }, ctx).await,
        (Protocol::Udp, false) => kind::serve(UdpReceive, ctx).await,
        (Protocol::Udp, true) => kind::serve(UdpSend, ctx).await,
    }
}

/// A request-response exchange, by protocol.
async fn exchange<R, W>(rr: &RrParams, ctx: SessionContext<'_, R, W>) -> Ended
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    match rr.protocol {
        Protocol::Tcp | Protocol::Quic => kind::serve(RrStreams { rr }, ctx).await,
        Protocol::Udp => kind::serve(RrUdp { rr }, ctx).await,
    }
}

/// Whether the client closed its control connection: it is gone (killed, or stopped) and did
/// not wait for its report. A client that is still there is silent now, so nothing is read.
async fn client_left<R: AsyncRead + Unpin>(rd: &mut R) -> Option<String> {
    match tokio::time::timeout(Duration::ZERO, control::recv(rd)).await {
        Ok(Ok(None)) => Some("the client closed its control connection before its report".into()),
        Ok(Err(e)) if stop_reason(&e).is_none() => Some(format!(
            "the client's control connection failed before its report: {e:#}"
        )),
        _ => None,
    }
}

/// Sends a refusal (or an error) to the client; the connection ends after it.
async fn refuse<W: AsyncWrite + Unpin>(wr: &mut W, answer: ControlMessage) {
    let _ = control::send(wr, &answer).await;
}
