//! The session kinds, one type each (see `kind::SessionKind`), as the dispatcher
//! (`session`) picks them: TCP or QUIC either way (`stream`, `stream_send`), UDP either way
//! (`udp`, `udp_send`), request-response (`rr`), and QUIC `perf` connections (`perf`, which
//! have no control connection). No kind imports another: what they share is in `kit`.

pub(crate) mod perf;
pub(crate) mod rr;
pub(crate) mod stream;
pub(crate) mod stream_send;
pub(crate) mod udp;
pub(crate) mod udp_send;
