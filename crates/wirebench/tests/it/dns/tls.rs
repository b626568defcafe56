//! DoT certificates: the name checked unless --insecure, and the guide's certificate recipe
//! accepted.

use std::process::Stdio;

use serde_json::Value;

use super::{u, Unbound};
use crate::cli::{stderr, wirebench};
use crate::support::{TempPath, TEST_TIMEOUT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dot_checks_the_certificate_name_unless_insecure() {
    let Some(ub) = Unbound::start() else { return };
    tokio::time::timeout(TEST_TIMEOUT, async {
        let resolver = ub.addr().to_string();
        let tls_port = ub.tls_port.to_string();
        let ca = ub.ca();
        let base = [
            "dns",
            "--resolver",
            &resolver,
            "--dot-port",
            &tls_port,
            "--name",
            "host.wb.test",
            "--transport",
            "dot",
            "--count",
            "3",
            "--no-store",
            "--dot-name",
            "other.wb.test",
        ];
        // The CA is trusted, but its certificate is for dns.wb.test: the run fails (status 1).
        let mut args = base.to_vec();
        args.extend(["--dot-ca", &ca]);
        let out = wirebench(&args).await;
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("TLS handshake"), "{}", stderr(&out));
        // Accepting any certificate, the same name gets answers.
        let mut args = base.to_vec();
        args.push("--dot-insecure");
        let out = wirebench(&args).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("sent 3, answered 3 (NOERROR 3"), "{text}");
    })
    .await
    .expect("in time");
}

/// The shell commands of the guide's DoT recipe (docs/guide/dns.md) that make certificates
/// (`openssl`, `printf`), continuation lines joined, with /tmp/ replaced by `dir`.
fn readme_certificate_commands(dir: &str) -> Vec<String> {
    let readme = include_str!("../../../../../docs/guide/dns.md");
    let section = readme
        .split("# DNS response time")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the guide's DNS page");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|s| s.split("\n```").next())
        .expect("the DoT recipe block");
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                let command = std::mem::take(&mut current);
                if command.starts_with("openssl ") || command.starts_with("printf ") {
                    commands.push(command.replace("/tmp/", &format!("{dir}/")));
                }
            }
        }
    }
    commands
}

#[tokio::test]
async fn the_readmes_dot_certificates_are_accepted() {
    let openssl = std::process::Command::new("openssl")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !openssl {
        eprintln!("skipped: openssl is not installed");
        return;
    }
    let dir = TempPath::new("-readme-dot");
    std::fs::create_dir_all(&dir.0).unwrap();
    let commands = readme_certificate_commands(dir.arg());
    assert!(commands.len() >= 4, "the recipe's commands: {commands:?}");
    for command in &commands {
        let out = std::process::Command::new("sh")
            .args(["-c", command])
            .stdin(Stdio::null())
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let Some(ub) = Unbound::start_with(Some(&dir.0)) else {
        return;
    };
    // The trust the README names: its CA, its resolver name.
    let (resolver, tls_port, ca) = (ub.addr().to_string(), ub.tls_port.to_string(), ub.ca());
    let out = wirebench(&[
        "dns",
        "--resolver",
        &resolver,
        "--dot-port",
        &tls_port,
        "--dot-ca",
        &ca,
        "--dot-name",
        "resolver.test",
        "--name",
        "host.wb.test",
        "--transport",
        "dot",
        "--count",
        "20",
        "--json",
        "--no-store",
    ])
    .await;
    assert!(
        out.status.success(),
        "DoT with the README's certificates: {}",
        stderr(&out)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(u(&doc, "/results/0/counts/answered"), 20, "{doc}");
}
