//! The layering of docs/architecture.md, checked on the source. The layer of a file is the
//! folder it sits in under `crates/wirebench/src` (`flows/client.rs` is in `flows`); every
//! `crate::` path must point to a lower layer, or to a sibling unit of the same layer where the
//! layer allows it, and no two units may import each other through any path. Nothing but
//! `lib.rs` and `main.rs` sits beside the layer folders, the leaves (store, output, report) are
//! crates that depend on no workspace crate but `wirebench-core`, with no two of their units
//! importing each other, and `wirebench-core` stays pure. A failure names the file, the line
//! and the rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top first: folder name and whether its units may import each other. A unit is
/// one file or folder inside the layer's folder (`flows/server/` is the unit `flows::server`).
const LAYERS: &[(&str, bool)] = &[
    ("commands", true),
    ("exporter", true),
    ("config", true),
    ("cli", false),
    ("runner", false),
    ("flows", true),
    ("engine", true),
    ("transport", true),
];

/// Renderers and the store: crates of their own that see the result model in `wirebench-core`
/// and nothing of the shell (commands load records from the store and hand them to them); the
/// shell re-exports each under its name here (`crate::store` is `wirebench_store`).
const LEAVES: &[&str] = &["store", "output", "report"];

/// The folder of a leaf's crate under `crates/`.
fn leaf_crate(leaf: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(format!("wirebench-{leaf}"))
}

/// The layers that may reach the leaves: commands wire them together; config resolves the
/// store's default location.
const REACH_LEAVES: &[&str] = &["commands", "config"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`, into `out` (also used by `import_circles`).
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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

/// Every source file of the crate as (path relative to `src`, with `/`, text).
fn sources() -> Vec<(String, String)> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&root).expect("under src");
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            let text = std::fs::read_to_string(&f).expect("source readable");
            (rel, text)
        })
        .collect()
}

/// A place in the crate: its layer (top folder) and, below it, its unit (`None` for the
/// layer's own `mod.rs` or a path that names only the layer).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Place {
    layer: String,
    unit: Option<String>,
}

impl Place {
    fn name(&self) -> String {
        match &self.unit {
            Some(u) => format!("{}::{u}", self.layer),
            None => self.layer.clone(),
        }
    }
}

/// Where a file sits: `flows/client.rs` → flows::client; `flows/server/session.rs` →
/// flows::server; `flows/mod.rs` → flows; `lib.rs`/`main.rs` → None (the crate root, which
/// may use everything).
fn place_of_file(rel: &str) -> Option<Place> {
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.len() == 1 {
        return None;
    }
    let unit = match parts.get(1) {
        Some(&"mod.rs") if parts.len() == 2 => None,
        Some(u) => Some(u.trim_end_matches(".rs").to_string()),
        None => None,
    };
    Some(Place {
        layer: parts[0].to_string(),
        unit,
    })
}

/// Every `crate::` path of a source text outside comments, as its first two segments with the
/// line number; groups (`crate::{a, b::c}`, `crate::flows::{client, server}`) count each
/// member.
fn crate_paths(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            // `$crate::` and `wirebench_crate::` are not ours.
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let mut paths = Vec::new();
            parse_tree(rest, Vec::new(), &mut paths);
            for p in paths {
                found.push((i + 1, p.into_iter().take(2).collect()));
            }
        }
    }
    found
}

/// Parses a use-tree (`a::b`, `a::{b, c::d}`) at the start of `text`, pushing each full path
/// (prefixed by `prefix`) to `out`; returns how many bytes it read.
fn parse_tree(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut pos = 0;
    let mut path = prefix;
    loop {
        let rest = &text[pos..];
        let trimmed = rest.trim_start();
        pos += rest.len() - trimmed.len();
        if let Some(group) = trimmed.strip_prefix('{') {
            pos += 1;
            let mut inner = group;
            loop {
                let read = parse_tree(inner, path.clone(), out);
                pos += read;
                inner = &inner[read..];
                let t = inner.trim_start();
                pos += inner.len() - t.len();
                inner = t;
                if let Some(after) = inner.strip_prefix(',') {
                    pos += 1;
                    inner = after;
                    if inner.trim_start().starts_with('}') {
                        let t = inner.trim_start();
                        pos += inner.len() - t.len() + 1;
                        return pos;
                    }
                    continue;
                }
                if inner.starts_with('}') {
                    pos += 1;
                }
                return pos;
            }
        }
        let name = ident(trimmed);
        if name.is_empty() {
            if !path.is_empty() {
                out.push(path);
            }
            return pos;
        }
        pos += name.len();
        if name != "self" {
            path.push(name);
        }
        let after = &text[pos..];
        if let Some(next) = after.strip_prefix("::") {
            let _ = next;
            pos += 2;
            continue;
        }
        out.push(path);
        return pos;
    }
}

/// The place a `crate::` path points to: its first segment is the layer, its second the unit
/// when that names a module of the layer's folder (not an item of the layer's `mod.rs`).
fn place_of_path(segments: &[String], units: &BTreeMap<String, BTreeSet<String>>) -> Place {
    let layer = segments[0].clone();
    let unit = segments
        .get(1)
        .filter(|u| units.get(&layer).is_some_and(|set| set.contains(*u)))
        .cloned();
    Place { layer, unit }
}

/// The units of each layer folder, read from the file names.
fn units_of(files: &[(String, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut units: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, _) in files {
        if let Some(Place {
            layer,
            unit: Some(u),
        }) = place_of_file(rel)
        {
            units.entry(layer).or_default().insert(u);
        }
    }
    units
}

fn layer_index(layer: &str) -> Option<usize> {
    LAYERS.iter().position(|(name, _)| *name == layer)
}

/// Every broken rule of the crate's sources, one message each.
fn violations(files: &[(String, String)]) -> Vec<String> {
    let units = units_of(files);
    let mut wrong = Vec::new();
    for (rel, text) in files {
        let Some(from) = place_of_file(rel) else {
            continue;
        };
        if LEAVES.contains(&from.layer.as_str()) {
            wrong.push(format!(
                "src/{rel}: `{}` is the crate crates/wirebench-{}, not a folder of the shell",
                from.layer, from.layer
            ));
            continue;
        }
        if layer_index(&from.layer).is_none() {
            wrong.push(format!(
                "src/{rel}: `{}` is neither a layer nor a leaf of tests/it/architecture.rs and docs/architecture.md",
                from.layer
            ));
            continue;
        }
        for (line, segments) in crate_paths(text) {
            let to = place_of_path(&segments, &units);
            let at = format!("src/{rel}:{line}");
            if to.layer == from.layer {
                let siblings = layer_index(&from.layer).is_some_and(|i| LAYERS[i].1);
                let same_unit = to.unit.is_none() || from.unit.is_none() || to.unit == from.unit;
                if !siblings && !same_unit {
                    wrong.push(format!(
                        "{at}: {} imports crate::{}: units of the {} layer do not import each other",
                        from.name(),
                        to.name(),
                        from.layer
                    ));
                }
                continue;
            }
            if LEAVES.contains(&to.layer.as_str()) {
                if !REACH_LEAVES.contains(&from.layer.as_str()) {
                    wrong.push(format!(
                        "{at}: {} imports crate::{}: only commands (and config, for paths) reach the store and the renderers",
                        from.name(),
                        to.name()
                    ));
                }
                continue;
            }
            let (Some(a), Some(b)) = (layer_index(&from.layer), layer_index(&to.layer)) else {
                // A path to an item of the crate root (lib.rs): the runtime, which is below
                // nothing and above nothing.
                if units.contains_key(&to.layer) || to.layer == "cli" {
                    wrong.push(format!(
                        "{at}: {} → {}: unknown layer",
                        from.name(),
                        to.name()
                    ));
                }
                continue;
            };
            if b <= a {
                wrong.push(format!(
                    "{at}: {} (layer {}) imports crate::{} (layer {}): imports must point down",
                    from.name(),
                    from.layer,
                    to.name(),
                    to.layer
                ));
            }
        }
    }
    wrong
}

/// Unit → the units it imports (first place, for the message).
fn unit_graph(files: &[(String, String)]) -> BTreeMap<String, BTreeMap<String, String>> {
    let units = units_of(files);
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (rel, text) in files {
        let Some(from) = place_of_file(rel) else {
            continue;
        };
        let entry = graph.entry(from.name()).or_default();
        for (line, segments) in crate_paths(text) {
            let to = place_of_path(&segments, &units);
            if to.unit.is_none() || to == from {
                continue;
            }
            entry
                .entry(to.name())
                .or_insert_with(|| format!("src/{rel}:{line}"));
        }
    }
    graph
}

fn find_cycle(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Option<Vec<String>> {
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
    graph
        .keys()
        .find_map(|unit| visit(unit, graph, &mut Vec::new(), &mut done))
}

#[test]
fn every_import_points_down_the_layers() {
    let wrong = violations(&sources());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_two_units_import_each_other() {
    if let Some(cycle) = find_cycle(&unit_graph(&sources())) {
        panic!("import circle: {}", cycle.join(" → "));
    }
}

#[test]
fn only_the_crate_root_sits_beside_the_layers() {
    let root = src();
    let mut loose = Vec::new();
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(&root).expect("src readable").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            folders.push(name);
        } else if !matches!(name.as_str(), "lib.rs" | "main.rs") {
            loose.push(name);
        }
    }
    assert!(
        loose.is_empty(),
        "files beside the layer folders in src/ (move each into its layer): {loose:?}"
    );
    for folder in folders {
        assert!(
            layer_index(&folder).is_some(),
            "src/{folder}/ is not a layer of tests/it/architecture.rs (store, output and report are crates)"
        );
    }
}

#[test]
fn cli_imports_nothing_of_the_crate() {
    let files = sources();
    let cli: Vec<String> = files
        .iter()
        .filter(|(rel, _)| rel.starts_with("cli/"))
        .flat_map(|(rel, text)| {
            crate_paths(text)
                .into_iter()
                .filter(|(_, s)| s[0] != "cli")
                .map(move |(line, s)| format!("src/{rel}:{line}: crate::{}", s.join("::")))
        })
        .collect();
    assert!(cli.is_empty(), "cli imports {cli:?}");
}

#[test]
fn the_checker_sees_imports_groups_and_circles() {
    let found = crate_paths(
        "use crate::{runner, store::Store};\nlet x = crate::transport::net::f(); // crate::config\nuse crate::flows::{client::{self, Run}, server};\n",
    );
    let paths: Vec<String> = found.iter().map(|(_, s)| s.join("::")).collect();
    assert_eq!(
        paths,
        [
            "runner",
            "store::Store",
            "transport::net",
            "flows::client",
            "flows::client",
            "flows::server"
        ]
    );
    // An injected upward import and a leaf put back as a folder of the shell are caught, with
    // file and line.
    let files = vec![
        (
            "engine/stream.rs".to_string(),
            "use crate::transport::net;\nuse crate::flows::client::Session;\n".to_string(),
        ),
        (
            "flows/client.rs".to_string(),
            "use crate::engine::stream;\n".to_string(),
        ),
        (
            "report/chart.rs".to_string(),
            "use crate::output::text;\n".to_string(),
        ),
        (
            "runner/mod.rs".to_string(),
            "use crate::store::Store;\n".to_string(),
        ),
    ];
    let wrong = violations(&files);
    assert_eq!(wrong.len(), 3, "{wrong:#?}");
    assert!(wrong[0].starts_with(
        "src/engine/stream.rs:2: engine::stream (layer engine) imports crate::flows::client"
    ));
    assert!(wrong[1].starts_with("src/report/chart.rs: `report` is the crate"));
    assert!(wrong[2].starts_with("src/runner/mod.rs:1"));
    // Siblings of one layer importing each other both ways make a circle.
    let circle = vec![
        (
            "flows/a.rs".to_string(),
            "use crate::flows::b::X;\n".to_string(),
        ),
        (
            "flows/b.rs".to_string(),
            "use crate::flows::a::Y;\n".to_string(),
        ),
    ];
    assert!(violations(&circle).is_empty());
    assert_eq!(
        find_cycle(&unit_graph(&circle)),
        Some(vec![
            "flows::a".into(),
            "flows::b".into(),
            "flows::a".into()
        ])
    );
}

/// The dependencies a manifest names in its dependency tables (`[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]`, target-specific ones too), by name.
fn manifest_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(table) = line.strip_prefix('[') {
            in_deps = table.trim_end_matches(']').ends_with("dependencies");
            continue;
        }
        if in_deps {
            if let Some((name, _)) = line.split_once('=') {
                names.push(name.trim().trim_matches('"').to_string());
            }
        }
    }
    names
}

/// The package names of the workspace's members, read from the root manifest.
fn workspace_packages() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("root manifest");
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("a members list");
    members
        .split(',')
        .map(|m| m.split('#').next().unwrap_or("").trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| {
            let text = std::fs::read_to_string(root.join(m).join("Cargo.toml")).expect("manifest");
            let name = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = "))
                .expect("a package name");
            name.trim_matches('"').to_string()
        })
        .collect()
}

#[test]
fn the_leaf_crates_depend_only_on_the_core() {
    let members = workspace_packages();
    assert!(members.iter().any(|m| m == "wirebench-core"), "{members:?}");
    let mut wrong = Vec::new();
    for leaf in LEAVES {
        let manifest = leaf_crate(leaf).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).expect("leaf manifest");
        assert!(manifest_dependencies(&text).contains(&"wirebench-core".to_string()));
        for dep in manifest_dependencies(&text) {
            if dep != "wirebench-core" && (members.contains(&dep) || dep.starts_with("wirebench")) {
                wrong.push(format!(
                    "crates/wirebench-{leaf}/Cargo.toml depends on {dep}"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "a leaf depends on a workspace crate other than wirebench-core:\n{}",
        wrong.join("\n")
    );
}

/// A leaf crate's sources as if they were a folder `leaf/` of the shell, for the unit graph:
/// `lib.rs` is the folder's root, and its top-level files' `super::` (the crate root) and every
/// `crate::` path name `crate::leaf::…`. Unit tests (after `#[cfg(test)]`) are left out: their
/// `super::` is their own module.
fn leaf_sources(leaf: &str) -> Vec<(String, String)> {
    let root = leaf_crate(leaf).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(&root).expect("under src");
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let text = std::fs::read_to_string(&f).expect("source readable");
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let top = parts.len() == 1 || (parts.len() == 2 && parts[1] == "mod.rs");
            let mut code = code.replace("crate::", &format!("crate::{leaf}::"));
            if top {
                code = code.replace("super::", &format!("crate::{leaf}::"));
            }
            let rel = match parts.as_slice() {
                [only] if only == "lib.rs" => format!("{leaf}/mod.rs"),
                _ => format!("{leaf}/{}", parts.join("/")),
            };
            (rel, code)
        })
        .collect()
}

#[test]
fn no_two_units_of_a_leaf_crate_import_each_other() {
    for leaf in LEAVES {
        let files = leaf_sources(leaf);
        assert!(files.len() > 1, "{leaf}: no sources");
        if let Some(cycle) = find_cycle(&unit_graph(&files)) {
            panic!("import circle in wirebench-{leaf}: {}", cycle.join(" → "));
        }
    }
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
        // A module's unit tests in a `tests.rs` of their own may use the clock.
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("source readable");
        // Tests come last in a module (docs/dev/style.md): what follows #[cfg(test)] may use
        // the clock.
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
