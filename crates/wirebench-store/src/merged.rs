//! What bringing a campaign in from elsewhere did ([`Merged`]: an import, a copy, a spool file),
//! and what the open did with each spool file ([`Replayed`]); below the store handle, which
//! keeps the latter, and the lifecycle and spool, which produce them.

use std::path::PathBuf;

use wirebench_core::record::campaign::Status;
use wirebench_core::record::lifecycle::CampaignKind;

/// What merging a campaign from elsewhere did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merged {
    /// The store did not hold it: it is stored whole under this id.
    New(i64),
    /// The store held it and took what it lacked: `added` results, and its end when `ended`.
    Updated {
        /// Its id in this store.
        id: i64,
        /// Results added.
        added: u64,
        /// The status it ended with, when its status and end came with it (it was running or
        /// interrupted here).
        ended: Option<Status>,
    },
    /// The store already held all of it.
    AlreadyThere(i64),
}

impl Merged {
    /// The campaign's id in this store.
    pub fn id(self) -> i64 {
        match self {
            Merged::New(id) | Merged::AlreadyThere(id) | Merged::Updated { id, .. } => id,
        }
    }
}

/// What the open did with one spool file.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The file.
    pub path: PathBuf,
    /// Its campaign's kind.
    pub kind: CampaignKind,
    /// Its campaign's uid.
    pub uid: Option<String>,
    /// What the merge did (the file is removed), or why it could not (the file stays).
    pub outcome: std::result::Result<Merged, String>,
}
