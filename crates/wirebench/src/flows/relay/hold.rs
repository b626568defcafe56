//! What the relay holds in memory, bounded in bytes: every datagram or chunk between its
//! arrival and its release (in a flow's queue, in an impairment machine's delay line or held
//! back for reordering, in a TCP pipe) takes its bytes from one [`Hold`] shared by all flows
//! and both directions. A datagram that finds no room is dropped (counted as a queue drop, as
//! a full router would); a TCP pipe waits (back-pressure). Whatever `--queue`, `delay` or the
//! number of clients say, the relay never holds more than its budget, [`MAX_HELD_BYTES`] unless
//! `--max-held` says otherwise (duplicates made by `duplicate=` may pass it by their own size).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Most bytes the relay holds at once by default (`--max-held`), all flows and directions
/// together: 256 MiB (a 10 Gbit/s path with 100 ms of delay each way, or 1024 flows of 256 KiB).
pub const MAX_HELD_BYTES: u64 = 256 << 20;

/// The relay's byte budget.
#[derive(Debug)]
pub(crate) struct Hold {
    held: AtomicU64,
    limit: u64,
    /// Woken when bytes are given back (a TCP pipe waits on it).
    room: Notify,
    /// Pipes waiting for room: only then does giving back wake anyone (no lock per datagram).
    waiting: AtomicUsize,
}

impl Default for Hold {
    fn default() -> Self {
        Hold::new(MAX_HELD_BYTES)
    }
}

impl Hold {
    /// A budget of `limit` bytes.
    pub(crate) fn new(limit: u64) -> Hold {
        Hold {
            held: AtomicU64::new(0),
            limit,
            room: Notify::new(),
            waiting: AtomicUsize::new(0),
        }
    }

    /// Takes `n` bytes if they fit; false (nothing taken) when they do not.
    pub(crate) fn try_take(&self, n: u64) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                let after = held.saturating_add(n);
                (after <= self.limit).then_some(after)
            })
            .is_ok()
    }

    /// Waits until `n` bytes fit, then takes them (a byte stream waits instead of dropping).
    /// More than the whole budget is taken once nothing else is held.
    pub(crate) async fn take(&self, n: u64) {
        if self.try_take(n) {
            return;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            let alone = self.held.load(Ordering::Acquire) == 0;
            if self.try_take(n) || (alone && self.force(n)) {
                break;
            }
            room.await;
        }
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }

    /// Takes `n` bytes whether they fit or not (a duplicate of a packet already held).
    fn force(&self, n: u64) -> bool {
        self.held.fetch_add(n, Ordering::AcqRel);
        true
    }

    /// Gives `n` bytes back.
    pub(crate) fn give_back(&self, n: u64) {
        if n == 0 {
            return;
        }
        let _ = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                Some(held.saturating_sub(n))
            });
        if self.waiting.load(Ordering::Acquire) > 0 {
            self.room.notify_waiters();
        }
    }

    /// Moves what a holder has taken from `taken` to `now` (what it really holds after its
    /// machine kept, dropped, duplicated or released packets): gives back or takes the
    /// difference.
    pub(crate) fn settle(&self, taken: &mut u64, now: u64) {
        if now < *taken {
            self.give_back(*taken - now);
        } else if now > *taken {
            self.force(now - *taken);
        }
        *taken = now;
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    /// The most bytes it holds (its budget).
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_within_the_limit_and_settles_to_what_is_held() {
        let hold = Hold::new(1000);
        assert!(hold.try_take(600));
        assert!(!hold.try_take(500), "over the limit: nothing taken");
        assert_eq!(hold.held(), 600);
        let mut taken = 600;
        // The machine dropped one 100-byte packet and duplicated another.
        hold.settle(&mut taken, 600);
        hold.settle(&mut taken, 500);
        assert_eq!((taken, hold.held()), (500, 500));
        hold.settle(&mut taken, 0);
        assert_eq!(hold.held(), 0);
    }

    #[tokio::test]
    async fn a_stream_waits_for_room_and_gets_it_when_bytes_come_back() {
        let hold = std::sync::Arc::new(Hold::new(100));
        hold.take(80).await;
        let waiter = {
            let hold = std::sync::Arc::clone(&hold);
            tokio::spawn(async move { hold.take(50).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        hold.give_back(80);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(hold.held(), 50);
        // Alone, a chunk larger than the budget still passes.
        hold.give_back(50);
        hold.take(500).await;
        assert_eq!(hold.held(), 500);
    }
}
