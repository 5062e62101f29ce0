//! Checks of the code's shape run by `cargo test`: the modules of the pg_strata crate import each
//! other without cycles (a module may use its parent's items; `crate::a::b` and `super::a` paths
//! count), and no Rust source file is longer than 800 lines.

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    /// Module path (`index::state`) → source, for every `.rs` file under `src`.
    fn modules(src: &Path) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut pending = vec![src.to_path_buf()];
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let relative = path.strip_prefix(src).unwrap().with_extension("");
                    let name = relative.to_string_lossy().replace("/mod", "").replace('/', "::");
                    out.insert(
                        if name == "lib" { "crate".to_owned() } else { name },
                        std::fs::read_to_string(&path).unwrap(),
                    );
                }
            }
        }
        out
    }

    /// The modules each module refers to through `crate::…` or `super::…` paths.
    fn edges(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges = BTreeMap::new();
        for (name, source) in modules {
            let parent = name.rsplit_once("::").map_or("", |(p, _)| p);
            let mut targets = BTreeSet::new();
            for (prefix, base) in [("crate::", ""), ("super::", parent)] {
                for (at, _) in source.match_indices(prefix) {
                    let before = source[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let path: Vec<&str> = source[at + prefix.len()..]
                        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                        .next()
                        .unwrap_or("")
                        .split("::")
                        .collect();
                    let join = |parts: &[&str]| {
                        let tail = parts.join("::");
                        if base.is_empty() {
                            tail
                        } else {
                            format!("{base}::{tail}")
                        }
                    };
                    let target = [2, 1]
                        .into_iter()
                        .filter(|&n| path.len() >= n)
                        .map(|n| join(&path[..n]))
                        .find(|m| modules.contains_key(m));
                    if let Some(target) = target.filter(|t| t != name && !name.starts_with(&format!("{t}::"))) {
                        targets.insert(target);
                    }
                }
            }
            edges.insert(name.clone(), targets);
        }
        edges
    }

    /// A module on a cycle, with the cycle, if there is one.
    fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
        fn visit(
            node: &str,
            edges: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(start) = path.iter().position(|p| p == node) {
                return Some(path[start..].to_vec());
            }
            if !done.insert(node.to_owned()) {
                return None;
            }
            path.push(node.to_owned());
            for next in edges.get(node).into_iter().flatten() {
                if let Some(cycle) = visit(next, edges, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        edges.keys().find_map(|start| visit(start, edges, &mut Vec::new(), &mut done))
    }

    #[test]
    fn pg_strata_modules_import_each_other_without_cycles() {
        let src = crate::repo_root().join("pg_strata/src");
        let modules = modules(&src);
        assert!(modules.contains_key("index::state"), "read the crate's modules");
        let edges = edges(&modules);
        assert!(edges["index::recovery"].contains("index::state"), "edges are found");
        assert_eq!(find_cycle(&edges), None, "pg_strata's modules import each other in a cycle");
    }

    #[test]
    fn no_rust_source_file_is_longer_than_800_lines() {
        let root = crate::repo_root();
        let mut pending: Vec<_> = ["pg_strata", "crates", "xtask"].iter().map(|d| root.join(d)).collect();
        let mut checked = 0;
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() && !path.ends_with("target") {
                    pending.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                    assert!(lines <= 800, "{} has {lines} lines (at most 800)", path.display());
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "found the sources ({checked} files)");
    }

    #[test]
    fn a_cycle_is_found() {
        let modules: BTreeMap<String, String> = [
            ("a".to_owned(), "use crate::b::thing;".to_owned()),
            ("b".to_owned(), "fn f() { super::c::g() }".to_owned()),
            ("c".to_owned(), "use crate::a;".to_owned()),
        ]
        .into();
        let cycle = find_cycle(&edges(&modules)).expect("a → b → c → a");
        assert_eq!(cycle.len(), 3);
    }
}
