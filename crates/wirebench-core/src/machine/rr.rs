//! Request-response bookkeeping for UDP (`wirebench ping` and `rr`): owns the table of outstanding
//! requests, their timeouts, retry decisions and the classification of every response (answered, late,
//! duplicate, unknown); must not do I/O or read a clock (time comes in as `now`).
//!
//! One tracker serves one flow. Requests are numbered 0, 1, 2, … in the order they are first sent. A
//! request gets `timeout` to be answered; then it is sent again, up to `retries` times, each copy with a
//! fresh `timeout`; after the last copy's timeout it is lost. A response to a lost request is *late*: it
//! is counted, never turned into a sample. Response time runs from the first copy to the first answer,
//! which is what a client waiting for it sees.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

/// What the tracker has counted so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RrCounts {
    /// Distinct requests sent (retries are not new requests).
    pub sent: u64,
    /// Requests answered in time (each once).
    pub answered: u64,
    /// Requests whose retries were exhausted without an answer.
    pub lost: u64,
    /// Responses that arrived after their request was declared lost.
    pub late: u64,
    /// Copies sent again after a timeout.
    pub retries: u64,
    /// Further responses to a request already answered (a retry and its original both answered).
    pub duplicates: u64,
    /// Responses for a request number never sent.
    pub unknown: u64,
}

/// How a response was classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The first answer to an outstanding request: a sample.
    Answered {
        /// First copy sent → this response.
        response_time: Duration,
        /// The request had been sent more than once.
        retried: bool,
    },
    /// The request had already been declared lost.
    Late,
    /// The request had already been answered.
    Duplicate,
    /// No such request was ever sent.
    Unknown,
}

/// What to do about a request whose timeout passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Send request `seq` again (as a retransmission).
    Retry {
        /// The request number.
        seq: u64,
    },
    /// Request `seq` is lost: its retries are exhausted.
    Lost {
        /// The request number.
        seq: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    first_sent: Instant,
    /// Copies sent so far minus one.
    attempt: u32,
}

/// Outstanding requests of one flow, their deadlines and the counts.
#[derive(Debug)]
pub struct RequestTracker {
    timeout: Duration,
    retries: u32,
    next_seq: u64,
    /// Keyed by our own sequence numbers: a peer chooses nothing that goes in, so a fast
    /// unkeyed hash is safe here (SipHash cost tens of ns of every round trip).
    outstanding: FxHashMap<u64, Pending>,
    /// (deadline, seq, attempt) in the order the copies were sent. Every copy gets the same timeout, so
    /// this is also deadline order; entries of answered requests or older copies are skipped lazily.
    deadlines: VecDeque<(Instant, u64, u32)>,
    lost: FxHashSet<u64>,
    counts: RrCounts,
}

impl RequestTracker {
    /// A tracker giving each copy `timeout` and each request up to `retries` extra copies.
    pub fn new(timeout: Duration, retries: u32) -> Self {
        RequestTracker {
            timeout,
            retries,
            next_seq: 0,
            outstanding: FxHashMap::default(),
            deadlines: VecDeque::new(),
            lost: FxHashSet::default(),
            counts: RrCounts::default(),
        }
    }

    /// Registers a new request first sent at `now`; returns its number.
    pub fn send_new(&mut self, now: Instant) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.outstanding.insert(
            seq,
            Pending {
                first_sent: now,
                attempt: 0,
            },
        );
        self.deadlines.push_back((now + self.timeout, seq, 0));
        self.counts.sent += 1;
        seq
    }

    /// The timeout each copy gets.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Requests sent and neither answered nor lost.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Classifies the response to request `seq`, received at `now`.
    pub fn on_response(&mut self, seq: u64, now: Instant) -> Answer {
        if let Some(p) = self.outstanding.remove(&seq) {
            self.counts.answered += 1;
            return Answer::Answered {
                response_time: now.saturating_duration_since(p.first_sent),
                retried: p.attempt > 0,
            };
        }
        if self.lost.contains(&seq) {
            self.counts.late += 1;
            Answer::Late
        } else if seq < self.next_seq {
            self.counts.duplicates += 1;
            Answer::Duplicate
        } else {
            self.counts.unknown += 1;
            Answer::Unknown
        }
    }

    /// The earliest deadline of an outstanding copy, if any.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.drop_stale();
        self.deadlines.front().map(|&(at, _, _)| at)
    }

    /// The next request whose deadline is at or before `now`, and what to do about it; call until it
    /// returns `None`. A retry is registered here (its new deadline runs from `now`), so the caller must
    /// send the copy.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Expiry> {
        self.drop_stale();
        let &(at, seq, _) = self.deadlines.front()?;
        if at > now {
            return None;
        }
        self.deadlines.pop_front();
        let pending = self.outstanding.get_mut(&seq)?;
        if pending.attempt < self.retries {
            pending.attempt += 1;
            self.deadlines
                .push_back((now + self.timeout, seq, pending.attempt));
            self.counts.retries += 1;
            Some(Expiry::Retry { seq })
        } else {
            self.outstanding.remove(&seq);
            self.lost.insert(seq);
            self.counts.lost += 1;
            Some(Expiry::Lost { seq })
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> RrCounts {
        self.counts
    }

    /// Pops deadline entries of requests already answered or lost, or of copies since resent.
    fn drop_stale(&mut self) {
        while let Some(&(_, seq, attempt)) = self.deadlines.front() {
            match self.outstanding.get(&seq) {
                Some(p) if p.attempt == attempt => return,
                _ => {
                    self.deadlines.pop_front();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn answered_in_time_is_a_sample() {
        let t0 = Instant::now();
        let mut t = RequestTracker::new(10 * MS, 2);
        assert_eq!(t.send_new(t0), 0);
        assert_eq!(t.send_new(t0 + MS), 1);
        assert_eq!(t.outstanding(), 2);
        assert_eq!(
            t.on_response(1, t0 + 3 * MS),
            Answer::Answered {
                response_time: 2 * MS,
                retried: false
            }
        );
        assert_eq!(t.poll_timeout(), Some(t0 + 10 * MS));
        assert_eq!(
            t.on_response(0, t0 + 4 * MS),
            Answer::Answered {
                response_time: 4 * MS,
                retried: false
            }
        );
        assert_eq!(t.poll_timeout(), None, "stale deadlines are dropped");
        assert_eq!(t.handle_timeout(t0 + 100 * MS), None);
        assert_eq!(t.on_response(0, t0 + 5 * MS), Answer::Duplicate);
        assert_eq!(t.on_response(2, t0 + 5 * MS), Answer::Unknown);
        assert_eq!(
            t.counts(),
            RrCounts {
                sent: 2,
                answered: 2,
                duplicates: 1,
                unknown: 1,
                ..RrCounts::default()
            }
        );
    }

    #[test]
    fn retries_then_lost_then_late() {
        let t0 = Instant::now();
        let mut t = RequestTracker::new(10 * MS, 2);
        t.send_new(t0);
        assert_eq!(t.handle_timeout(t0 + 9 * MS), None, "not yet");
        assert_eq!(
            t.handle_timeout(t0 + 10 * MS),
            Some(Expiry::Retry { seq: 0 })
        );
        assert_eq!(t.handle_timeout(t0 + 10 * MS), None);
        // The retry's deadline runs from when it was sent.
        assert_eq!(t.poll_timeout(), Some(t0 + 20 * MS));
        assert_eq!(
            t.handle_timeout(t0 + 25 * MS),
            Some(Expiry::Retry { seq: 0 })
        );
        assert_eq!(t.poll_timeout(), Some(t0 + 35 * MS));
        assert_eq!(
            t.handle_timeout(t0 + 35 * MS),
            Some(Expiry::Lost { seq: 0 })
        );
        assert_eq!(t.outstanding(), 0);
        assert_eq!(t.poll_timeout(), None);
        assert_eq!(t.on_response(0, t0 + 40 * MS), Answer::Late);
        assert_eq!(t.on_response(0, t0 + 41 * MS), Answer::Late);
        let c = t.counts();
        assert_eq!(
            (c.sent, c.answered, c.lost, c.late, c.retries),
            (1, 0, 1, 2, 2)
        );
    }

    #[test]
    fn answer_after_a_retry_counts_from_the_first_copy() {
        let t0 = Instant::now();
        let mut t = RequestTracker::new(10 * MS, 1);
        t.send_new(t0);
        assert_eq!(
            t.handle_timeout(t0 + 10 * MS),
            Some(Expiry::Retry { seq: 0 })
        );
        assert_eq!(
            t.on_response(0, t0 + 12 * MS),
            Answer::Answered {
                response_time: 12 * MS,
                retried: true
            }
        );
        // The original copy's answer arrives too: a duplicate, not a sample.
        assert_eq!(t.on_response(0, t0 + 13 * MS), Answer::Duplicate);
        assert_eq!(t.handle_timeout(t0 + 100 * MS), None, "answered: no expiry");
    }

    #[test]
    fn zero_retries_loses_at_the_first_timeout_in_send_order() {
        let t0 = Instant::now();
        let mut t = RequestTracker::new(10 * MS, 0);
        for k in 0..3 {
            t.send_new(t0 + k * MS);
        }
        t.on_response(1, t0 + 5 * MS);
        let mut expired = Vec::new();
        while let Some(e) = t.handle_timeout(t0 + 50 * MS) {
            expired.push(e);
        }
        assert_eq!(expired, [Expiry::Lost { seq: 0 }, Expiry::Lost { seq: 2 }]);
        let c = t.counts();
        assert_eq!((c.sent, c.answered, c.lost, c.retries), (3, 1, 2, 0));
        assert_eq!(c.sent, c.answered + c.lost, "every request ends once");
    }
}
