//! The library's layout: no two modules depend on each other, directly or through others (a
//! circle makes every module in it change with the others): neither the top-level modules, nor
//! the files inside one module's folder (`src/serve/http.rs` and `src/serve/live.rs`, say); and
//! a module with files of its own is laid out one way, as `NAME/mod.rs` beside them.

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
    names_after(text, "crate::")
}

/// The names that follow `prefix` in a file's code (comments left out): `use crate::{a,
/// b::c}` gives every name in the braces.
fn names_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
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

/// A file's code without its test modules: they may reach anywhere and are not part of the
/// layout.
fn code_of(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap();
    text.split("#[cfg(test)]").next().unwrap_or("").to_string()
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
        let text = code_of(entry.path());
        let uses = g.entry(module.clone()).or_default();
        for r in references(&text) {
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

/// The graphs inside the modules: for each folder below `src/` (`serve`), its files but
/// `mod.rs` (the module itself, which declares them and may use them all) -> the files of the
/// same folder each names, through `super::` or the module's own path (`crate::serve::`).
fn inner_graphs(src: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut out = BTreeMap::new();
    for dir in walkdir::WalkDir::new(src).min_depth(1) {
        let dir = dir.unwrap();
        if !dir.file_type().is_dir() {
            continue;
        }
        let rel = dir.path().strip_prefix(src).unwrap();
        let module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let own_path = format!("crate::{}::", module.join("::"));
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in fs::read_dir(dir.path()).unwrap() {
            let path = file.unwrap().path();
            let Some(stem) = path
                .extension()
                .is_some_and(|e| e == "rs")
                .then(|| path.file_stem().unwrap().to_string_lossy().into_owned())
            else {
                continue;
            };
            if stem == "mod" {
                continue;
            }
            let text = code_of(&path);
            let uses = g.entry(stem.clone()).or_default();
            for r in names_after(&text, "super::").union(&names_after(&text, &own_path)) {
                if *r != stem {
                    uses.insert(r.clone());
                }
            }
        }
        let known: BTreeSet<String> = g.keys().cloned().collect();
        for uses in g.values_mut() {
            uses.retain(|m| known.contains(m));
        }
        out.insert(module.join("/"), g);
    }
    out
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

/// Every circle of the graph, one by one: each found is opened at its first arrow before the
/// next is looked for.
fn every_circle(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut g = g.clone();
    let mut out = Vec::new();
    while let Some(c) = find_circle(&g) {
        if let Some(uses) = g.get_mut(&c[0]) {
            uses.remove(&c[1]);
        }
        out.push(c);
    }
    out
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
fn no_module_has_an_import_circle_inside() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let inner = inner_graphs(&src);
    assert!(
        inner["serve"].contains_key("http") && inner["serve"]["http"].contains("pages"),
        "the serve module's graph is read: {:?}",
        inner.get("serve")
    );
    let circles: Vec<String> = inner
        .iter()
        .flat_map(|(module, g)| {
            every_circle(g)
                .into_iter()
                .map(move |c| format!("src/{module}: {}", c.join(" -> ")))
        })
        .collect();
    assert!(
        circles.is_empty(),
        "import circle inside a module (move what both use into a file that uses neither):\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_module_with_files_of_its_own_is_a_folder_with_mod_rs() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut two_ways = Vec::new();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        if entry.file_type().is_dir() && entry.path() != src {
            let beside = entry.path().with_extension("rs");
            if beside.exists() {
                two_ways.push(beside.strip_prefix(&src).unwrap().display().to_string());
            }
        }
    }
    two_ways.sort();
    assert!(
        two_ways.is_empty(),
        "a module beside its folder (move it into the folder as mod.rs, with git mv): {two_ways:?}"
    );
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
    edge(&mut g, "state", "ledger");
    edge(&mut g, "ledger", "state");
    assert_eq!(every_circle(&g).len(), 2, "{:?}", every_circle(&g));
    assert_eq!(
        references("use crate::{fsx, audit::probe};\nlet x = crate::run::go(); // crate::zzz"),
        ["audit", "fsx", "run"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert_eq!(
        names_after(
            "use super::{App, live};\nuse super::text::{self, LineCut};\nlet h = crate::serve::pages::head(t);",
            "super::"
        )
        .union(&names_after("let h = crate::serve::pages::head(t);", "crate::serve::"))
        .cloned()
        .collect::<BTreeSet<_>>(),
        ["App", "live", "pages", "text"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}
