//! The transport layer: sockets, the control connection, TLS, kernel counters, when a TCP
//! sender's data was acknowledged and when a datagram arrived, host facts, bounded reads of the files a user names, stop signals, the
//! HTTP/1.1 server of `/metrics` and `/probe`, and what a command may change about its own
//! process (CPU, output). It knows nothing of flows.

pub mod arrival;
pub mod control;
pub mod counters;
pub mod delivery;
pub mod environment;
pub mod files;
pub mod http;
pub mod net;
pub mod process;
pub mod signals;
pub mod syscall;
pub mod tls;
