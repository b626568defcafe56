//! Facts about the host a campaign ran on (host name, kernel, CPU, socket buffer maxima), read
//! from /proc where it exists. Owns nothing else; a fact that cannot be read is left empty, never
//! an error.

use wirebench_core::record::Environment;

/// Reads the facts of this host.
pub fn detect() -> Environment {
    Environment {
        host_name: read_trimmed("/proc/sys/kernel/hostname"),
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        cpu_model: std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| cpu_model(&text)),
        wirebench_version: env!("CARGO_PKG_VERSION").to_string(),
        rmem_max_bytes: read_trimmed("/proc/sys/net/core/rmem_max").and_then(|s| s.parse().ok()),
        wmem_max_bytes: read_trimmed("/proc/sys/net/core/wmem_max").and_then(|s| s.parse().ok()),
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The first `model name` line of /proc/cpuinfo text (x86); `Model` or `Hardware` elsewhere.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    for key in ["model name", "Model", "Hardware"] {
        let found = cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        });
        if let Some(v) = found.filter(|v| !v.is_empty()) {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_takes_the_first_model_name() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            cpu_model(text).as_deref(),
            Some("Intel(R) Xeon(R) CPU @ 2.20GHz")
        );
        assert_eq!(
            cpu_model("Model\t\t: Raspberry Pi 4\n").as_deref(),
            Some("Raspberry Pi 4")
        );
        assert_eq!(cpu_model("nothing here"), None);
    }
}
