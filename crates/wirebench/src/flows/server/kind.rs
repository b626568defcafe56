//! What a session kind is: a type that implements [`SessionKind`] (its kinds live in `kinds/`,
//! one file each, as quinn's congestion controllers do). [`serve`] drives any kind through the
//! steps every control-connection session takes once the gate has admitted it — an empty
//! report, a registry slot, the session id on the pass, `accepted` — so a kind holds only what
//! is its own. Must not decide a session's status: the gate does that from the kind's reason.

use std::net::{IpAddr, SocketAddr};

use tokio::io::{AsyncRead, AsyncWrite};
use wirebench_core::wire::proto::ServerReport;

use super::gate::Pass;
use super::kit::control::send_accepted;
use super::registry::Registration;
use super::shared::Shared;

/// How the kinds end: the report so far, and why the session failed (if it did).
pub(crate) type Ended = (ServerReport, Result<(), String>);

/// One admitted session on its control connection, as a kind serves it.
pub(crate) struct SessionContext<'s, R, W> {
    /// The control connection's reading half, interrupted by the gate's stop.
    pub(crate) rd: &'s mut R,
    /// The control connection's writing half.
    pub(crate) wr: &'s mut W,
    /// The client's control connection address.
    pub(crate) peer: SocketAddr,
    /// The server's state.
    pub(crate) shared: &'s Shared,
    /// The session's pass through the gate (params, meter, limits).
    pub(crate) pass: &'s Pass,
}

/// A kind of session the server serves on a control connection: a transfer by protocol and
/// direction, or a request-response exchange.
pub(crate) trait SessionKind {
    /// What the registry hands the kind for its slot (its data connections, its receiver).
    type Entry;

    /// Whether the client is told the server's certificate with `accepted` (its data
    /// connections are QUIC).
    fn quic(&self) -> bool {
        false
    }

    /// Takes the session's slot in the registry; a kind whose data the registry's receiver
    /// counts points the gate's meter at it here.
    fn register(&self, shared: &Shared, peer: IpAddr, pass: &Pass) -> (Registration, Self::Entry);

    /// The session once the client knows it exists, to its end: fills `report` and says why
    /// the session failed, if it did. Drops `registration` when the slot is no longer needed.
    async fn serve<R, W>(
        self,
        ctx: &mut SessionContext<'_, R, W>,
        registration: Registration,
        entry: Self::Entry,
        report: &mut ServerReport,
    ) -> Result<(), String>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin;
}

/// Serves one admitted session of `kind` to its end.
pub(crate) async fn serve<K, R, W>(kind: K, mut ctx: SessionContext<'_, R, W>) -> Ended
where
    K: SessionKind,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut report = ctx.pass.empty_report();
    let (registration, entry) = kind.register(ctx.shared, ctx.peer.ip(), ctx.pass);
    ctx.pass.set_session(registration.id);
    let cert = kind.quic().then(|| ctx.shared.cert_der.clone());
    if let Err(reason) = send_accepted(ctx.wr, &registration, cert).await {
        return (report, Err(reason));
    }
    let result = kind.serve(&mut ctx, registration, entry, &mut report).await;
    (report, result)
}
