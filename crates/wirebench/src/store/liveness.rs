//! Who writes a campaign, and what is left when a writer stops early: the writer process
//! (pid, host, boot) recorded when a campaign begins, campaigns of dead writers marked
//! `interrupted`, and runs stopped before their end stored as aborted with their reason and
//! the client's figures so far (schema V6). Must not print or decide when to stop.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use wirebench_core::record::campaign::{AbortedDetail, SoFar, Writer};

/// This process, as the writer of a campaign: pid, host name and the kernel's boot id (so a
/// pid from before a reboot is known dead whatever runs under that number now).
pub fn this_process() -> Writer {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    Writer {
        pid: std::process::id(),
        host: read("/proc/sys/kernel/hostname"),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
    }
}

use super::sql::args;
use super::{insert_aborted, AbortedRun, Status, Store};

impl Store {
    /// Records `writer` as the process writing `campaign`.
    pub fn claim_campaign(&mut self, campaign: i64, writer: &Writer) -> Result<()> {
        let changed = self
            .execute(
                "UPDATE campaign SET writer_pid = ?1, writer_host = ?2, writer_boot_id = ?3
                 WHERE id = ?4",
                args![writer.pid, &writer.host, &writer.boot_id, campaign],
            )
            .with_context(|| format!("while recording the writer of campaign {campaign}"))?;
        if changed != 1 {
            bail!("campaign {campaign} is not in the results database");
        }
        Ok(())
    }

    /// Marks as `interrupted` every campaign still `running` whose writer ran on this host
    /// (`me`'s) and is gone: another boot, or a process id no live process has. Campaigns of
    /// other hosts, of live processes, or without a recorded writer are left alone (a
    /// PostgreSQL store is shared by many hosts: a process id means something only on its
    /// own host). Returns the ids marked.
    pub fn mark_interrupted(&mut self, me: &Writer) -> Result<Vec<i64>> {
        let Some(host) = &me.host else {
            // Without our host name we cannot tell our campaigns from another host's.
            return Ok(Vec::new());
        };
        let candidates = self
            .query(
                "SELECT id, writer_pid, writer_boot_id FROM campaign
                 WHERE status = 'running' AND writer_pid IS NOT NULL AND writer_host = ?1",
                args![host],
            )?
            .iter()
            .map(|row| Ok((row.i64(0)?, row.i64(1)?, row.opt_text(2)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut marked = Vec::new();
        for (id, pid, boot) in candidates {
            let rebooted = matches!((&boot, &me.boot_id), (Some(a), Some(b)) if a != b);
            let dead = rebooted || i32::try_from(pid).is_ok_and(|pid| !process_alive(pid));
            if !dead {
                continue;
            }
            let why = if rebooted {
                format!("its process (pid {pid}) ended with the host's previous boot, without storing its end")
            } else {
                format!("its process (pid {pid}) ended without storing its end (killed or crashed)")
            };
            // Only if still running: a writer that finished meanwhile keeps its own status.
            let changed = self.execute(
                "UPDATE campaign SET status = ?1, error = coalesce(error, ?2)
                 WHERE id = ?3 AND status = 'running'",
                args![Status::Interrupted.as_str(), why, id],
            )?;
            if changed == 1 {
                marked.push(id);
            }
        }
        Ok(marked)
    }

    /// Commits a run of `campaign` that stopped before its end, as `aborted`: its parameters,
    /// why it stopped, and the client's figures so far when known.
    pub fn add_stopped_run(
        &mut self,
        campaign: i64,
        run: &AbortedRun,
        reason: &str,
        so_far: Option<SoFar>,
    ) -> Result<()> {
        self.transaction(|tx| insert_aborted(tx, campaign, run, Some(reason), so_far))
    }

    /// Why each aborted run of `campaign` stopped and what its client had done, in plan order.
    pub fn aborted_details(&self, campaign: i64) -> Result<Vec<AbortedDetail>> {
        let rows = self.query(
            "SELECT position, abort_reason, client_messages, client_bytes, client_elapsed_ns
             FROM run WHERE campaign_id = ?1 AND status = 'aborted' ORDER BY position",
            args![campaign],
        )?;
        rows.iter()
            .map(|row| {
                let so_far = match (row.opt_i64(2)?, row.opt_i64(3)?, row.opt_i64(4)?) {
                    (Some(m), Some(b), Some(e)) => Some(SoFar {
                        messages: u64::try_from(m).unwrap_or(0),
                        bytes: u64::try_from(b).unwrap_or(0),
                        elapsed: Duration::from_nanos(u64::try_from(e).unwrap_or(0)),
                    }),
                    _ => None,
                };
                Ok(AbortedDetail {
                    position: row.count(0)?,
                    reason: row.opt_text(1)?,
                    so_far,
                })
            })
            .collect()
    }
}

/// Whether a process with this id exists on this host and has not ended (a zombie, ended but
/// not yet reaped by its parent, counts as ended).
fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        // 0 and negative numbers name process groups to kill(2), not a process.
        return false;
    }
    // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && !is_zombie(pid)
}

/// Whether /proc says the process is a zombie (state `Z`); false where /proc is missing.
fn is_zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the state follows the last ')', since comm may hold anything.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state == "Z" || state == "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(process_alive(i32::try_from(std::process::id()).unwrap()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        child.wait().unwrap();
        assert!(!process_alive(pid), "reaped: no such process");
        assert!(!process_alive(0) && !process_alive(-1));
    }
}
