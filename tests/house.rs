//! The crate's imports point one way, as README.md says: the codecs know
//! nothing else; the plumbing (`http`) knows no layer; no two top-level
//! modules import each other, directly or around a loop, and no two files
//! of the hub; and nothing inside the crate imports a name through the
//! re-exports of `lib.rs`, which is only the face.
//!
//! Read from the source, std only: each file's `use crate::…`,
//! `use super::…`, `use self::…` and the `crate::…`/`super::…` paths written
//! in its code, tests aside (a `tests.rs`, a `tests/` folder, an inline
//! `#[cfg(test)] mod`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The layers: what the plumbing and the codecs must not know.
const LAYERS: &[&str] = &["capabilities", "listen_filter", "edge", "hub"];

/// A source file: its module path (`["hub", "stream"]`) and its code.
struct File {
    module: Vec<String>,
    code: String,
}

fn files() -> Vec<File> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().unwrap() != "tests" {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs")
                || path.file_name().unwrap() == "tests.rs"
            {
                continue;
            }
            out.push(File {
                module: module_of(&src, &path),
                code: code_of(&std::fs::read_to_string(&path).unwrap()),
            });
        }
    }
    out
}

fn module_of(src: &Path, path: &Path) -> Vec<String> {
    let relative = path.strip_prefix(src).unwrap().with_extension("");
    let mut module: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    module
}

/// The code of a file up to its inline test module, without comments.
fn code_of(text: &str) -> String {
    let end = text
        .match_indices("#[cfg(test)]")
        .find(|(at, _)| {
            let next = text[at + 12..].trim_start();
            let line = next.lines().next().unwrap_or_default();
            next.starts_with("mod ") && line.ends_with('{')
        })
        .map_or(text.len(), |(at, _)| at);
    text[..end]
        .lines()
        .map(|line| match line.trim_start().starts_with("//") {
            true => "",
            false => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file names: `crate::a::b`, `super::a`, `self::a`, with each
/// leaf of a `use` tree spelled out.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // A `use` statement begins a line (after `pub` or `pub(…)`) and ends at
    // its `;`.
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let visible = trimmed
            .strip_prefix("pub ")
            .or_else(|| {
                trimmed
                    .strip_prefix("pub(")
                    .and_then(|r| Some(r.split_once(") ")?.1))
            })
            .unwrap_or(trimmed);
        if let Some(tree) = visible.strip_prefix("use ") {
            let start = offset + line.len() - tree.len();
            let tree = &code[start..];
            let tree = &tree[..tree.find(';').unwrap_or(tree.len())];
            let tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
            out.extend(leaves(&tree));
        }
        offset += line.len();
    }
    for word in ["crate::", "super::"] {
        for (start, _) in code.match_indices(word) {
            if code[..start].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let path: String = code[start..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(path.split("::").map(str::to_owned).collect());
        }
    }
    out.into_iter()
        .filter(|p| matches!(p[0].as_str(), "crate" | "super" | "self"))
        .collect()
}

/// The leaves of a `use` tree: `a::{b,c::{d}}` is `a::b`, `a::c::d`.
fn leaves(tree: &str) -> Vec<Vec<String>> {
    let Some(open) = tree.find('{') else {
        let tree = tree.split(" as ").next().unwrap_or(tree).replace(' ', "");
        return vec![tree.split("::").map(str::to_owned).collect()];
    };
    let (head, body) = (&tree[..open], &tree[open + 1..tree.rfind('}').unwrap()]);
    let (mut parts, mut depth, mut part) = (Vec::new(), 0, String::new());
    for c in body.chars() {
        match c {
            ',' if depth == 0 => parts.push(std::mem::take(&mut part)),
            '{' | '}' => {
                depth += if c == '{' { 1 } else { -1 };
                part.push(c);
            }
            _ => part.push(c),
        }
    }
    parts.push(part);
    parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .flat_map(|p| leaves(&format!("{}{p}", head.trim())))
        .collect()
}

/// The module a path of `from` names, made absolute.
fn absolute(from: &[String], path: &[String]) -> Vec<String> {
    let mut base: Vec<String> = Vec::new();
    let mut rest = path;
    match path[0].as_str() {
        "crate" => rest = &path[1..],
        "self" => {
            base = from.to_vec();
            rest = &path[1..];
        }
        _ => {
            base = from.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
    }
    base.extend(rest.iter().cloned());
    base
}

/// The graph's node of module `module` (a top-level module; in the hub,
/// its file, `redis/` as one), given the modules that exist.
fn node(module: &[String], known: &BTreeSet<Vec<String>>, depth: usize) -> Option<Vec<String>> {
    let mut module = module.to_vec();
    // Keep only the part that names a module (not an item in it).
    while !module.is_empty() && !known.contains(&module) {
        module.pop();
    }
    module.truncate(depth);
    (!module.is_empty()).then_some(module)
}

/// The strongly connected components of more than one node.
fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    // A node is on a cycle with `to` when each reaches the other.
    let reach = |from: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(at) = stack.pop() {
            for next in edges.get(&at).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let mut found: Vec<Vec<Vec<String>>> = Vec::new();
    for from in edges.keys() {
        let reached = reach(from);
        let mut component: Vec<Vec<String>> = reached
            .iter()
            .filter(|to| *to != from && reach(to).contains(from))
            .cloned()
            .collect();
        if !component.is_empty() {
            component.push(from.clone());
            component.sort();
            if !found.contains(&component) {
                found.push(component);
            }
        }
    }
    found
}

#[test]
fn imports_point_one_way() {
    let files = files();
    let known: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let mut top: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut hub: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in files.iter().filter(|f| !f.module.is_empty()) {
        for path in paths(&file.code) {
            let target = absolute(&file.module, &path);
            let (Some(from), Some(to)) = (node(&file.module, &known, 1), node(&target, &known, 1))
            else {
                continue;
            };
            if from != to {
                top.entry(from).or_default().insert(to);
            } else if from[0] == "hub" {
                let hub_from = node(&file.module, &known, 2);
                let hub_to = node(&target, &known, 2);
                if let (Some(a), Some(b)) = (hub_from, hub_to) {
                    // The face naming its own files is not an edge.
                    if a != b && a.len() == 2 {
                        hub.entry(a).or_default().insert(b);
                    }
                }
            }
        }
    }
    assert_eq!(
        cycles(&top),
        Vec::<Vec<Vec<String>>>::new(),
        "cycles among src/'s modules"
    );
    assert_eq!(
        cycles(&hub),
        Vec::<Vec<Vec<String>>>::new(),
        "cycles among the hub's files"
    );
    let names = |to: &BTreeSet<Vec<String>>| to.iter().map(|m| m[0].clone()).collect::<Vec<_>>();
    for (from, to) in &top {
        let to = names(to);
        if from[0] == "codec" {
            assert!(to.is_empty(), "codec knows {to:?}");
        }
        if from[0] == "http" {
            assert!(
                !to.iter().any(|m| LAYERS.contains(&m.as_str())),
                "http knows {to:?}"
            );
        }
    }
}

#[test]
fn nothing_is_imported_through_the_crate_root() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"));
    let face: BTreeSet<String> = paths(&code_of(&lib.unwrap()))
        .into_iter()
        .filter(|p| p[0] == "self" && p.len() > 2)
        .map(|p| p.last().unwrap().clone())
        .collect();
    assert!(
        face.contains("ServerProfile") && face.contains("EdgeLayer"),
        "{face:?}"
    );
    for file in files().iter().filter(|f| !f.module.is_empty()) {
        for path in paths(&file.code) {
            if path[0] == "crate" && path.len() >= 2 && face.contains(&path[1]) {
                panic!(
                    "src/{} imports {} through lib.rs",
                    file.module.join("/"),
                    path.join("::")
                );
            }
        }
    }
}
