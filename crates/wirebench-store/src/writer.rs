//! Who writes a campaign: the writer process (pid, host, boot) recorded when a campaign of
//! any kind begins (schema V6 for runs, V9 for every kind), and campaigns of dead writers
//! marked `interrupted`. Must not print or decide when to stop.

use anyhow::{bail, Context, Result};

use wirebench_core::record::campaign::{Status, Writer};

use super::kind::{Kind, Tables};
use super::run::Run;
use super::sql::args;
use crate::store::Store;

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

impl Store {
    /// Records `writer` as the process writing throughput campaign `campaign`.
    pub fn claim_campaign(&mut self, campaign: i64, writer: &Writer) -> Result<()> {
        self.claim::<Run>(campaign, writer)
    }

    /// Records `writer` as the process writing `campaign` of kind `K` (`begin` records this
    /// process already).
    pub fn claim<K: Kind>(&self, campaign: i64, writer: &Writer) -> Result<()> {
        let t = Tables::of(K::KIND);
        let changed = self
            .execute(
                &format!(
                    "UPDATE {} SET writer_pid = ?1, writer_host = ?2, writer_boot_id = ?3
                     WHERE id = ?4",
                    t.campaigns
                ),
                args![writer.pid, &writer.host, &writer.boot_id, campaign],
            )
            .with_context(|| {
                format!(
                    "while recording the writer of {} {campaign}",
                    K::KIND.noun()
                )
            })?;
        if changed != 1 {
            bail!(
                "{} {campaign} is not in the results database",
                K::KIND.noun()
            );
        }
        Ok(())
    }

    /// Marks as `interrupted` every campaign of every kind still `running` whose writer ran
    /// on this host (`me`'s) and is gone: another boot, or a process id no live process has.
    /// Campaigns of other hosts, of live processes, without a recorded writer (older stores,
    /// imports, copies), or whose end waits in a spool file this open could not bring in yet,
    /// are left alone (a PostgreSQL store is shared by many hosts: a process id means
    /// something only on its own host). Returns the ids marked, per campaign table.
    pub fn mark_interrupted(&mut self, me: &Writer) -> Result<Vec<i64>> {
        let Some(host) = &me.host else {
            // Without our host name we cannot tell our campaigns from another host's.
            return Ok(Vec::new());
        };
        let pending: Vec<&str> = self
            .replayed()
            .iter()
            .filter(|r| r.outcome.is_err())
            .filter_map(|r| r.uid.as_deref())
            .collect();
        let mut marked = Vec::new();
        for table in Tables::every_campaign_table() {
            let candidates = self
                .query(
                    &format!(
                        "SELECT id, writer_pid, writer_boot_id, uid FROM {table}
                         WHERE status = 'running' AND writer_pid IS NOT NULL AND writer_host = ?1"
                    ),
                    args![host],
                )?
                .iter()
                .map(|row| Ok((row.i64(0)?, row.i64(1)?, row.opt_text(2)?, row.opt_text(3)?)))
                .collect::<Result<Vec<_>>>()?;
            for (id, pid, boot, uid) in candidates {
                if uid.as_deref().is_some_and(|u| pending.contains(&u)) {
                    continue;
                }
                let rebooted = matches!((&boot, &me.boot_id), (Some(a), Some(b)) if a != b);
                let dead = rebooted || i32::try_from(pid).is_ok_and(|pid| !process_alive(pid));
                if !dead {
                    continue;
                }
                let why = if rebooted {
                    format!("its process (pid {pid}) ended with the host's previous boot, without storing its end")
                } else {
                    format!(
                        "its process (pid {pid}) ended without storing its end (killed or crashed)"
                    )
                };
                // Only if still running: a writer that finished meanwhile keeps its own status.
                let changed = self.execute(
                    &format!(
                        "UPDATE {table} SET status = ?1, error = coalesce(error, ?2)
                         WHERE id = ?3 AND status = 'running'"
                    ),
                    args![Status::Interrupted.as_str(), why, id],
                )?;
                if changed == 1 {
                    marked.push(id);
                }
            }
        }
        Ok(marked)
    }
}

/// Whether a process with this id exists on this host and has not ended (a zombie, ended but
/// not yet reaped by its parent, counts as ended).
pub(super) fn process_alive(pid: i32) -> bool {
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
