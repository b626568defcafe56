//! No import circle between files, in any crate of the workspace: a file that uses another
//! (a `use`, a path through `crate::`, `super::` or `self::`, or a relative path into a module
//! declared beside it) must not be used back by it, directly or through a chain.
//! `architecture.rs` checks the layers and the units of a layer; this checks inside them too (a
//! folder's `mod.rs` that uses a child's function and a child that imports from `mod.rs` make a
//! circle). The first check reads a re-export (`pub use`) as a folder's front door, no arrow;
//! a second counts it too, so no part imports from the `mod.rs` that hands it on; a third
//! takes each folder's files and subfolders whole, so no two of them use each other. Together:
//! no arrow runs back up at any level. Test modules (`#[cfg(test)] mod tests`) are left out, as
//! a test may import whatever it checks. A failure names every circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::architecture::rust_files;

/// The workspace root, the folder of `crates/`.
fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The source folder of every crate of the workspace (`crates/*/src` with a `lib.rs`).
pub(crate) fn crate_sources() -> Vec<PathBuf> {
    let root = workspace_root();
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root.join("crates")) {
        for entry in entries.flatten() {
            let src = entry.path().join("src");
            if src.join("lib.rs").is_file() {
                out.push(src);
            }
        }
    }
    out.sort();
    out
}

/// The module path of `file` under `src` (`flows/server/mod.rs` is `[flows, server]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file);
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The file of the longest prefix of `path` (a module path) that is a module of the crate.
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    let mut best = Some(src.join("lib.rs"));
    let mut dir = src.to_path_buf();
    for seg in path {
        let file = dir.join(format!("{seg}.rs"));
        let folder = dir.join(seg).join("mod.rs");
        if file.is_file() {
            best = Some(file);
        } else if folder.is_file() {
            best = Some(folder);
        } else {
            break;
        }
        dir = dir.join(seg);
    }
    best
}

/// The text of a file without its test modules and comments.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<usize> = None;
    let mut depth = 0usize;
    let mut after_cfg_test = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            after_cfg_test = true;
            continue;
        }
        // `mod tests {`, or one other test modules use (`pub(crate) mod tests {`).
        let module = ["mod ", "pub mod ", "pub(crate) mod ", "pub(super) mod "]
            .iter()
            .any(|m| trimmed.starts_with(m));
        if after_cfg_test && skip_depth.is_none() && module && line.contains('{') {
            skip_depth = Some(depth);
        }
        after_cfg_test = false;
        let opens = line.matches('{').count();
        let closes = line.matches('}').count();
        if skip_depth.is_none() {
            out.push_str(line);
            out.push('\n');
        }
        depth = (depth + opens).saturating_sub(closes);
        if skip_depth.is_some_and(|d| depth <= d) {
            skip_depth = None;
        }
    }
    out
}

/// Every path a file's code names through `crate::`, `super::` or `self::`, `use` groups
/// (`use super::{a, b::c}`) expanded.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `use` statements (a line that starts one, to its `;`), braces expanded.
    let mut statement: Option<String> = None;
    for line in code.lines() {
        let t = line.trim_start();
        if statement.is_none() {
            // A re-export (`pub use child::Thing`) is the folder's front door, not a use of
            // what it names: it makes no arrow (a child may then import from its parent).
            if let Some(tree) = t.strip_prefix("use ") {
                statement = Some(String::new());
                if let Some(s) = statement.as_mut() {
                    s.push_str(tree);
                }
            } else {
                continue;
            }
        } else if let Some(s) = statement.as_mut() {
            s.push(' ');
            s.push_str(t);
        }
        if let Some(text) = statement.as_ref().filter(|s| s.contains(';')) {
            // A rename (`x as y`) becomes `x@y`, then the white space goes.
            let tree = text.split(';').next().unwrap_or("").replace(" as ", "@");
            let tree = tree.replace(char::is_whitespace, "");
            let tree = tree.trim_start_matches("::").to_string();
            expand(&tree, &mut Vec::new(), &mut out);
            statement = None;
        }
    }
    // Paths in code: `crate::a::b`, `super::x`.
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            if at > 0
                && (bytes[at - 1].is_ascii_alphanumeric()
                    || bytes[at - 1] == b'_'
                    || bytes[at - 1] == b':')
            {
                continue;
            }
            let tail: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            // `crate::{a, b}` or `super::*` (a `use` group, read whole above): the prefix
            // alone is no import of the front door.
            if tail.ends_with("::") {
                continue;
            }
            out.push(
                tail.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            );
        }
    }
    out
}

/// Expands one `use` tree (`a::{b, c::{d, e}}`) under `prefix` into whole paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let close = tree.rfind('}').filter(|c| *c > open).unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let depth_before = prefix.len();
        prefix.extend(head);
        let mut level = 0;
        let mut piece = String::new();
        for c in inner.chars().chain(std::iter::once(',')) {
            match c {
                '{' => level += 1,
                '}' => level -= 1,
                _ => {}
            }
            if c == ',' && level == 0 {
                if !piece.is_empty() {
                    expand(&piece, prefix, out);
                }
                piece.clear();
            } else {
                piece.push(c);
            }
        }
        prefix.truncate(depth_before);
    } else {
        // `x@y` is `x as y`: the name after `@` is local.
        let name = tree.split('@').next().unwrap_or(tree);
        let mut path = prefix.clone();
        path.extend(
            name.split("::")
                .filter(|s| !s.is_empty() && *s != "*")
                .map(str::to_string),
        );
        out.push(path);
    }
}

/// The files `file` imports, by the module paths it names.
fn imports(src: &Path, file: &Path, code: &str) -> BTreeSet<PathBuf> {
    let module = module_of(src, file);
    let mut out = BTreeSet::new();
    for path in paths_in(code) {
        let Some(first) = path.first() else { continue };
        // A path without `crate`, `self` or `super` is relative: it imports from this file
        // only when it starts with a module declared here (`use child::Thing` in a `mod.rs`).
        let relative = !matches!(first.as_str(), "crate" | "self" | "super");
        if relative && !is_child(src, &module, first) {
            continue;
        }
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            _ => module.clone(),
        };
        let mut rest = if relative { &path[..] } else { &path[1..] };
        if first == "super" {
            base.pop();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        base.extend(rest.iter().cloned());
        if let Some(target) = file_of(src, &base) {
            if target != file {
                out.insert(target);
            }
        }
    }
    out
}

/// Whether `name` is a module below `module` (a file or folder in its folder).
fn is_child(src: &Path, module: &[String], name: &str) -> bool {
    let dir = module.iter().fold(src.to_path_buf(), |d, m| d.join(m));
    dir.join(format!("{name}.rs")).is_file() || dir.join(name).join("mod.rs").is_file()
}

/// The strongly connected groups of more than one file (Tarjan).
fn circles(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct State<'g> {
        graph: &'g BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'g PathBuf, usize>,
        low: BTreeMap<&'g PathBuf, usize>,
        stack: Vec<&'g PathBuf>,
        on_stack: BTreeSet<&'g PathBuf>,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g PathBuf) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = s.graph.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.clone());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                s.found.push(group);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// Each circle of `src`'s crate as one line, its files named from the workspace root.
fn circles_named(src: &Path, groups: &[Vec<PathBuf>]) -> Vec<String> {
    groups
        .iter()
        .map(|group| {
            let names: Vec<String> = group
                .iter()
                .map(|f| {
                    f.strip_prefix(src.join("../.."))
                        .unwrap_or(f)
                        .display()
                        .to_string()
                })
                .collect();
            names.join(" <-> ")
        })
        .collect()
}

/// The import graph of one crate's files.
fn graph_of(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    graph_reading(src, |code| code.to_string())
}

/// The import graph of one crate's files, each file's code (test modules and comments left
/// out) read through `read` first.
fn graph_reading(
    src: &Path,
    read: impl Fn(&str) -> String,
) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let deps = imports(src, &f, &read(&code_of(&text)));
            (f, deps)
        })
        .collect()
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let sources = crate_sources();
    assert!(sources.len() >= 2, "found the crates: {sources:?}");
    let mut found = Vec::new();
    for src in &sources {
        found.extend(circles_named(src, &circles(&graph_of(src))));
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The folder-level graph of `graph` inside `dir`: each file or folder directly in `dir` is a
/// unit, and a unit imports another when one of its files imports one of the other's.
fn units_in(
    graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
    dir: &Path,
) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let unit = |f: &Path| -> Option<PathBuf> {
        let first = f.strip_prefix(dir).ok()?.components().next()?;
        Some(dir.join(first))
    };
    let mut units: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for (file, deps) in graph {
        let Some(from) = unit(file) else { continue };
        // The folder's own front door (lib.rs, mod.rs) declares its children: not a unit.
        if file.parent() == Some(dir)
            && matches!(
                file.file_name().and_then(|n| n.to_str()),
                Some("lib.rs" | "mod.rs")
            )
        {
            continue;
        }
        let entry = units.entry(from.clone()).or_default();
        for dep in deps {
            let front = dep.parent() == Some(dir)
                && matches!(
                    dep.file_name().and_then(|n| n.to_str()),
                    Some("lib.rs" | "mod.rs")
                );
            if let Some(to) = unit(dep).filter(|to| *to != from && !front) {
                entry.insert(to);
            }
        }
    }
    units
}

/// Every folder of a crate's source, the source folder itself included.
fn folders(src: &Path, out: &mut Vec<PathBuf>) {
    out.push(src.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(src) {
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for d in dirs {
            folders(&d, out);
        }
    }
}

/// No arrow back up at any level: inside every folder of every crate, its files and folders
/// (each taken as a whole) import one another in one direction only, so a folder can be read
/// from the bottom up (`wirebench-core`'s `wire/` and `security/` once used each other).
#[test]
fn no_folder_imports_a_sibling_that_imports_it_back() {
    let mut found = Vec::new();
    for src in &crate_sources() {
        let graph = graph_of(src);
        let mut dirs = Vec::new();
        folders(src, &mut dirs);
        for dir in dirs {
            found.extend(circles_named(src, &circles(&units_in(&graph, &dir))));
        }
    }
    assert!(
        found.is_empty(),
        "folders that import each other:\n{}",
        found.join("\n")
    );
}

/// The import graph of one crate's files with every re-export (`pub use child::Thing`) an
/// arrow too: the graph farm-studio draws. A circle here that the graph without re-exports
/// lacks is a front door (`mod.rs`, `lib.rs`) that hands on a part which imports from it.
fn graph_with_reexports(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    graph_reading(src, |code| {
        // Each re-export read as the import it also is.
        let mut as_uses = String::new();
        for line in code.lines() {
            let t = line.trim_start();
            let reexport = ["pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|p| t.strip_prefix(p));
            match reexport {
                Some(tree) => as_uses.push_str(&format!("use {tree}\n")),
                None => {
                    as_uses.push_str(line);
                    as_uses.push('\n');
                }
            }
        }
        as_uses
    })
}

/// No part of a folder imports a name from the front door that hands it on (its `mod.rs`
/// re-exports the part, the part imports from `mod.rs`): the parts import each other, and what
/// they share is a part of its own (docs/dev/style.md), so the front door sits above them all.
#[test]
fn no_front_door_is_imported_by_a_part_it_hands_on() {
    let mut found = Vec::new();
    for src in &crate_sources() {
        found.extend(circles_named(src, &circles(&graph_with_reexports(src))));
    }
    assert!(
        found.is_empty(),
        "import circles through a re-export:\n{}",
        found.join("\n")
    );
}

/// The check finds what it is for: a circle of two files through a re-export and a `super::`
/// path, and none in a chain that only goes down.
#[test]
fn the_check_sees_a_circle_through_a_reexport() {
    let dir = std::env::temp_dir().join(format!("wirebench-circles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "mod child;\nuse child::Thing;\npub struct Base;\npub fn f(_: Thing) {}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a/child.rs"),
        "use super::Base;\npub struct Thing(Base);\n",
    )
    .unwrap();
    std::fs::write(src.join("b.rs"), "use crate::a::{Thing, child::Thing as T};\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n").unwrap();
    let graph = graph_of(&src);
    let found = circles(&graph);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 2, "{found:?}");
    assert!(
        found[0].iter().all(|f| f.starts_with(src.join("a"))),
        "{found:?}"
    );
}
