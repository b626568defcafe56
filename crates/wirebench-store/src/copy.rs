//! Copying history from one store into another (`wirebench store copy`): every campaign of
//! every kind with all its results, each merged in one transaction of the destination, new
//! ids given by the destination. A campaign the destination already holds in full is skipped,
//! so copying twice duplicates nothing; one it holds unfinished (copied while it ran) is
//! brought up to date: the results it lacks and its end. Must not print.

use anyhow::{Context, Result};
use wirebench_core::record::lifecycle::CampaignKind;

use super::dns::Dns;
use super::kind::Kind;
use super::latency::Latency;
use super::lifecycle::Merged;
use super::rpm::Rpm;
use super::rr::{Ping, Rr};
use super::run::Run;
use crate::store::Store;

/// What a copy did with the campaigns of one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindCounts {
    /// Campaigns copied whole.
    pub copied: u64,
    /// Campaigns the destination held unfinished, brought up to date.
    pub updated: u64,
    /// Campaigns the destination already held in full.
    pub skipped: u64,
    /// Results (finished and aborted runs) of the campaigns copied whole.
    pub results: u64,
    /// Results added to the campaigns brought up to date.
    pub added: u64,
}

/// What a copy did, per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyCounts {
    /// Per kind, in [`CampaignKind::ALL`] order.
    pub kinds: Vec<(CampaignKind, KindCounts)>,
}

impl CopyCounts {
    /// The counts of one kind.
    pub fn of(&self, kind: CampaignKind) -> KindCounts {
        self.kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, c)| *c)
            .unwrap_or_default()
    }

    /// Campaigns of every kind the destination already held in full.
    pub fn skipped(&self) -> u64 {
        self.kinds.iter().map(|(_, c)| c.skipped).sum()
    }

    /// Campaigns of every kind brought up to date.
    pub fn updated(&self) -> u64 {
        self.kinds.iter().map(|(_, c)| c.updated).sum()
    }

    /// Results added to the campaigns brought up to date, of every kind.
    pub fn added(&self) -> u64 {
        self.kinds.iter().map(|(_, c)| c.added).sum()
    }
}

impl Store {
    /// Copies everything in `from` that this store does not hold yet.
    pub fn copy_from(&mut self, from: &Store) -> Result<CopyCounts> {
        let mut n = CopyCounts::default();
        for kind in CampaignKind::ALL {
            let counts = match kind {
                CampaignKind::Run => self.copy_kind::<Run>(from),
                CampaignKind::Rr => self.copy_kind::<Rr>(from),
                CampaignKind::Ping => self.copy_kind::<Ping>(from),
                CampaignKind::Dns => self.copy_kind::<Dns>(from),
                CampaignKind::Rpm => self.copy_kind::<Rpm>(from),
                CampaignKind::Latency => self.copy_kind::<Latency>(from),
            }?;
            n.kinds.push((kind, counts));
        }
        Ok(n)
    }

    /// Merges every campaign of kind `K` of `from` into this store.
    fn copy_kind<K: Kind>(&mut self, from: &Store) -> Result<KindCounts> {
        let mut n = KindCounts::default();
        for (life, _) in from.list::<K>()? {
            let doc = from.document::<K>(life.id)?.with_context(|| {
                format!("{} {} vanished while copying", K::KIND.noun(), life.id)
            })?;
            // Positions are kept: a run's place in the plan, gaps and all.
            let merged = self
                .merge::<K>(&doc, None, false)
                .with_context(|| format!("while copying {} {}", K::KIND.noun(), life.id))?;
            match merged {
                Merged::New(_) => {
                    n.copied += 1;
                    n.results += doc.results.len() as u64;
                }
                Merged::Updated { added, .. } => {
                    n.updated += 1;
                    n.added += added;
                }
                Merged::AlreadyThere(_) => n.skipped += 1,
            }
        }
        Ok(n)
    }
}
