//! What makes one kind of campaign different in the store, and nothing else: its two tables,
//! the columns of its plan and of its results, and how a row reads back ([`Kind`]). Every kind
//! shares the lifecycle columns of schema version 9 (status, times, error, origin, writer,
//! uid), so beginning, recording, finishing, marking interrupted, reading, copying, importing
//! and spooling are written once, over this trait (`lifecycle.rs`, `copy.rs`, `spool.rs`).
//! The kinds are `run.rs`, `rr.rs`, `dns.rs`, `rpm.rs` and `latency.rs`.

use std::fmt::Debug;

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde::Serialize;
use wirebench_core::record::lifecycle::{CampaignKind, Lifecycle};

use super::sql::{Row, Value};

/// One kind of stored campaign.
pub trait Kind {
    /// Which kind this is.
    const KIND: CampaignKind;
    /// What is known about a campaign when it begins (`NewCampaign`, `NewRrCampaign`, …).
    type Plan: Clone + Debug + Serialize + DeserializeOwned + Send;
    /// One result (`StoredRun`, `RrResult`, …).
    type Result: Clone + Debug + Serialize + DeserializeOwned + Send;
    /// A campaign as the views read it (`CampaignInfo`, `SweepInfo<NewRrCampaign>`, …).
    type Info;

    /// The plan's columns of the campaign table, in the order [`Kind::plan_values`] gives and
    /// [`Kind::read_plan`] reads them; among them `started_at_unix_s`, `host_name` and the
    /// planned count ([`Tables::planned`]).
    const PLAN_COLUMNS: &'static [&'static str];
    /// The plan columns that, with the start time and the planned count, name a campaign
    /// stored before campaigns had a uid (what a second copy of it would repeat).
    const IDENTITY: &'static [&'static str];
    /// The columns of a result row (beside `campaign_id` and `position`), in the order
    /// [`Kind::result_values`] gives and [`Kind::read_result`] reads them.
    const RESULT_COLUMNS: &'static [&'static str];

    /// The plan as column values.
    fn plan_values(plan: &Self::Plan) -> Result<Vec<Value>>;
    /// The plan from a row whose plan columns start at `at`.
    fn read_plan(row: &Row, at: usize) -> Result<Self::Plan>;
    /// When the campaign started, seconds since the Unix epoch.
    fn started_at(plan: &Self::Plan) -> i64;
    /// Results planned.
    fn planned(plan: &Self::Plan) -> u64;
    /// Whether a result was stopped in flight (a complete campaign holds none).
    fn stopped_in_flight(_result: &Self::Result) -> bool {
        false
    }
    /// Why a result read from a file cannot be true, if it cannot (checked before it is
    /// stored); kinds whose results have nothing to check across accept every one.
    fn check_result(_result: &Self::Result) -> std::result::Result<(), String> {
        Ok(())
    }
    /// A result as column values.
    fn result_values(result: &Self::Result) -> Result<Vec<Value>>;
    /// The result at `position` from a row whose result columns start at `at`.
    fn read_result(row: &Row, at: usize, position: u64) -> Result<Self::Result>;
    /// A campaign's lifecycle and plan as the views read it.
    fn info(life: Lifecycle, plan: Self::Plan) -> Self::Info;
}

/// Where a kind lives: its tables and what tells its rows apart. The names are ours, never
/// the user's, so they are formatted into SQL.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    /// The campaign table.
    pub campaigns: &'static str,
    /// The result table (`campaign_id`, `position`, …).
    pub results: &'static str,
    /// The campaign table's planned-count column.
    pub planned: &'static str,
    /// The value of `command` that is this kind's, where two kinds share the tables
    /// (`rr_campaign`: rr and ping).
    pub command: Option<&'static str>,
    /// The condition on a result row `r` that it is finished (`run`: not aborted).
    pub finished: &'static str,
    /// The condition on a result row `r` that it is aborted, for kinds that keep such rows.
    pub aborted: Option<&'static str>,
}

impl Tables {
    /// The tables of `kind`.
    pub fn of(kind: CampaignKind) -> Tables {
        let sweep = |campaigns, results, command| Tables {
            campaigns,
            results,
            planned: "planned_results",
            command,
            finished: "1 = 1",
            aborted: None,
        };
        match kind {
            CampaignKind::Run => Tables {
                campaigns: "campaign",
                results: "run",
                planned: "planned_runs",
                command: None,
                finished: "r.status = 'complete'",
                aborted: Some("r.status = 'aborted'"),
            },
            CampaignKind::Rr => sweep("rr_campaign", "rr_result", Some("rr")),
            CampaignKind::Ping => sweep("rr_campaign", "rr_result", Some("ping")),
            CampaignKind::Dns => sweep("dns_campaign", "dns_result", None),
            CampaignKind::Rpm => sweep("rpm_campaign", "rpm_result", None),
            CampaignKind::Latency => sweep("latency_campaign", "latency_result", None),
        }
    }

    /// `AND c.command = '…'` for a kind that shares its table, else nothing.
    pub fn scope(&self) -> String {
        match self.command {
            Some(command) => format!(" AND c.command = '{command}'"),
            None => String::new(),
        }
    }

    /// The campaign tables, each once (rr and ping share one).
    pub fn every_campaign_table() -> Vec<&'static str> {
        let mut tables: Vec<&'static str> = CampaignKind::ALL
            .iter()
            .map(|k| Tables::of(*k).campaigns)
            .collect();
        tables.sort_unstable();
        tables.dedup();
        tables
    }
}

/// The lifecycle columns every campaign table holds, as [`Lifecycle`] reads them: `c.` first.
///
/// [`Lifecycle`]: wirebench_core::record::lifecycle::Lifecycle
pub const LIFECYCLE_SELECT: &str = "c.id, c.uid, c.started_at_unix_s, c.finished_at_unix_s, \
     c.status, c.error, c.origin";

/// How many columns [`LIFECYCLE_SELECT`] and the three counts after it take.
pub const LIFECYCLE_WIDTH: usize = 10;

/// `SELECT` of a kind's campaigns: the lifecycle, its planned, stored and aborted counts,
/// then the plan's columns; `FROM {campaigns} c WHERE 1 = 1` and the kind's scope, for the
/// caller to add conditions and an order.
pub fn campaign_select<K: Kind>() -> String {
    let t = Tables::of(K::KIND);
    let plan: Vec<String> = K::PLAN_COLUMNS.iter().map(|c| format!("c.{c}")).collect();
    let aborted = match t.aborted {
        Some(cond) => format!(
            "(SELECT count(*) FROM {} r WHERE r.campaign_id = c.id AND {cond})",
            t.results
        ),
        None => "0".to_string(),
    };
    format!(
        "SELECT {LIFECYCLE_SELECT}, c.{planned},
             (SELECT count(*) FROM {results} r WHERE r.campaign_id = c.id AND {finished}),
             {aborted}, {plan}
         FROM {campaigns} c WHERE 1 = 1{scope}",
        planned = t.planned,
        results = t.results,
        finished = t.finished,
        plan = plan.join(", "),
        campaigns = t.campaigns,
        scope = t.scope(),
    )
}

/// A new campaign uid: 128 random bits as 32 hex digits.
pub fn new_uid() -> String {
    let bits: u128 = rand::random();
    format!("{bits:032x}")
}

/// Both backends' integers are signed 64-bit; counts beyond that are refused rather than wrapped.
pub fn int(v: u64, what: &str) -> Result<i64> {
    use anyhow::Context;
    i64::try_from(v).with_context(|| format!("{what} {v} is too large to store"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_distinct_hex() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn rr_and_ping_share_a_table_and_nothing_else_does() {
        assert_eq!(
            Tables::every_campaign_table(),
            [
                "campaign",
                "dns_campaign",
                "latency_campaign",
                "rpm_campaign",
                "rr_campaign"
            ]
        );
        assert_eq!(
            Tables::of(CampaignKind::Ping).scope(),
            " AND c.command = 'ping'"
        );
        assert_eq!(Tables::of(CampaignKind::Dns).scope(), "");
    }
}
