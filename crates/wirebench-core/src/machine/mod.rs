//! State machines with time passed in: stop-and-wait, retransmission timers, sequence
//! accounting, request-response tables, rate search, responsiveness, impairments, pacing and the
//! QUIC send window. They decide; the engines in the `wirebench` crate move the bytes.

pub mod impair;
pub mod pacing;
pub mod ratesearch;
pub mod responsiveness;
pub mod rr;
pub mod rto;
pub mod saw;
pub mod send_window;
pub mod seq;
