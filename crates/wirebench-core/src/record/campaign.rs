//! Campaigns: what a set of runs was asked to do, where it ran and how it ended. Owns the
//! records the store keeps about a campaign besides its runs; must not know how they are kept.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::run::Parameters;
use crate::wire::proto::SessionParams;

/// How a campaign ended (or that it has not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Still running, or the process died without saying (a crash or a kill).
    Running,
    /// Every planned run finished.
    Complete,
    /// A run failed and the campaign stopped there.
    Failed,
    /// Stopped by a signal (SIGINT, SIGTERM, SIGHUP).
    Aborted,
    /// Its process died without storing its end (SIGKILL, a crash, power loss): found
    /// `running` by a later command on the same host whose writer process is gone.
    Interrupted,
}

impl Status {
    /// The name stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Complete => "complete",
            Status::Failed => "failed",
            Status::Aborted => "aborted",
            Status::Interrupted => "interrupted",
        }
    }

    /// The status named `s`; `None` for a name this build does not know.
    pub fn from_name(s: &str) -> Option<Status> {
        Some(match s {
            "running" => Status::Running,
            "complete" => Status::Complete,
            "failed" => Status::Failed,
            "aborted" => Status::Aborted,
            "interrupted" => Status::Interrupted,
            _ => return None,
        })
    }
}

/// The host a campaign ran on. Every field is optional: other systems lack /proc.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// Host name (/proc/sys/kernel/hostname).
    pub host_name: Option<String>,
    /// Kernel release (/proc/sys/kernel/osrelease).
    pub kernel: Option<String>,
    /// CPU model (first "model name" in /proc/cpuinfo).
    pub cpu_model: Option<String>,
    /// The wirebench version that ran the campaign.
    pub wirebench_version: String,
    /// Largest receive buffer a socket may ask for, bytes (/proc/sys/net/core/rmem_max).
    pub rmem_max_bytes: Option<u64>,
    /// Largest send buffer a socket may ask for, bytes (/proc/sys/net/core/wmem_max).
    pub wmem_max_bytes: Option<u64>,
}

/// What is known about a campaign when it starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewCampaign {
    /// Start time, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// The run parameters, as in the run document.
    pub parameters: Parameters,
    /// Runs planned.
    pub planned_runs: u64,
    /// Message sizes planned, in plan order.
    pub msg_sizes: Vec<u32>,
    /// Totals planned, in plan order.
    pub totals: Vec<u64>,
    /// The host it ran on.
    pub environment: Environment,
}

/// A stored campaign, without its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignInfo {
    /// Store id (what `show`, `export`, `report` and `compare` take).
    pub id: i64,
    /// Start time, seconds since the Unix epoch (UTC).
    pub started_at_unix_s: i64,
    /// End time, seconds since the Unix epoch (UTC); null while running or after a crash.
    pub finished_at_unix_s: Option<i64>,
    /// How it ended.
    pub status: Status,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
    /// `run` (measured here) or `import` (loaded from a file).
    pub origin: String,
    /// The run parameters.
    pub parameters: Parameters,
    /// Runs planned.
    pub planned_runs: u64,
    /// Finished runs stored.
    pub stored_runs: u64,
    /// Runs stored as aborted: in flight when the campaign was interrupted (at most one).
    #[serde(default)]
    pub aborted_runs: u64,
    /// Message sizes planned, in plan order.
    pub msg_sizes: Vec<u32>,
    /// Totals planned, in plan order.
    pub totals: Vec<u64>,
    /// The host it ran on.
    pub environment: Environment,
}

/// A run that was in flight when its campaign was interrupted: what the client knew of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbortedRun {
    /// 1-based position in the plan.
    pub position: u64,
    /// 0-based repeat index within its combination.
    pub repeat_index: u32,
    /// What was asked of the server (protocol, mechanism, message size, total, ...).
    pub params: SessionParams,
}

/// The process that writes a campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Writer {
    /// Its process id.
    pub pid: u32,
    /// The host name it runs on (`None` where it cannot be read).
    pub host: Option<String>,
    /// The kernel's boot id (/proc/sys/kernel/random/boot_id), so a pid from before a reboot
    /// is known dead whatever runs under that number now.
    pub boot_id: Option<String>,
}

/// What the client of a run stopped before its end had done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SoFar {
    /// Payload bytes sent (stop-and-wait: acknowledged; `--reverse`: read).
    pub bytes: u64,
    /// Whole messages those bytes make.
    pub messages: u64,
    /// Time since the run started.
    pub elapsed: Duration,
}

/// A run stored as aborted, with what was known when it stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct AbortedDetail {
    /// 1-based position in the plan.
    pub position: u64,
    /// Why it stopped (`None` for runs stored before schema version 6).
    pub reason: Option<String>,
    /// The client's figures so far, when they were known.
    pub so_far: Option<SoFar>,
}
