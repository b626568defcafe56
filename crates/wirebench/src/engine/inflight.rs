//! What the run in flight has moved so far, readable by the command that started it when the
//! run is cut short (a signal, a server that went away). The runner publishes each run's
//! progress counters here as it starts it; the command reads them. Owns no I/O and no policy.
//!
//! The place is a tokio task-local set by the command around its plan ([`InFlight::scope`]),
//! so the runner's signature stays as it is and code run outside a scope (tests, the library)
//! publishes into nothing.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::engine::interval::Progress;

tokio::task_local! {
    static CURRENT: Arc<InFlight>;
}

/// The progress counters of the run in flight, if one is.
#[derive(Debug, Default)]
pub struct InFlight {
    run: Mutex<Option<Published>>,
}

#[derive(Debug)]
struct Published {
    started: Instant,
    flows: Vec<Arc<Progress>>,
}

impl InFlight {
    /// Nothing in flight yet.
    pub fn new() -> Arc<InFlight> {
        Arc::new(InFlight::default())
    }

    /// Runs `work` with `this` as the place runs publish their progress in.
    pub async fn scope<F: Future>(this: Arc<InFlight>, work: F) -> F::Output {
        CURRENT.scope(this, work).await
    }

    /// The run in flight has ended (its figures are final elsewhere).
    pub fn clear(&self) {
        if let Ok(mut run) = self.run.lock() {
            *run = None;
        }
    }

    /// What the run in flight has moved so far, its flows together: payload bytes and the
    /// time since it started (its plan says how many messages that is); `None` when no run
    /// is in flight.
    pub fn moved(&self) -> Option<(u64, Duration)> {
        let run = self.run.lock().ok()?;
        let run = run.as_ref()?;
        let bytes: u64 = run
            .flows
            .iter()
            .map(|p| p.bytes.load(Ordering::Relaxed))
            .sum();
        Some((bytes, run.started.elapsed()))
    }
}

/// The run in flight has ended (its figures are final, or it failed): nothing is in flight in
/// this scope until the next [`publish`]; nothing outside a scope.
pub fn clear() {
    let _ = CURRENT.try_with(|place| place.clear());
}

/// Publishes the progress counters of a run that starts now; nothing outside a scope.
pub fn publish(flows: &[Arc<Progress>]) {
    let _ = CURRENT.try_with(|place| {
        if let Ok(mut run) = place.run.lock() {
            *run = Some(Published {
                started: Instant::now(),
                flows: flows.to_vec(),
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_published_in_scope_is_seen_and_outside_nothing_is() {
        publish(&[Progress::new()]); // Outside any scope: nowhere to go, no panic.
        let place = InFlight::new();
        let flows = [Progress::new(), Progress::new()];
        InFlight::scope(Arc::clone(&place), async {
            publish(&flows);
        })
        .await;
        flows[0].bytes.store(3000, Ordering::Relaxed);
        flows[1].bytes.store(1500, Ordering::Relaxed);
        let (bytes, _) = place.moved().expect("in flight");
        assert_eq!(bytes, 4500);
        place.clear();
        assert_eq!(place.moved(), None);
    }
}
