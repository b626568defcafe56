//! A busy machine for the lab to measure beside: one busy-looping process per CPU at the
//! test's own priority (nice 0 under cargo), each killed by its PID and reaped when dropped.

use std::process::{Child, Command, Stdio};

/// The busy processes; dropping it ends them.
pub struct CpuHog(Vec<Child>);

impl CpuHog {
    /// Starts one busy process per CPU this process may use.
    pub fn start() -> CpuHog {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        CpuHog(
            (0..cpus)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("sh runs a busy loop")
                })
                .collect(),
        )
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
