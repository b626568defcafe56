//! Waiting until a release time to within tens of microseconds, where tokio's timer alone
//! would wake whole milliseconds late; the TCP and UDP forwarders both wait here.

use std::time::Duration;

/// How long before a release the relay stops sleeping and yields in a loop instead: tokio's
/// timer rounds sleeps up to whole milliseconds and wakes late, which would add 1–2 ms to every delay.
const SPIN_BEFORE: Duration = Duration::from_millis(2);

/// Waits until `t`, to within tens of microseconds: a timer sleep to [`SPIN_BEFORE`] ahead,
/// then yielding to the runtime until the time has come.
pub(super) async fn wait_until(t: std::time::Instant) {
    if let Some(early) = t.checked_sub(SPIN_BEFORE) {
        if early > std::time::Instant::now() {
            tokio::time::sleep_until(tokio::time::Instant::from_std(early)).await;
        }
    }
    while std::time::Instant::now() < t {
        tokio::task::yield_now().await;
    }
}
