//! A campaign document of any kind as text: which kind it holds, merging it into a store, and
//! writing one out — the one place that picks the [`Kind`] from a document's `kind`, for
//! `import`, `export` and the spool. Must not print.

use anyhow::{Context, Result};
use serde::Deserialize;
use wirebench_core::record::campaign::Writer;
use wirebench_core::record::lifecycle::{CampaignDocument, CampaignKind, DOCUMENT_VERSION};

use super::dns::Dns;
use super::kind::Kind;
use super::latency::Latency;
use super::lifecycle::Merged;
use super::rpm::Rpm;
use super::rr::{Ping, Rr};
use super::run::Run;
use crate::store::Store;

/// What every campaign document says before its kind's fields: enough to pick the kind and
/// tell a live writer's spool from a dead one's.
#[derive(Debug, Clone, Deserialize)]
pub struct Head {
    /// The layout version.
    pub schema_version: u32,
    /// The kind of campaign.
    pub kind: CampaignKind,
    /// Its uid, under `campaign`.
    #[serde(default)]
    pub campaign: Option<HeadCampaign>,
    /// The process that wrote it (spool files).
    #[serde(default)]
    pub writer: Option<Writer>,
}

/// The part of a document's `campaign` block [`Head`] reads.
#[derive(Debug, Clone, Deserialize)]
pub struct HeadCampaign {
    /// The campaign's uid.
    #[serde(default)]
    pub uid: Option<String>,
}

impl Head {
    /// The head of a campaign document; `None` when `text` is not one (an export of a
    /// throughput campaign or a `run --json` document has no `kind`).
    pub fn of(text: &str) -> Option<Head> {
        serde_json::from_str(text).ok()
    }

    /// The campaign's uid, if it has one.
    pub fn uid(&self) -> Option<&str> {
        self.campaign.as_ref()?.uid.as_deref()
    }
}

impl Store {
    /// Merges the campaign document `text` into this store ([`Store::merge`]), whatever its
    /// kind; its kind and what the merge did.
    pub fn merge_text(
        &self,
        text: &str,
        origin: Option<&str>,
        again: bool,
    ) -> Result<(CampaignKind, Merged)> {
        let head: Head = serde_json::from_str(text).context("not a wirebench campaign document")?;
        if head.schema_version != DOCUMENT_VERSION {
            anyhow::bail!(
                "campaign document version {} is not one this wirebench reads ({DOCUMENT_VERSION})",
                head.schema_version
            );
        }
        let merged = match head.kind {
            CampaignKind::Run => self.merge_as::<Run>(text, origin, again),
            CampaignKind::Rr => self.merge_as::<Rr>(text, origin, again),
            CampaignKind::Ping => self.merge_as::<Ping>(text, origin, again),
            CampaignKind::Dns => self.merge_as::<Dns>(text, origin, again),
            CampaignKind::Rpm => self.merge_as::<Rpm>(text, origin, again),
            CampaignKind::Latency => self.merge_as::<Latency>(text, origin, again),
        }?;
        Ok((head.kind, merged))
    }

    fn merge_as<K: Kind>(&self, text: &str, origin: Option<&str>, again: bool) -> Result<Merged> {
        let doc: CampaignDocument<K::Plan, K::Result> = serde_json::from_str(text)
            .with_context(|| format!("not a readable {} document", K::KIND.noun()))?;
        self.merge::<K>(&doc, origin, again)
    }

    /// Campaign `id` of `kind` as a document (pretty JSON), `None` when there is no such id.
    /// An rr id that is a ping sweep is given as one, and the other way round.
    pub fn document_text(&self, kind: CampaignKind, id: i64) -> Result<Option<String>> {
        let text = match kind {
            CampaignKind::Run => self.text_of::<Run>(id)?,
            CampaignKind::Rr | CampaignKind::Ping => match self.text_of::<Rr>(id)? {
                Some(text) => Some(text),
                None => self.text_of::<Ping>(id)?,
            },
            CampaignKind::Dns => self.text_of::<Dns>(id)?,
            CampaignKind::Rpm => self.text_of::<Rpm>(id)?,
            CampaignKind::Latency => self.text_of::<Latency>(id)?,
        };
        Ok(text)
    }

    fn text_of<K: Kind>(&self, id: i64) -> Result<Option<String>> {
        self.document::<K>(id)?
            .map(|doc| serde_json::to_string_pretty(&doc).context("while writing the document"))
            .transpose()
    }
}
