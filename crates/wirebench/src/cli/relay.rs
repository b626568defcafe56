//! The flags of `wirebench relay`: where it listens, where it forwards, and the impairments.

use clap::Args;

/// Flags of `wirebench relay`.
#[derive(Debug, Args)]
pub struct RelayArgs {
    /// Address to accept clients on, TCP and UDP on one port (e.g. 127.0.0.1:5311).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// The server to forward to, HOST:PORT.
    #[arg(long, value_name = "ADDR")]
    pub to: String,
    /// Packet loss: P% at random, or ge:P/R[/H[/K]] for Gilbert–Elliott bursts (P good→bad,
    /// R bad→good, H loss in the bad state, default 100%, K in the good state, default 0%).
    #[arg(long, value_name = "[up:|down:]P", action = clap::ArgAction::Append)]
    pub loss: Vec<String>,
    /// One-way delay added to every packet (e.g. 10ms).
    #[arg(long, value_name = "[up:|down:]D", action = clap::ArgAction::Append)]
    pub delay: Vec<String>,
    /// Each packet's delay varies uniformly within ±D (never reordering).
    #[arg(long, value_name = "[up:|down:]D", action = clap::ArgAction::Append)]
    pub jitter: Vec<String>,
    /// Share of packets held back until the next one has left (e.g. 1%).
    #[arg(long, value_name = "[up:|down:]P", action = clap::ArgAction::Append)]
    pub reorder: Vec<String>,
    /// Share of packets sent twice (e.g. 1%).
    #[arg(long, value_name = "[up:|down:]P", action = clap::ArgAction::Append)]
    pub duplicate: Vec<String>,
    /// Bottleneck rate (e.g. 100Mbit): a token bucket one packet deep, so nothing leaves faster
    /// than the rate.
    #[arg(long, value_name = "[up:|down:]RATE", action = clap::ArgAction::Append)]
    pub rate: Vec<String>,
    /// Bytes the rate queue holds before it drops (default 256KiB). Whatever the settings, the
    /// relay holds at most --max-held in all, 1024 UDP clients and 1024 TCP connections at once.
    #[arg(long, value_name = "[up:|down:]SIZE", action = clap::ArgAction::Append)]
    pub queue: Vec<String>,
    /// Most bytes the relay holds at once, all clients and both directions (in delay lines,
    /// rate queues, held back for reordering): a datagram that finds no room is dropped and
    /// counted as a queue drop, a TCP stream waits. Raise it for a long fat path (10 Gbit/s
    /// with 200 ms of delay holds 250 MB). 64KiB to 64GiB.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    pub max_held: String,
    /// Seed of the random decisions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Which transports to relay: tcp, udp or both (tcp,udp).
    #[arg(long, default_value = "tcp,udp")]
    pub proto: String,
    /// Print the counts as one JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}
