//! What a session's data path ran with, for its report: the shared UDP socket's buffers (UDP
//! and QUIC sessions), the receive lane or the own socket a UDP session's datagrams met, the
//! CPU.

use wirebench_core::wire::proto::DataPathInfo;

use crate::flows::server::registry::Registration;
use crate::flows::server::shared::Shared;
use crate::transport::net;

/// What the shared UDP socket (UDP and QUIC sessions) runs with.
pub(crate) fn shared_udp_data_path(shared: &Shared) -> DataPathInfo {
    DataPathInfo {
        recv_buffer: shared.udp_buffers.0,
        send_buffer: shared.udp_buffers.1,
        cpu: net::current_cpu(),
        ..DataPathInfo::default()
    }
}

/// What a UDP session's data path ran with: the shared socket's buffers, and the receive
/// lane its datagrams met (of how many), if the server runs lanes, or the socket of its own
/// they met instead.
pub(crate) fn udp_data_path(shared: &Shared, registration: &Registration) -> DataPathInfo {
    let own_socket = registration.on_own_socket();
    let (receive_lane, receive_lanes) = registration
        .lane()
        .map_or((None, 0), |(lane, lanes)| (Some(lane), lanes));
    DataPathInfo {
        receive_lane: receive_lane.filter(|_| !own_socket),
        receive_lanes,
        own_socket,
        ..shared_udp_data_path(shared)
    }
}
