//! What a command may change about its own process, as iperf3's flags do: the CPU it runs on
//! (`-A`), and where its output goes, each line with a prefix (`--logfile`, `-T`). Owns the
//! file descriptors and the one thread that prefixes lines; must not decide the output.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use anyhow::{Context, Result};

/// Runs every thread of this process (and those it starts later, which inherit it) on `cpu`.
#[cfg(target_os = "linux")]
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    let max = usize::try_from(libc::CPU_SETSIZE).unwrap_or(1024);
    if cpu >= max {
        anyhow::bail!("CPU {cpu} does not exist here (at most {max} CPUs can be named)");
    }
    // SAFETY: cpu_set_t is plain old data: all-zero bytes are the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    let tasks =
        std::fs::read_dir("/proc/self/task").context("while listing this process's threads")?;
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: `set` is a valid cpu_set_t that outlives the call; `tid` names a thread of
        // this process, or one that has ended since the listing.
        let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            // A thread that ended since the listing (an idle blocking thread) needs no CPU.
            if e.raw_os_error() == Some(libc::ESRCH) {
                continue;
            }
            return Err(e).with_context(|| format!("cannot run on CPU {cpu}"));
        }
    }
    Ok(())
}

/// Choosing a CPU needs Linux here.
#[cfg(not(target_os = "linux"))]
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    anyhow::bail!("cannot run on CPU {cpu}: choosing the CPU (-A) needs Linux")
}

/// This process's stdout (and with a log file, stderr) sent elsewhere until dropped: to a log
/// file, appended, and with a prefix on every line of stdout.
#[derive(Debug)]
pub struct Redirect {
    /// The original stdout and stderr, put back on drop.
    saved: Vec<(RawFd, OwnedFd)>,
    /// The thread that prefixes stdout's lines, ended by the end of its pipe.
    prefixer: Option<std::thread::JoinHandle<()>>,
}

impl Redirect {
    /// Sends stdout to `logfile` (stderr too) or keeps it where it is, each of its lines
    /// starting with `prefix` when given. Nothing changes without either.
    pub fn new(logfile: Option<&Path>, prefix: Option<String>) -> Result<Redirect> {
        let mut r = Redirect {
            saved: Vec::new(),
            prefixer: None,
        };
        let log = logfile
            .map(|path| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("cannot open the log file {}", path.display()))
            })
            .transpose()?;
        let out: File = match &log {
            Some(file) => file.try_clone().context("while opening the log file")?,
            None => File::from(dup(libc::STDOUT_FILENO)?),
        };
        if let Some(file) = &log {
            r.replace(libc::STDERR_FILENO, file.as_raw_fd())?;
        }
        match prefix {
            Some(prefix) => {
                let (read, write) = pipe()?;
                let reader = BufReader::new(File::from(read));
                r.prefixer = Some(std::thread::spawn(move || {
                    prefix_lines(reader, out, &prefix)
                }));
                r.replace(libc::STDOUT_FILENO, write.as_raw_fd())?;
                // `write` closes here: the pipe's only writer is now stdout itself.
            }
            None => {
                if log.is_some() {
                    r.replace(libc::STDOUT_FILENO, out.as_raw_fd())?;
                }
            }
        }
        Ok(r)
    }

    /// Points `fd` at `to`, keeping what it was for the drop.
    fn replace(&mut self, fd: RawFd, to: RawFd) -> Result<()> {
        let before = dup(fd)?;
        let _ = std::io::stdout().flush();
        // SAFETY: both descriptors are open (`to` is owned by the caller for the call).
        if unsafe { libc::dup2(to, fd) } < 0 {
            return Err(std::io::Error::last_os_error()).context("while redirecting the output");
        }
        self.saved.push((fd, before));
        Ok(())
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        for (fd, before) in self.saved.drain(..).rev() {
            // SAFETY: `before` is an open descriptor we own; `fd` is stdout or stderr. Putting
            // it back closes the pipe's last writer, which ends the prefixer.
            unsafe { libc::dup2(before.as_raw_fd(), fd) };
        }
        if let Some(t) = self.prefixer.take() {
            let _ = t.join();
        }
    }
}

/// Copies lines from `from` to `to`, each after `prefix` (iperf3's -T: "TITLE:  line").
fn prefix_lines(from: BufReader<File>, mut to: File, prefix: &str) {
    for line in from.split(b'\n') {
        let Ok(line) = line else { break };
        let mut out = Vec::with_capacity(prefix.len() + 3 + line.len());
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(b":  ");
        out.extend_from_slice(&line);
        out.push(b'\n');
        if to.write_all(&out).is_err() {
            break;
        }
    }
}

fn dup(fd: RawFd) -> Result<OwnedFd> {
    // SAFETY: dup has no memory effects; a negative result is an error, a non-negative one a
    // new descriptor we own.
    let new = unsafe { libc::dup(fd) };
    if new < 0 {
        return Err(std::io::Error::last_os_error()).context("while duplicating stdout");
    }
    // SAFETY: `new` is a fresh, open descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error()).context("while making a pipe for -T");
    }
    // SAFETY: pipe2 succeeded: both are fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
