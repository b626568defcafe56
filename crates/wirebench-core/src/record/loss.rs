//! Where a UDP run's lost messages went: owns [`LossSplit`], the one split of a loss figure
//! into what the receiving host dropped, what the sending host did not send and what the path
//! lost, counted in messages (datagrams). Pure: the ends' counts come in, nothing is measured.

use serde::{Deserialize, Serialize};

/// A UDP loss figure, split by where the messages were lost. The three shares add up to the
/// loss they split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LossSplit {
    /// Dropped by the receiving host: its socket's buffer was full when they arrived (the
    /// receiver's drop counter, turned into messages by their sequence numbers).
    pub receiving_host: u64,
    /// Not sent by the sending host: numbered by the sender, refused by its host (a full
    /// device queue).
    pub sending_host: u64,
    /// Lost on the path: the rest.
    pub path: u64,
}

impl LossSplit {
    /// The split of `lost` messages, given how many the receiver says its host dropped (None:
    /// its socket does not say, and there is no split) and how many the sender's host did not
    /// send. Each share is held within what the loss leaves for it, the sender's first (a
    /// message it never sent cannot have been dropped later).
    pub fn of(lost: u64, receiving_host: Option<u64>, sending_host: u64) -> Option<LossSplit> {
        let receiving = receiving_host?;
        let sending_host = sending_host.min(lost);
        let receiving_host = receiving.min(lost - sending_host);
        Some(LossSplit {
            receiving_host,
            sending_host,
            path: lost - sending_host - receiving_host,
        })
    }

    /// The shares added up (both directions of a `--bidir` run).
    pub fn plus(self, other: LossSplit) -> LossSplit {
        LossSplit {
            receiving_host: self.receiving_host + other.receiving_host,
            sending_host: self.sending_host + other.sending_host,
            path: self.path + other.path,
        }
    }

    /// The messages the split covers.
    #[cfg(test)]
    fn total(&self) -> u64 {
        self.receiving_host + self.sending_host + self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shares_add_up_to_the_loss() {
        let s = LossSplit::of(100, Some(60), 15).unwrap();
        assert_eq!(
            s,
            LossSplit {
                receiving_host: 60,
                sending_host: 15,
                path: 25
            }
        );
        assert_eq!(s.total(), 100);
    }

    #[test]
    fn all_of_a_loopback_loss_at_the_receiver() {
        let s = LossSplit::of(189_348, Some(189_348), 0).unwrap();
        assert_eq!((s.receiving_host, s.sending_host, s.path), (189_348, 0, 0));
    }

    #[test]
    fn shares_never_exceed_the_loss_and_unknown_means_no_split() {
        let s = LossSplit::of(10, Some(30), 4).unwrap();
        assert_eq!((s.receiving_host, s.sending_host, s.path), (6, 4, 0));
        let s = LossSplit::of(3, Some(0), 9).unwrap();
        assert_eq!((s.receiving_host, s.sending_host, s.path), (0, 3, 0));
        assert_eq!(LossSplit::of(10, None, 4), None);
        assert_eq!(LossSplit::of(0, Some(0), 0).unwrap().total(), 0);
    }

    #[test]
    fn two_directions_add_up() {
        let a = LossSplit::of(10, Some(4), 1).unwrap();
        let b = LossSplit::of(5, Some(5), 0).unwrap();
        assert_eq!(a.plus(b).total(), 15);
        assert_eq!(a.plus(b).receiving_host, 9);
    }
}
