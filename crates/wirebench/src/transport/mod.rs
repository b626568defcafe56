//! The transport layer: sockets, the control connection, TLS, kernel counters, when a TCP
//! sender's data was acknowledged and when a datagram arrived, host facts, stop signals and the HTTP/1.1 server of `/metrics` and `/probe`. It knows nothing of flows.

pub mod arrival;
pub mod control;
pub mod counters;
pub mod delivery;
pub mod environment;
pub mod http;
pub mod net;
pub mod signals;
pub mod tls;
