//! One lifecycle for every kind of stored campaign (`run`, `rr`, `ping`, `dns`, `rpm`): which
//! kind it is, how it stands (status, times, why it stopped, where it came from, the id that
//! follows it between stores) and the one document that carries a whole campaign between
//! stores, files and spool — `export`, `import`, `store copy` and a spooled result all read and
//! write it. Owns those records; must not know how a store keeps them.

use serde::{Deserialize, Serialize};

use super::campaign::{AbortedRun, SoFar, Status, Writer};
use super::document::Tool;
use super::run::RunRecord;
use crate::vocab::sweep::Point;

/// The kinds of campaign a results store keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CampaignKind {
    /// `wirebench run`: throughput runs.
    Run,
    /// `wirebench rr`: request-response sweeps.
    Rr,
    /// `wirebench ping`: round trips, stored as an rr-like sweep.
    Ping,
    /// `wirebench dns`: DNS probe campaigns.
    Dns,
    /// `wirebench rpm`: responsiveness tests.
    Rpm,
    /// `wirebench latency`: latency under load by direction.
    Latency,
}

impl CampaignKind {
    /// Every kind, in the order listings show them.
    pub const ALL: [CampaignKind; 6] = [
        CampaignKind::Run,
        CampaignKind::Dns,
        CampaignKind::Rr,
        CampaignKind::Ping,
        CampaignKind::Rpm,
        CampaignKind::Latency,
    ];

    /// The name in documents and on the command line (`run`, `rr`, `ping`, `dns`, `rpm`,
    /// `latency`).
    pub fn name(self) -> &'static str {
        match self {
            CampaignKind::Run => "run",
            CampaignKind::Rr => "rr",
            CampaignKind::Ping => "ping",
            CampaignKind::Dns => "dns",
            CampaignKind::Rpm => "rpm",
            CampaignKind::Latency => "latency",
        }
    }

    /// The kind named `s`; `None` for a name this build does not know.
    pub fn from_name(s: &str) -> Option<CampaignKind> {
        CampaignKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// What one campaign of this kind is called in messages ("campaign", "rr sweep", …).
    pub fn noun(self) -> &'static str {
        match self {
            CampaignKind::Run => "campaign",
            CampaignKind::Rr => "rr sweep",
            CampaignKind::Ping => "ping sweep",
            CampaignKind::Dns => "DNS campaign",
            CampaignKind::Rpm => "rpm campaign",
            CampaignKind::Latency => "latency campaign",
        }
    }

    /// What one result of this kind is called in messages ("run", "result", "test").
    pub fn result_noun(self) -> &'static str {
        match self {
            CampaignKind::Run => "run",
            CampaignKind::Rpm | CampaignKind::Latency => "test",
            _ => "result",
        }
    }
}

impl CampaignKind {
    /// Whether a campaign of this kind shares its store table with another kind (rr and
    /// ping), so that its records say which they are ([`SweepInfo::kind`]).
    pub fn shares_its_table(self) -> bool {
        matches!(self, CampaignKind::Rr | CampaignKind::Ping)
    }
}

/// The plan of a stored sweep (rr or ping, DNS, rpm): which kind a [`SweepInfo`] of it is
/// when its record does not say.
pub trait SweepPlan {
    /// The kind a record without `kind` is (an rr sweep's plan also plans ping sweeps).
    const KIND: CampaignKind;
}

fn implied_kind<P: SweepPlan>() -> CampaignKind {
    P::KIND
}

fn kind_is_implied(kind: &CampaignKind) -> bool {
    !kind.shares_its_table()
}

/// A stored sweep (rr or ping, DNS, rpm), without its results: one type for every sweep kind,
/// its plan the kind's own (`NewRrCampaign`, `NewDnsCampaign`, `NewRpmCampaign`). In JSON,
/// `kind` is written only for the kinds that share a table (`rr`, `ping`), as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "P: Serialize",
    deserialize = "P: Deserialize<'de> + SweepPlan"
))]
pub struct SweepInfo<P> {
    /// Store id (what `wirebench report --rr|--dns|--rpm` takes).
    pub id: i64,
    /// End time, seconds since the Unix epoch (UTC); null while running or after a crash.
    pub finished_at_unix_s: Option<i64>,
    /// How it ended.
    pub status: Status,
    /// What it was started with.
    pub campaign: P,
    /// Which command measured it (`rr` or `ping` for the rr table's sweeps).
    #[serde(default = "implied_kind::<P>", skip_serializing_if = "kind_is_implied")]
    pub kind: CampaignKind,
}

impl<P> SweepInfo<P> {
    /// A sweep of `kind` as the store read it: its lifecycle and its plan.
    pub fn new(kind: CampaignKind, life: Lifecycle, campaign: P) -> SweepInfo<P> {
        SweepInfo {
            id: life.id,
            finished_at_unix_s: life.finished_at_unix_s,
            status: life.status,
            campaign,
            kind,
        }
    }
}

/// How one stored campaign of any kind stands: what every kind shares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// Its id in the store it was read from (what `report`, `show` and `export` take); a new
    /// id is given wherever it is stored again.
    pub id: i64,
    /// The id that follows the campaign from store to store (`export`, `import`, `store copy`,
    /// the spool), so a later, finished version of it updates the one already there; `None`
    /// for campaigns stored before schema version 9.
    #[serde(default)]
    pub uid: Option<String>,
    /// Start time, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// End time, seconds since the Unix epoch (UTC); null while running or after a crash.
    pub finished_at_unix_s: Option<i64>,
    /// How it ended, or that it has not.
    pub status: Status,
    /// Why it stopped early, if it did (`failed`: the error; `aborted`: the signal).
    #[serde(default)]
    pub error: Option<String>,
    /// `run` (measured into this store), `import` (from a file) or the origin it had where it
    /// was copied from.
    pub origin: String,
    /// Results planned.
    pub planned: u64,
    /// Finished results stored.
    pub stored: u64,
    /// Results stored as aborted (a run stopped in flight; `run` campaigns only).
    #[serde(default)]
    pub aborted: u64,
}

impl Lifecycle {
    /// Whether the campaign still awaits its end: `running`, or `interrupted` (its writer
    /// died, but a copy or export of its finished version may still arrive and bring it).
    /// A campaign that ended takes nothing from another version of it but results it lacks.
    pub fn awaits_its_end(&self) -> bool {
        matches!(self.status, Status::Running | Status::Interrupted)
    }
}

/// One result of a campaign at its 1-based position in run order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Positioned<R> {
    /// 1-based position in run order (a throughput run's place in the plan, gaps and all).
    pub position: u64,
    /// The result.
    pub result: R,
}

/// Version of [`CampaignDocument`]'s layout; bumped on any incompatible change.
pub const DOCUMENT_VERSION: u32 = 1;

/// A whole campaign of one kind, as it moves between stores: `export --rr/--dns/--rpm ID`
/// prints it, `import` reads it, `store copy` carries it, and a result the store could not
/// take is kept in a spool file of this layout until it can.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignDocument<P, R> {
    /// [`DOCUMENT_VERSION`].
    pub schema_version: u32,
    /// Which program wrote it.
    pub tool: Tool,
    /// Which kind of campaign (`run`, `rr`, `ping`, `dns`, `rpm`).
    pub kind: CampaignKind,
    /// How it stands.
    pub campaign: Lifecycle,
    /// What it was started with (`NewCampaign`, `NewRrCampaign`, …).
    pub plan: P,
    /// Its results, in run order.
    pub results: Vec<Positioned<R>>,
    /// The process writing it, in a spool file (so a live writer's spool is left to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<Writer>,
}

impl<P, R> CampaignDocument<P, R> {
    /// The document of a campaign of `kind`, written by wirebench `version`.
    pub fn new(
        version: &str,
        kind: CampaignKind,
        campaign: Lifecycle,
        plan: P,
        results: Vec<Positioned<R>>,
    ) -> CampaignDocument<P, R> {
        CampaignDocument {
            schema_version: DOCUMENT_VERSION,
            tool: Tool {
                name: "wirebench".into(),
                version: version.into(),
            },
            kind,
            campaign,
            plan,
            results,
            writer: None,
        }
    }
}

/// One stored result of a throughput campaign: a finished run at its message size and total,
/// or a run stopped before its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoredRun {
    /// A finished run.
    Finished {
        /// Its message size and total.
        point: Point,
        /// The run.
        run: Box<RunRecord>,
    },
    /// A run stopped before its end (a signal, a failure): what the client knew of it.
    Aborted {
        /// Its place in the plan and what was asked of the server.
        run: Box<AbortedRun>,
        /// Why it stopped (`None` for runs stored before schema version 6).
        #[serde(default)]
        reason: Option<String>,
        /// The client's figures so far, when they were known.
        #[serde(default)]
        so_far: Option<SoFar>,
    },
}

impl StoredRun {
    /// A finished run with its message size and total.
    pub fn finished(point: Point, run: RunRecord) -> StoredRun {
        StoredRun::Finished {
            point,
            run: Box::new(run),
        }
    }

    /// A run stopped before its end: why, and the client's figures so far when known.
    pub fn aborted(run: AbortedRun, reason: &str, so_far: Option<SoFar>) -> StoredRun {
        StoredRun::Aborted {
            run: Box::new(run),
            reason: Some(reason.to_string()),
            so_far,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_their_names() {
        for k in CampaignKind::ALL {
            assert_eq!(CampaignKind::from_name(k.name()), Some(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.name()));
        }
        assert_eq!(CampaignKind::from_name("iperf"), None);
    }

    #[test]
    fn only_running_and_interrupted_campaigns_await_their_end() {
        let mut life = Lifecycle {
            id: 1,
            uid: None,
            started_at_unix_s: 0,
            finished_at_unix_s: None,
            status: Status::Running,
            error: None,
            origin: "run".into(),
            planned: 1,
            stored: 0,
            aborted: 0,
        };
        assert!(life.awaits_its_end());
        life.status = Status::Interrupted;
        assert!(life.awaits_its_end(), "a finished version may still arrive");
        for s in [Status::Complete, Status::Failed, Status::Aborted] {
            life.status = s;
            assert!(!life.awaits_its_end());
        }
    }
}
