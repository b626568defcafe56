//! The layering of docs/architecture.md, checked on the source: every `crate::` path in each
//! top-level module of `crates/wirebench/src` must point to a module of a lower layer (or a
//! sibling of the same layer where the layer allows it), no two modules may import each other
//! through any path, and `wirebench-core` stays pure. A failure names the file, the line and
//! the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top first. A module may import any module of a lower layer; within a layer
/// only where `siblings` is true, and never in a circle.
const LAYERS: &[(&str, &[&str], bool)] = &[
    ("commands", &["commands"], false),
    ("exporter", &["exporter"], false),
    ("config", &["config", "args"], true),
    ("runner", &["runner"], false),
    (
        "flows",
        &[
            "client",
            "server",
            "relay",
            "dns",
            "iperf3",
            "perf",
            "rr_client",
            "parallel",
            "rpm",
            "latency_probe",
        ],
        true,
    ),
    (
        "engine",
        &["engine", "interval", "liveness", "inflight"],
        true,
    ),
    (
        "transport",
        &[
            "net",
            "control",
            "tls",
            "counters",
            "environment",
            "signals",
            "http",
        ],
        true,
    ),
    ("cli", &["cli"], false),
];

/// Renderers and the store: they see the result model in `wirebench-core` and nothing of the
/// crate (commands load records from the store and hand them to them).
const LEAVES: &[&str] = &["store", "output", "report"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`commands/run.rs` → `commands`); `None` for the
/// crate root (lib.rs, main.rs), which dispatches and may use everything.
fn module_of(root: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// Every `crate::NAME` a source text uses outside comments, with its line number; a
/// `crate::{a, b}` group counts each name.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for item in inner.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.push((i + 1, name));
                    }
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push((i + 1, name));
                }
            }
        }
    }
    found
}

/// module → (the modules it imports → where, for the message).
fn import_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&root, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("source readable");
        let entry = graph.entry(module.clone()).or_default();
        for (line, target) in crate_paths(&text) {
            if target != module {
                entry
                    .entry(target)
                    .or_insert_with(|| format!("{}:{line}", file.display()));
            }
        }
    }
    graph
}

fn layer_of(module: &str) -> Option<(usize, bool)> {
    LAYERS
        .iter()
        .position(|(_, members, _)| members.contains(&module))
        .map(|i| (i, LAYERS[i].2))
}

#[test]
fn every_import_points_down_the_layers() {
    let graph = import_graph();
    let mut wrong = Vec::new();
    for (module, imports) in &graph {
        for (target, at) in imports {
            if LEAVES.contains(&module.as_str()) {
                wrong.push(format!(
                    "{at}: {module} imports crate::{target}, but store, output and report import nothing of the crate (only wirebench_core)"
                ));
                continue;
            }
            if LEAVES.contains(&target.as_str()) {
                if !matches!(module.as_str(), "commands" | "config") {
                    wrong.push(format!(
                        "{at}: {module} imports crate::{target}: only commands (and config, for paths) reach the store and the renderers"
                    ));
                }
                continue;
            }
            let (Some((from, siblings)), Some((to, _))) = (layer_of(module), layer_of(target))
            else {
                wrong.push(format!(
                    "{at}: {module} → {target}: a module missing from the layer table in tests/it/architecture.rs and docs/architecture.md"
                ));
                continue;
            };
            let ok = to > from || (to == from && siblings);
            if !ok {
                wrong.push(format!(
                    "{at}: {module} (layer {}) imports crate::{target} (layer {}): imports must point down",
                    LAYERS[from].0, LAYERS[to].0
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_two_modules_import_each_other() {
    let graph = import_graph();
    // Depth-first search for a cycle; reports the first one found as a path.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).map(|m| m.keys()).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        if let Some(cycle) = visit(module, &graph, &mut Vec::new(), &mut done) {
            panic!("import circle: {}", cycle.join(" → "));
        }
    }
}

#[test]
fn cli_imports_nothing_of_the_crate() {
    let graph = import_graph();
    let imports = graph.get("cli").cloned().unwrap_or_default();
    assert!(imports.is_empty(), "cli imports {imports:?}");
}

#[test]
fn the_checker_sees_imports_and_circles() {
    // The checker itself: a grouped import, an inline path, and a commented one.
    let found = crate_paths(
        "use crate::{runner, store::Store};\nlet x = crate::net::f(); // crate::config\n",
    );
    let names: Vec<&str> = found.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["runner", "store", "net"]);
    assert!(layer_of("client").is_some_and(|(l, _)| l > layer_of("runner").unwrap().0));
}

/// `wirebench-core` is pure: outside its tests it opens no socket or file, reads no clock and
/// spawns nothing.
#[test]
fn the_core_crate_does_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wirebench-core/src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(!files.is_empty());
    let banned = [
        "std::fs",
        "std::net::TcpStream",
        "std::net::UdpSocket",
        "Instant::now",
        "SystemTime::now",
        "std::thread",
        "tokio",
        "println!",
        "eprintln!",
    ];
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source readable");
        // Tests come last in a module (STYLE.md): what follows #[cfg(test)] may use the clock.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, line) in code.lines().enumerate() {
            let line = line.split("//").next().unwrap_or("");
            for b in banned {
                if line.contains(b) {
                    wrong.push(format!("{}:{}: {b}", file.display(), i + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "I/O in wirebench-core:\n{}",
        wrong.join("\n")
    );
}
