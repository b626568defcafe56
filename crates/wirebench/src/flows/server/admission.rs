//! Admission of sessions: counts the sessions running, in all and per client address, refuses
//! one over the limits or while the server shuts down, and lets the shutdown wait until none
//! runs. It decides nothing else about a session.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

use super::options::Limits;
use crate::transport::net::canonical_ip;

/// Sessions running now, and whether new ones may start.
#[derive(Debug)]
pub(super) struct Admission {
    max_total: usize,
    max_per_client: usize,
    state: Mutex<State>,
    /// Sessions running; the shutdown waits for 0.
    running: watch::Sender<usize>,
}

#[derive(Debug, Default)]
struct State {
    per_client: HashMap<IpAddr, usize>,
    total: usize,
    closing: bool,
}

/// A running session's place; dropping it frees the place.
#[derive(Debug)]
pub(super) struct SessionSlot {
    admission: Arc<Admission>,
    client: IpAddr,
}

impl Admission {
    /// Admission under `limits`.
    pub(super) fn new(limits: &Limits) -> Arc<Admission> {
        Arc::new(Admission {
            max_total: limits.max_sessions,
            max_per_client: limits.max_sessions_per_client,
            state: Mutex::new(State::default()),
            running: watch::Sender::new(0),
        })
    }

    /// Takes a place for a session from `client`, or says why there is none.
    pub(super) fn admit(self: &Arc<Self>, client: IpAddr) -> Result<SessionSlot, String> {
        let client = canonical_ip(client);
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closing {
            return Err("the server is shutting down".into());
        }
        if state.total >= self.max_total {
            return Err(format!(
                "the server is busy: {} sessions are running, its limit is {} (--max-sessions); try again later",
                state.total, self.max_total
            ));
        }
        let mine = state.per_client.entry(client).or_insert(0);
        if *mine >= self.max_per_client {
            return Err(format!(
                "{client} already runs {mine} sessions, the server allows {} per client (--max-sessions-per-client)",
                self.max_per_client
            ));
        }
        *mine += 1;
        state.total += 1;
        self.running.send_replace(state.total);
        Ok(SessionSlot {
            admission: Arc::clone(self),
            client,
        })
    }

    /// Refuses every session from now on.
    pub(super) fn close(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closing = true;
    }

    /// Waits until no session runs.
    pub(super) async fn idle(&self) {
        self.at_most(0).await;
    }

    /// Waits until at most `n` sessions hold a place.
    pub(super) async fn at_most(&self, n: usize) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|running| *running <= n).await;
    }

    /// Waits until at least `n` sessions hold a place.
    pub(super) async fn at_least(&self, n: usize) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|running| *running >= n).await;
    }

    /// Sessions running now.
    pub(super) fn running(&self) -> usize {
        *self.running.borrow()
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut state = self
            .admission
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = state.per_client.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                state.per_client.remove(&self.client);
            }
        }
        state.total = state.total.saturating_sub(1);
        self.admission.running.send_replace(state.total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(total: usize, per_client: usize) -> Limits {
        Limits {
            max_sessions: total,
            max_sessions_per_client: per_client,
            ..Limits::default()
        }
    }

    #[test]
    fn per_client_and_total_limits_and_release() {
        let a = Admission::new(&limits(3, 2));
        let one: IpAddr = "127.0.0.1".parse().unwrap();
        let two: IpAddr = "127.0.0.2".parse().unwrap();
        let s1 = a.admit(one).unwrap();
        let _s2 = a.admit(one).unwrap();
        let err = a.admit(one).unwrap_err();
        assert!(err.contains("--max-sessions-per-client"), "{err}");
        let _s3 = a.admit(two).unwrap();
        let err = a.admit(two).unwrap_err();
        assert!(err.contains("--max-sessions)"), "{err}");
        assert_eq!(a.running(), 3);
        drop(s1);
        assert_eq!(a.running(), 2);
        assert!(a.admit(one).is_ok());
    }

    #[test]
    fn mapped_ipv4_counts_as_the_same_client() {
        let a = Admission::new(&limits(10, 1));
        let _s = a.admit("127.0.0.1".parse().unwrap()).unwrap();
        assert!(a.admit("::ffff:127.0.0.1".parse().unwrap()).is_err());
    }

    #[test]
    fn closing_refuses_new_sessions() {
        let a = Admission::new(&limits(10, 10));
        a.close();
        assert_eq!(
            a.admit("127.0.0.1".parse().unwrap()).unwrap_err(),
            "the server is shutting down"
        );
    }
}
