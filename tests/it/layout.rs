//! The library's layout: no two top-level modules depend on each other, directly or through
//! others (a circle makes every module in it change with the others).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// The top-level module a source file belongs to: `src/audit/check.rs` -> `audit`.
fn module_of(rel: &Path) -> Option<String> {
    let mut parts = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let first = parts.next()?;
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib" && name != "main").then_some(name)
}

/// The top-level modules a file's text names through `crate::`.
fn references(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
            // `use crate::{a, b::c}`: every name in the braces.
            if let Some(body) = rest.strip_prefix('{') {
                for item in body.split([',', '}']) {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
            }
        }
    }
    out
}

/// The module graph of `src/`: module -> the modules it uses.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(src) {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = entry.path().strip_prefix(src).unwrap();
        let Some(module) = module_of(rel) else {
            continue;
        };
        let text = fs::read_to_string(entry.path()).unwrap();
        // Test modules may reach anywhere; they are not part of the layout.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        let uses = g.entry(module.clone()).or_default();
        for r in references(text) {
            if r != module {
                uses.insert(r);
            }
        }
    }
    let known: BTreeSet<String> = g.keys().cloned().collect();
    for uses in g.values_mut() {
        uses.retain(|m| known.contains(m));
    }
    g
}

/// A circle in the graph, if there is one, as the modules along it.
fn find_circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in g.get(node).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in g.keys() {
        if let Some(c) = visit(g, node, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_library_has_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(g.contains_key("audit") && g.contains_key("contract"));
    if let Some(circle) = find_circle(&g) {
        panic!("import circle: {}", circle.join(" -> "));
    }
}

#[test]
fn the_circle_finder_finds_the_circle_that_was_once_there() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let edge = |g: &mut BTreeMap<String, BTreeSet<String>>, a: &str, b: &str| {
        g.entry(a.into()).or_default().insert(b.into());
    };
    edge(&mut g, "audit", "run");
    edge(&mut g, "run", "init");
    edge(&mut g, "init", "audit");
    edge(&mut g, "init", "state");
    let circle = find_circle(&g).expect("a circle");
    assert_eq!(circle.first(), circle.last());
    assert_eq!(circle.len(), 4, "{circle:?}");
    assert_eq!(
        references("use crate::{fsx, audit::probe};\nlet x = crate::run::go(); // crate::zzz"),
        ["audit", "fsx", "run"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}
