//! What an iperf3 peer may send or ask for at most: the longest JSON document, and the bounds
//! every test parameter a client sends is held to (most of them iperf3's own).

/// Largest JSON document accepted on the control connection (iperf3's own are a few KiB).
pub const MAX_JSON_LEN: u32 = 1 << 20;
/// Largest number of parallel streams a test may ask for (iperf3's own limit is 128).
pub const MAX_PARALLEL: u32 = 128;
/// Largest TCP block length accepted from a client.
pub const MAX_TCP_BLOCK: u32 = 16 << 20;
/// Largest UDP datagram payload (IPv4).
pub const MAX_UDP_BLOCK: u32 = 65_507;
/// Longest omit span a test may ask for, seconds (iperf3's own limit).
pub const MAX_OMIT_S: u64 = 600;
/// Longest test a client may ask for, seconds (iperf3's own limit).
pub const MAX_TIME_S: u64 = 86_400;
/// Largest socket buffer a test may ask for, bytes (iperf3's own limit, 512 MiB).
pub const MAX_WINDOW: u64 = 512 << 20;
/// Largest TCP maximum segment size a test may ask for, bytes (iperf3's own limit).
pub const MAX_MSS: u64 = 32 * 1024 - 1;
